"""``children_results``: what a flow parent's children ended with, in one bounded read
(the parent's ``:kids`` and ``:kidfails`` hashes; a parent has at most
:data:`~.model.MAX_CHILDREN` children, so each hash is bounded)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from ..context import Context, as_str
from ..scripts import Batch, Cmd, Plan


@dataclass(frozen=True)
class ChildEnding:
    """A child that ended otherwise than completed.

    Attributes:
        outcome: failed, removed, drained, obliterated, cancelled, missing or
            deduplicated (schema.FLOW_OUTCOMES).
        error: the child's error (failed), the owner's id (deduplicated), else ``''``.
    """

    outcome: str
    error: str


@dataclass(frozen=True)
class ChildrenResults:
    """A flow parent's children's endings, by child ref ``queue:id``.

    Attributes:
        completed: completed children's results, deserialized (``None``: none sent).
        failed: the other endings recorded (a ``remove_dependency`` child records none).
    """

    completed: dict[str, Any] = field(default_factory=dict)
    failed: dict[str, ChildEnding] = field(default_factory=dict)

    def values(self) -> list[Any]:
        """The completed children's results, in ref order."""
        return [self.completed[k] for k in sorted(self.completed)]


def children_results(ctx: Context, job_id: str) -> Plan[ChildrenResults]:
    """A flow parent's children's results and other endings, in one round trip.

    Args:
        job_id: the parent.

    Returns:
        :class:`ChildrenResults` (empty for a job that is no parent, or is gone).
    """
    kids, fails = yield Batch(
        (Cmd(("HGETALL", ctx.keys.kids(job_id))), Cmd(("HGETALL", ctx.keys.kidfails(job_id))))
    )
    done: dict[str, Any] = {}
    for k, v in _pairs(kids):
        done[k] = ctx.serializer.loads(v) if v else None
    failed: dict[str, ChildEnding] = {}
    for k, v in _pairs(fails):
        try:
            msg = json.loads(v)
            failed[k] = ChildEnding(str(msg.get("outcome", "")), str(msg.get("error", "")))
        except (ValueError, AttributeError):
            failed[k] = ChildEnding("", v)
    return ChildrenResults(done, failed)


def _pairs(reply: Any) -> list[tuple[str, str]]:
    if isinstance(reply, Exception):
        raise reply
    if isinstance(reply, dict):
        return [(as_str(k), as_str(v)) for k, v in reply.items()]
    return [(as_str(reply[i]), as_str(reply[i + 1])) for i in range(0, len(reply), 2)]
