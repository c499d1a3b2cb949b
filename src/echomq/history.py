"""Opt-in history: a queue's retention, and waiting for a kept job's result.

The seed keeps no history (complete deletes the row; the metrics hashes are the
throughput record), and that stays the default. A queue keeps it once
:func:`set_retention` stores a retention in its ``meta`` hash, and one job when its
enqueue says ``keep_ms``. The enqueue script then stamps the row with ``keep`` and
``enqueued_at``; the claim, complete and retry scripts read ``keep`` with the row
fields they already read, so a job that is not kept costs them nothing more. A kept
job's row carries its timeline (server clock), its result and, beside it, its error
history (``job:<id>:errors``); a kept completed job stays in ``completed`` (score =
finish time) until the queue's retention, or its own ``keep_ms``, trims it, a bounded
number per transition.

:func:`settled` is the one read behind ``Queue.result()``: the facades subscribe to the
queue's events first, then read the row with it, so a completion between the two is
never missed (see :meth:`echomq.queue.Queue.result`).
"""

from __future__ import annotations

import time
from collections.abc import Generator
from dataclasses import dataclass
from typing import Any

from . import checks
from .context import Context
from .errors import InvalidArgument, JobFailed, JobNotKept, ResultTimeout
from .results import ErrorRecord, Retention
from .scripts import Batch, Cmd, Eval, Plan, script

#: The retention fields of the queue's ``meta`` hash, in Retention's order.
RETENTION_FIELDS = ("keep_completed", "keep_completed_ms", "keep_dead", "keep_dead_ms")


def _limit(value: Any, what: str, *, ms: bool) -> str:
    if value is None:
        return ""
    n = checks.ms(value, what, zero=True) if ms else checks.count(value, what, zero=True)
    return str(n) if n else ""


def set_retention(
    ctx: Context,
    completed: int | None = None,
    completed_age_ms: int | None = None,
    dead: int | None = None,
    dead_age_ms: int | None = None,
) -> Plan[int]:
    """Set how much settled history the queue keeps; every limit left out (or 0) is
    cleared, so ``set_retention()`` alone keeps none again.

    While any limit is set, the jobs enqueued from then on are kept: their rows carry
    a timeline, their result and an error history. A kept completed job stays in
    ``completed`` while it is among the newest ``completed`` and younger than
    ``completed_age_ms`` (each as set); ``dead`` and ``dead_age_ms`` trim the dead set
    the same way (every dead job, kept or not). Each transition trims a few jobs, so no
    call is unbounded; this call trims at most 500 per set and rule itself. Clearing
    the completed limits keeps no new completions; the ones kept stay until
    ``clean(..., state="completed")`` or ``remove_job`` takes them. Journaled.

    Args:
        completed: keep the newest N completed jobs.
        completed_age_ms: keep completed jobs that finished less than T ms ago.
        dead: keep the newest N dead jobs.
        dead_age_ms: keep dead jobs that died less than T ms ago.

    Returns:
        How many settled jobs this call trimmed.

    Raises:
        InvalidArgument: a limit that is not an int within its range, before any I/O.
    """
    args = (
        _limit(completed, "completed", ms=False),
        _limit(completed_age_ms, "completed_age_ms", ms=True),
        _limit(dead, "dead", ms=False),
        _limit(dead_age_ms, "dead_age_ms", ms=True),
        ctx.actor,
    )
    return int((yield Eval(script("set_retention"), (ctx.keys.base,), args)))


def _opt_int(value: Any) -> int | None:
    return int(value) if value not in (None, "", b"") and int(value) > 0 else None


def retention(ctx: Context) -> Plan[Retention]:
    """The queue's retention, read from its ``meta`` hash. Read-only.

    Returns:
        A :class:`~echomq.results.Retention` (every field ``None``: no history kept).
    """
    raw = yield Cmd(("HMGET", ctx.keys.meta, *RETENTION_FIELDS))
    return Retention(*(_opt_int(v) for v in raw))


@dataclass(frozen=True)
class Settled:
    """Where a kept job stands, for ``Queue.result()``.

    Attributes:
        done: True when it completed (``value`` is its result).
        value: the deserialized result (``None`` when the handler returned ``None``).
    """

    done: bool
    value: Any = None


