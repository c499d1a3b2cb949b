"""The public value objects of a flow: :class:`Flow` (a node of the tree a producer
writes) and :class:`FlowIds` (the ids ``enqueue_flow`` wrote, the same shape)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ..backoff import Backoff

#: The most children one parent may have (checked before anything is sent).
MAX_CHILDREN = 10_000
#: The most levels of children below a flow's root.
MAX_DEPTH = 8
#: The most jobs one flow may hold.
MAX_JOBS = 100_000


@dataclass(frozen=True)
class Flow:
    """One job of a flow, with its children (each a job or a sub-tree).

    A job with children is a *parent*: it waits in ``waiting_children`` until every
    child has ended (by its ``on_fail`` policy), then runs like any job. A job without
    children is a leaf and is ready (or scheduled) at once.

    Attributes:
        queue: the queue of this job; ``None``: the queue ``enqueue_flow`` is called on.
        payload: its data (serialized by the queue's serializer).
        children: its children.
        on_fail: what this job's ending other than completed does to its parent:
            ``fail_parent`` (default: the parent goes dead, this job named),
            ``ignore`` (recorded, the dependency resolves), ``remove_dependency``
            (the dependency is dropped, nothing recorded) or ``continue`` (recorded,
            and the parent runs at once). Ignored on the root.
        name, group, priority, max_attempts, delay_ms, backoff, keep_ms: as for
            ``enqueue``. A parent's ``delay_ms`` counts from the enqueue: when its
            children are done earlier, it waits in the schedule until then.
        dedup_id: a leaf's dedup id (simple mode): when a live job holds it, no job
            is written and the parent records this child as ``deduplicated`` (the
            owner's id in ``FlowIds``), which resolves it like ``ignore``.
        id: your own ``JOB`` id for this job (minted when omitted); a chosen id that
            exists (or settled in the last minute) refuses that queue's part.
    """

    queue: str | None = None
    payload: Any = None
    children: Sequence[Flow] = ()
    on_fail: str = "fail_parent"
    name: str | None = None
    group: str | None = None
    priority: int = 0
    max_attempts: int | None = None
    delay_ms: int | None = None
    backoff: str | Backoff | None = None
    keep_ms: int | None = None
    dedup_id: str | None = None
    id: str | None = None


@dataclass(frozen=True)
class FlowIds:
    """The ids of a written flow, in the tree's shape.

    Attributes:
        queue: the job's queue.
        id: the job's id (for a deduplicated leaf: the id of the job that holds the
            dedup id; ``deduplicated`` is then true).
        children: its children's ids, in the order given.
        deduplicated: no job was written for this leaf (its dedup id was held).
    """

    queue: str
    id: str
    children: tuple[FlowIds, ...] = field(default=())
    deduplicated: bool = False

    @property
    def ref(self) -> str:
        """``queue:id``, as a parent's dependencies name it."""
        return f"{self.queue}:{self.id}"

    def walk(self) -> list[FlowIds]:
        """This node and every node below it, parents before children."""
        out = [self]
        for c in self.children:
            out.extend(c.walk())
        return out
