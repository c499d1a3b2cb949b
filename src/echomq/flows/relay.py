"""The flow relay: a child's ending in one queue applied to its parent in another.

A child whose parent lives in another queue writes its ending to its own queue's
outbox (``lib/flow.lua``, in the same atomic step as the ending). :func:`relay` reads
the oldest entries (bounded), groups them by the parent's queue, applies each group
there with the ``resolve_child`` transition (idempotent: keyed by the child's ref) and
then drops the entries by child id (``outbox_done``). Any step may be lost or repeated:
a repeat resolves nothing twice, and an entry stays until its resolve has answered.

A parent that goes dead in its queue by a relayed ending and is itself a child of a
third queue writes to its own queue's outbox; the relay follows it there (at most
:data:`MAX_HOPS` queues a call, the depth bound of a flow).
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from .. import checks
from ..context import Context
from ..errors import InvalidArgument
from ..keyspace import Keyspace
from ..scripts import Batch, Eval, Plan, script

#: Entries read from one queue's outbox a call (oldest first).
RELAY_BUDGET = 100
#: Queues followed in one call (a flow is at most 8 deep).
MAX_HOPS = 8


def relay_queue(keys: Keyspace, budget: int = RELAY_BUDGET) -> Plan[tuple[int, list[str]]]:
    """Relay up to ``budget`` entries of one queue's outbox.

    Returns:
        ``(relayed, next)``: how many entries were applied and dropped, and the parent
        queues whose own outbox got an entry from this relay (a parent gone dead that is
        itself a child elsewhere).
    """
    flat = yield Eval(script("outbox_read"), (keys.base,), (str(budget),))
    if not flat:
        return 0, []
    by_queue: dict[str, list[str]] = {}
    ids: list[str] = []
    for i in range(0, len(flat), 2):
        child, raw = str(flat[i]), flat[i + 1]
        ids.append(child)
        try:
            msg = json.loads(raw)
            pq, pid = str(msg["pq"]), str(msg["pid"])
            args = [f"{keys.name}:{child}", pid, str(msg["o"]), str(msg.get("p") or "")]
            args.append(str(msg.get("v") or ""))
            Keyspace(pq).job(pid)  # the names are checked before anything is sent
        except (ValueError, KeyError, TypeError, AttributeError):
            continue  # a message no relay can apply: dropped with the others
        by_queue.setdefault(pq, []).extend(args)
    nxt: list[str] = []
    if by_queue:
        ops = tuple(
            Eval(script("resolve_child"), (Keyspace(pq).base,), args)
            for pq, args in by_queue.items()
        )
        replies = yield Batch(ops)
        for pq, reply in zip(by_queue, replies):
            if isinstance(reply, Exception):
                raise reply  # nothing dropped: the entries are relayed again
            if int(reply[1]):
                nxt.append(pq)
    yield Eval(script("outbox_done"), (keys.base,), ids)
    return len(ids), nxt


def relay_flows(
    ctx: Context, budget: int = RELAY_BUDGET, *, queues: Sequence[str] = ()
) -> Plan[int]:
    """Relay this queue's flow outbox now (bounded by ``budget`` entries a queue), then the
    outboxes its relay wrote to, up to :data:`MAX_HOPS` queues.

    Args:
        budget: the most entries read from one queue's outbox (1..1000).
        queues: more queues to relay (their outboxes) after this one.

    Returns:
        How many endings were relayed (applied to their parents and dropped).
    """
    budget = checks.integer(budget, "budget", 1, 1000)
    if isinstance(queues, (str, bytes)) or not isinstance(queues, Sequence):
        raise InvalidArgument("queues must be a sequence of queue names")
    todo: list[Keyspace] = [ctx.keys, *(Keyspace(q) for q in queues)]
    seen: set[str] = set()
    total = 0
    hops = 0
    while todo and hops < MAX_HOPS:
        keys = todo.pop(0)
        if keys.name in seen:
            continue
        seen.add(keys.name)
        hops += 1
        done, nxt = yield from relay_queue(keys, budget)
        total += done
        todo.extend(Keyspace(q) for q in nxt if q not in seen)
    return total
