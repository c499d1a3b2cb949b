"""One job: its row (:func:`get_job`), its state (:func:`job_state`), and everything a
detail page shows in one round trip (:func:`job_view`)."""

from __future__ import annotations

from typing import Any, cast

from .. import checks
from ..context import Context, as_str
from ..results import ErrorRecord, JobRow, JobState, log_entries
from ..results.views import JobView
from ..scripts import Batch, Cmd, Eval, Plan, script
from . import decode
from .limits import LOG_TAIL, PAGE_STATES


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
    history), ``waiting_children`` (a flow parent waiting for its children), or
    ``None`` when gone."""
    return cast("JobState | None", (yield Cmd(("HGET", ctx.keys.job(job_id), "state"))))


def job_view(ctx: Context, job_id: str, log_tail: int = LOG_TAIL) -> Plan[JobView | None]:
    """One job for a detail page in one round trip, or ``None`` when it is gone (a job
    with a dedup id takes a second: who holds the id now).

    Raises:
        InvalidJobId: a malformed id (before anything is sent).
    """
    row_key = ctx.keys.job(job_id)
    log_tail = checks.batch(log_tail, "log_tail")
    k = ctx.keys
    raw, logged, lock, errs, *scores, now = yield Batch(
        (
            Cmd(("HGETALL", row_key)),
            # the newest log lines, their times and the count, read at one instant
            Eval(script("get_job_log_entries"), (k.base, row_key), (str(log_tail),)),
            Cmd(("EXISTS", k.lock(job_id))),
            # a kept job's error history is capped (20 entries): read whole
            Cmd(("LRANGE", k.errors(job_id), 0, -1)),
            *(Cmd(("ZSCORE", k.state_set(s), job_id)) for s in PAGE_STATES),
            Cmd(("TIME",)),
        )
    )
    if not raw:
        return None
    row: dict[str, Any] = {as_str(a): as_str(b) for a, b in decode.pairs(raw)}
    row["id"] = job_id
    if "payload" in row:
        row["data"] = ctx.serializer.loads(row["payload"])
    state = row.get("state")
    score = dict(zip(PAGE_STATES, scores)).get(state) if state in PAGE_STATES else None
    if state == "pending":  # its priority (in its lane: no score read)
        score = decode.int_or_zero(row.get("priority"))
    # the row went between the two reads (the script answers -1): no logs
    lines, times, count = logged if isinstance(logged, list) else ([], [], 0)
    entries = log_entries([as_str(x) for x in lines], times)
    owner = None
    if row.get("dedup"):  # who holds its dedup id now (a second trip, for such jobs only)
        held = yield Eval(script("dedup_owner"), (k.base,), (row["dedup"],))
        owner = as_str(held[0]) if isinstance(held, list) else None
    return JobView(
        row=row,
        logs=[e.line for e in entries],
        log_count=int(count),
        locked=bool(int(lock)) or "lock" in row,
        score=None if score is None else decode.ms(score),
        now_ms=decode.time_ms(now),
        errors=[ErrorRecord.from_text(as_str(e)) for e in errs or ()],
        result=ctx.serializer.loads(row["result"]) if row.get("result") else None,
        log_times=[e.time_ms for e in entries],
        dedup_owner=owner,
    )
