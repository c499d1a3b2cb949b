"""Plans the worker runtime adds to the spine to settle its jobs.

- :func:`release` (a verb on both facades): hand an active job back to the backlog
  without counting a failure, as a worker does with the jobs still running when its
  shutdown grace ends.
- :func:`fail`: retry a failed job after the delay its backoff policy says (the row's
  policy, else the worker's default), or dead-letter it at ``max_attempts``.
- :func:`release_many`: many releases in one pipelined round trip.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from .backoff import Backoff
from .context import Context, as_str, opt_str, positive
from .errors import JobGone, StaleToken
from .scripts import Batch, Cmd, Eval, Plan, script
from .spine import retry


def _release_op(ctx: Context, job_id: str, token: int) -> Eval:
    ctx.keys.job(job_id)
    positive(token, "token")
    return Eval(script("release"), (ctx.keys.base,), (job_id, str(token)))


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
    reply = yield _release_op(ctx, job_id, token)
    if reply == -1:
        raise JobGone(f"job {job_id} is gone", job_id=job_id)


def release_many(ctx: Context, pairs: Sequence[tuple[str, int]]) -> Plan[list[str]]:
    """Release many active jobs in one pipelined round trip.

    Args:
        pairs: ``(job_id, token)`` for each job.

    Returns:
        The ids NOT released (gone, or no longer active under that token).
    """
    ops = tuple(_release_op(ctx, j, t) for j, t in pairs)
    if not ops:
        return []
    replies = yield Batch(ops)
    missed: list[str] = []
    for (j, _), r in zip(pairs, replies):
        if r == -1 or isinstance(r, (JobGone, StaleToken)):
            missed.append(j)
        elif isinstance(r, Exception):
            raise r
    return missed


def fail(
    ctx: Context,
    job_id: str,
    token: int,
    error: str,
    default: Backoff,
    rng: random.Random | None = None,
) -> Plan[str]:
    """Record a failure: schedule the job after its backoff, or dead-letter it.

    The row's ``backoff`` spec and failure count are read first (a job that fails is
    the rare path, so the extra read costs nothing on the hot one).

    Args:
        error: the error text kept as ``last_error`` (a traceback included).
        default: the policy for a job whose row names none.
        rng: random source for jitter.

    Returns:
        ``"scheduled"`` or ``"dead"``.

    Raises:
        JobGone, StaleToken: refused (the lease was lost); nothing changed.
    """
    row = yield Cmd(("HMGET", ctx.keys.job(job_id), "backoff", "failures"))
    policy = Backoff.parse(opt_str(row[0])) or default
    failures = int(as_str(row[1])) if row[1] is not None else 0
    wait = policy.delay_for(failures + 1, rng)
    return (yield from retry(ctx, job_id, token, error, delay_ms=wait))
