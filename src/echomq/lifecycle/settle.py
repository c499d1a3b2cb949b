"""Settling a claimed job, fenced by its token: ``complete`` (one or many), ``retry``,
``delay`` and ``release``; and reading a batch's per-job outcomes."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .. import checks
from ..context import Context
from ..errors import JobGone, StaleToken
from ..results import RetryOutcome
from ..scripts import Batch, Eval, Plan, script


def fenced_token(ctx: Context, job_id: str, token: int) -> str:
    """The token as the script takes it, the id and the token checked."""
    ctx.keys.job(job_id)
    return str(checks.token(token))


def _row_keys(ctx: Context, job_id: str) -> tuple[str, str]:
    """The KEYS of a verb on one job: the queue base, then the job's row (checked)."""
    return ctx.keys.base, ctx.keys.job(job_id)


def complete(ctx: Context, job_id: str, token: int, *, result: Any = None) -> Plan[None]:
    """Settle an active job as done: its row and logs go, the completion is counted.

    A kept job (see ``set_retention`` and ``keep_ms``) stays instead, as history: state
    ``completed``, its finish time and ``result``.

    Args:
        job_id: the job.
        token: the token its claim handed out.
        result: the handler's return value, serialized by the queue's serializer and
            stored on a kept job's row (``None``: nothing is sent).

    Raises:
        JobGone: no such job (or it completed already and is kept as history).
        StaleToken: the job is not active under ``token``.
        InvalidPayload: ``result`` does not serialize, before anything is sent.
    """
    tok = fenced_token(ctx, job_id, token)
    args: tuple[str, ...] = (job_id, tok)
    if result is not None:
        args = (job_id, tok, checks.payload(ctx.serializer, result))
    yield Eval(script("complete"), _row_keys(ctx, job_id), args, job=job_id)


def complete_many(ctx: Context, pairs: Sequence[tuple[str, int]]) -> Plan[list[str]]:
    """Complete many active jobs in one round trip: one script call per
    :data:`COMPLETE_CHUNK` jobs (each job fenced by its own token), pipelined.

    Args:
        pairs: ``(job_id, token)`` for each job.

    Returns:
        The ids that were NOT completed (gone or stale); ``[]`` when all were.
    """
    pairs = checks.pairs(pairs)
    ops = complete_ops(ctx, pairs)
    if not ops:
        return []
    gone, stale = settle_outcomes((yield Batch(tuple(ops))))
    missed = {*gone, *stale}
    return [j for j, _ in pairs if j in missed]


#: Jobs per call of the complete script's batch form.
COMPLETE_CHUNK = 500


#: A completion's result argument when there is none (bytes: packed as they are).
_NO_RESULT = b""


def complete_ops(
    ctx: Context,
    pairs: Sequence[tuple[str, int]],
    results: dict[tuple[str, int], str] | None = None,
    *,
    from_claim: bool = False,
) -> list[Eval]:
    """The complete script's batch form for ``(job_id, token)`` pairs: one call per
    :data:`COMPLETE_CHUNK`, gated before any I/O (no call for no pairs). Each call
    makes each kind of write once for all its jobs (one ``ZREM``, one ``DEL``, one
    count), where a call per job would pay the script and its fixed writes each time.
    Read the replies with :func:`settle_outcomes`.

    Args:
        results: serialized results by ``(job_id, token)``, sent with their
            completions (a kept job stores its result; see :func:`complete`).
        from_claim: the pairs are as a claim's reply handed them out (the worker's):
            the ids and tokens the server gave are not checked again, one by one.
    """
    done = script("complete")
    found = results or {}
    ops = []
    for i in range(0, len(pairs), COMPLETE_CHUNK):
        args: list[str | bytes] = []
        chunk = pairs[i : i + COMPLETE_CHUNK]
        if from_claim and not found:
            for j, t in chunk:
                args += (j, str(t), _NO_RESULT)
        else:
            for j, t in chunk:
                tok = str(t) if from_claim else fenced_token(ctx, j, t)
                args += (j, tok, found.get((j, t)) or _NO_RESULT)
        ops.append(Eval(done, (ctx.keys.base,), args))
    return ops


def settle_outcomes(replies: Sequence[Any]) -> tuple[list[str], list[str]]:
    """Read the replies of :func:`complete_ops` (each a flat list of ``(id, reason)``
    for the jobs not completed).

    Returns:
        ``(gone, stale)``: the ids whose row was gone and the ids refused as no longer
        active under that token.

    Raises:
        Exception: an error reply (the first one).
    """
    gone: list[str] = []
    stale: list[str] = []
    for r in replies:
        if isinstance(r, Exception):
            raise r
        for k in range(0, len(r), 2):
            if r[k + 1] == RELAY_MARK:
                continue  # a flow child's ending waits in the outbox (relay_waits)
            (gone if r[k + 1] == "gone" else stale).append(r[k])
    return gone, stale


#: The complete script's batch form ends its reply with ``('', RELAY_MARK)`` when a
#: flow child's ending was written to the queue's outbox (its parent is elsewhere).
RELAY_MARK = "relay"


