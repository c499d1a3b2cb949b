"""echomq: a job queue for Python on Valkey/Redis with a fenced operator plane."""

from .context import JsonSerializer, Serializer
from .errors import (
    EchoMQError,
    InvalidArgument,
    InvalidJobId,
    InvalidName,
    JobGone,
    JobLocked,
    JobNotDead,
    JobNotPending,
    QueueHasActiveJobs,
    QueueNotPaused,
    Refused,
    ScriptError,
    ServerUnavailable,
    StaleToken,
    VersionMismatch,
)
from .ids import new_id
from .lanes import GroupInfo
from .queue import AsyncQueue, Queue
from .spine import Claimed

__version__ = "0.1.0"

__all__ = [
    "AsyncQueue",
    "Claimed",
    "EchoMQError",
    "GroupInfo",
    "InvalidArgument",
    "InvalidJobId",
    "InvalidName",
    "JobGone",
    "JobLocked",
    "JobNotDead",
    "JobNotPending",
    "JsonSerializer",
    "Queue",
    "QueueHasActiveJobs",
    "QueueNotPaused",
    "Refused",
    "ScriptError",
    "Serializer",
    "ServerUnavailable",
    "StaleToken",
    "VersionMismatch",
    "__version__",
    "new_id",
]
