"""Read verbs: counts, one job's row and state, browsing a state, metrics."""

from __future__ import annotations

from typing import cast

from . import checks
from .context import Context
from .errors import InvalidArgument
from .results import JOB_STATES, Counts, ErrorRecord, JobRow, JobState
from .scripts import Batch, Cmd, Eval, Plan, script

STATES = JOB_STATES
_SETS = {
    "pending": "pending",
    "active": "active",
    "scheduled": "schedule",
    "dead": "dead",
    "completed": "completed",
}


def counts(ctx: Context) -> Plan[Counts]:
    """Jobs in every state (lanes counted in pending), the settled totals and the pause,
    in one script call.

    Returns:
        A :class:`~echomq.results.Counts`.
    """
    r = yield Eval(script("counts"), (ctx.keys.base,))
    pending, active, scheduled, dead, completed, failed, paused, kept = (int(v) for v in r)
    return Counts(pending, active, scheduled, dead, completed, failed, bool(paused), kept)


def get_job(ctx: Context, job_id: str) -> Plan[JobRow | None]:
    """A job's row, or ``None`` when it does not exist, in one round trip.

    Returns:
        A :class:`~echomq.results.JobRow`: the row's fields typed, ``data`` (the
        deserialized payload) and, for a kept job, its timeline, result and
        ``errors`` (its error history, oldest first).
    """
    row, errors = yield Batch(
        (Cmd(("HGETALL", ctx.keys.job(job_id))), Cmd(("LRANGE", ctx.keys.errors(job_id), 0, -1)))
    )
    if not row:
        return None
    payload = row.get("payload")
    data = ctx.serializer.loads(payload) if payload is not None else None
    history = tuple(ErrorRecord.from_text(e) for e in errors or ())
    return JobRow.from_fields(job_id, row, data, history)


def job_state(ctx: Context, job_id: str) -> Plan[JobState | None]:
    """``pending``, ``active``, ``scheduled``, ``dead``, ``completed`` (a job kept as
    history), or ``None`` when gone."""
    return cast("JobState | None", (yield Cmd(("HGET", ctx.keys.job(job_id), "state"))))


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
        state: ``pending``, ``active``, ``scheduled``, ``dead`` or ``completed``
            (the completed jobs kept as history; newest first = latest finished).
        n: page size.
        offset: how many to skip.
        order: ``newest`` (score then id, descending: the default) or ``run`` (the
            order claims take: priority then age; the schedule soonest first).

    Raises:
        InvalidArgument: an unknown state or order, or a bad page.
    """
    state = checks.state(state, kept=True)
    n = checks.batch(n, "n")
    offset = checks.count(offset, "offset", zero=True)
    if not isinstance(order, str) or order not in ORDERS:
        raise InvalidArgument(f"order must be 'newest' or 'run', got {checks.show(order, 40)}")
    argv = (_SETS[state], str(n), str(offset), "run" if order == "run" else "")
    ids: list[str] = yield Eval(script("browse"), (ctx.keys.base,), argv)
    return ids


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
    return {
        "completed": {k: int(v) for k, v in done.items()},
        "failed": {k: int(v) for k, v in failed.items()},
    }
