"""``enqueue_flow``: write a tree of jobs, a part per queue, parents first.

The tree is checked whole before anything is sent (names, payloads, options, the
bounds :data:`~.model.MAX_CHILDREN`, :data:`~.model.MAX_DEPTH`,
:data:`~.model.MAX_JOBS`). Each job gets a *step*: the root's is 0, a child in its
parent's queue has its parent's step, a child in another queue the next one. The jobs
of one step and one queue are one call of ``enqueue_flow.lua`` (parents before their
children: one atomic step); the calls of a step go in one round trip, the steps in
order. So a flow in one queue is one atomic call, and a child can never end before
the parent it reports to exists. A producer that dies between two steps leaves parents
waiting on children that were never written: the flow sweep resolves them as
``missing`` (docs/flows.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from .. import checks, ids
from ..backoff import spec_text
from ..context import Context, as_str
from ..errors import InvalidArgument
from ..keyspace import Keyspace, check_name
from ..schema import FLOW_POLICIES
from ..scripts import Batch, Eval, Plan, script
from .model import MAX_CHILDREN, MAX_DEPTH, MAX_JOBS, Flow, FlowIds
from .relay import relay_flows

#: Jobs per call of enqueue_flow.lua (a bigger part goes in several, parents first).
FLOW_CHUNK = 2_000


@dataclass
class _Node:
    queue: str
    id: str
    depth: int
    step: int
    args: list[str]
    kids: list[_Node] = field(default_factory=list)
    owner: str | None = None


def _opt(v: object) -> str:
    return "" if v is None else str(v)


def _check(ctx: Context, flow: Flow, queue: str, depth: int, parent: _Node | None) -> list[str]:
    """One job's 12 fixed arguments, checked (the children's refs follow)."""
    if not isinstance(flow, Flow):
        raise InvalidArgument(f"a flow's node must be a Flow, got {type(flow).__name__}")
    if flow.on_fail not in FLOW_POLICIES:
        raise InvalidArgument(f"on_fail must be one of {', '.join(FLOW_POLICIES)}")
    if depth > MAX_DEPTH:
        raise InvalidArgument(f"a flow is at most {MAX_DEPTH} levels of children deep")
    kids = flow.children
    if isinstance(kids, (str, bytes, dict)) or not isinstance(kids, Sequence):
        raise InvalidArgument("children must be a sequence of Flow")
    if len(kids) > MAX_CHILDREN:
        raise InvalidArgument(f"a parent has at most {MAX_CHILDREN} children")
    if flow.dedup_id is not None and kids:
        raise InvalidArgument("dedup_id is for a flow's leaves (a job without children)")
    if flow.group is not None:
        check_name(flow.group, "group")
    if flow.name is not None:
        checks.job_name(flow.name)
    checks.priority(flow.priority)
    delay = None if flow.delay_ms is None else checks.ms(flow.delay_ms, "delay_ms", zero=True)
    maxa = None if flow.max_attempts is None else checks.count(flow.max_attempts, "max_attempts")
    keep = None if not flow.keep_ms else checks.ms(flow.keep_ms, "keep_ms")
    dedup = None if flow.dedup_id is None else checks.dedup(flow.dedup_id)
    pref = "" if parent is None else f"{parent.queue}:{parent.id}"
    policy = "" if parent is None or flow.on_fail == "fail_parent" else flow.on_fail
    return [
        checks.payload(ctx.serializer, flow.payload),
        pref,
        policy,
        _opt(dedup),
        _opt(flow.name),
        _opt(flow.group),
        str(int(flow.priority)) if flow.priority else "",
        _opt(maxa),
        _opt(delay),
        spec_text(flow.backoff) or "",
        _opt(keep),
    ]


def _plan_tree(ctx: Context, flow: Flow) -> tuple[_Node, list[_Node]]:
    """Every job of the tree checked, with its id and step; parents before children."""
    nodes: list[_Node] = []
    if not isinstance(flow, Flow):
        raise InvalidArgument(f"enqueue_flow takes a Flow, got {type(flow).__name__}")
    root_q = ctx.keys.name if flow.queue is None else check_name(flow.queue)
    root = _Node(root_q, _id(flow), 0, 0, _check(ctx, flow, root_q, 0, None))
    nodes.append(root)
    todo: list[tuple[_Node, Flow]] = [(root, flow)]
    while todo:
        node, f = todo.pop(0)  # breadth first: parents before their children
        for child in f.children:
            if not isinstance(child, Flow):
                raise InvalidArgument(f"a flow's node must be a Flow, got {type(child).__name__}")
            q = ctx.keys.name if child.queue is None else check_name(child.queue)
            step = node.step if q == node.queue else node.step + 1
            kid = _Node(q, _id(child), node.depth + 1, step, [])
            kid.args = _check(ctx, child, q, node.depth + 1, node)
            node.kids.append(kid)
            nodes.append(kid)
            if len(nodes) > MAX_JOBS:
                raise InvalidArgument(f"a flow holds at most {MAX_JOBS} jobs")
            todo.append((kid, child))
    return root, nodes


def _id(flow: Flow) -> str:
    return ids.new_id() if flow.id is None else ids.validate(flow.id)


def _wire(node: _Node) -> list[str]:
    return [
        node.id,
        *node.args,
        str(len(node.kids)),
        *(f"{k.queue}:{k.id}" for k in node.kids),
    ]


def _any_chosen(flow: Flow) -> bool:
    return flow.id is not None or any(_any_chosen(c) for c in flow.children)


def _ids(node: _Node) -> FlowIds:
    return FlowIds(
        node.queue,
        node.owner or node.id,
        tuple(_ids(k) for k in node.kids),
        node.owner is not None,
    )


def enqueue_flow(ctx: Context, flow: Flow) -> Plan[FlowIds]:
    """Enqueue a flow: a parent job and its children (jobs or sub-trees), in any queues.

    Each parent waits in ``waiting_children`` until its last child has ended (each
    child's ``on_fail`` says what an ending other than completed does), then runs; its
    handler reads the children's results with ``job.children_results()``. The jobs of
    one queue are written in one atomic step; the queues in order, parents first.

    Args:
        flow: the tree (:class:`~echomq.flows.Flow`); a node whose ``queue`` is ``None``
            goes to this queue.

    Returns:
        The ids written, in the tree's shape (:class:`~echomq.flows.FlowIds`).

    Raises:
        InvalidArgument, InvalidName, InvalidPayload: before anything is sent.
    """
    root, nodes = _plan_tree(ctx, flow)
    chosen = _any_chosen(flow)
    if len({(n.queue, n.id) for n in nodes}) != len(nodes):
        raise InvalidArgument("a flow names one job id twice")
    steps: dict[int, dict[str, list[_Node]]] = {}
    for n in sorted(nodes, key=lambda x: x.depth):  # stable: parents first in a part
        steps.setdefault(n.step, {}).setdefault(n.queue, []).append(n)
    relay_from: list[str] = []
    for step in sorted(steps):
        ops: list[Eval] = []
        parts: list[list[_Node]] = []
        for q, part in steps[step].items():
            base = Keyspace(q).base
            for i in range(0, len(part), FLOW_CHUNK):
                chunk = part[i : i + FLOW_CHUNK]
                args = [str(len(chunk)), "1" if chosen else "0"]
                for n in chunk:
                    args += _wire(n)
                ops.append(Eval(script("enqueue_flow"), (base,), args))
                parts.append(chunk)
        replies = yield Batch(tuple(ops))
        for chunk, reply in zip(parts, replies):
            if isinstance(reply, Exception):
                raise reply
            if int(reply[0]) and chunk[0].queue not in relay_from:
                relay_from.append(chunk[0].queue)
            for n, got in zip(chunk, reply[1:]):
                if as_str(got) != n.id:
                    n.owner = as_str(got)
    if relay_from:
        yield from relay_flows(ctx, queues=relay_from)
    return _ids(root)
