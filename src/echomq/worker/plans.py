"""The worker's own plans, composed from the lifecycle's pieces.

- :func:`fail`: retry a failed job after the delay its backoff policy says (the row's
  policy, else the worker's default), or dead-letter it at ``max_attempts``.
- :func:`complete_and_claim`: the hot path. The completions travel in the same
  pipeline as the claim's pause-gate read (``lifecycle.claim_gate``); the claim script
  (``lifecycle.claim_op``) follows in its own call, only when the gate reads open.
- :func:`claim_after_wait`: the claim that ends an idle wait (see
  :class:`~echomq.worker.waker.Waker`).
- :func:`beat`: the beat's one round trip: the lease extensions, the worker's record
  in the registry and the cancel requests for the jobs it holds.
- :func:`fail_cancelled`: a job its handler stopped on an operator's cancel goes dead.

Every claim here is the lifecycle's own pieces (the gate read, the claim script call,
the one reply decoder ``lifecycle.decode_claimed``), as ``claim_many`` composes them;
nothing inspects another plan's commands. (``release`` and ``release_many``, verbs
of both facades, live in :mod:`echomq.lifecycle`.)
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from .. import lifecycle, registry
from ..backoff import Backoff
from ..context import Context, as_str, opt_str
from ..lifecycle import Claimed
from ..lifecycle.settle import DEAD_RELAY
from ..replies import outcome, script_outcome
from ..scripts import Batch, Cmd, Eval, Plan, is_noscript
from .waker import WaitResult


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
        ``"scheduled"`` or ``"dead"``; ``"dead_relay"``: dead, a flow child whose
        ending waits in the queue's outbox (the worker relays it now).

    Raises:
        JobGone, StaleToken: refused (the lease was lost); nothing changed.
    """
    row = yield Cmd(("HMGET", ctx.keys.job(job_id), "backoff", "failures"))
    policy = Backoff.read(opt_str(row[0])) or default
    failures = int(as_str(row[1])) if row[1] is not None else 0
    wait = policy.delay_for(failures + 1, rng)
    verdict, relay = yield from lifecycle.retry_verdict(ctx, job_id, token, error, wait)
    return DEAD_RELAY if relay else verdict


@dataclass
class ClaimRound:
    """What one :func:`complete_and_claim` round trip pair did.

    Attributes:
        gone: completions answered "gone": the row was already deleted (our own
            completion whose reply was lost, sent again). Read as completed.
        stale: completions refused: the job is no longer active under that token.
        claimed: the jobs leased.
        relay: a completed flow child's ending waits in the queue's outbox (its
            parent is in another queue): the worker relays it now.
    """

    gone: list[str]
    stale: list[str]
    claimed: list[Claimed]
    relay: bool = False


def complete_and_claim(
    ctx: Context,
    done: Sequence[tuple[str, int]],
    count: int,
    lease_ms: int,
    lock_ms: int,
    results: dict[tuple[str, int], str] | None = None,
) -> Plan[ClaimRound]:
    """Complete finished jobs and claim more, in two round trips for both.

    The completions are pipelined with the claim's pause-gate read; the claim
    script runs next, in its own call, only when the gate is open.

    Args:
        done: ``(job_id, token)`` of the jobs to complete.
        count: the most jobs to claim (0: only complete).
        lease_ms, lock_ms: as for ``claim_many``.
        results: the serialized results of finished jobs by ``(job_id, token)``,
            sent with their completions (a kept job stores its result).
    """
    # the pairs are the claims' own: not checked again (the hot path's per-job cost)
    completions = lifecycle.complete_ops(ctx, done, results, from_claim=True)
    if count == 0:
        if not completions:
            return ClaimRound([], [], [])
        replies = yield Batch(tuple(completions))
        gone, stale = lifecycle.settle_outcomes(replies)
        return ClaimRound(gone, stale, [], lifecycle.relay_waits(replies))
    if not completions:
        gate = yield lifecycle.claim_gate(ctx)
        claimed = yield from lifecycle.claim_behind_gate(ctx, gate, count, lease_ms, lock_ms)
        return ClaimRound([], [], claimed)
    if ctx.executor.gate_folded:  # the native claim reads the pause itself: one trip
        replies = yield Batch((*completions, lifecycle.claim_op(ctx, count, lease_ms, lock_ms)))
        gone, stale = lifecycle.settle_outcomes(replies[:-1])
        if isinstance(replies[-1], Exception):
            raise replies[-1]
        claimed = lifecycle.decode_claimed(ctx, replies[-1])
        return ClaimRound(gone, stale, claimed, lifecycle.relay_waits(replies[:-1]))
    replies = yield Batch((*completions, lifecycle.claim_gate(ctx)))
    gone, stale = lifecycle.settle_outcomes(replies[:-1])
    relay = lifecycle.relay_waits(replies[:-1])
    claimed = yield from lifecycle.claim_behind_gate(ctx, replies[-1], count, lease_ms, lock_ms)
    return ClaimRound(gone, stale, claimed, relay)


