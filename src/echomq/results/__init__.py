"""The typed results the verbs answer, in one place (a module per subject).

- :mod:`.jobs`: one job (``JobRow``, ``JobState``, ``ErrorRecord``, ``LogEntry``,
  ``RetryOutcome``, ``Claimed``) and the queue's ``Counts`` and ``Retention``;
- :mod:`.queue`: ``GroupInfo``, ``ReindexResult``, ``WorkerInfo``, ``Repeatable``;
- :mod:`.operator`: ``BulkResult``, ``AuditEntry``;
- :mod:`.limits`: flow control (``ClaimedBatch``, ``ClaimHold``, ``RateLimit``, ``Limits``);
- :mod:`.views`: the operator's pages and views (``JobPage``, ``JobLine``, ``JobView``, ...).

The modules whose verbs answer them re-export them (``echomq.lanes.GroupInfo`` ...).
"""

from .jobs import (
    JOB_STATES,
    Claimed,
    Counts,
    ErrorRecord,
    JobRow,
    JobState,
    LogEntry,
    Retention,
    RetryOutcome,
    log_entries,
)
from .limits import ClaimedBatch, ClaimHold, HoldScope, Limits, RateLimit
from .operator import AuditEntry, BulkResult
from .queue import DedupOwner, GroupInfo, ReindexResult, Repeatable, WorkerInfo
from .views import (
    BusiestLanes,
    Found,
    GroupsPage,
    History,
    JobLine,
    JobPage,
    JobView,
    LaneStat,
    Order,
    Series,
    Throughput,
)

__all__ = [
    "JOB_STATES",
    "AuditEntry",
    "BulkResult",
    "BusiestLanes",
    "ClaimHold",
    "Claimed",
    "ClaimedBatch",
    "Counts",
    "DedupOwner",
    "ErrorRecord",
    "Found",
    "GroupInfo",
    "GroupsPage",
    "History",
    "HoldScope",
    "JobLine",
    "JobPage",
    "JobRow",
    "JobState",
    "JobView",
    "LaneStat",
    "Limits",
    "LogEntry",
    "Order",
    "RateLimit",
    "ReindexResult",
    "Repeatable",
    "Retention",
    "RetryOutcome",
    "Series",
    "Throughput",
    "WorkerInfo",
    "log_entries",
]
