"""The producer's half of the lifecycle: ``enqueue`` and ``enqueue_many`` (one round
trip for any number of jobs, chunked), their options checked before anything is sent."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from .. import checks, hooks, ids
from ..backoff import Backoff, spec_text
from ..context import Context, as_str
from ..dedup import Dedup, DedupWire, gate
from ..errors import EnqueuePartial, InvalidArgument
from ..keyspace import check_name
from ..schema import ENQUEUE_OPTIONS
from ..scripts import Batch, Eval, Plan, script

#: Jobs per enqueue script call; enqueue_many pipelines the chunks in one round trip.
ENQUEUE_CHUNK = 500


def _options(
    *,
    name: str | None,
    group: str | None,
    delay_ms: int | None,
    run_at_ms: int | None,
    priority: int,
    max_attempts: int | None,
    backoff: str | Backoff | None,
) -> list[str]:
    """Gate the options an enqueue shares across its jobs; return them in the
    enqueue script's order, trailing absent ones left off (fewer bytes per call)."""
    if (
        name is None
        and group is None
        and delay_ms is None
        and run_at_ms is None
        and max_attempts is None
        and backoff is None
        and type(priority) is int
        and priority == 0
    ):
        return []  # the common call: nothing to check, nothing to send
    if group is not None:
        check_name(group, "group")
    if name is not None:
        checks.job_name(name)
    checks.priority(priority)
    if delay_ms is not None:
        delay_ms = checks.ms(delay_ms, "delay_ms", zero=True)
    if run_at_ms is not None:
        checks.run_at(run_at_ms)
    if max_attempts is not None:
        max_attempts = checks.count(max_attempts, "max_attempts")
    # the schema's ENQUEUE_OPTIONS before `trace`, in its order (tests/test_schema.py)
    opts = [
        str(int(priority)) if priority else "",
        name or "",
        group or "",
        "" if max_attempts is None else str(int(max_attempts)),
        "" if delay_ms is None else str(int(delay_ms)),
        "" if run_at_ms is None else str(int(run_at_ms)),
        spec_text(backoff) or "",
    ]
    while opts and not opts[-1]:
        opts.pop()
    return opts


def enqueue(
    ctx: Context,
    payload: Any,
    *,
    job_id: str | None = None,
    name: str | None = None,
    group: str | None = None,
    delay_ms: int | None = None,
    run_at_ms: int | None = None,
    priority: int = 0,
    max_attempts: int | None = None,
    dedup_id: str | None = None,
    backoff: str | Backoff | None = None,
    keep_ms: int | None = None,
    dedup: Dedup | None = None,
) -> Plan[str]:
    """Enqueue one job in one round trip.

    Args:
        payload: the job's data, serialized by the queue's serializer (JSON by default).
        job_id: your own ``JOB`` id (idempotent enqueue); minted when omitted.
        name: a job name (a worker may route on it).
        group: put the job in this group's lane instead of the flat pending set.
        delay_ms: park the job in the schedule for this long (server clock).
        run_at_ms: park the job until this absolute time in ms since the epoch.
        priority: lower is served first; ties in mint order.
        max_attempts: failures before the job is dead (queue default 3).
        dedup_id: while a job holding this dedup id exists, enqueue returns its id
            (the simple form of ``dedup``).
        backoff: a :class:`~echomq.backoff.Backoff` (or its spec text) stored on the
            row; a worker retrying the job waits as it says.
        keep_ms: keep this job's history even when the queue keeps none: its
            timeline, result and error history, and its row for ``keep_ms`` after it
            completes (``0``/``None``: as the queue's retention says).
        dedup: a :class:`~echomq.dedup.Dedup`: the dedup id and its mode (simple,
            throttle, debounce, keep_last; docs/dedup.md).

    Returns:
        The job id; for a duplicate ``job_id`` or a held dedup id, the id of the
        job that already exists (nothing is written then, but for the payload a
        debounce or keep_last gives the waiting job). An id still kept as
        history (a completed job) is a duplicate too: a re-sent enqueue cannot run a
        completed job again.

    Raises:
        InvalidJobId, InvalidName, InvalidArgument: before anything is sent.
    """
    if job_id is not None:
        ids.validate(job_id)
    wire = (
        None if dedup is None and dedup_id is None else gate(dedup, dedup_id, delay_ms, run_at_ms)
    )
    if wire is not None:
        delay_ms = wire.delay_ms
    opts = _options(
        name=name,
        group=group,
        delay_ms=delay_ms,
        run_at_ms=run_at_ms,
        priority=priority,
        max_attempts=max_attempts,
        backoff=backoff,
    )
    keep = "" if keep_ms is None else _keep(keep_ms)
    text = checks.payload(ctx.serializer, payload)
    opts = hooks.trace_opts(opts)
    if keep:
        opts = _with_keep(opts, keep)
    if wire is not None:
        opts = _with_dedup(opts, wire)
    if job_id is None and wire is None:
        # a minted id cannot be a duplicate: the short form, whose reply is a count
        jid = ids.new_id()
        yield _enqueue_op(ctx, ["1", "2", jid, text], opts)
        return jid
    jid = job_id or ids.new_id()
    check = "0" if job_id is None else "1"
    did = "" if wire is None else wire.id
    reply = yield _enqueue_op(ctx, ["1", "4", jid, text, did, check], opts)
    return as_str(reply[0])


