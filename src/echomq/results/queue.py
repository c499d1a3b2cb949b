"""What the queue-level reads answer: a lane, a reindex step, a live worker, a repeatable."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class GroupInfo:
    """One group's lane.

    Attributes:
        name: the group.
        depth: jobs waiting in its lane.
        in_flight: its jobs in active.
        limit: its concurrency limit, or ``None``.
        weight: jobs served per turn of the ring.
        paused: whether the group is held back.
        rate_limit: its own rate limit as ``(max_jobs, per_ms)``, or ``None`` (the
            queue's lane default may still apply: ``Queue.limits``).
        held_until_ms: while its rate limit or a handler's ``RateLimited`` holds it
            off the ring, when it may be served again (server ms); else ``None``.
    """

    name: str
    depth: int
    in_flight: int
    limit: int | None
    weight: int
    paused: bool
    rate_limit: tuple[int, int] | None = None
    held_until_ms: int | None = None


@dataclass(frozen=True)
class ReindexResult:
    """Where a :func:`reindex` stands (the final answer, and each progress report).

    Attributes:
        added: lane jobs the lanes' index missed (or held at another score), added
            (on a dry run: that would be).
        removed: index members no lane holds (stale), removed (or would be).
        examined: members the walk looked at (lane jobs, then index members).
        calls: server calls made.
        cursor: where to resume (``cursor=``), or ``None`` once the walk is done.
        dry_run: nothing was written.
    """

    added: int = 0
    removed: int = 0
    examined: int = 0
    calls: int = 0
    cursor: str | None = None
    dry_run: bool = False

    @property
    def done(self) -> bool:
        """The walk reached the end."""
        return self.cursor is None


@dataclass(frozen=True)
class WorkerInfo:
    """One live worker process, as its last beat wrote it.

    Attributes:
        id: the worker id (hex, random per run).
        host, pid: where it runs.
        queues: the queues it serves.
        concurrency: the most jobs it runs at once.
        jobs: jobs in hand at its last beat.
        job_ids: the first ``JOB_IDS_SHOWN`` of them.
        started_ms, beat_ms: the server time of its first and its last beat.
        interval_ms: its beat interval.
        version: the echomq version it runs.
        claimed, completed, failed, cancelled: its counts so far.
        age_ms: ms since its last beat (server clock at the read).
        order: a worker over several queues: ``"priority"`` or ``"fair"`` (else ``""``).
        batch: a batch worker's settings, ``"size=100,min_size=1,wait_ms=500"``
            (else ``""``).
    """

    id: str
    host: str
    pid: int
    queues: list[str]
    concurrency: int
    jobs: int
    job_ids: list[str]
    started_ms: int
    beat_ms: int
    interval_ms: int
    version: str
    claimed: int
    completed: int
    failed: int
    cancelled: int
    age_ms: int
    order: str = ""
    batch: str = ""


@dataclass(frozen=True)
class Repeatable:
    """A registered repeatable.

    Attributes:
        name: its name (also the default name of the jobs it makes).
        every_ms: the interval, or ``None`` for a cron repeatable.
        cron: the cron expression, or ``None``.
        next_run_ms: when it fires next (ms since the epoch, server clock).
        payload: the deserialized payload of each occurrence.
        job_name: the name given to each job.
        group: the group each job goes to, or ``None``.
        priority: each job's priority.
        max_attempts: each job's failure limit, or ``None`` (the queue's).
        backoff: each job's backoff spec, or ``None``.
        count: how many occurrences it has made.
        last_run_ms: the slot of the last occurrence, or ``None``.
        paused: it makes no jobs until ``resume_repeat`` (``next_run_ms`` is then the
            run it had when paused).
    """

    name: str
    every_ms: int | None
    cron: str | None
    next_run_ms: int
    payload: Any
    job_name: str
    group: str | None
    priority: int
    max_attempts: int | None
    backoff: str | None
    count: int
    last_run_ms: int | None
    paused: bool = False


@dataclass(frozen=True)
class DedupOwner:
    """Who holds a dedup id, as an enqueue would see it (:func:`echomq.dedup.dedup_owner`).

    Attributes:
        job_id: the owning job's id (an enqueue with this dedup id answers it).
        state: the owner's state (``pending``, ``scheduled``, ``active``); ``None`` when
            the job is gone and only its throttle window holds the id.
        mode: ``simple``, ``throttle``, ``debounce`` or ``keep_last``.
        window_ms: a throttle window's time left in ms; ``None`` for a key without one.
    """

    job_id: str
    state: str | None
    mode: str
    window_ms: int | None
