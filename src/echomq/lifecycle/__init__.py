"""The job lifecycle as data: enqueue, claim, settle, recover.

Each verb is a plan (see :mod:`echomq.scripts`): it checks its arguments before any
I/O, yields the operations to run and decodes their replies. ``Queue`` and
``AsyncQueue`` run the same plans (declared in :mod:`echomq.verbs`).

- :mod:`.produce`: ``enqueue``, ``enqueue_many``;
- :mod:`.claiming`: the pause gate's read, ``claim``, ``claim_many`` and the pieces the
  worker composes (``claim_gate``, ``claim_op``, ``decode_claimed``);
- :mod:`.settle`: ``complete``, ``complete_many``, ``retry``, ``delay``, ``release``;
- :mod:`.leases`: ``extend_lock``, ``extend_locks``, ``promote``, ``reap``,
  ``check_stalled``.
"""

from .claiming import (
    Claimed,
    claim,
    claim_behind_gate,
    claim_gate,
    claim_many,
    claim_op,
    decode_claimed,
    gate_open,
    request_id,
)
from .leases import check_stalled, extend_lock, extend_locks, extend_op, promote, reap
from .produce import (
    ENQUEUE_CHUNK,
    KEEP_OPTION_INDEX,
    RESENT_OPTION,
    enqueue,
    enqueue_many,
)
from .settle import (
    COMPLETE_CHUNK,
    complete,
    complete_many,
    complete_ops,
    delay,
    fenced_batch,
    fenced_outcomes,
    relay_waits,
    release,
    release_many,
    retry,
    retry_verdict,
    settle_outcomes,
)

__all__ = [
    "COMPLETE_CHUNK",
    "ENQUEUE_CHUNK",
    "KEEP_OPTION_INDEX",
    "RESENT_OPTION",
    "Claimed",
    "check_stalled",
    "claim",
    "claim_behind_gate",
    "claim_gate",
    "claim_many",
    "claim_op",
    "complete",
    "complete_many",
    "complete_ops",
    "decode_claimed",
    "delay",
    "enqueue",
    "enqueue_many",
    "extend_lock",
    "extend_locks",
    "extend_op",
    "fenced_batch",
    "fenced_outcomes",
    "gate_open",
    "promote",
    "reap",
    "relay_waits",
    "release",
    "release_many",
    "request_id",
    "retry",
    "retry_verdict",
    "settle_outcomes",
]