#: Where keep_ms goes among the enqueue script's shared options (the schema's order).
KEEP_OPTION_INDEX = ENQUEUE_OPTIONS.index("keep_ms")


def _keep(keep_ms: int | None) -> str:
    """Gate ``keep_ms``: its wire text, ``''`` for none (``None`` or 0)."""
    if keep_ms is None:
        return ""
    keep_ms = checks.ms(keep_ms, "keep_ms", zero=True)
    return str(keep_ms) if keep_ms else ""


def _with_keep(opts: list[str], keep: str) -> list[str]:
    """The shared options with keep_ms in its place (unchanged when there is none)."""
    if not keep:
        return opts
    return [*opts, *([""] * (KEEP_OPTION_INDEX - len(opts))), keep]


#: Where the enqueue script reads its ``resent`` option, counted from the first option.
RESENT_OPTION = ENQUEUE_OPTIONS.index("resent")
#: Where delay_ms goes among the shared options.
DELAY_OPTION = ENQUEUE_OPTIONS.index("delay_ms")
#: Where the dedup mode and its throttle window go among the shared options.
DEDUP_MODE_OPTION = ENQUEUE_OPTIONS.index("dedup_mode")


def _with_dedup(opts: list[str], wire: DedupWire | None) -> list[str]:
    """The shared options with the dedup mode and window in place (unchanged for none
    or the simple mode: the script's default)."""
    if wire is None or not wire.mode:
        return opts
    return [*opts, *([""] * (DEDUP_MODE_OPTION - len(opts))), wire.mode, wire.ttl]


def _enqueue_op(ctx: Context, head: list[str], opts: list[str]) -> Eval:
    """One enqueue script call; its re-send (after a lost reply) sets the ``resent``
    option, so the script checks every id for a first run that landed. A first send
    checks only the ids the caller chose: minted ones are fresh."""
    again: Sequence[str]
    if opts:
        again = [*opts, *([""] * (RESENT_OPTION + 1 - len(opts)))]
        again[RESENT_OPTION] = "1"
    else:
        again = _RESENT_ALONE  # the common call: no option but the re-send's
    return Eval(script("enqueue"), (ctx.keys.base,), [*head, *opts], again=[*head, *again])


#: The shared options of a re-send that has no other option.
_RESENT_ALONE = (*([""] * RESENT_OPTION), "1")


