"""Read verbs for the operator's tools: pages, search, one job, groups, throughput
and the history series,
and the one JSON codec the tools share.

They live in the package of reads (:mod:`echomq.reads`: :mod:`~echomq.reads.job_pages`,
:mod:`~echomq.reads.one_job`, :mod:`~echomq.reads.queue_state`, with their types in
:mod:`~echomq.results.views` and the codec in :mod:`~echomq.reads.codec`); this
module names them as the tools and the facades always have.
"""

from __future__ import annotations

from .reads.codec import LenientJson, to_json
from .reads.job_pages import find_jobs, job_page
from .reads.limits import (
    ASKED_ORDERS,
    LINE_FIELDS,
    LOG_TAIL,
    MAX_GROUPS_PAGE,
    MAX_MINUTES,
    MAX_PAGE,
    MAX_SEARCH_BUDGET,
    PAGE_STATES,
    SEARCH_BUDGET,
    SEARCH_FIELDS,
    Order,
)
from .reads.limits import STATE_ORDERS as ORDERS
from .reads.limits import VIEW_STATES as STATES
from .reads.one_job import job_view
from .reads.queue_state import groups_page, latency, queue_exists, server_time
from .reads.series import MAX_HISTORY_MINUTES, busiest_lanes, history, throughput
from .reads.series import RANGES as HISTORY_RANGES
from .results.views import (
    BusiestLanes,
    Found,
    GroupsPage,
    History,
    JobLine,
    JobPage,
    JobView,
    LaneStat,
    Series,
    Throughput,
)

__all__ = [
    "ASKED_ORDERS",
    "HISTORY_RANGES",
    "LINE_FIELDS",
    "LOG_TAIL",
    "MAX_GROUPS_PAGE",
    "MAX_HISTORY_MINUTES",
    "MAX_MINUTES",
    "MAX_PAGE",
    "MAX_SEARCH_BUDGET",
    "ORDERS",
    "PAGE_STATES",
    "SEARCH_BUDGET",
    "SEARCH_FIELDS",
    "STATES",
    "BusiestLanes",
    "Found",
    "GroupsPage",
    "History",
    "JobLine",
    "JobPage",
    "JobView",
    "LaneStat",
    "LenientJson",
    "Order",
    "Series",
    "Throughput",
    "busiest_lanes",
    "find_jobs",
    "groups_page",
    "history",
    "job_page",
    "job_view",
    "latency",
    "queue_exists",
    "server_time",
    "throughput",
    "to_json",
]
