"""A flow's tree for the operator: :func:`flow` (the parent chain of a job up to its
root, then the tree under the root, bounded) and :func:`read_levels` (the tree under a
parent, level by level, for ``cancel_flow``).

Bounded: at most ``limit`` nodes a call (:data:`FLOW_NODES` by default, at most
:data:`MAX_FLOW_NODES`) and :data:`MAX_DEPTH` levels under the root (the depth bound
of a flow); each level is one pipelined round trip of one ``flow_nodes`` script call
per queue and 100 nodes (a queue's keys share a slot: one call per queue works on a
cluster), each returning at most 10,000 children refs. A parent whose children are
more than the budget left shows a sample of them (``SRANDMEMBER``/``HRANDFIELD``: no
walk) and the count it did not show (``FlowNode.more``); the tree says ``truncated``.
There is no cursor: a larger ``limit``, or :func:`flow` on a child, shows the rest.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from .. import checks
from ..context import Context, as_str
from ..errors import InvalidName
from ..keyspace import Keyspace
from ..results.flows import FlowNode, FlowTree
from ..scripts import Batch, Cmd, Eval, Plan, script
from .relay import relay_flows

#: The depth bound of a flow: levels under a root (and parents above a job) read.
MAX_DEPTH = 8
#: Nodes :func:`flow` reads by default, and at most.
FLOW_NODES = 500
MAX_FLOW_NODES = 10_000
#: Nodes ``cancel_flow`` reads (a parent has at most 10,000 children).
MAX_CANCEL_NODES = 10_000
#: Nodes one flow_nodes call reads, and children refs it returns at most (each call's
#: server time stays near a few ms: bench/flow_ops.py).
NODES_CHUNK = 100
REFS_CHUNK = 10_000
#: Queues whose outboxes :func:`flow` relays before it reads again.
MAX_RELAY_QUEUES = 16


def parse_ref(ref: Any) -> tuple[str, str] | None:
    """``('queue', 'id')`` of a ref ``queue:id`` whose names are well formed, else
    ``None`` (text from the server is data: a malformed ref is skipped, not raised)."""
    q, sep, i = as_str(ref).partition(":")
    if not sep:
        return None
    try:
        Keyspace(q).job(i)
    except (InvalidName, ValueError):
        return None
    return q, i


@dataclass
class _Rec:
    """A node while the tree is read (made a frozen FlowNode at the end)."""

    queue: str
    id: str
    depth: int
    outcome: str | None = None
    summary: str = ""
    state: str | None = None
    name: str | None = None
    policy: str | None = None
    children: int = 0
    unresolved: int = 0
    more: int = 0
    kids: list[int] = field(default_factory=list)


def _recorded(raw: Any) -> tuple[str, str]:
    """A :kidfails value ``{outcome, error}`` as (outcome, error); a value cut short or
    malformed reads as its text."""
    text = as_str(raw)
    try:
        d = json.loads(text)
        return str(d.get("outcome") or "failed"), str(d.get("error") or "")
    except (ValueError, AttributeError):
        return "failed", text


def _opt(raw: Any) -> str | None:
    return None if raw is None else as_str(raw)


def _read(ctx: Context, root: tuple[str, str], limit: int) -> Plan[tuple[list[_Rec], bool]]:
    """The records of the tree under ``root``, level by level (index 0 the root)."""
    recs = [_Rec(root[0], root[1], 0)]
    level = [0]
    truncated = False
    while level:
        by_queue: dict[str, list[int]] = {}
        for ix in level:
            by_queue.setdefault(recs[ix].queue, []).append(ix)
        # one call per queue and NODES_CHUNK nodes (each call's server time bounded)
        parts = [
            (q, ixs[s : s + NODES_CHUNK])
            for q, ixs in by_queue.items()
            for s in range(0, len(ixs), NODES_CHUNK)
        ]
        left = max(1, limit - len(recs))
        share = max(1, min(left // len(parts), REFS_CHUNK))
        ops = tuple(
            Eval(
                script("flow_nodes"),
                (Keyspace(q).base,),
                (str(share), *(recs[ix].id for ix in ixs)),
            )
            for q, ixs in parts
        )
        replies = yield Batch(ops)
        nxt: list[int] = []
        for (_, ixs), reply in zip(parts, replies):
            if isinstance(reply, Exception):
                raise reply
            for ix, node in zip(ixs, reply):
                rec = recs[ix]
                st, _parent, on_fail, children, name, last_error = node[:6]
                nd, nk, nf = int(node[6]), int(node[7]), int(node[8])
                rec.state, rec.name = _opt(st), _opt(name)
                if ix != 0:
                    rec.policy = _opt(on_fail) or ("fail_parent" if st is not None else None)
                rec.children = int(children) if children is not None else 0
                rec.unresolved = nd
                if not rec.summary and last_error is not None:
                    rec.summary = as_str(last_error)
                found: list[tuple[Any, str | None, str]] = [(r, None, "") for r in node[9]]
                kids = node[10]
                found += [
                    (kids[j], "completed", as_str(kids[j + 1])) for j in range(0, len(kids), 2)
                ]
                fails = node[11]
                found += [(fails[j], *_recorded(fails[j + 1])) for j in range(0, len(fails), 2)]
                taken = 0
                for ref, outcome, summary in sorted(found, key=lambda f: as_str(f[0])):
                    p = parse_ref(ref)
                    if p is None or rec.depth >= MAX_DEPTH or len(recs) >= limit:
                        continue
                    recs.append(_Rec(p[0], p[1], rec.depth + 1, outcome, summary))
                    rec.kids.append(len(recs) - 1)
                    nxt.append(len(recs) - 1)
                    taken += 1
                rec.more = max(0, nd + nk + nf - taken)
                truncated = truncated or rec.more > 0
        level = nxt
    return recs, truncated


def _node(recs: list[_Rec], ix: int) -> FlowNode:
    r = recs[ix]
    kids = tuple(_node(recs, k) for k in r.kids)
    return FlowNode(
        r.queue, r.id, r.state, r.name, r.policy, r.outcome, r.summary, r.children,
        r.unresolved, kids, r.more,
    )  # fmt: skip


def read_levels(
    ctx: Context, queue: str, job_id: str, limit: int
) -> Plan[tuple[list[list[tuple[str, str]]], int, bool]]:
    """The tree under ``queue:job_id`` by level (the job alone at level 0), parents
    before their children: ``(levels, nodes, truncated)``."""
    recs, truncated = yield from _read(ctx, (queue, job_id), limit)
    levels: list[list[tuple[str, str]]] = []
    for r in recs:
        while len(levels) <= r.depth:
            levels.append([])
        levels[r.depth].append((r.queue, r.id))
    return levels, len(recs), truncated


def flow(
    ctx: Context, job_id: str, limit: int = FLOW_NODES, relay: bool = True
) -> Plan[FlowTree | None]:
    """A job's flow: its parent chain up to the root (at most 8 parents up; a parent
    whose row is gone ends the chain), then the tree under the root, each node with its
    state and what its parent recorded of it.

    Flow endings waiting in an outbox are relayed first (this queue's, then those of the
    tree's other queues: when any was relayed, the tree is read again), so the tree
    shows what the parents will see.

    Args:
        job_id: any job of the flow (a parent, a child, the root).
        limit: the most nodes read, 1..``MAX_FLOW_NODES``.
        relay: relay the outboxes first (``False``: a pure read, as a read-only
            console asks; the tree then shows what the parents have seen so far).

    Returns:
        A :class:`~echomq.results.flows.FlowTree`, or ``None`` when the job has no row.
        A job of no flow is a tree of one node.

    Raises:
        InvalidJobId, InvalidArgument: before any I/O.
    """
    ctx.keys.job(job_id)
    limit = checks.integer(limit, "limit", 1, MAX_FLOW_NODES)
    relayed = (yield from relay_flows(ctx)) if relay else 0
    here = (ctx.keys.name, job_id)
    if (yield Cmd(("EXISTS", ctx.keys.job(job_id)))) == 0:
        return None
    chain = [here]
    top_cut = False
    for hop in range(MAX_DEPTH + 1):
        q, i = chain[-1]
        up = parse_ref((yield Cmd(("HGET", Keyspace(q).job(i), "parent"))) or "")
        if up is None or up in chain:
            break
        if (yield Cmd(("EXISTS", Keyspace(up[0]).job(up[1])))) == 0:
            break  # its parent is gone (removed, drained): the tree starts here
        if hop == MAX_DEPTH:
            top_cut = True
            break
        chain.append(up)
    recs, truncated = yield from _read(ctx, chain[-1], limit)
    others = sorted({r.queue for r in recs} - {ctx.keys.name})[:MAX_RELAY_QUEUES]
    if others and relay:
        again = yield from relay_flows(ctx, queues=others)
        if again:
            relayed += again
            recs, truncated = yield from _read(ctx, chain[-1], limit)
    ref = f"{here[0]}:{here[1]}"
    root = _node(recs, 0)
    return FlowTree(ref, root, len(recs), truncated or top_cut, relayed)