def claim_after_wait(
    ctx: Context, woke: WaitResult, count: int, lease_ms: int, lock_ms: int
) -> Plan[list[Claimed]]:
    """The claim that ends an idle wait, from what the wait ended with.

    Args:
        woke: what :meth:`~echomq.worker.waker.Waker.wait` returned.
        count, lease_ms, lock_ms: as for ``claim_many``.

    Returns:
        The claimed jobs: decoded from the claim that rode along
        (:func:`claimed_behind_wait`); or, when none did, claimed now by the gate read
        made behind the wait; or, when the claim never ran (the transaction was refused
        as a whole, or the script cache was flushed), claimed now plainly: a fresh gate
        read, then the script.
    """
    got = claimed_behind_wait(ctx, woke)
    if got is not None:
        return got
    if not woke.claim_sent:
        # read as the runner reads the gate read of claim_many (an error reply typed)
        gate = outcome(lifecycle.claim_gate(ctx), woke.gate)
        return (yield from lifecycle.claim_behind_gate(ctx, gate, count, lease_ms, lock_ms))
    gate = yield lifecycle.claim_gate(ctx)
    return (yield from lifecycle.claim_behind_gate(ctx, gate, count, lease_ms, lock_ms))


def claimed_behind_wait(ctx: Context, woke: WaitResult) -> list[Claimed] | None:
    """The jobs of the claim that rode behind the wait, decoded as the runner reads
    the claim plan's reply; ``None`` when a claim must still be made (none rode along,
    or it never ran). The idle worker's wake path calls it first: a job that woke the
    worker starts without a plan driven through the runner.

    Raises:
        EchoMQError: the claim's error reply, typed.
    """
    if not woke.claim_sent:
        return None
    reply = woke.claim
    if woke.refused is not None or is_noscript(reply):
        return None
    if reply is None:  # WATCH dropped the transaction: the gate moved, nothing claimed
        return []
    got = script_outcome(reply)
    if isinstance(got, Exception):
        raise got
    return lifecycle.decode_claimed(ctx, got)


def may_have_work(ctx: Context) -> Plan[bool]:
    """Whether a claim could find a job: one of the claim script's sources (``claim``:
    the flat pending set, the ring of lanes, the held lanes in ``gwait`` that return to
    the ring when due) is not empty. Three reads in one round trip; an idle worker over
    several queues asks it of each queue its beat's timeout woke, where a claim per
    queue would run one after another under ``priority`` order.

    Raises:
        EchoMQError: a read failed.
    """
    keys = ctx.keys
    got = yield Batch(
        (Cmd(("ZCARD", keys.pending)), Cmd(("LLEN", keys.ring)), Cmd(("ZCARD", keys.gwait)))
    )
    for reply in got:
        if isinstance(reply, Exception):
            raise reply
    return any(int(n) for n in got)


#: The ``last_error`` of a job that stopped on an operator's cancel.
CANCELLED_ERROR = "JobCancelled: cancelled by an operator"


@dataclass
class Beat:
    """What one :func:`beat` found.

    Attributes:
        lost: held jobs whose lease was not extended (gone, or no longer ours).
        cancelled: held jobs an operator asked to cancel (``cancel_job``).
        error: the registry write's error, if it failed (the extensions still count).
    """

    lost: list[str]
    cancelled: list[str]
    error: Exception | None = None


def beat(
    ctx: Context,
    held: Sequence[tuple[str, int]],
    lease_ms: int,
    lock_ms: int,
    wid: str,
    ttl_ms: int,
    fields: Mapping[str, str],
) -> Plan[Beat]:
    """Extend the held leases, write the worker's registry record and read the cancel
    requests, in one round trip (the extensions first, so the cancel read sees rows
    as the extensions left them).

    Args:
        held: ``(job_id, token)`` of the jobs in hand.
        lease_ms, lock_ms: as for ``extend_locks``.
        wid, ttl_ms, fields: the registry record (:func:`echomq.registry.beat_op`).

    Raises:
        EchoMQError: the extensions failed (a registry failure is ``Beat.error``).
    """
    ops: list[Eval] = []
    if held:
        # the jobs in hand are the claims' own: not checked again one by one
        ops.append(lifecycle.extend_op(ctx, held, lease_ms, lock_ms, from_claim=True))
    ops.append(registry.beat_op(ctx, wid, ttl_ms, fields, held))
    replies = yield Batch(tuple(ops))
    if held and isinstance(replies[0], Exception):
        raise replies[0]
    lost = [as_str(x) for x in replies[0][::2]] if held else []
    if isinstance(replies[-1], Exception):
        return Beat(lost, [], replies[-1])
    return Beat(lost, [as_str(x) for x in replies[-1]])


def fail_cancelled(ctx: Context, job_id: str, token: int) -> Plan[str]:
    """Dead-letter a job whose handler stopped on an operator's cancel (no retry: the
    operator asked it to stop; ``reprocess_job`` runs it again).

    Returns:
        ``"dead"``.

    Raises:
        JobGone, StaleToken: refused (the lease was lost); nothing changed.
    """
    verdict, relay = yield from lifecycle.retry_verdict(ctx, job_id, token, CANCELLED_ERROR, 0, 1)
    return DEAD_RELAY if relay else verdict
