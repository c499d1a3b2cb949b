"""The claim: the pause gate's read, the claim script's call with its request id, and
the decoding of its reply into :class:`Claimed` jobs; composed by ``claim``,
``claim_many`` and the worker."""

from __future__ import annotations

import json
import os
from typing import Any

from .. import checks
from ..context import Context, JsonSerializer, as_str
from ..results import Claimed as Claimed
from ..results import ClaimedBatch, ClaimHold
from ..scripts import Cmd, Eval, Plan, script


def claim_gate(ctx: Context) -> Cmd:
    """The pause-gate read a claim starts with: ``HEXISTS meta paused``.

    It travels in a round trip of its own (or pipelined with other work, or behind a
    ``BLPOP``), before the claim script, which itself carries no pause logic. Read its
    reply with :func:`gate_open`.
    """
    return Cmd(("HEXISTS", ctx.keys.meta, "paused"))


def gate_open(reply: Any) -> bool:
    """Whether the reply of :func:`claim_gate` lets a claim run (the queue is not paused).

    Raises:
        Exception: the reply itself, when the read failed (a runner's mapped error).
    """
    if isinstance(reply, Exception):
        raise reply
    return not int(reply)


def request_id() -> str:
    """A fresh claim request id: 16 hex digits (a test may fix it)."""
    return os.urandom(8).hex()


def claim_op(
    ctx: Context, count: int, lease_ms: int, lock_ms: int, *, recorded: bool = True
) -> Eval:
    """The claim script call: lease up to ``count`` jobs (no pause logic of its own).

    Send it only after :func:`claim_gate` read open; read its reply with
    :func:`decode_claimed`. Each call flips which side (flat pending or the ring of
    lanes) the next claim tries first, so neither starves the other. The arguments
    are gated by the caller's verb (``claim_many`` checks them before any I/O).

    Args:
        recorded: the call carries a fresh request id, so that one re-sent after a
            lost reply (marked as such, see ``Eval.again``) answers the jobs the first
            run claimed instead of leasing more; the server then writes a record of
            each call that claimed a job (``claimreq:<rid>``, for 60 s). ``False``
            for a call that is never re-sent (the claim behind the idle worker's
            wait: a lost reply leaves its jobs to their leases): no request id, no
            record, and no re-send form.
    """
    side = "f" if ctx.flat_first else "g"  # the script's wire word for which side first
    ctx.flat_first = not ctx.flat_first
    if not recorded:
        return Eval(
            script("claim"), (ctx.keys.base,), (str(lease_ms), str(count), side, str(lock_ms))
        )
    args = (str(lease_ms), str(count), side, str(lock_ms), request_id())
    # only the re-send reads the request's record (a first send's rid is fresh)
    return Eval(script("claim"), (ctx.keys.base,), args, again=(*args, "1"))


def decode_claimed(ctx: Context, reply: Any) -> ClaimedBatch:
    """The jobs in a claim script's reply (5 entries per job: id, payload, token,
    name, group), payloads deserialized by the queue's serializer; a trailing
    ``[scope, ms]`` entry (flow control held the claim back) becomes the batch's
    :attr:`~echomq.results.ClaimedBatch.hold`."""
    loads = ctx.serializer.loads
    if type(ctx.serializer) is JsonSerializer:
        loads = _json_loads  # the same values and errors, a third of the instructions
    n = len(reply) - len(reply) % 5
    # positional, not by keyword: the worker's hot path decodes every job it runs here
    got = ClaimedBatch(
        [
            Claimed(
                reply[i],
                loads(reply[i + 1]),
                int(reply[i + 2]),
                reply[i + 3] or None,
                reply[i + 4] or None,
            )
            for i in range(0, n, 5)
        ]
    )
    if n < len(reply):
        scope, ms = reply[-1]
        got.hold = ClaimHold(as_str(scope), int(ms))  # type: ignore[arg-type]
    return got


_raw_decode = json.JSONDecoder().raw_decode


def _json_loads(text: Any) -> Any:
    """``json.loads(text)``, for the default serializer's payloads.

    ``json.loads`` runs three Python frames and two whitespace matches around one C
    scan (about 12,000 instructions for a small payload); a payload echomq wrote is
    exactly one JSON value with no whitespace around it, which ``raw_decode`` reads
    alone (about 5,000). Anything else (whitespace around the value, trailing text, an
    error, bytes) is read by ``json.loads`` itself: the same value, the same error.
    """
    try:
        value, end = _raw_decode(text)
    except Exception:
        return json.loads(text)
    if end != len(text):
        return json.loads(text)
    return value


def claim_behind_gate(
    ctx: Context, gate_reply: Any, count: int, lease_ms: int, lock_ms: int
) -> Plan[list[Claimed]]:
    """The claim after its gate read: nothing when the reply says paused, else the
    claim script call, decoded. ``claim_many`` runs it behind its own gate read; a
    caller that made the gate read in a round trip of its own passes the reply.

    Returns:
        The claimed jobs (``[]`` when paused or nothing is ready).
    """
    if not gate_open(gate_reply):
        return []
    return decode_claimed(ctx, (yield claim_op(ctx, count, lease_ms, lock_ms)))


def _claim_batch(ctx: Context, count: int, lease_ms: int, lock_ms: int) -> Plan[list[Claimed]]:
    # The separate gate: the pause is read in its own round trip, before the claim
    # script, which itself carries no pause logic. The native claim (EMQ.CLAIM) reads
    # the same field itself, so it goes alone: one round trip.
    if ctx.executor.gate_folded:
        return decode_claimed(ctx, (yield claim_op(ctx, count, lease_ms, lock_ms)))
    gate = yield claim_gate(ctx)
    return (yield from claim_behind_gate(ctx, gate, count, lease_ms, lock_ms))


def claim(ctx: Context, lease_ms: int = 30000) -> Plan[Claimed | None]:
    """Lease the next ready job, flat or grouped.

    The queue's ``paused`` field is read first; while it is set the answer is
    ``None`` and nothing is touched. Successive claims alternate which side (flat
    pending or the ring of lanes) is tried first, so neither starves the other.

    Args:
        lease_ms: the lease; past it, ``reap`` returns the job to the backlog.

    Returns:
        The claimed job, or ``None`` when the queue is paused or nothing is ready.
    """
    lease_ms = checks.ms(lease_ms, "lease_ms")
    got = yield from _claim_batch(ctx, 1, lease_ms, 0)
    return got[0] if got else None


def claim_many(
    ctx: Context, count: int, lease_ms: int = 30000, *, lock_ms: int = 0
) -> Plan[list[Claimed]]:
    """Lease up to ``count`` ready jobs in one script call (the pause read first).

    Args:
        count: the most jobs to lease.
        lease_ms: the lease of each.
        lock_ms: when > 0, also set each job's ``:lock`` key to its token for this long.

    Returns:
        The claimed jobs, flat and grouped interleaved (``[]`` when paused or empty).
    """
    count = checks.batch(count, "count")
    lease_ms = checks.ms(lease_ms, "lease_ms")
    lock_ms = checks.ms(lock_ms, "lock_ms", zero=True)
    return (yield from _claim_batch(ctx, count, lease_ms, lock_ms))
