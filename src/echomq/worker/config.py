"""The settings of a :class:`~echomq.worker.Worker`, in one frozen value."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from .. import checks
from ..backoff import Backoff
from ..errors import InvalidArgument

#: The beat never runs less often than this, so scheduled jobs and repeatables are
#: served within about a second even under long leases.
MAX_BEAT_MS = 1000


def _default_backoff() -> Backoff:
    return Backoff.exponential(1000, max_ms=60_000, jitter=0.2)


@dataclass(frozen=True)
class WorkerConfig:
    """How a worker runs. Every field has a default; ``None`` means "derived".

    Attributes:
        concurrency: the most jobs in flight at once.
        lease_ms: each claim's lease; the beat extends it while the job runs, and a
            lease that runs out (a crashed worker) puts the job back in the backlog.
        lock_ms: the ttl of each job's ``:lock`` key (default ``2 * lease_ms``).
        beat_ms: the beat interval: leases are extended, and the stalled check,
            promote and due repeatables run, once per beat; it is also how long an
            idle worker blocks on the wake list. Default ``min(1000, lease_ms // 3)``.
        claim_batch: the most jobs leased per claim call (also capped by free slots).
        backoff: the retry policy of a job whose row names none.
        max_stalled: a job whose lease expired more than this many times goes dead.
        grace_ms: on shutdown, how long running jobs may finish before they are
            released back to the backlog.
        job_timeout_ms: a handler running longer than this is cancelled and the job
            fails with a timeout (``None`` = no limit).
        threads: how many plain (sync) handlers run at once, each on a thread of its
            own (default concurrency; :mod:`echomq.worker.threads`).
        maintenance_budget: the most jobs the stalled check and promote move per beat.
        repeat_budget: the most repeatables fired per beat.
        error_max_chars: ``last_error`` (error text and traceback) is cut to this.
        failure_log_level: the level of the one line a handler's failure logs on
            ``echomq.worker`` (``logging.WARNING`` by default; ``logging.INFO`` or
            ``logging.DEBUG`` for a queue whose handlers fail by design). Its structured
            fields: ``queue``, ``job_id``, ``attempt``, ``token``, ``outcome``, ``error``
            (the exception's type and text) and ``error_type``.
        log_tracebacks: ``True`` attaches the traceback to that line; by default the
            traceback is a second record at DEBUG (shown only when DEBUG is on).
    """

    concurrency: int = 10
    lease_ms: int = 30_000
    lock_ms: int | None = None
    beat_ms: int | None = None
    claim_batch: int = 50
    backoff: Backoff = field(default_factory=_default_backoff)
    max_stalled: int = 2
    grace_ms: int = 10_000
    job_timeout_ms: int | None = None
    threads: int | None = None
    maintenance_budget: int = 100
    repeat_budget: int = 50
    error_max_chars: int = 8000
    failure_log_level: int = logging.WARNING
    log_tracebacks: bool = False

    def __post_init__(self) -> None:
        # the limits of the verbs each setting feeds (echomq.checks), checked here so
        # a bad setting fails the constructor, not every turn of the loop; lease_ms
        # stays within half the horizon so the derived lock (2 * lease_ms) does too
        horizon, batch, count = checks.HORIZON_MS, checks.MAX_BATCH, checks.MAX_COUNT
        for name, low, high in (
            ("concurrency", 1, batch),
            ("lease_ms", 1, horizon // 2),
            ("claim_batch", 1, batch),
            ("maintenance_budget", 1, batch),
            ("max_stalled", 0, count),
            ("grace_ms", 0, horizon),
            ("repeat_budget", 0, batch),
            ("error_max_chars", 0, count),
        ):
            _check(name, getattr(self, name), low, high)
        for name, high in (
            ("lock_ms", horizon),
            ("beat_ms", horizon),
            ("job_timeout_ms", horizon),
            ("threads", batch),
        ):
            if getattr(self, name) is not None:
                _check(name, getattr(self, name), 1, high)
        level = self.failure_log_level
        if type(level) is not int or logging.getLevelName(level) == f"Level {level}":
            raise InvalidArgument(
                f"failure_log_level must be a logging level (e.g. logging.INFO), got {level!r}"
            )
        if not isinstance(self.log_tracebacks, bool):
            raise InvalidArgument(f"log_tracebacks must be a bool, got {self.log_tracebacks!r}")
        if not isinstance(self.backoff, Backoff):
            raise InvalidArgument(f"backoff must be a Backoff, got {self.backoff!r}")
        if self.beat_ms is not None and self.beat_ms * 2 > self.lease_ms:
            raise InvalidArgument("beat_ms must be at most half of lease_ms")
        if self.lock_ms is not None and self.lock_ms < self.lease_ms:
            raise InvalidArgument("lock_ms must be at least lease_ms")

    @property
    def beat(self) -> int:
        """The beat interval in ms, derived when not set."""
        if self.beat_ms is not None:
            return self.beat_ms
        return max(1, min(MAX_BEAT_MS, self.lease_ms // 3))

    @property
    def lock(self) -> int:
        """The ``:lock`` ttl in ms, derived when not set."""
        return self.lock_ms if self.lock_ms is not None else 2 * self.lease_ms

    @property
    def pool_size(self) -> int:
        """Threads for sync handlers."""
        return self.threads if self.threads is not None else self.concurrency


def _check(name: str, value: object, low: int, high: int) -> None:
    checks.integer(value, f"WorkerConfig.{name}", low, high)
