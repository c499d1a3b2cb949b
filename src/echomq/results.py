"""Typed results of the verbs: what a read returns, and the outcomes a verb answers.

Frozen dataclasses and enums in place of dicts of text and bare strings, so a caller
(the CLI, the console, a program) reads fields its type checker knows. The outcome
enums are ``str`` enums: each member equals (and prints as) its wire text
(``RetryOutcome.DEAD == "dead"``), so code that compared strings keeps working.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from enum import Enum
from typing import Any, Literal, get_args

#: The state a job's row records; a job in a lane is ``pending``.
JobState = Literal["pending", "active", "scheduled", "dead"]
#: Every :data:`JobState`, in the order the counts and the CLI list them.
JOB_STATES: tuple[JobState, ...] = get_args(JobState)


class RetryOutcome(str, Enum):
    """What ``retry`` did with the failed job."""

    SCHEDULED = "scheduled"  # parked in the schedule, due after its delay
    DEAD = "dead"  # its failures reached max_attempts: dead-lettered

    def __str__(self) -> str:  # the wire text, as StrEnum (3.11+) would print it
        return self.value


@dataclass(frozen=True)
class Counts:
    """Jobs in every state (lanes counted in pending), the settled totals and the pause.

    Attributes:
        pending, active, scheduled, dead: jobs in each state now.
        completed, failed: the running totals of ``metrics:completed``/``failed``.
        paused: whether the queue's claim gate is closed.
    """

    pending: int
    active: int
    scheduled: int
    dead: int
    completed: int
    failed: int
    paused: bool

    def as_dict(self) -> dict[str, Any]:
        """The counts as a plain dict (for JSON output)."""
        return asdict(self)


#: Row fields a JobRow carries as attributes; any other field lands in ``extra``.
_ROW_FIELDS = (
    "name",
    "group",
    "priority",
    "max_attempts",
    "backoff",
    "dedup",
    "progress",
    "last_error",
    "failures",
    "stalled",
    "lock",
    "repeat",
)


def _int(value: str | None, default: int | None = 0) -> int | None:
    return default if value is None or value == "" else int(value)


@dataclass(frozen=True)
class JobRow:
    """One job's row (``emq:{q}:job:<id>``), typed.

    Attributes:
        id: the job id.
        state: its state.
        attempts: the fencing token (claims so far).
        payload: the serialized payload, as stored.
        data: the payload, deserialized.
        name, group, backoff, dedup, last_error, lock, repeat: text fields, ``None``
            when absent.
        progress: the progress as stored (decimal text, a string, or JSON text).
        priority: the priority (0 when absent).
        max_attempts: the job's own limit, ``None`` for the queue default.
        failures, stalled: the counters (0 when absent).
        extra: any other field of the row (a field a newer transition added).
    """

    id: str
    state: JobState
    attempts: int
    payload: str
    data: Any
    name: str | None = None
    group: str | None = None
    priority: int = 0
    max_attempts: int | None = None
    backoff: str | None = None
    dedup: str | None = None
    progress: str | None = None
    last_error: str | None = None
    failures: int = 0
    stalled: int = 0
    lock: str | None = None
    repeat: str | None = None
    extra: dict[str, str] = field(default_factory=dict)

    @classmethod
    def from_fields(cls, job_id: str, row: dict[str, str], data: Any) -> JobRow:
        """Build from a row's fields (text) and its deserialized payload."""
        extra = {k: v for k, v in row.items() if k not in _ROW_FIELDS and k not in _CORE_FIELDS}
        return cls(
            id=job_id,
            state=row.get("state", "pending"),  # type: ignore[arg-type]
            attempts=_int(row.get("attempts")) or 0,
            payload=row.get("payload", ""),
            data=data,
            name=row.get("name"),
            group=row.get("group"),
            priority=_int(row.get("priority")) or 0,
            max_attempts=_int(row.get("max_attempts"), None),
            backoff=row.get("backoff"),
            dedup=row.get("dedup"),
            progress=row.get("progress"),
            last_error=row.get("last_error"),
            failures=_int(row.get("failures")) or 0,
            stalled=_int(row.get("stalled")) or 0,
            lock=row.get("lock"),
            repeat=row.get("repeat"),
            extra=extra,
        )

    def fields(self) -> dict[str, str]:
        """The row's fields as the server holds them (text; absent ones left out)."""
        out = {"state": self.state, "attempts": str(self.attempts), "payload": self.payload}
        for name in _ROW_FIELDS:
            value = getattr(self, name)
            if value is not None and not (name in _ZERO_ABSENT and value == 0):
                out[name] = str(value)
        return out | self.extra

    def as_dict(self) -> dict[str, Any]:
        """The row as a plain dict: every present field as text, plus ``id`` and
        ``data`` (the shape ``get_job`` returned before it was typed)."""
        return {**self.fields(), "id": self.id, "data": self.data}


_CORE_FIELDS = ("state", "attempts", "payload")
_ZERO_ABSENT = ("priority", "failures", "stalled")
