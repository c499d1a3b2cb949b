"""The flow operator verbs on a parent: :func:`release_parent`, :func:`fail_parent` and
:func:`cancel_flow` (docs/flows-operations.md).

Each runs one script per queue (``release_parent``, ``fail_parent``, ``cancel_flow``),
checked before any write, journaled (one audit entry in each queue a verb acts in). An
ending that wrote to a flow outbox (a parent whose own parent is in
another queue) is relayed before the verb returns (:func:`echomq.flows.relay.relay_flows`).
"""

from __future__ import annotations

from .. import checks
from ..context import Context
from ..keyspace import Keyspace
from ..results.flows import FlowCancel
from ..scripts import Eval, Plan, script
from .relay import relay_flows
from .tree import MAX_CANCEL_NODES, read_levels

#: The longest error text ``fail_parent`` takes.
MAX_ERROR_LEN = 10_000
#: The most nodes one ``cancel_flow`` script call handles (its server time stays near a
#: few ms: bench/flow_ops.py).
CANCEL_CHUNK = 50


def release_parent(ctx: Context, job_id: str) -> Plan[int]:
    """Let a flow parent that waits for its children run now.

    The parent becomes ready (pending or its lane; the schedule when it was enqueued
    with a delay still ahead), a wake token is pushed, event ``waiting_done``. Its
    children not yet done keep running: their endings are recorded on the parent
    (``children_results``) as they come and change no state.

    Args:
        job_id: the parent.

    Returns:
        How many of its dependencies were still unresolved.

    Raises:
        InvalidJobId: a malformed id, before any I/O.
        JobGone: no such job.
        JobNotWaiting: the job is not ``waiting_children``; nothing changed.
    """
    keys = (ctx.keys.base, ctx.keys.job(job_id))
    reply = yield Eval(script("release_parent"), keys, (job_id, ctx.actor), job=job_id)
    return int(reply)


def fail_parent(ctx: Context, job_id: str, error: str = "failed by an operator") -> Plan[None]:
    """End a flow parent that waits for its children: it goes dead with ``error``.

    That is the parent's own ending: when it is itself a flow child, its parent resolves
    it by its policy (outcome ``failed``), in the same step when in the same queue, else
    through this queue's outbox, relayed before this call returns. Its children keep
    running (``cancel_flow`` stops them); their endings are recorded on it.

    Args:
        job_id: the parent.
        error: its ``last_error``.

    Raises:
        InvalidJobId, InvalidArgument: a malformed id or error, before any I/O.
        JobGone: no such job.
        JobNotWaiting: the job is not ``waiting_children``; nothing changed.
    """
    keys = (ctx.keys.base, ctx.keys.job(job_id))
    error = checks.text(error, "error", max_len=MAX_ERROR_LEN)
    reply = yield Eval(script("fail_parent"), keys, (job_id, error, ctx.actor), job=job_id)
    if int(reply) == 2:
        yield from relay_flows(ctx)


def cancel_flow(ctx: Context, job_id: str) -> Plan[FlowCancel]:
    """Cancel a flow from a parent that waits for its children: the whole tree under it.

    The tree is read first (bounded: :data:`~echomq.flows.tree.MAX_CANCEL_NODES` nodes,
    8 levels), then each queue's nodes are cancelled by one script call per queue and
    level, parents before their children, the parent's queue first:

    - a waiting parent (the job itself first) goes **dead** with the error
      ``cancelled by an operator`` (kept, visible, removable; its own parent resolves
      it by its policy, outcome ``cancelled``);
    - a job not yet started (pending, scheduled) is **removed**; its parent records the
      outcome ``cancelled``;
    - a running job is asked to stop, as ``cancel_job`` asks (cooperative: its handler
      sees ``job.cancelled``; it goes dead, its parent records it);
    - a job already dead or completed, or locked, is left as it is.

    Returns:
        A :class:`~echomq.results.flows.FlowCancel`.

    Raises:
        InvalidJobId: a malformed id, before any I/O.
        JobGone: no such job.
        JobNotWaiting: the job is not ``waiting_children`` (nothing written anywhere:
            its queue's call, the first, refuses before any write).
    """
    ctx.keys.job(job_id)
    levels, nodes, truncated = yield from read_levels(ctx, ctx.keys.name, job_id, MAX_CANCEL_NODES)
    root_ref = f"{ctx.keys.name}:{job_id}"
    # calls: runs of one queue's ids, level by level (parents before their children)
    calls: list[tuple[str, list[str]]] = [(ctx.keys.name, [job_id])]
    for level in levels[1:]:
        by_queue: dict[str, list[str]] = {}
        for q, i in level:
            by_queue.setdefault(q, []).append(i)
        for q, ids in by_queue.items():
            for s in range(0, len(ids), CANCEL_CHUNK):
                part = ids[s : s + CANCEL_CHUNK]
                last_q, last = calls[-1]
                if last_q == q and len(last) + len(part) <= CANCEL_CHUNK:
                    last.extend(part)  # the same queue next: one call (one audit entry)
                else:
                    calls.append((q, part))
    per_queue: dict[str, int] = {}
    for q, ids in calls:
        per_queue[q] = per_queue.get(q, 0) + len(ids)
    removed = cancelling = failed = 0
    relay_from: list[str] = []
    journaled: set[str] = set()
    for n, (q, ids) in enumerate(calls):
        # the root's call checks it; a queue's first call that changes something
        # journals the cancel there (once a queue)
        mode = "root" if n == 0 else ("more" if q in journaled else "first")
        argv = (root_ref, ctx.actor, mode, str(per_queue[q]), *ids)
        reply = yield Eval(script("cancel_flow"), (Keyspace(q).base,), argv, job=job_id)
        removed += int(reply[0])
        cancelling += int(reply[1])
        failed += int(reply[2])
        if int(reply[4]):
            journaled.add(q)
        if int(reply[3]) and q not in relay_from:
            relay_from.append(q)
    if relay_from:
        yield from relay_flows(ctx, queues=relay_from)
    return FlowCancel(removed, cancelling, failed, nodes, truncated)
