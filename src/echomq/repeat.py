"""Repeatables: jobs made on a cadence (every N ms, or a cron expression).

The registry is the zset ``emq:{q}:repeat`` (member = repeat name, score = the next
run in ms, server clock) plus one hash ``emq:{q}:repeat:<name>`` holding the cadence
and the template of the job each occurrence makes. Workers fire due repeatables from
their beat (:func:`fire_due`): every occurrence is a fresh job; the fire script
compares and sets the registry score, so two workers that see the same slot make
one job; the next slot is always the first one after now, so missed runs are skipped,
not replayed in a burst.

Cron expressions are read by ``croniter`` (5 fields, or 6 with seconds last) and
evaluated in UTC; Python computes the next slot from the server's time and the fire
script checks the slot it replaces.
"""

from __future__ import annotations

import time
from typing import Any

from croniter import croniter

from . import checks, ids, journal
from .backoff import Backoff, spec_text
from .context import Context, as_str
from .errors import InvalidArgument
from .keyspace import check_name
from .results import Repeatable as Repeatable
from .scripts import Batch, Cmd, Eval, Plan, script


def next_cron_ms(expr: str, after_ms: int) -> int:
    """The first slot of ``expr`` strictly after ``after_ms`` (UTC), in ms."""
    return int(croniter(expr, after_ms / 1000.0).get_next(float) * 1000)


#: The longest cron expression accepted.
MAX_CRON_LEN = 256


def _valid_cron(expr: str) -> bool:
    """Whether croniter reads ``expr`` and finds a next slot (``0 0 30 2 *`` has none)."""
    try:
        return bool(croniter.is_valid(expr)) and next_cron_ms(expr, int(time.time() * 1000)) > 0
    except Exception:  # croniter raises several unrelated types for bad input
        return False


def _server_ms(reply: Any) -> int:
    return int(reply[0]) * 1000 + int(reply[1]) // 1000


def repeat(
    ctx: Context,
    name: str,
    *,
    every_ms: int | None = None,
    cron: str | None = None,
    payload: Any = None,
    first_in_ms: int = 0,
    job_name: str | None = None,
    group: str | None = None,
    priority: int = 0,
    max_attempts: int | None = None,
    backoff: str | Backoff | None = None,
) -> Plan[int]:
    """Register a repeatable (or update one of that name).

    Exactly one of ``every_ms`` and ``cron`` is given. Registering again with the
    same cadence keeps the next run (so a worker may register at every start); the
    job template is replaced.

    Args:
        name: the repeatable's name, ``[A-Za-z0-9._-]{1,128}``.
        every_ms: fire every this many ms.
        cron: fire on this cron expression (UTC).
        payload: the data of each occurrence.
        first_in_ms: the first run is this long from now (for cron: the first slot
            after that).
        job_name: the name of each job (default: the repeatable's name).
        group, priority, max_attempts, backoff: as for ``enqueue``, for each job.

    Returns:
        The next run in ms since the epoch (server clock).

    Raises:
        InvalidName, InvalidArgument: before anything is sent.
    """
    check_name(name, "repeat")
    if (every_ms is None) == (cron is None):
        raise InvalidArgument("give exactly one of every_ms and cron")
    if every_ms is not None:
        every_ms = checks.ms(every_ms, "every_ms")
    if cron is not None and not (
        isinstance(cron, str) and len(cron) <= MAX_CRON_LEN and _valid_cron(cron)
    ):
        raise InvalidArgument(f"invalid cron expression: {cron!r:.80}")
    first_in_ms = checks.ms(first_in_ms, "first_in_ms", zero=True)
    if group is not None:
        check_name(group, "group")
    if job_name is not None:
        checks.job_name(job_name)
    priority = checks.priority(priority)
    if max_attempts is not None:
        max_attempts = checks.count(max_attempts, "max_attempts")
    backoff_text = spec_text(backoff)
    text = checks.payload(ctx.serializer, payload)
    if cron is not None:
        now = _server_ms((yield Cmd(("TIME",))))
        kind, spec, first = "cron", cron, str(next_cron_ms(cron, now + first_in_ms - 1))
    else:
        kind, spec, first = "every", str(every_ms), str(first_in_ms)
    args = (
        name,
        kind,
        spec,
        first,
        text,
        job_name or "",
        group or "",
        "" if priority == 0 else str(priority),
        "" if max_attempts is None else str(max_attempts),
        backoff_text or "",
        ctx.actor,
        journal.request_id(),
    )
    return int((yield Eval(script("repeat"), (ctx.keys.base,), args)))


def cancel_repeat(ctx: Context, name: str) -> Plan[bool]:
    """Remove a repeatable; the jobs it already made stay.

    Returns:
        ``True`` when it existed.

    Raises:
        InvalidName: before anything is sent.
    """
    check_name(name, "repeat")
    return bool((yield Eval(script("cancel_repeat"), (ctx.keys.base,), (name, ctx.actor))))


