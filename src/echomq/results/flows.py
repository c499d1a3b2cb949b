"""What the flow operator verbs answer: a flow's tree (:class:`FlowTree`), a cancel's
counts (:class:`FlowCancel`) and a sweep's (:class:`FlowSweep`)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(frozen=True)
class FlowNode:
    """One job of a flow, as :func:`echomq.flows.tree.flow` reads it.

    Attributes:
        queue, id: where the job is; ``ref`` is ``queue:id``.
        state: its row's state; ``None`` when the row is gone (a child that completed
            without history, or was removed: ``outcome`` says which when its parent
            recorded it).
        name: its name, if any.
        policy: its ``on_fail`` policy as a child (``fail_parent`` when absent); ``None``
            for the root.
        outcome: how it ended as its parent recorded it (``completed``, ``failed``,
            ``removed``, ...); ``None`` while its parent still waits for it, or for the
            root.
        summary: the result text (completed) or the error its parent recorded, cut to
            200 bytes; else its own ``last_error``; ``''`` for none.
        children: the number of children it was written with (its ``children`` field).
        unresolved: its children not yet resolved (its ``:deps``).
        kids: the nodes read under it (at most what the call's budget left).
        more: children it has that the call did not read (the budget, or the depth).
    """

    queue: str
    id: str
    state: str | None
    name: str | None = None
    policy: str | None = None
    outcome: str | None = None
    summary: str = ""
    children: int = 0
    unresolved: int = 0
    kids: tuple[FlowNode, ...] = ()
    more: int = 0

    @property
    def ref(self) -> str:
        return f"{self.queue}:{self.id}"

    def walk(self) -> list[FlowNode]:
        """This node and every node read under it, parents first."""
        out = [self]
        for k in self.kids:
            out.extend(k.walk())
        return out

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["ref"] = self.ref
        d["kids"] = [k.as_dict() for k in self.kids]
        return d


@dataclass(frozen=True)
class FlowTree:
    """A flow around one job: the root (the top of its parent chain) and the tree read
    under it.

    Attributes:
        job: the ref ``queue:id`` asked about.
        root: the root node, with its descendants (bounded).
        nodes: how many nodes were read.
        truncated: ``True`` when a bound stopped the read (nodes, depth, or a parent
            chain longer than the depth bound): some node has ``more`` > 0, or the root
            shown is not the top.
        relayed: flow endings the read relayed first (its queues' outboxes).
    """

    job: str
    root: FlowNode
    nodes: int
    truncated: bool
    relayed: int = 0

    def find(self, ref: str) -> FlowNode | None:
        """The node of ``ref`` (``queue:id``) among those read, or ``None``."""
        return next((n for n in self.root.walk() if n.ref == ref), None)

    def as_dict(self) -> dict[str, Any]:
        return {
            "job": self.job,
            "root": self.root.as_dict(),
            "nodes": self.nodes,
            "truncated": self.truncated,
            "relayed": self.relayed,
        }


@dataclass(frozen=True)
class FlowCancel:
    """What :func:`echomq.flows.ops.cancel_flow` did.

    Attributes:
        removed: jobs not yet started (pending, scheduled) removed, outcome cancelled.
        cancelling: running jobs asked to stop (as ``cancel_job`` asks).
        failed: waiting parents ended as dead (``cancelled by an operator``), the root
            first.
        nodes: the nodes the call read (the tree under the root, bounded).
        truncated: the tree was larger than the bound: the nodes not read were left
            running; their endings are recorded on their (dead) parents.
    """

    removed: int
    cancelling: int
    failed: int
    nodes: int
    truncated: bool

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class FlowSweep:
    """What :func:`echomq.flows.sweep.sweep_flows` found and did.

    Attributes:
        parents: waiting parents examined (past the grace, oldest first).
        checked: their dependencies checked (a child's row and its queue's outbox).
        missing: dependencies whose child is gone with no ending on its way.
        resolved: of those, the ones this call resolved as ``missing`` (another call,
            or a late relay, may have resolved the rest first).
        missing_refs: the refs found missing (at most 100).
    """

    parents: int
    checked: int
    missing: int
    resolved: int
    missing_refs: tuple[str, ...] = field(default_factory=tuple)

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["missing_refs"] = list(self.missing_refs)
        return d
