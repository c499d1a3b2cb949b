"""What a worker has done: :class:`WorkerStats`, and the registry record it beats."""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping
from dataclasses import dataclass

from .. import registry
from ..version import __version__
from .config import WorkerConfig


@dataclass
class WorkerStats:
    """What a worker has done (updated on the worker's loop; read it any time).

    Every claimed job ends in exactly one of ``completed``, ``retried``, ``dead``,
    ``cancelled``, ``released``, ``rate_limited``, ``stale``, ``lost`` and
    ``abandoned``: once the worker has stopped,
    ``claimed`` is their sum (:attr:`accounted`); while it runs, the difference is
    the jobs in hand.

    Attributes:
        claimed: jobs leased.
        completed: jobs completed (a "gone" answer to a completion counts: the
            row is deleted, by our own completion whose reply was lost).
        retried: failures scheduled to run again (a "gone" answer counts: the job
            is settled).
        dead: failures that dead-lettered the job.
        cancelled: jobs an operator cancelled (``cancel_job``) whose handler then
            stopped: dead-lettered with "JobCancelled: cancelled by an operator".
        released: jobs handed back at shutdown.
        rate_limited: jobs handed back by their handler's ``RateLimited`` (no failure
            counted; the queue or the job's lane held for its ``retry_after_ms``).
        stale: outcomes the server refused (the lease had moved on).
        lost: jobs the beat found no longer held while they ran (not settled).
        abandoned: jobs whose outcome could not be sent before the worker stopped
            (the server unreachable at shutdown); their leases run out and they are
            served again.
        timed_out: handlers cancelled for running past the job timeout (each also
            counted as a failure).
        errors: server errors the loops recovered from.
        limited_ms: the time this worker waited because the queue's rate limit (a
            full window) or a handler's ``RateLimited`` let no claim start a job.
    """

    claimed: int = 0
    completed: int = 0
    retried: int = 0
    dead: int = 0
    cancelled: int = 0
    released: int = 0
    rate_limited: int = 0
    stale: int = 0
    lost: int = 0
    abandoned: int = 0
    timed_out: int = 0
    errors: int = 0
    limited_ms: int = 0

    @property
    def accounted(self) -> int:
        """The claimed jobs whose outcome is counted (equals ``claimed`` once stopped)."""
        return (
            self.completed
            + self.retried
            + self.dead
            + self.cancelled
            + self.released
            + self.rate_limited
            + self.stale
            + self.lost
            + self.abandoned
        )


def record_fields(
    queues: list[str],
    config: WorkerConfig,
    stats: WorkerStats,
    held: list[tuple[str, int]],
    shape: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The worker's registry record as its beat writes it (``echomq.registry``): where it
    runs, every queue it serves, what it holds here and what it has done so far.
    ``shape`` adds ``order`` (a worker over several queues) and ``batch`` (a batch
    worker's settings)."""
    return registry.record_fields(
        {
            **(shape or {}),
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "queues": queues,
            "concurrency": config.concurrency,
            "jobs": len(held),
            "job_ids": [job_id for job_id, _ in held[: registry.JOB_IDS_SHOWN]],
            "interval_ms": config.beat,
            "version": __version__,
            "claimed": stats.claimed,
            "completed": stats.completed,
            "failed": stats.retried + stats.dead,
            "cancelled": stats.cancelled,
        }
    )
