"""The bounds, orders and field lists the reads share: what a page, a search or a job
view may ask for, and in which order each state is read."""

from __future__ import annotations

from .. import checks
from ..results import JOB_STATES
from ..results.views import Order as Order

#: Every state a job may be in (what :func:`~echomq.reads.job_state` answers).
JOB_STATE_NAMES = JOB_STATES
#: The four sets of the operator's views (``echomq.views.STATES``).
VIEW_STATES = checks.STATES
#: Every state a page or a search can read: the four sets, the completed jobs a
#: queue keeps as history (``set_retention``, ``keep_ms``), newest finished first, and
#: the flow parents waiting for their children, longest waiting first.
PAGE_STATES = checks.PAGE_STATES

#: Each state's order in a page: (the order's name, whether the set is read reversed)
#: (``echomq.views.ORDERS``).
STATE_ORDERS: dict[str, tuple[Order, bool]] = {
    "pending": ("run", False),
    "scheduled": ("soonest", False),
    "active": ("newest", True),
    "dead": ("newest", True),
    "completed": ("newest", True),
    # score = since it waits: the longest waiting first (the one an operator looks at)
    "waiting_children": ("run", False),
}
#: The orders a caller may ask for instead of the state's own (as ``browse`` takes):
#: ``run`` (the set ascending: the order claims take; the schedule soonest first) or
#: ``newest`` (descending).
ASKED_ORDERS = ("run", "newest")
#: The orders :func:`~echomq.reads.browse` pages in (``echomq.reads.ORDERS``).
BROWSE_ORDERS = ("newest", "run")
#: The largest page a view returns.
MAX_PAGE = 200
#: The largest page of groups: each group costs the groups script five reads, and a
#: SSCAN page may hold more than asked; 100 keeps one call near 3 ms on 1,000 lanes.
MAX_GROUPS_PAGE = 100
#: Jobs one search call examines by default, and at most.
SEARCH_BUDGET = 1000
MAX_SEARCH_BUDGET = 5000
#: What a search may look in.
SEARCH_FIELDS = ("id", "name", "group", "error", "payload")
#: The newest log lines one job view carries.
LOG_TAIL = 200
#: The longest throughput window, in minutes (a day; the history series: 7 days).
MAX_MINUTES = 1440
#: The row fields a page shows.
LINE_FIELDS = (
    "state",
    "name",
    "group",
    "priority",
    "attempts",
    "failures",
    "progress",
    "last_error",
)
#: Keys whose presence says a queue exists (any one of them): those that outlive a
#: job (the enqueue sequence stays after the last job went, the worker registry while
#: a worker waits on a queue with no job yet, the journal after an operator's verb).
PRESENCE_KEYS = (
    "meta",
    "pending",
    "active",
    "schedule",
    "dead",
    "completed",
    "groups",
    "repeat",
    "metrics:completed",
    "metrics:failed",
    "seq",
    "workers",
    "audit",
    "keepuntil",
)
