"""What the operator's views answer: a job as a list shows it, a page, a search step,
one job for a detail page, a page of groups, a throughput record."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Literal

from .jobs import ErrorRecord
from .queue import GroupInfo

#: The orders a page of jobs comes in.
Order = Literal["run", "soonest", "newest"]


@dataclass(frozen=True)
class JobLine:
    """One job as a list shows it.

    Attributes:
        id: the job id.
        state: ``pending``, ``active``, ``scheduled``, ``dead`` or ``completed``.
        score: the set's score: priority (pending), lease deadline (active), due
            time (scheduled), time of death (dead), finish time (completed, a job
            kept as history), in ms where it is a time.
    """

    id: str
    state: str
    name: str | None
    group: str | None
    priority: int
    attempts: int
    failures: int
    progress: str | None
    last_error: str | None
    score: int | None


@dataclass(frozen=True)
class JobPage:
    """A page of one state (or one lane), in the state's order."""

    state: str
    group: str | None
    order: Order
    n: int
    offset: int
    total: int
    now_ms: int
    jobs: list[JobLine]


@dataclass(frozen=True)
class Found:
    """One bounded search step.

    Attributes:
        scanned: jobs examined by this call.
        cursor: where the next call goes on (a rank in the state's order), or
            ``None`` when the state was examined to its end.
        total: the jobs the walk covers now (for pending without a group: the flat
            set and every lane), so a tool shows "examined N of M".
    """

    state: str
    group: str | None
    text: str
    fields: list[str]
    scanned: int
    cursor: int | None
    now_ms: int
    jobs: list[JobLine]
    total: int = 0


@dataclass(frozen=True)
class JobView:
    """One job with what a detail page shows.

    Attributes:
        row: every row field as text, plus ``id`` and ``data`` (the payload decoded).
        logs: the newest ``LOG_TAIL`` log lines, oldest first.
        log_count: how many lines the job has in all.
        locked: a worker holds the job (a lock key or a ``lock`` field).
        score: the job's score in its state's set (see :class:`JobLine`); for a kept
            completed job its finish time.
        now_ms: the server's clock.
        errors: a kept job's error history, oldest first (``[]`` when none is kept).
        result: a kept completed job's result, decoded (``None`` when there is none).
        log_times: the server time (ms) each of ``logs`` was written, aligned with it;
            ``None`` for a line written before echomq kept log times.
        dedup_owner: for a job with a dedup id, the job that holds the id now (this
            one, a newer one, or ``None`` when it is free).
    """

    row: dict[str, Any]
    logs: list[str]
    log_count: int
    locked: bool
    score: int | None
    now_ms: int
    errors: list[ErrorRecord] = dataclasses.field(default_factory=list)
    result: Any = None
    log_times: list[int | None] = dataclasses.field(default_factory=list)
    dedup_owner: str | None = None


@dataclass(frozen=True)
class GroupsPage:
    """One page of the queue's groups; ``cursor`` is ``"0"`` after the last page."""

    groups: list[GroupInfo]
    cursor: str


@dataclass(frozen=True)
class Series:
    """A throughput record: the total and one count per minute, oldest first."""

    total: int
    series: list[int]


@dataclass(frozen=True)
class Throughput:
    """Completed and failed per minute over ``minutes`` ending at ``end_minute``
    (a minute is ms since the epoch // 60000, server clock)."""

    minutes: int
    end_minute: int
    completed: Series
    failed: Series


@dataclass(frozen=True)
class History:
    """A queue's history series over ``span`` (``1h``, ``24h``, ``7d``): one point per
    ``step`` minutes, the first starting at minute ``first_minute``, the last holding
    ``end_minute`` (server minutes: ms since the epoch // 60000), oldest first. Per
    point: the jobs that completed, the jobs that went dead, and their summed wait
    (enqueue to first start) and run (last start to end) in ms."""

    span: str
    step: int
    first_minute: int
    end_minute: int
    completed: list[int]
    dead: list[int]
    wait_ms: list[int]
    run_ms: list[int]

    def averages(self) -> tuple[list[float | None], list[float | None]]:
        """The mean wait and run in ms per point (``None`` where no job ended)."""
        n = [c + d for c, d in zip(self.completed, self.dead)]
        return (
            [w / k if k else None for w, k in zip(self.wait_ms, n)],
            [r / k if k else None for r, k in zip(self.run_ms, n)],
        )


@dataclass(frozen=True)
class LaneStat:
    """One lane's endings over a :class:`BusiestLanes` window: jobs completed, jobs
    dead, and their summed wait (enqueue to first start) and run (last start to end) in
    ms. ``lane`` is the group's name, or ``#`` and the 8 hex digits of its hash
    (``schema.HIST_LANE_FIELDS``) when the queue's ``lanenames`` no longer names it
    (an obliterated queue's, or two names of one hash: the one seen last is named)."""

    lane: str
    completed: int
    dead: int
    wait_ms: int
    run_ms: int

    @property
    def ended(self) -> int:
        """Jobs that ended: completed + dead."""
        return self.completed + self.dead

    def averages(self) -> tuple[float | None, float | None]:
        """The mean wait and run in ms (``None`` when no job ended)."""
        n = self.ended
        return (self.wait_ms / n if n else None, self.run_ms / n if n else None)


@dataclass(frozen=True)
class BusiestLanes:
    """The lanes with the most endings over ``span`` (``1h``, ``24h``, ``7d``), most
    first (ties by name), at hourly resolution: the window is the whole server hours
    ``first_hour`` .. ``end_hour`` (ms // 3600000; the last one so far), those the
    queue's :class:`History` of the same span reads. Each hour keeps its busiest lanes
    only (``schema.HIST_LANES`` slots, the fewest-ended taken over by a new lane): a
    lane's counts are low by what it ended in an hour before it took its slot or after
    it lost it (``lanes_seen``: how many lanes the hours held, all told)."""

    span: str
    first_hour: int
    end_hour: int
    lanes: list[LaneStat]
    lanes_seen: int
