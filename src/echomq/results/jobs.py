"""Typed results of the verbs: what a read returns, and the outcomes a verb answers.

Frozen dataclasses and enums in place of dicts of text and bare strings, so a caller
(the CLI, the console, a program) reads fields its type checker knows. The outcome
enums are ``str`` enums: each member equals (and prints as) its wire text
(``RetryOutcome.DEAD == "dead"``), so code that compared strings keeps working.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from dataclasses import fields as dataclass_fields
from enum import Enum
from typing import Any, Literal, get_args

from ..schema import ROW_FIELDS, TIME_ROW_FIELDS

#: The state a job's row records; a job in a lane is ``pending``; ``completed`` only
#: for a job kept as history (see ``Queue.set_retention`` and ``keep_ms``);
#: ``waiting_children`` for a flow parent waiting for its children (docs/flows.md).
#: The one list of states: :data:`echomq.checks.PAGE_STATES` and the views, the CLI,
#: the console and the exporter read it (``tests/test_results.py`` holds them to it).
JobState = Literal["pending", "active", "scheduled", "dead", "completed", "waiting_children"]
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
        kept: completed jobs kept as history now (the ``completed`` set; 0 unless the
            queue or its jobs keep history).
        waiting_children: flow parents waiting for their children now (the
            ``waiting`` set; docs/flows.md).
    """

    pending: int
    active: int
    scheduled: int
    dead: int
    completed: int
    failed: int
    paused: bool
    kept: int = 0
    waiting_children: int = 0

    def as_dict(self) -> dict[str, Any]:
        """The counts as a plain dict (for JSON output)."""
        return asdict(self)


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
        keep: ``None`` for a job that keeps no history; else its own ``keep_ms``, or 0
            when it is kept as the queue's retention says.
        enqueued_at, started_at, last_started_at, finished_at, died_at: the job's
            timeline, server ms (``None`` until it happens; ``started_at`` is the first
            claim, ``last_started_at`` the latest from the second claim on: ``None``
            after one claim; ``last_start`` answers either). Every claimed job has its
            start times (the history series reads them); the others only a kept job.
        result: a kept completed job's result as stored (the serializer's text), or
            ``None`` (no history, not completed, or the handler returned ``None``).
        errors: a kept job's error history, oldest first (the newest 20 failures).
        extra: any other field of the row (a field a newer transition added).
        seq: its place in the queue's enqueue sequence (the run order among equal
            priorities), ``None`` for a row written before echomq kept it.
        dedup_mode: the mode of its dedup id (``throttle``, ``debounce``,
            ``keep_last``); ``None`` for simple or none.
        dedup_behind: a ``keep_last`` job held until this running job ends.
        rerun_as: the newest copy ``rerun_job`` made of this finished job.
        rerun_of: the finished job this one is a copy of (``rerun_job``).
        parent: a flow child's parent, ``queue:id``.
        on_fail: a flow child's policy (``None``: ``fail_parent``).
        children: a flow parent's number of children when it was written.
        due: a waiting flow parent's due time (server ms; enqueued with a delay).
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
    keep: int | None = None
    enqueued_at: int | None = None
    started_at: int | None = None
    last_started_at: int | None = None
    finished_at: int | None = None
    died_at: int | None = None
    result: str | None = None
    errors: tuple[ErrorRecord, ...] = ()
    extra: dict[str, str] = field(default_factory=dict)
    seq: int | None = None
    dedup_mode: str | None = None
    dedup_behind: str | None = None
    rerun_as: str | None = None
    rerun_of: str | None = None
    parent: str | None = None
    on_fail: str | None = None
    children: int | None = None
    due: int | None = None

    @classmethod
    def from_fields(
        cls,
        job_id: str,
        row: dict[str, str],
        data: Any,
        errors: tuple[ErrorRecord, ...] = (),
    ) -> JobRow:
        """Build from a row's fields (text), its deserialized payload and (for a kept
        job) its error history."""
        extra = {k: v for k, v in row.items() if k not in _ROW_FIELDS and k not in _CORE_FIELDS}
        times = {k: _int(row.get(k), None) for k in _TIME_FIELDS}
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
            keep=_int(row.get("keep"), None),
            seq=_int(row.get("seq"), None),
            dedup_mode=row.get("dedup_mode"),
            dedup_behind=row.get("dedup_behind"),
            rerun_as=row.get("rerun_as"),
            rerun_of=row.get("rerun_of"),
            parent=row.get("parent"),
            on_fail=row.get("on_fail"),
            children=_int(row.get("children"), None),
            result=row.get("result"),
            errors=errors,
            extra=extra,
            **times,
        )

    @property
    def last_start(self) -> int | None:
        """When the job was last claimed (server ms): ``last_started_at``, or
        ``started_at`` after its only claim; ``None`` for a job never claimed or not
        kept."""
        return self.last_started_at if self.last_started_at is not None else self.started_at

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
#: Row fields (of the schema) a JobRow carries as attributes; any other lands in ``extra``.
_ROW_FIELDS = tuple(
    f.name
    for f in ROW_FIELDS
    if f.name in {a.name for a in dataclass_fields(JobRow)} and f.name not in _CORE_FIELDS
)
#: The row fields that hold a server time in ms.
_TIME_FIELDS = TIME_ROW_FIELDS
_ZERO_ABSENT = ("priority", "failures", "stalled")


