"""The job-scope operator verbs: reach into one row, fenced and typed.

Each verb is one script; the id is checked at the key builder before any I/O; a missing
row is :class:`~echomq.errors.JobGone` (the runner translates the script's ``-1``, for
the op's ``job``) and nothing is written.
"""

from __future__ import annotations

import json
import math
from typing import Any

from . import checks, ids, journal
from .context import Context, as_str
from .errors import InvalidArgument
from .results import LogEntry, log_entries
from .scripts import Eval, Plan, script


def _row(ctx: Context, job_id: str) -> tuple[str, str]:
    return ctx.keys.base, ctx.keys.job(job_id)


def update_data(ctx: Context, job_id: str, payload: Any) -> Plan[None]:
    """Replace a job's payload, in any state; nothing else on the row changes.

    Args:
        job_id: the job (a branded ``JOB`` id).
        payload: the new data, serialized by the queue's serializer.

    Raises:
        InvalidJobId, InvalidPayload: a malformed id or payload, before any I/O.
        JobGone: no such job; nothing written.
    """
    keys = _row(ctx, job_id)
    text = checks.payload(ctx.serializer, payload)
    argv = (job_id, text, ctx.actor, journal.request_id())
    yield Eval(script("update_data"), keys, argv, job=job_id)


def progress_text(progress: Any) -> tuple[str, str]:
    """How a progress value is stored on the row and carried by the event.

    A number is stored as its decimal text, a string as is, anything else as JSON.

    Returns:
        ``(text, kind)``: kind ``json`` when ``text`` is JSON (a number, a bool, a list,
        an object, ...), ``str`` when it is a plain string the script JSON-encodes.

    Raises:
        InvalidArgument: a non-finite number, or a value JSON cannot carry.
    """
    if isinstance(progress, str):
        return checks.text(progress, "progress"), "str"
    try:
        if isinstance(progress, (int, float)) and not isinstance(progress, bool):
            if isinstance(progress, float) and not math.isfinite(progress):
                raise InvalidArgument(f"progress must be finite, got {progress!r}")
            return (repr(progress) if isinstance(progress, float) else str(int(progress))), "json"
        text = json.dumps(progress, separators=(",", ":"), allow_nan=False, ensure_ascii=False)
    except (TypeError, ValueError, RecursionError) as exc:
        raise InvalidArgument(f"progress is not JSON-serializable: {exc}") from None
    return checks.text(text, "progress"), "json"


def update_progress(ctx: Context, job_id: str, progress: Any) -> Plan[None]:
    """Write a job's progress, then publish it on the queue's events channel.

    The script writes the row's ``progress`` field and publishes
    ``{"event":"progress","job":id,"progress":value}`` on ``emq:{q}:events``.

    Args:
        job_id: the job, in any state.
        progress: a number (stored as decimal text), a string (as is) or any
            JSON-serializable value (stored as JSON). The event carries the value.

    Raises:
        InvalidJobId, InvalidArgument: a malformed id or a value JSON cannot carry,
            before any I/O.
        JobGone: no such job; nothing written, nothing published.
    """
    keys = _row(ctx, job_id)
    text, kind = progress_text(progress)
    yield Eval(script("update_progress"), keys, (job_id, text, kind), job=job_id)


def add_log(ctx: Context, job_id: str, line: str, keep: int = 0) -> Plan[int]:
    """Append a line to a job's logs (``emq:{q}:job:<id>:logs``), in any state, and the
    server time it was written (ms, from ``TIME``) to ``emq:{q}:job:<id>:logtimes``;
    :func:`get_job_log_entries` reads the two together.

    Args:
        job_id: the job.
        line: the text to append.
        keep: when > 0, trim the list (and the times with it) to its newest ``keep``
            lines; 0 keeps every line.

    Returns:
        The number of lines kept.

    Raises:
        InvalidJobId, InvalidArgument: a malformed id or a negative ``keep``.
        JobGone: no such job; nothing written.
    """
    keys = _row(ctx, job_id)
    line = checks.text(line, "line")
    keep = checks.count(keep, "keep", zero=True)
    reply = yield Eval(script("add_log"), keys, (job_id, line, str(keep)), job=job_id)
    return int(reply)


def get_job_logs(ctx: Context, job_id: str) -> Plan[list[str]]:
    """A job's log lines in append order. Read-only.

    Args:
        job_id: the job.

    Returns:
        The lines, oldest first; ``[]`` when there are none.

    Raises:
        InvalidJobId: a malformed id, before any I/O.
        JobGone: no such job.
    """
    lines: list[str] = yield Eval(script("get_job_logs"), _row(ctx, job_id), job=job_id)
    return lines


def get_job_log_entries(ctx: Context, job_id: str) -> Plan[list[LogEntry]]:
    """A job's log lines with the server time each was written. Read-only.

    ``add_log`` keeps the time of each line (server ms, from ``TIME``) in a sibling
    list ``emq:{q}:job:<id>:logtimes``; both are read by one script, at one instant.
    The lines are those :func:`get_job_logs` answers, in the same order.

    Args:
        job_id: the job.

    Returns:
        A :class:`~echomq.results.LogEntry` per line, oldest first; ``[]`` when there
        are none. A line written before echomq kept log times has ``time_ms=None``
        (the two lists are aligned at their newest end).

    Raises:
        InvalidJobId: a malformed id, before any I/O.
        JobGone: no such job.
    """
    keys = _row(ctx, job_id)
    lines, times, _ = yield Eval(script("get_job_log_entries"), keys, ("0",), job=job_id)
    return log_entries([as_str(x) for x in lines], times)


