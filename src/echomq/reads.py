"""Read verbs: counts, one job's row and state, browsing a state, metrics."""

from __future__ import annotations

from typing import Any

from . import checks
from .context import Context, as_str
from .errors import InvalidArgument
from .scripts import Batch, Cmd, Eval, Plan, script

STATES = ("pending", "active", "scheduled", "dead")
_SETS = {"pending": "pending", "active": "active", "scheduled": "schedule", "dead": "dead"}


def counts(ctx: Context) -> Plan[dict[str, int]]:
    """Jobs in every state (lanes counted in pending) and the settled totals.

    Returns:
        ``{"pending", "active", "scheduled", "dead", "completed", "failed"}`` -> int.
    """
    r = yield Eval(script("counts"), (ctx.keys.base,))
    names = ("pending", "active", "scheduled", "dead", "completed", "failed")
    return {n: int(v) for n, v in zip(names, r)}


def get_job(ctx: Context, job_id: str) -> Plan[dict[str, Any] | None]:
    """A job's row, or ``None`` when it does not exist.

    Returns:
        Every row field as text, plus ``"id"`` and ``"data"`` (the deserialized
        payload).
    """
    raw = yield Cmd(("HGETALL", ctx.keys.job(job_id)))
    if not raw:
        return None
    items = raw.items() if isinstance(raw, dict) else zip(raw[::2], raw[1::2])
    row: dict[str, Any] = {as_str(k): as_str(v) for k, v in items}
    row["id"] = job_id
    if "payload" in row:
        row["data"] = ctx.serializer.loads(row["payload"])
    return row


def job_state(ctx: Context, job_id: str) -> Plan[str | None]:
    """``pending``, ``active``, ``scheduled``, ``dead``, or ``None`` when gone."""
    r = yield Cmd(("HGET", ctx.keys.job(job_id), "state"))
    return None if r is None else as_str(r)


#: The orders :func:`browse` pages in.
ORDERS = ("newest", "run")


def browse(
    ctx: Context, state: str, n: int = 20, offset: int = 0, order: str = "newest"
) -> Plan[list[str]]:
    """A page of job ids in ``state`` (lanes merged into pending), bounded at any offset.

    Pending's flat set and every lane form one order through the lanes' index
    (``gindex``), so a page costs ``O(log^2 N + n)`` on the server whatever the offset
    and the number of lanes.

    Args:
        state: ``pending``, ``active``, ``scheduled`` or ``dead``.
        n: page size.
        offset: how many to skip.
        order: ``newest`` (score then id, descending: the default) or ``run`` (the
            order claims take: priority then age; the schedule soonest first).

    Raises:
        InvalidArgument: an unknown state or order, or a bad page.
    """
    state = checks.state(state)
    n = checks.batch(n, "n")
    offset = checks.count(offset, "offset", zero=True)
    if not isinstance(order, str) or order not in ORDERS:
        raise InvalidArgument(f"order must be 'newest' or 'run', got {checks.show(order, 40)}")
    argv = (_SETS[state], str(n), str(offset), "run" if order == "run" else "")
    r = yield Eval(script("browse"), (ctx.keys.base,), argv)
    return [as_str(x) for x in r]


def is_paused(ctx: Context) -> Plan[bool]:
    """Whether the queue's claim gate is closed."""
    return bool(int((yield Cmd(("HEXISTS", ctx.keys.meta, "paused")))))


def metrics(ctx: Context) -> Plan[dict[str, dict[str, int]]]:
    """The throughput record: totals and per-minute buckets.

    Returns:
        ``{"completed": {...}, "failed": {...}}``, each ``{"count": n, "<minute>": n}``
        where ``<minute>`` is milliseconds since the epoch // 60000.
    """
    done, failed = yield Batch(
        (
            Cmd(("HGETALL", ctx.keys.metrics_completed)),
            Cmd(("HGETALL", ctx.keys.metrics_failed)),
        )
    )

    def table(raw: Any) -> dict[str, int]:
        items = raw.items() if isinstance(raw, dict) else zip(raw[::2], raw[1::2])
        return {as_str(k): int(v) for k, v in items}

    return {"completed": table(done), "failed": table(failed)}
