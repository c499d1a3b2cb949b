"""Read verbs: counts, one job's row and state, browsing a state, metrics, and the
operator's bounded views (pages, search, one job, groups, throughput).

Each read is a plan like every other verb (bound on :class:`~echomq.Queue` and
:class:`~echomq.AsyncQueue`). The operator's views are **bounded**: no view walks
every lane or every group in one call, and no server command it sends grows with the
queue beyond the page or budget the caller asked for (a page of a sorted set by rank
is ``O(log N + n)``; a search examines at most ``budget`` jobs per call and returns
a cursor to go on from).

By subject: :mod:`.queue_state` (counts, pause, clock, latency, existence, groups,
throughput), :mod:`.one_job` (a row, a state, a detail view), :mod:`.job_pages`
(browse, pages, search); :mod:`echomq.results.views` holds what the views answer,
:mod:`.limits` their bounds and orders, :mod:`.codec` the tools' JSON codec and
:mod:`.decode` the reading of raw replies. :mod:`echomq.views` names the operator's
views as before.
"""

from __future__ import annotations

from .job_pages import browse
from .limits import BROWSE_ORDERS as ORDERS
from .limits import JOB_STATE_NAMES as STATES
from .one_job import get_job, job_state
from .queue_state import counts, is_paused, metrics

__all__ = [
    "ORDERS",
    "STATES",
    "browse",
    "counts",
    "get_job",
    "is_paused",
    "job_state",
    "metrics",
]