def relay_waits(replies: Sequence[Any]) -> bool:
    """Whether any reply of :func:`complete_ops` says a flow ending waits in the outbox."""
    return any(
        not isinstance(r, Exception) and len(r) >= 2 and r[-1] == RELAY_MARK for r in replies
    )


def fenced_batch(pairs: Sequence[tuple[str, int]], ops: Sequence[Eval]) -> Plan[list[str]]:
    """Run one token-fenced op per job in one pipelined round trip.

    Returns:
        The ids whose op was refused as gone or stale; any other error is raised.
    """
    if not ops:
        return []
    gone, stale = fenced_outcomes(pairs, (yield Batch(tuple(ops))))
    missed = {*gone, *stale}
    return [j for j, _ in pairs if j in missed]


def fenced_outcomes(
    pairs: Sequence[tuple[str, int]], replies: Sequence[Any]
) -> tuple[list[str], list[str]]:
    """Read the replies of one token-fenced op per job (in ``pairs`` order).

    Returns:
        ``(gone, stale)``: the ids whose row was gone (``JobGone``) and the
        ids refused as no longer active under that token.

    Raises:
        Exception: any other error reply (the first one).
    """
    gone: list[str] = []
    stale: list[str] = []
    for (j, _), r in zip(pairs, replies):
        if isinstance(r, JobGone):
            gone.append(j)
        elif isinstance(r, StaleToken):
            stale.append(j)
        elif isinstance(r, Exception):
            raise r
    return gone, stale


def retry(
    ctx: Context,
    job_id: str,
    token: int,
    error: str,
    *,
    delay_ms: int = 0,
    max_attempts: int | None = None,
) -> Plan[RetryOutcome]:
    """Record a failure of an active job and schedule it again, or dead-letter it.

    Args:
        error: the error text (kept as ``last_error``).
        delay_ms: how long until the job is due again (from a backoff policy).
        max_attempts: overrides the row's limit for this decision.

    Returns:
        ``RetryOutcome.SCHEDULED``, or ``RetryOutcome.DEAD`` when its failures reached
        ``max_attempts`` (each equal to its text, ``"scheduled"`` / ``"dead"``).

    Raises:
        JobGone, StaleToken: refused, nothing changed.
    """
    verdict, _ = yield from retry_verdict(ctx, job_id, token, error, delay_ms, max_attempts)
    return verdict


#: The retry script's reply for a flow child gone dead whose ending waits in the outbox.
DEAD_RELAY = "dead_relay"


def retry_verdict(
    ctx: Context,
    job_id: str,
    token: int,
    error: str,
    delay_ms: int = 0,
    max_attempts: int | None = None,
) -> Plan[tuple[RetryOutcome, bool]]:
    """:func:`retry`, and whether a flow child's ending now waits in the outbox (the
    worker relays it at once)."""
    tok = fenced_token(ctx, job_id, token)
    error = checks.error_text(error)
    delay_ms = checks.ms(delay_ms, "delay_ms", zero=True)
    if max_attempts is not None:
        max_attempts = checks.count(max_attempts, "max_attempts")
    reply = yield Eval(
        script("retry"),
        _row_keys(ctx, job_id),
        (
            job_id,
            tok,
            error,
            str(delay_ms),
            "" if max_attempts is None else str(max_attempts),
            str(ctx.max_attempts),
        ),
        job=job_id,
    )
    if reply == DEAD_RELAY:
        return RetryOutcome.DEAD, True
    return RetryOutcome(reply), False


def delay(ctx: Context, job_id: str, token: int, delay_ms: int) -> Plan[int]:
    """Move an active job back to the schedule, counting no failure.

    Returns:
        The due time in ms (server clock).

    Raises:
        JobGone, StaleToken: refused, nothing changed.
    """
    tok = fenced_token(ctx, job_id, token)
    delay_ms = checks.ms(delay_ms, "delay_ms", zero=True)
    args = (job_id, tok, str(delay_ms))
    return int((yield Eval(script("delay"), _row_keys(ctx, job_id), args, job=job_id)))


def _release_op(ctx: Context, job_id: str, token: int) -> Eval:
    tok = fenced_token(ctx, job_id, token)
    return Eval(script("release"), _row_keys(ctx, job_id), (job_id, tok), job=job_id)


def release(ctx: Context, job_id: str, token: int) -> Plan[None]:
    """Return an active job to pending (or its lane), keeping its counters.

    No failure is counted; the job's lock is deleted and a grouped job gives its lane
    slot back. The next claim serves it with the next token.

    Args:
        job_id: the job.
        token: the token its claim handed out.

    Raises:
        JobGone: no such job.
        StaleToken: the job is not active under ``token``; nothing changed.
    """
    yield _release_op(ctx, job_id, token)


def release_many(ctx: Context, pairs: Sequence[tuple[str, int]]) -> Plan[list[str]]:
    """Release many active jobs in one pipelined round trip.

    Args:
        pairs: ``(job_id, token)`` for each job.

    Returns:
        The ids NOT released (gone, or no longer active under that token).
    """
    pairs = checks.pairs(pairs)
    return (yield from fenced_batch(pairs, [_release_op(ctx, j, t) for j, t in pairs]))
