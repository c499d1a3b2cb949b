"""Flows (issue 27): a parent job that waits in ``waiting_children`` until its
children are done, children in any queue.

- :mod:`.model`: the public tree (:class:`Flow`) and the ids written (:class:`FlowIds`);
- :mod:`.produce`: ``enqueue_flow``;
- :mod:`.results`: ``children_results`` (a parent's children's endings);
- :mod:`.relay`: a child's ending in one queue applied to its parent in another.
"""

from .model import MAX_CHILDREN, MAX_DEPTH, MAX_JOBS, Flow, FlowIds
from .produce import enqueue_flow
from .results import ChildEnding, ChildrenResults, children_results

__all__ = [
    "MAX_CHILDREN",
    "MAX_DEPTH",
    "MAX_JOBS",
    "ChildEnding",
    "ChildrenResults",
    "Flow",
    "FlowIds",
    "children_results",
    "enqueue_flow",
]