@dataclass(frozen=True)
class ErrorRecord:
    """One failure in a kept job's error history (``emq:{q}:job:<id>:errors``).

    Attributes:
        attempt: the token of the run that failed (the claim count then).
        time_ms: when the failure was recorded (server ms).
        error: the error text the worker sent.
    """

    attempt: int
    time_ms: int
    error: str

    @classmethod
    def from_text(cls, text: str) -> ErrorRecord:
        """Read one entry as the retry script writes it (``{"attempt","time","error"}``);
        an entry that does not read is kept whole as its error."""
        try:
            doc = json.loads(text)
            return cls(int(doc["attempt"]), int(doc["time"]), str(doc["error"]))
        except (ValueError, KeyError, TypeError):
            return cls(0, 0, text)


@dataclass(frozen=True)
class LogEntry:
    """One log line with the server time it was written.

    Attributes:
        time_ms: when ``add_log`` wrote it (server ms, from ``TIME``); ``None`` for a
            line written before echomq kept log times.
        line: the text, as it was appended.
    """

    time_ms: int | None
    line: str


def log_entries(lines: Sequence[str], times: Sequence[Any]) -> list[LogEntry]:
    """Pair a job's log lines with their times (``:logs`` and ``:logtimes``, the same
    range of each). The two lists are aligned at their newest end: lines older than
    the first time have none."""
    stamps = [int(t) for t in times][-len(lines) :] if lines else []
    pad: list[int | None] = [None] * (len(lines) - len(stamps))
    return [LogEntry(t, s) for t, s in zip([*pad, *stamps], lines)]


@dataclass(frozen=True)
class Retention:
    """How much settled history a queue keeps (``None``: no limit of that kind set).

    A queue with no field set keeps none (the default: complete deletes the row). With
    any set, the jobs enqueued from then on carry a timeline and an error history; a
    completed one stays in ``completed`` while ``completed`` or ``completed_age_ms``
    says (the newest N, and younger than T ms); ``dead`` and ``dead_age_ms`` trim the
    dead set the same way.

    Attributes:
        completed: keep the newest N completed jobs.
        completed_age_ms: keep completed jobs younger than this.
        dead: keep the newest N dead jobs.
        dead_age_ms: keep dead jobs younger than this.
    """

    completed: int | None = None
    completed_age_ms: int | None = None
    dead: int | None = None
    dead_age_ms: int | None = None

    @property
    def keeps(self) -> bool:
        """Whether any retention is set (new jobs are kept)."""
        return any(v is not None for v in asdict(self).values())

    def as_dict(self) -> dict[str, Any]:
        """The retention as a plain dict (for JSON output)."""
        return asdict(self)


@dataclass(frozen=True)
class Claimed:
    """A job leased to a worker.

    Attributes:
        id: the job id.
        payload: the deserialized payload.
        token: the fencing token (the row's ``attempts`` after this claim).
        name: the job's name, or ``None``.
        group: the job's group, or ``None`` for a flat job.
    """

    id: str
    payload: Any
    token: int
    name: str | None = None
    group: str | None = None
