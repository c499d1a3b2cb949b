"""Plans the worker runtime adds to the spine to settle its jobs.

(``release`` and ``release_many``, verbs of both facades, live in :mod:`echomq.spine`.)

- :func:`fail`: retry a failed job after the delay its backoff policy says (the row's
  policy, else the worker's default), or dead-letter it at ``max_attempts``.
- :func:`settle_and_claim` and :func:`claim_gated`: the worker's hot path. They run
  the spine's own ``complete_many`` and ``claim_many`` plans, only sharing round
  trips: the completions travel in the same pipeline as the pause-gate read, and the
  claim script follows in its own call, so the pause stays the separate gate read
  before each claim call and the claim script carries no pause logic.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import redis

from ..backoff import Backoff
from ..context import Context, as_str, opt_str
from ..errors import EchoMQError
from ..scripts import Batch, Cmd, Eval, Op, Plan, is_noscript, map_error
from ..spine import Claimed, claim_many, complete_many, retry

T = TypeVar("T")


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
    policy = Backoff.read(opt_str(row[0])) or default
    failures = int(as_str(row[1])) if row[1] is not None else 0
    wait = policy.delay_for(failures + 1, rng)
    return (yield from retry(ctx, job_id, token, error, delay_ms=wait))


def _resume(plan: Plan[T], reply: Any) -> Plan[T]:
    """Continue ``plan`` from a step whose reply the caller already has."""
    failure: EchoMQError | None = None
    while True:
        try:
            op = plan.throw(failure) if failure is not None else plan.send(reply)
        except StopIteration as stop:
            result: T = stop.value
            return result
        failure = None
        try:
            reply = yield op
        except EchoMQError as exc:  # the runner's typed error goes inside the plan
            failure = exc


def _is_gate(op: Op, ctx: Context) -> bool:
    return isinstance(op, Cmd) and op.args[:2] == ("HEXISTS", ctx.keys.meta)


def gate_read(ctx: Context) -> Cmd:
    """The pause-gate read a claim starts with (to pipeline behind a ``BLPOP``)."""
    return Cmd(("HEXISTS", ctx.keys.meta, "paused"))


def claim_gated(
    ctx: Context, gate_reply: Any, count: int, lease_ms: int, lock_ms: int
) -> Plan[list[Claimed]]:
    """``claim_many`` whose pause-gate read the caller has just made.

    The idle worker pipelines the gate read right behind its ``BLPOP`` on the wake
    list: the server answers it the moment the wake token pops, so the read is as
    fresh as the claim plan's own and saves a round trip on every wake.

    Args:
        gate_reply: the reply of :func:`gate_read`.
        count, lease_ms, lock_ms: as for ``claim_many``.

    Returns:
        The claimed jobs (``[]`` when the gate said paused or nothing is ready).
    """
    plan = claim_many(ctx, count, lease_ms, lock_ms=lock_ms)
    first = next(plan)
    if not _is_gate(first, ctx):  # the claim no longer starts with the gate: run it all
        reply = yield first
        return (yield from _resume(plan, reply))
    return (yield from _resume(plan, gate_reply))


@dataclass
class ArmedClaim:
    """A claim plan stopped past its pause gate, to send behind a wait.

    Attributes:
        op: the claim script call the plan would make next, the gate having read open.
        plan: the rest of the plan, to finish with :func:`finish_armed`.
    """

    op: Eval
    plan: Plan[list[Claimed]]


def arm_claim(ctx: Context, count: int, lease_ms: int, lock_ms: int) -> ArmedClaim:
    """``claim_many`` advanced as if its gate read open, for an idle worker to send
    under ``WATCH`` of a gate read it made itself (``waker.Waker``).

    Returns:
        The armed claim: the plan's one claim script call, and the rest of the plan.
    """
    plan = claim_many(ctx, count, lease_ms, lock_ms=lock_ms)
    gate = next(plan)
    assert _is_gate(gate, ctx), "a claim starts with the pause-gate read"
    op = plan.send(0)
    assert isinstance(op, Eval), "then makes one claim script call"
    return ArmedClaim(op, plan)


def finish_armed(armed: ArmedClaim, reply: Any) -> Plan[list[Claimed]]:
    """Finish an armed claim with the reply its script call got behind the wait.

    Args:
        reply: the script's reply; ``None`` when the transaction was dropped (the
            gate moved: nothing was claimed); an error reply as an exception. After a
            ``NOSCRIPT`` the call is made again here (the runner loads the script).

    Returns:
        The claimed jobs.
    """
    if reply is None:
        armed.plan.close()
        return []
    if is_noscript(reply):
        reply = yield armed.op
    elif isinstance(reply, redis.ResponseError):
        armed.plan.close()
        raise map_error(reply)
    return (yield from _resume(armed.plan, reply))


def settle_and_claim(
    ctx: Context, done: Sequence[tuple[str, int]], count: int, lease_ms: int, lock_ms: int
) -> Plan[tuple[list[str], list[Claimed]]]:
    """Complete finished jobs and claim more, in two round trips for both.

    The completions are pipelined with the claim's pause-gate read; the claim
    script runs next, in its own call, only when the gate is open.

    Args:
        done: ``(job_id, token)`` of the jobs to complete.
        count: the most jobs to claim (0: only complete).
        lease_ms, lock_ms: as for ``claim_many``.

    Returns:
        ``(ids not completed (gone or stale), claimed jobs)``.
    """
    if count == 0:
        return (yield from complete_many(ctx, done)), []
    if not done:
        return [], (yield from claim_many(ctx, count, lease_ms, lock_ms=lock_ms))
    settling = complete_many(ctx, done)
    batch = next(settling)
    claiming = claim_many(ctx, count, lease_ms, lock_ms=lock_ms)
    gate = next(claiming)
    if not isinstance(batch, Batch) or not isinstance(gate, Cmd) or not _is_gate(gate, ctx):
        refused = yield from _resume(settling, (yield batch))
        return refused, (yield from _resume(claiming, (yield gate)))
    replies = yield Batch((*batch.ops, gate))
    if isinstance(replies[-1], Exception):
        raise replies[-1]
    refused = yield from _resume(settling, replies[:-1])
    return refused, (yield from _resume(claiming, replies[-1]))
