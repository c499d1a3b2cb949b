"""Leases and recovery: extending leases (one or many, fenced by token), and the
bounded sweeps that move due and expired jobs: ``promote``, ``reap``,
``check_stalled``."""

from __future__ import annotations

from collections.abc import Sequence

from .. import checks
from ..context import Context
from ..replies import refusal
from ..scripts import Eval, Plan, script
from .settle import fenced_token


def _extend(
    ctx: Context,
    pairs: Sequence[tuple[str, int]],
    lease_ms: int,
    lock_ms: int,
    *,
    from_claim: bool = False,
) -> Eval:
    lease_ms = checks.ms(lease_ms, "lease_ms")
    lock_ms = checks.ms(lock_ms, "lock_ms", zero=True)
    args: list[str] = [str(lease_ms), str(lock_ms)]
    if from_claim:
        for j, t in pairs:
            args += (j, str(t))
    else:
        for j, t in pairs:
            args += [j, fenced_token(ctx, j, t)]
    return Eval(script("extend_lock"), (ctx.keys.base,), args)


def extend_op(
    ctx: Context,
    pairs: Sequence[tuple[str, int]],
    lease_ms: int,
    lock_ms: int,
    *,
    from_claim: bool = False,
) -> Eval:
    """The ``extend_locks`` call as one op, for a plan that batches it with others (the
    worker's beat); its reply is the flat ``(id, reason)`` list of the jobs not extended.

    Args:
        from_claim: the pairs are as claims' replies handed them out (the worker's jobs
            in hand): the ids and tokens the server gave are not checked again, one by
            one (about 20,000 instructions a job, every beat, for every job held).

    Raises:
        InvalidArgument: a bad pair (unless ``from_claim``), more than
            ``checks.MAX_BATCH`` pairs, or a bad ``lease_ms`` or ``lock_ms``.
    """
    if not from_claim or len(pairs) > checks.MAX_BATCH:
        pairs = checks.pairs(pairs, limit=checks.MAX_BATCH)
    return _extend(ctx, pairs, lease_ms, lock_ms, from_claim=from_claim)


def extend_lock(ctx: Context, job_id: str, token: int, lease_ms: int) -> Plan[None]:
    """Move an active job's lease deadline to now + ``lease_ms``.

    Raises:
        JobGone, StaleToken: refused, nothing changed.
    """
    reply = yield _extend(ctx, [(job_id, token)], lease_ms, 0)
    if reply:  # this call answers refusals per job, as reasons: (id, 'gone' | 'stale')
        raise refusal(job_id, reply[1])


def extend_locks(
    ctx: Context, pairs: Sequence[tuple[str, int]], lease_ms: int, *, lock_ms: int = 0
) -> Plan[list[str]]:
    """Extend the leases of many jobs in one call, each fenced by its own token.

    Args:
        pairs: ``(job_id, token)`` for each job.
        lease_ms: the new lease from now.
        lock_ms: when > 0, also push each job's ``:lock`` expiry to this long.

    Returns:
        The ids NOT extended (gone, or no longer active under that token).
    """
    pairs = checks.pairs(pairs, limit=checks.MAX_BATCH)
    if not pairs:
        lease_ms = checks.ms(lease_ms, "lease_ms")
        lock_ms = checks.ms(lock_ms, "lock_ms", zero=True)
        return []
    reply = yield _extend(ctx, pairs, lease_ms, lock_ms)
    missed: list[str] = reply[::2]
    return missed


def promote(ctx: Context, budget: int = 100) -> Plan[int]:
    """Move due scheduled jobs to pending or their lane, at most ``budget``.

    Returns:
        How many moved; equal to ``budget`` means more may be due (call again).
    """
    budget = checks.batch(budget, "budget")
    return int((yield Eval(script("promote"), (ctx.keys.base,), (str(budget),))))


def reap(ctx: Context, budget: int = 100) -> Plan[int]:
    """Return jobs whose lease expired to pending or their lane, at most ``budget``.

    Returns:
        How many returned; equal to ``budget`` means call again.
    """
    budget = checks.batch(budget, "budget")
    return int((yield Eval(script("reap"), (ctx.keys.base,), (str(budget),))))


def check_stalled(
    ctx: Context, max_stalled: int = 2, budget: int = 100
) -> Plan[tuple[list[str], list[str]]]:
    """Recover expired leases, counting each on the row; dead-letter repeat stallers.

    Args:
        max_stalled: a job that has stalled more than this many times goes dead.
        budget: the most jobs handled per call.

    Returns:
        ``(recovered_ids, dead_ids)``.
    """
    max_stalled = checks.count(max_stalled, "max_stalled", zero=True)
    budget = checks.batch(budget, "budget")
    reply = yield Eval(script("check_stalled"), (ctx.keys.base,), (str(max_stalled), str(budget)))
    back: list[str] = reply[0]
    dead: list[str] = reply[1]
    return back, dead