def enqueue_many(
    ctx: Context,
    payloads: Iterable[Any],
    *,
    name: str | None = None,
    group: str | None = None,
    delay_ms: int | None = None,
    priority: int = 0,
    max_attempts: int | None = None,
    keep_ms: int | None = None,
    dedup: Dedup | Sequence[Dedup | None] | None = None,
) -> Plan[list[str]]:
    """Enqueue many jobs in one round trip (script calls of ENQUEUE_CHUNK jobs, pipelined).

    Args:
        payloads: the jobs' data, one job each.
        name, group, delay_ms, priority, max_attempts, keep_ms: as for
            :func:`enqueue`, applied to every job.
        dedup: one :class:`~echomq.dedup.Dedup` for every job (they share its id: a
            burst in one call, deduplicated by its mode), or one per job (``None``:
            that job has none). Jobs of different modes, windows or delays go in
            separate script calls of the same round trip, each kind in its order.

    Returns:
        The new ids, in the order of ``payloads`` (which is also their mint order);
        with ``dedup``, a job that met a held dedup id answers the holder's id.

    Raises:
        InvalidName, InvalidArgument: before anything is sent.
        EnqueuePartial: some chunks landed and some did not (a full server refuses
            a chunk whole); ``.landed`` holds the ids written, ``.cause`` the error.
        ServerFull: nothing landed, the server is out of memory.
    """
    opts = _options(
        name=name,
        group=group,
        delay_ms=delay_ms,
        run_at_ms=None,
        priority=priority,
        max_attempts=max_attempts,
        backoff=None,
    )
    keep = _keep(keep_ms)
    texts = checks.payloads(ctx.serializer, payloads)
    if dedup is not None:
        return (yield from _enqueue_many_dedup(ctx, texts, dedup, delay_ms, opts, keep))
    opts = _with_keep(hooks.trace_opts(opts), keep)
    if not texts:
        return []
    minted = ids.new_ids(len(texts))
    ops = []
    for i in range(0, len(texts), ENQUEUE_CHUNK):
        chunk = texts[i : i + ENQUEUE_CHUNK]
        # per job only its id and payload travel; the options once per call
        head: list[str] = [str(len(chunk)), "2", *([""] * (2 * len(chunk)))]
        head[2::2] = minted[i : i + ENQUEUE_CHUNK]
        head[3::2] = chunk
        ops.append(_enqueue_op(ctx, head, opts))
    replies = yield Batch(tuple(ops))
    failed = [(k, r) for k, r in enumerate(replies) if isinstance(r, Exception)]
    if not failed:
        return minted
    if len(failed) == len(replies):
        raise failed[0][1]  # nothing landed: the error as it came
    # some chunks landed (a full server refuses a chunk whole, before its first write)
    landed = [
        j
        for k in range(len(replies))
        if not isinstance(replies[k], Exception)
        for j in minted[k * ENQUEUE_CHUNK : (k + 1) * ENQUEUE_CHUNK]
    ]
    first = failed[0][1]
    raise EnqueuePartial(
        f"enqueue_many: {len(landed)} of {len(minted)} jobs landed ({first})",
        landed=landed,
        cause=first,
    )


def _enqueue_many_dedup(
    ctx: Context,
    texts: list[str],
    dedup: Dedup | Sequence[Dedup | None],
    delay_ms: int | None,
    opts: list[str],
    keep: str,
) -> Plan[list[str]]:
    """enqueue_many with dedup ids: the jobs by kind (mode, window, delay), each kind in
    calls of ENQUEUE_CHUNK jobs of four arguments, every call in one round trip."""
    specs = [dedup] * len(texts) if isinstance(dedup, Dedup) else list(dedup)
    if len(specs) != len(texts):
        raise InvalidArgument(f"{len(specs)} dedup specs for {len(texts)} payloads")
    wires = [gate(d, None, delay_ms, None) for d in specs]
    if not texts:
        return []
    minted = ids.new_ids(len(texts))
    kinds: dict[tuple[str, str, int | None], list[int]] = {}
    for i, w in enumerate(wires):
        kind = ("", "", delay_ms) if w is None else (w.mode, w.ttl, w.delay_ms)
        kinds.setdefault(kind, []).append(i)
    ops, where = [], []
    for (mode, ttl, delay), members in kinds.items():
        shared = opts
        if delay != delay_ms:  # a Dedup's own delay (checked by gate)
            shared = [*opts, *([""] * (DELAY_OPTION + 1 - len(opts)))]
            shared[DELAY_OPTION] = str(delay)
        shared = _with_keep(hooks.trace_opts(shared), keep)
        shared = _with_dedup(shared, DedupWire("", mode, ttl, delay))
        for c in range(0, len(members), ENQUEUE_CHUNK):
            chunk = members[c : c + ENQUEUE_CHUNK]
            head = [str(len(chunk)), "4"]
            for i in chunk:
                w = wires[i]
                head += [minted[i], texts[i], "" if w is None else w.id, "0"]
            ops.append(_enqueue_op(ctx, head, shared))
            where.append(chunk)
    replies = yield Batch(tuple(ops))
    out = list(minted)
    landed: list[str] = []
    failed = [r for r in replies if isinstance(r, Exception)]
    for chunk, reply in zip(where, replies, strict=True):
        if isinstance(reply, Exception):
            continue
        for i, held in zip(chunk, reply, strict=True):
            out[i] = as_str(held)
            landed.append(out[i])
    if not failed:
        return out
    if len(failed) == len(replies):
        raise failed[0]
    raise EnqueuePartial(
        f"enqueue_many: {len(landed)} of {len(minted)} jobs landed ({failed[0]})",
        landed=landed,
        cause=failed[0],
    )


# The claim in explicit pieces. Every claimer composes them (``claim_many`` here, the
# worker in its own round trips): the pause-gate read, then the claim script call only
# while the gate reads open, then one decoder of the script's reply. Nobody inspects
# another plan's commands, so a change to a piece reaches every claimer.
