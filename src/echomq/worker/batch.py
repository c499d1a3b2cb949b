"""Batch handlers: the handler takes a list of jobs, each settled on its own.

``Worker(q, handler, batch=Batch(size=100, min_size=1, wait_ms=500))`` claims up to
``size`` jobs in ONE claim script call (``claim_many``'s call: flat jobs and lanes'
jobs interleaved, so a batch may mix jobs of several lanes, each lane's limits
applied by the claim as for single jobs) and calls ``handler(jobs)`` once with them.

- At least ``min_size`` jobs claimed: the batch starts at once. Fewer: they are held
  (their leases kept alive by the beat like any job in hand) while the worker claims
  more, and start when ``min_size`` is reached or ``wait_ms`` after the first was
  held, whichever comes first. A stopping worker starts what it holds at once.
- Each member is settled on its own. The handler returns ``None`` (all complete), or
  one result per job, in order: a value completes its job (kept as its result), an
  exception instance fails it. ``job.fail(err)`` marks a member failed whatever is
  returned. Raising fails every member not already marked. A failed member is retried
  by its own backoff and ``max_attempts``, like a single job.
- Leases are extended together: the beat extends every job in hand in one call.
- Cancel is per job: an operator's cancel (``cancel_job``) or a lost lease flags that
  member only (``job.cancelled``); the call runs on for the others. A cancelled member
  the handler fails (or a raise) goes dead as ``JobCancelled``; one it completes
  completes. The job timeout (``WorkerConfig.job_timeout_ms``) and the shutdown grace
  apply to the batch's call as a whole.
- ``concurrency`` counts batches: a worker holds up to ``concurrency * size`` jobs;
  ``WorkerConfig.claim_batch`` is not used (each claim asks for a batch).

A handler mapping (job name to handler) splits a claimed batch by route: each handler
gets the list of its own jobs.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .. import checks
from .job import LEASE_LOST, TIMEOUT
from .routes import DEFAULT_ROUTE

if TYPE_CHECKING:
    from .engine import Engine, _Running
    from .threads import HandlerThreads

log = logging.getLogger("echomq.worker")


@dataclass(frozen=True)
class Batch:
    """How a batch worker groups jobs.

    Attributes:
        size: the most jobs handed to one call (claimed in one claim call).
        min_size: the fewest jobs a call starts with, unless ``wait_ms`` ran out.
        wait_ms: the most a held job waits for ``min_size`` to be reached.

    Raises:
        InvalidArgument: a bound out of range, or ``min_size > size``.
    """

    size: int = 100
    min_size: int = 1
    wait_ms: int = 500

    def __post_init__(self) -> None:
        checks.integer(self.size, "Batch.size", 1, checks.MAX_HANDLER_BATCH)
        checks.integer(self.min_size, "Batch.min_size", 1, self.size)
        checks.integer(self.wait_ms, "Batch.wait_ms", 0, checks.HORIZON_MS)

    def describe(self) -> str:
        """``"size=100,min_size=1,wait_ms=500"`` (the registry record's ``batch``)."""
        return f"size={self.size},min_size={self.min_size},wait_ms={self.wait_ms}"


class Batcher:
    """Holds claimed jobs until a batch is due, runs each batch, records each member.

    Lives on the engine's loop; the engine calls :meth:`wanted`, :meth:`add` and
    :meth:`flush`.
    """

    def __init__(self, engine: Engine, batch: Batch) -> None:
        self.engine, self.batch = engine, batch
        self.held: list[_Running] = []
        self._timer: asyncio.TimerHandle | None = None
        self._pool: HandlerThreads | None = None

    def wanted(self) -> int:
        """How many jobs the next claim asks for: the rest of a batch."""
        return self.batch.size - len(self.held)

    def add(self, runs: list[_Running], pool: HandlerThreads) -> None:
        """Take claimed jobs; start the batches that are due."""
        self._pool = pool
        self.held.extend(runs)
        size = self.batch.size
        while len(self.held) >= size:
            self._start(self.held[:size])
            self.held = self.held[size:]
        if len(self.held) >= self.batch.min_size or self.engine.stop_requested:
            self.flush()
        elif self.held and self._timer is None:
            loop = asyncio.get_running_loop()
            self._timer = loop.call_later(self.batch.wait_ms / 1000, self.flush)

    def flush(self) -> None:
        """Start what is held now (``wait_ms`` ran out, or the worker stops)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        runs = [run for run in self.held if not run.recorded]
        self.held = []
        if runs:
            self._start(runs)

    def _start(self, runs: list[_Running]) -> None:
        loop = asyncio.get_running_loop()
        task = loop.create_task(self._run(runs))
        timeout = self.engine.config.job_timeout_ms
        timer = None
        if timeout is not None:
            timer = loop.call_later(timeout / 1000, self._time_out, runs)
        for run in runs:
            run.task, run.timer = task, timer

    def _time_out(self, runs: list[_Running]) -> None:
        for run in runs:
            self.engine.cancel(run, TIMEOUT)

    async def _run(self, runs: list[_Running]) -> None:
        """One call per route among the members, one after the other."""
        routes: dict[int, tuple[Callable[..., Any], bool, list[_Running]]] = {}
        engine = self.engine
        try:
            table = engine.routes.table
            if len(table) == 1 and DEFAULT_ROUTE in table:  # one handler: one call
                fn, is_async = table[DEFAULT_ROUTE]
                await self._call(fn, is_async, runs)
                return
            for run in runs:
                try:
                    fn, is_async = engine.routes.pick(run.job.name)
                except LookupError as exc:
                    self._settle(run, exc, None)
                    continue
                routes.setdefault(id(fn), (fn, is_async, []))[2].append(run)
            for fn, is_async, members in routes.values():
                await self._call(fn, is_async, members)
        finally:
            timer = runs[0].timer
            if timer is not None:
                timer.cancel()

    async def _call(self, fn: Callable[..., Any], is_async: bool, runs: list[_Running]) -> None:
        jobs = [run.job for run in runs]
        for run in runs:
            run.is_async = is_async
        try:
            if is_async:
                value = await fn(jobs)
            else:
                assert self._pool is not None
                value = await self._pool.submit(fn, jobs)
                if inspect.isawaitable(value):
                    value = await value
            results = _per_item(value, len(jobs))
        except (asyncio.CancelledError, Exception) as exc:
            failed = sum(1 for job in jobs if job.cancel_reason is None)
            if failed and not isinstance(exc, asyncio.CancelledError):
                log.log(
                    engine_level(self.engine),
                    "batch of %d on %s failed: %s: %s",
                    len(jobs),
                    jobs[0].queue,
                    type(exc).__name__,
                    exc,
                )
            for run in runs:
                self._settle(run, run.job.marked or exc, None)
            return
        if value is None:
            # the common case, every member done with no result to keep: queued for
            # completion together, one nudge (a marked or lost member on its own)
            done: list[_Running] = []
            for run in runs:
                job = run.job
                if job.marked is not None or job.cancel_reason == LEASE_LOST:
                    self._settle(run, job.marked, None)
                else:
                    done.append(run)
            self.engine.record_done(done)
            return
        for run, item in zip(runs, results, strict=True):
            error = run.job.marked or (item if isinstance(item, BaseException) else None)
            self._settle(run, error, None if error is not None else item)

    def _settle(self, run: _Running, error: BaseException | None, value: Any) -> None:
        engine = self.engine
        if error is None:
            run.value = value
            outcome, text = "done", ""
        else:
            outcome, text = engine.failure(run.job, error)
        if run.job.cancel_reason == LEASE_LOST:
            outcome = "lost"
        engine.record(run, outcome, text)


def _per_item(value: Any, count: int) -> list[Any]:
    """A batch handler's return value as one result per job.

    Raises:
        TypeError: neither ``None`` nor a list (or tuple) of ``count`` items.
    """
    if value is None:
        return [None] * count
    if isinstance(value, list | tuple) and len(value) == count:
        return list(value)
    raise TypeError(
        f"a batch handler returns None or a list of one result per job ({count}), "
        f"got {type(value).__name__}"
        + (f" of {len(value)}" if isinstance(value, list | tuple) else "")
    )


def engine_level(engine: Engine) -> int:
    """The level of a failure's log line (``WorkerConfig.failure_log_level``)."""
    return engine.config.failure_log_level