def timeout(value: Any) -> float | None:
    """Gate ``timeout_s`` of ``Queue.result()``: ``None`` (wait as long as it takes) or
    a finite number of seconds >= 0.

    Raises:
        InvalidArgument: anything else, before any I/O.
    """
    if value is None:
        return None
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not 0 <= value <= checks.HORIZON_MS / 1000
    ):
        raise InvalidArgument(
            f"timeout_s must be None or seconds within 0..{checks.HORIZON_MS // 1000}, "
            f"got {checks.show(value, 40)}"
        )
    return float(value)


def settled(ctx: Context, job_id: str) -> Plan[Settled]:
    """Read whether a kept job has settled, in one round trip.

    Returns:
        ``Settled(True, result)`` for a completed job; ``Settled(False)`` for one
        still on its way (pending, active, scheduled).

    Raises:
        InvalidJobId: a malformed id, before any I/O.
        JobNotKept: no row, or a row that keeps no history, or one kept only as the
            queue says while the queue keeps no completed jobs (it will not stay).
        JobFailed: the job is dead (``.error``: its last error).
    """
    k = ctx.keys
    row, meta, last = yield Batch(
        (
            Cmd(("HMGET", k.job(job_id), "state", "keep", "result", "last_error")),
            Cmd(("HMGET", k.meta, "keep_completed", "keep_completed_ms")),
            Cmd(("LRANGE", k.errors(job_id), -1, -1)),
        )
    )
    state, keep, result, last_error = row
    if state is None:
        raise JobNotKept(f"job {job_id} does not exist (not kept, or gone)", job_id=job_id)
    if keep is None:
        raise JobNotKept(f"job {job_id} keeps no history", job_id=job_id)
    if state == "completed":
        return Settled(True, None if result is None else ctx.serializer.loads(result))
    if state == "dead":
        attempt = 0
        if last:
            attempt = ErrorRecord.from_text(last[0]).attempt
        raise JobFailed(job_id=job_id, error=last_error, attempt=attempt)
    if not int(keep) and meta[0] is None and meta[1] is None:
        raise JobNotKept(
            f"job {job_id} will not be kept when it completes (the queue keeps no completed "
            "jobs and the job asked for no keep_ms)",
            job_id=job_id,
        )
    return Settled(False)


#: The events of one job after which ``result()`` reads its row again.
SETTLING_EVENTS = frozenset({"completed", "dead", "removed"})
#: Queue-scope events after which ``result()`` reads the row again (the job may be gone).
QUEUE_EVENTS = frozenset({"drained", "obliterated"})


def settles(job_id: str, name: str, job: str | None) -> bool:
    """Whether an event (its name and job) may have settled ``job_id``."""
    return (job == job_id and name in SETTLING_EVENTS) or (job is None and name in QUEUE_EVENTS)


@dataclass(frozen=True)
class RunPlan:
    """A step of the result wait: read the row (the facade answers the plan's ``Settled``)."""

    plan: Plan[Settled]


@dataclass(frozen=True)
class AwaitEvent:
    """A step of the result wait: wait up to ``left`` seconds (``None``: no limit) for the
    next event; the facade answers ``(event or None, whether the stream reconnected)``."""

    left: float | None


def wait_for_result(
    ctx: Context, job_id: str, timeout_s: Any
) -> Generator[RunPlan | AwaitEvent, Any, Any]:
    """The logic of ``Queue.result()`` and ``AsyncQueue.result()``, written once: the
    facades subscribe first, then drive these steps with their own I/O.

    Raises:
        InvalidJobId, InvalidArgument: a malformed id or timeout, at once (before the
            facade subscribes); then what :func:`settled` raises, and ResultTimeout.
    """
    ctx.keys.job(job_id)
    limit = timeout(timeout_s)
    return _wait_steps(ctx, job_id, timeout_s, limit)


def _wait_steps(
    ctx: Context, job_id: str, timeout_s: Any, limit: float | None
) -> Generator[RunPlan | AwaitEvent, Any, Any]:
    deadline = None if limit is None else time.monotonic() + limit
    got: Settled = yield RunPlan(settled(ctx, job_id))
    while not got.done:
        left = None if deadline is None else deadline - time.monotonic()
        if left is not None and left <= 0:
            raise ResultTimeout(f"job {job_id} did not settle in {timeout_s} s", job_id=job_id)
        event, lost = yield AwaitEvent(left)
        # a reconnect may have missed the settling event: read the row again
        if lost or (event is not None and settles(job_id, event.name, event.job)):
            got = yield RunPlan(settled(ctx, job_id))
    return got.value