def remove_job(ctx: Context, job_id: str, dedup_id: str | None = None) -> Plan[None]:
    """Delete a job in any state, with its logs and lock; release its dedup key.

    A grouped job leaves its lane; when it was in flight it gives its lane slot back
    and the group's place on the ring follows.

    Args:
        job_id: the job.
        dedup_id: also release this dedup key, only when it names this job (the
            row's own dedup key is released the same way without it).

    Raises:
        InvalidJobId, InvalidName: a malformed id or dedup id, before any I/O.
        JobGone: no such job.
        JobLocked: a worker holds it (a ``:lock`` key or a ``lock`` field); the job
            is untouched.
    """
    keys = _row(ctx, job_id)
    if dedup_id is not None:
        ctx.keys.dedup(checks.dedup(dedup_id))
    # a request id: a re-send after a lost reply answers the first run's 1 (lib/requests)
    argv = (job_id, dedup_id or "", ctx.actor, journal.request_id())
    yield Eval(script("remove_job"), keys, argv, job=job_id, again=(*argv, "1"))


def reprocess_job(ctx: Context, job_id: str) -> Plan[None]:
    """Move a dead job back to the backlog: ``last_error`` cleared, counters kept.

    A flat job goes to pending at its priority, a grouped job to its lane (rejoining
    the ring when the lane can be served), each at a fresh place in the enqueue
    sequence: the back of its priority, as a new arrival; a wake token is pushed. The
    pause is not read: on a paused queue the job waits until the first claim after
    resume, which hands out token ``attempts + 1``.

    Args:
        job_id: the job.

    Raises:
        InvalidJobId: a malformed id, before any I/O.
        JobGone: no such job.
        JobNotDead: the job is not in the dead set; nothing changed.
    """
    k = ctx.keys
    keys = (k.job(job_id), k.dead, k.pending, k.base)
    yield Eval(script("reprocess_job"), keys, (job_id, ctx.actor), job=job_id)


def rerun_job(ctx: Context, job_id: str) -> Plan[str]:
    """Run a completed or dead job again as a new job: a copy, the original kept.

    The copy takes the original's payload, name, group, priority, max_attempts,
    backoff and keep_ms, with a new id, ``attempts`` 0 and a fresh place in the
    enqueue sequence (the back of its priority); it goes to pending or its lane like
    a new arrival. It takes no dedup key (the original's dedup id is not carried: a
    rerun is an operator's explicit ask, and the key may belong to a newer job), nor
    the original's repeatable, trace, logs, progress or result. The original is left
    as it is but for ``rerun_as``, the copy's id (the newest copy when rerun again);
    the copy's ``rerun_of`` names the original. One audit entry (``rerun_job``, its
    args the job and the copy). A completed job can be rerun only while its row is
    kept (a retention or ``keep_ms``); without history its row is gone at completion.

    Args:
        job_id: the completed or dead job.

    Returns:
        The copy's id.

    Raises:
        InvalidJobId: a malformed id, before any I/O.
        JobGone: no such job (never enqueued, removed, or completed without history).
        JobNotFinished: the job is pending, scheduled or active; nothing changed.
    """
    keys = _row(ctx, job_id)
    copy = ids.new_id()
    reply = yield Eval(script("rerun_job"), keys, (job_id, copy, ctx.actor), job=job_id)
    return as_str(reply)


def lock_job(ctx: Context, job_id: str, token: int, ttl_ms: int = 60000) -> Plan[None]:
    """Mark an active job as held by its worker: ``remove_job`` refuses it meanwhile.

    Args:
        job_id: the job.
        token: the fencing token the claim handed out.
        ttl_ms: the lock's lifetime (about two leases); locking again extends it.

    Raises:
        InvalidJobId, InvalidArgument: before any I/O.
        JobGone: no such job.
        StaleToken: the job is not active under ``token``; nothing changed.
    """
    keys = _row(ctx, job_id)
    token = checks.token(token)
    ttl_ms = checks.ms(ttl_ms, "ttl_ms")
    yield Eval(script("lock_job"), keys, (job_id, str(token), str(ttl_ms)), job=job_id)


def unlock_job(ctx: Context, job_id: str, token: int) -> Plan[bool]:
    """Release a job's lock, only when it still carries ``token``.

    Args:
        job_id: the job.
        token: the token the lock was taken with.

    Returns:
        ``True`` when the lock was released; ``False`` when no lock was held (it
        expired or was already cleared), nothing changed.

    Raises:
        JobGone: no such job.
        StaleToken: the lock carries another token; it is left as it is.
    """
    keys = _row(ctx, job_id)
    token = checks.token(token)
    reply = yield Eval(script("unlock_job"), keys, (job_id, str(token)), job=job_id)
    return bool(reply)


def cancel_job(ctx: Context, job_id: str) -> Plan[bool]:
    """Ask the worker running an active job to stop it (cooperative).

    The worker holding the lease sees the request on its next beat: the handler's
    ``job.cancelled`` turns true (``check_cancelled()``, ``progress()`` and ``log()``
    then raise ``JobCancelled``; an ``async def`` handler is also cancelled at its next
    ``await``). A handler that stops that way sends the job to dead with the error
    ``JobCancelled: cancelled by an operator`` (reprocess it to run it again); one that
    returns normally all the same completes it. The request names the current run
    only: a later run of the job (after a crash and a reap) is not cancelled by it.

    Args:
        job_id: the job.

    Returns:
        ``True`` when the request was written, ``False`` when it was already made for
        this run (nothing written).

    Raises:
        InvalidJobId: a malformed id, before any I/O.
        JobGone: no such job.
        JobNotActive: the job is pending, scheduled or dead: nothing runs to cancel;
            nothing changed.
    """
    keys = _row(ctx, job_id)
    reply = yield Eval(script("cancel_job"), keys, (job_id, ctx.actor), job=job_id)
    return bool(int(reply))
