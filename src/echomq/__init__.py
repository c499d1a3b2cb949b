"""echomq: a job queue for Python on Valkey/Redis with a fenced operator plane."""

from .backoff import Backoff
from .bulk import BulkResult, JobFilter
from .context import JsonSerializer, Serializer
from .dedup import Dedup
from .errors import (
    EchoMQError,
    EnqueuePartial,
    InvalidArgument,
    InvalidJobId,
    InvalidName,
    InvalidPayload,
    JobFailed,
    JobGone,
    JobLocked,
    JobNotActive,
    JobNotDead,
    JobNotFinished,
    JobNotKept,
    JobNotPending,
    JobNotScheduled,
    JobNotWaiting,
    NativeUnavailable,
    OutcomeUnknown,
    QueueHasActiveJobs,
    QueueNotPaused,
    RateLimited,
    Refused,
    ResultError,
    ResultTimeout,
    ScriptError,
    ServerFull,
    ServerUnavailable,
    StaleToken,
    VersionMismatch,
)
from .events import AsyncEventStream, Event, EventStream
from .flows import ChildEnding, ChildrenResults, Flow, FlowIds
from .ids import new_id
from .journal import AuditEntry
from .lanes import GroupInfo, ReindexResult
from .lifecycle import Claimed
from .queue import AsyncQueue, Queue
from .repeat import Repeatable
from .results import (
    Counts,
    DedupOwner,
    ErrorRecord,
    JobRow,
    JobState,
    LogEntry,
    Retention,
    RetryOutcome,
)
from .version import __version__ as __version__
from .worker import Batch, Worker, WorkerStats
from .worker.config import WorkerConfig
from .worker.job import JobCancelled, JobContext, JobFailure

__all__ = [
    "AsyncEventStream",
    "AsyncQueue",
    "AuditEntry",
    "Backoff",
    "Batch",
    "BulkResult",
    "ChildEnding",
    "ChildrenResults",
    "Claimed",
    "Counts",
    "Dedup",
    "DedupOwner",
    "EchoMQError",
    "EnqueuePartial",
    "ErrorRecord",
    "Event",
    "EventStream",
    "Flow",
    "FlowIds",
    "GroupInfo",
    "InvalidArgument",
    "InvalidJobId",
    "InvalidName",
    "InvalidPayload",
    "JobCancelled",
    "JobContext",
    "JobFailed",
    "JobFailure",
    "JobFilter",
    "JobGone",
    "JobLocked",
    "JobNotActive",
    "JobNotDead",
    "JobNotFinished",
    "JobNotKept",
    "JobNotPending",
    "JobNotScheduled",
    "JobNotWaiting",
    "JobRow",
    "JobState",
    "JsonSerializer",
    "LogEntry",
    "NativeUnavailable",
    "OutcomeUnknown",
    "Queue",
    "QueueHasActiveJobs",
    "QueueNotPaused",
    "RateLimited",
    "Refused",
    "ReindexResult",
    "Repeatable",
    "ResultError",
    "ResultTimeout",
    "Retention",
    "RetryOutcome",
    "ScriptError",
    "Serializer",
    "ServerFull",
    "ServerUnavailable",
    "StaleToken",
    "VersionMismatch",
    "Worker",
    "WorkerConfig",
    "WorkerStats",
    "__version__",
    "new_id",
]