def pause_repeat(ctx: Context, name: str) -> Plan[bool]:
    """Stop a repeatable making jobs; its record and next run are kept.

    Registering it again with the same cadence (a worker starting) keeps it paused; a
    new cadence replaces it, unpaused.

    Returns:
        ``True`` when it was paused now, ``False`` when there is no such repeatable or
        it was paused already (nothing written).

    Raises:
        InvalidName: before anything is sent.
    """
    check_name(name, "repeat")
    return bool((yield Eval(script("pause_repeat"), (ctx.keys.base,), (name, ctx.actor))))


def resume_repeat(ctx: Context, name: str) -> Plan[int | None]:
    """Let a paused repeatable make jobs again, from its first slot after now (the slots
    missed while paused are skipped).

    Returns:
        The next run in ms since the epoch (server clock), or ``None`` when there is no
        such repeatable or it is not paused (nothing written).

    Raises:
        InvalidName: before anything is sent.
    """
    check_name(name, "repeat")
    row = yield Batch(
        (Cmd(("HMGET", ctx.keys.repeat_record(name), "kind", "spec")), Cmd(("TIME",)))
    )
    kind, spec = (as_str(x) if x is not None else None for x in row[0])
    nxt = ""
    if kind == "cron" and spec is not None:
        nxt = str(next_cron_ms(spec, _server_ms(row[1])))
    got = yield Eval(script("resume_repeat"), (ctx.keys.base,), (name, nxt, ctx.actor))
    return int(got) or None


def run_repeat(ctx: Context, name: str) -> Plan[str | None]:
    """Run a repeatable now: one job, made as its slots make theirs (``fire_due``).

    The cadence goes on from this run: ``every_ms`` counts from now, a cron takes its
    next slot after now.

    Returns:
        The new job's id; ``None`` when there is no such repeatable, it is paused
        (resume it first), or a worker's beat fired the slot between the two calls
        (that beat made the job): nothing else written.

    Raises:
        InvalidName: before anything is sent.
    """
    check_name(name, "repeat")
    got = yield Eval(script("run_repeat"), (ctx.keys.base,), (name, ctx.actor))
    if not got:
        return None
    slot, kind, spec = int(got[0]), as_str(got[1]), as_str(got[2])
    nxt = str(next_cron_ms(spec, slot)) if kind == "cron" else ""
    made = yield Eval(script("fire_due"), (ctx.keys.base,), (name, str(slot), nxt, ids.new_id()))
    return as_str(made) if made else None


def repeats(ctx: Context, n: int = 1000) -> Plan[list[Repeatable]]:
    """The registered repeatables, soonest first.

    Args:
        n: at most this many.

    Returns:
        One :class:`Repeatable` each.
    """
    n = checks.batch(n, "n")
    listed = [
        (m, int(s)) for m, s in (yield Cmd(("ZRANGE", ctx.keys.repeat, 0, n - 1, "WITHSCORES")))
    ]
    if not listed:
        return []
    rows = yield Batch(tuple(Cmd(("HGETALL", ctx.keys.repeat_record(m))) for m, _ in listed))
    out: list[Repeatable] = []
    for (name, next_run), raw_row in zip(listed, rows):
        row: dict[str, str] = raw_row
        if not row:
            continue  # cancelled between the two reads
        every = row.get("kind") == "every"
        out.append(
            Repeatable(
                name=name,
                every_ms=int(row["spec"]) if every else None,
                cron=None if every else row.get("spec"),
                next_run_ms=int(row["paused"]) if "paused" in row else next_run,
                payload=ctx.serializer.loads(row.get("payload", "null")),
                job_name=row.get("job_name") or name,
                group=row.get("group") or None,
                priority=int(row.get("priority", "0")),
                max_attempts=int(row["max_attempts"]) if "max_attempts" in row else None,
                backoff=row.get("backoff") or None,
                count=int(row.get("count", "0")),
                last_run_ms=int(row["last"]) if "last" in row else None,
                paused="paused" in row,
            )
        )
    return out


def fire_due(ctx: Context, budget: int = 50) -> Plan[list[str]]:
    """Make one job for each due repeatable (what a worker's beat runs).

    Safe to run from several workers at once: each slot makes one job.

    Args:
        budget: at most this many repeatables per call.

    Returns:
        The ids of the jobs made by this call.
    """
    budget = checks.batch(budget, "budget")
    reply = yield Eval(script("fire_due_list"), (ctx.keys.base,), (str(budget),))
    now = int(reply[0])
    ops: list[Eval | Cmd] = []
    fire = script("fire_due")
    for i in range(1, len(reply), 4):
        name, slot, kind, spec = reply[i], int(float(reply[i + 1])), reply[i + 2], reply[i + 3]
        nxt = str(next_cron_ms(spec, max(now, slot))) if kind == "cron" else ""
        ops.append(Eval(fire, (ctx.keys.base,), (name, str(slot), nxt, ids.new_id())))
    if not ops:
        return []
    made = yield Batch(tuple(ops))
    return [m for m in made if m and not isinstance(m, Exception)]
