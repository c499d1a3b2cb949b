"""The worker runtime: claim jobs, run handlers, settle them, keep the queue moving.

One asyncio loop drives everything. The *serve* loop claims up to the free slots in
one ``claim_many`` call (the pause gate read first), starts a task per job, and
settles the finished ones together (``complete_many``: one pipelined round trip).
When nothing is ready it blocks on the queue's wake list (``BLPOP``, on its own
connection) instead of polling. The *beat* extends every in-flight lease in one
``extend_locks`` call and runs the stalled check, promote and the due repeatables,
bounded, so scheduled and crashed work moves without any other process.

Usage::

    def handle(job):                       # or: async def handle(job)
        ...

    Worker("emails", handle, url="redis://...", concurrency=20).run()

See ``docs/worker.md`` for the config, the job context, retries, shutdown and events.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import inspect
import logging
import random
import signal
import threading
import traceback
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import redis

from . import repeat, settle
from .errors import EchoMQError, InvalidArgument, JobGone, StaleToken
from .job_context import LEASE_LOST, SHUTDOWN, TIMEOUT, JobCancelled, JobContext
from .keyspace import check_name
from .queue import AsyncQueue, Queue
from .spine import Claimed
from .worker_config import WorkerConfig
from .worker_conn import async_queue_for, blocking_client

log = logging.getLogger("echomq.worker")

Handler = Callable[[JobContext], Any]
_RECOVERABLE = (EchoMQError, redis.RedisError, OSError)
#: The pause after a server error before the loops try again, doubling to the cap.
_ERROR_PAUSE_S, _ERROR_PAUSE_CAP_S = 0.05, 2.0


@dataclass
class WorkerStats:
    """What a worker has done (read it any time; updated on the worker's loop).

    Attributes:
        claimed: jobs leased.
        completed: jobs completed.
        retried: failures scheduled to run again.
        dead: failures that dead-lettered the job.
        released: jobs handed back at shutdown.
        stale: settlements the server refused (the lease had moved on).
        lost: jobs the beat found no longer held while they ran (not settled).
        timed_out: handlers cancelled for running past the job timeout.
        errors: server errors the loops recovered from.
    """

    claimed: int = 0
    completed: int = 0
    retried: int = 0
    dead: int = 0
    released: int = 0
    stale: int = 0
    lost: int = 0
    timed_out: int = 0
    errors: int = 0


class _Routes:
    """Which handler runs a job: one for all, or one per job name (``"*"`` = default)."""

    def __init__(self, handler: Handler | Mapping[str, Handler]) -> None:
        table = dict(handler) if isinstance(handler, Mapping) else {"*": handler}
        if not table:
            raise InvalidArgument("no handler given")
        for name, fn in table.items():
            if not callable(fn):
                raise InvalidArgument(f"handler for {name!r} is not callable")
        self.table = {k: (fn, _is_async(fn)) for k, fn in table.items()}

    def pick(self, name: str | None) -> tuple[Handler, bool]:
        found = self.table.get(name or "*") or self.table.get("*")
        if found is None:
            raise LookupError(f"no handler for job name {name!r}")
        return found


def _is_async(fn: Any) -> bool:
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(
        getattr(fn, "__call__", None)  # noqa: B004 - an object with an async __call__
    )


@dataclass
class _Running:
    job: JobContext
    task: asyncio.Task[None] | None = None
    timer: asyncio.TimerHandle | None = None
    recorded: bool = False


class Worker:
    """Runs a handler for each job of one queue.

    Args:
        queue_or_name: a queue name, a :class:`~echomq.Queue` (its connection
            settings, serializer and ``max_attempts`` are reused) or an
            :class:`~echomq.AsyncQueue` (used as is, on the loop that runs the worker).
        handler: ``handler(job)``, plain or ``async def``; or a mapping of job name to
            handler, with ``"*"`` as the fallback. A plain handler runs in a thread pool.
        url: the server URL when ``queue_or_name`` is a name (default local).
        concurrency: shortcut for ``config.concurrency`` (default 10).
        lease_ms: shortcut for ``config.lease_ms`` (default 30000).
        config: every other setting (:class:`WorkerConfig`).

    Raises:
        InvalidName, InvalidArgument: a bad queue name, handler or setting.
    """

    def __init__(
        self,
        queue_or_name: str | Queue | AsyncQueue,
        handler: Handler | Mapping[str, Handler],
        *,
        url: str | None = None,
        concurrency: int | None = None,
        lease_ms: int | None = None,
        config: WorkerConfig | None = None,
    ) -> None:
        cfg = config or WorkerConfig()
        shortcuts = {"concurrency": concurrency, "lease_ms": lease_ms}
        changes: dict[str, Any] = {k: v for k, v in shortcuts.items() if v is not None}
        self.config = dataclasses.replace(cfg, **changes) if changes else cfg
        if isinstance(queue_or_name, str):
            self.queue_name = check_name(queue_or_name)
        else:
            self.queue_name = queue_or_name.name
        self._source, self._url = queue_or_name, url
        self._routes = _Routes(handler)
        self.stats = WorkerStats()
        #: Set once the worker is connected and serving (for hosts and tests).
        self.ready = threading.Event()
        self._finished = threading.Event()
        self._stop = self._force = self._started = False
        self._more = True
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread = 0
        self._running: dict[tuple[str, int], _Running] = {}
        self._outcomes: list[tuple[JobContext, str, str]] = []
        self._poke_fut: asyncio.Future[None] | None = None
        self._rng = random.Random()

    # ---- control, from any thread ------------------------------------------------

    def run(self) -> WorkerStats:
        """Serve until stopped (blocking). SIGINT/SIGTERM stop it gracefully when run
        from the main thread; a second signal skips the rest of the grace period.

        Returns:
            The final stats.
        """
        asyncio.run(self._run_with_signals())
        return self.stats

    async def arun(self) -> WorkerStats:
        """Serve until :meth:`request_stop` (for async hosts; installs no signal handler).

        Returns:
            The final stats.

        Raises:
            RuntimeError: the worker already ran (a worker runs once).
            ServerUnavailable: no server at the start.
        """
        if self._started:
            raise RuntimeError("a Worker runs once; make a new one")
        self._started = True
        self._loop = asyncio.get_running_loop()
        self._thread = threading.get_ident()
        self._poke_fut = self._loop.create_future()
        aq, owned = async_queue_for(self._source, self._url)
        blocker = blocking_client(aq)
        pool = ThreadPoolExecutor(self.config.pool_size, thread_name_prefix="emq-handler")
        beat: asyncio.Task[None] | None = None
        try:
            await aq.runner.fence()
            beat = self._loop.create_task(self._beat_loop(aq))
            self.ready.set()
            await self._serve(aq, blocker, pool)
            await self._wind_down(aq)
        finally:
            if beat is not None:
                beat.cancel()
                await asyncio.gather(beat, return_exceptions=True)
            pool.shutdown(wait=False, cancel_futures=True)
            if blocker is not aq.client:
                await blocker.aclose()
            if owned:
                await aq.client.aclose()
            self._finished.set()
        return self.stats

    def request_stop(self, *, force: bool = False) -> None:
        """Ask the worker to stop (returns at once; safe from any thread or signal).

        It stops claiming, lets running jobs finish for up to ``grace_ms`` (none with
        ``force``), then releases the rest back to the backlog.
        """
        self._stop = True
        self._force = self._force or force
        loop = self._loop
        if loop is not None and not loop.is_closed():
            # the loop may close in between: then there is nothing left to wake
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(self._poke)

    def stop(self, timeout: float | None = None, *, force: bool = False) -> bool:
        """Request a stop from another thread and wait for the worker to finish.

        Args:
            timeout: the most seconds to wait (``None`` = until done).
            force: skip the grace period.

        Returns:
            ``True`` when the worker has finished.

        Raises:
            RuntimeError: called on the worker's own loop (use :meth:`request_stop`).
        """
        if self._loop is not None and threading.get_ident() == self._thread:
            raise RuntimeError("stop() would wait on its own loop; use request_stop()")
        self.request_stop(force=force)
        if not self._started:
            return True
        return self._finished.wait(timeout)

    # ---- the serve loop -----------------------------------------------------------

    async def _run_with_signals(self) -> None:
        loop = asyncio.get_running_loop()
        installed: list[signal.Signals] = []
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                try:
                    loop.add_signal_handler(sig, self._on_signal)
                    installed.append(sig)
                except (NotImplementedError, RuntimeError):
                    pass
        try:
            await self.arun()
        finally:
            for sig in installed:
                loop.remove_signal_handler(sig)

    def _on_signal(self) -> None:
        self.request_stop(force=self._stop)

    def _poke(self) -> None:
        if self._poke_fut is not None and not self._poke_fut.done():
            self._poke_fut.set_result(None)

    async def _serve(self, aq: AsyncQueue, blocker: Any, pool: ThreadPoolExecutor) -> None:
        cfg, loop = self.config, asyncio.get_running_loop()
        wake: asyncio.Task[Any] | None = None
        failures = 0
        try:
            while not self._stop:
                try:
                    await self._settle(aq)
                    free = cfg.concurrency - len(self._running)
                    if free > 0 and self._more:
                        want = min(free, cfg.claim_batch)
                        got = await aq.claim_many(want, cfg.lease_ms, lock_ms=cfg.lock)
                        self._more = len(got) == want
                        for claimed in got:
                            self._start(aq, claimed, pool)
                        failures = 0
                        continue
                    assert self._poke_fut is not None
                    waits: list[asyncio.Future[Any]] = [self._poke_fut]
                    if free > 0:
                        if wake is None:
                            wake = loop.create_task(
                                blocker.blpop([aq.keys.wake], timeout=cfg.beat / 1000)
                            )
                        waits.append(wake)
                    await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
                    if self._poke_fut.done():
                        self._poke_fut = loop.create_future()
                    if wake is not None and wake.done():
                        done, wake = wake, None
                        # a token or a beat's timeout: look once (a missed wake costs
                        # at most one beat of latency, never a stuck job)
                        self._more = True
                        done.result()
                    failures = 0
                except _RECOVERABLE as exc:
                    self.stats.errors += 1
                    log.warning("worker %s: %r; retrying", self.queue_name, exc)
                    await self._pause(failures)
                    failures += 1
        finally:
            if wake is not None:
                wake.cancel()
                await asyncio.gather(wake, return_exceptions=True)

    async def _pause(self, failures: int) -> None:
        delay = min(_ERROR_PAUSE_CAP_S, _ERROR_PAUSE_S * 2 ** min(failures, 10))
        assert self._poke_fut is not None
        await asyncio.wait([self._poke_fut], timeout=delay)

    def _start(self, aq: AsyncQueue, claimed: Claimed, pool: ThreadPoolExecutor) -> None:
        loop = asyncio.get_running_loop()
        job = JobContext(claimed, aq, loop, self._thread)
        run = _Running(job)
        self._running[(job.id, job.attempt)] = run
        self.stats.claimed += 1
        run.task = loop.create_task(self._execute(run, pool))
        if self.config.job_timeout_ms is not None:
            run.timer = loop.call_later(
                self.config.job_timeout_ms / 1000, self._cancel, run, TIMEOUT
            )

    def _cancel(self, run: _Running, reason: str) -> None:
        run.job._cancel(reason)
        if run.task is not None and not run.task.done():
            run.task.cancel()

    async def _execute(self, run: _Running, pool: ThreadPoolExecutor) -> None:
        job = run.job
        outcome, error = "done", ""
        try:
            fn, is_async = self._routes.pick(job.name)
            if is_async:
                await fn(job)
            else:
                result = await asyncio.get_running_loop().run_in_executor(pool, fn, job)
                if inspect.isawaitable(result):
                    await result
        except (asyncio.CancelledError, Exception) as exc:
            outcome, error = self._failure(job, exc)
        finally:
            if run.timer is not None:
                run.timer.cancel()
        if job.cancel_reason == LEASE_LOST:
            outcome = "lost"
        self._record(run, outcome, error)

    def _failure(self, job: JobContext, exc: BaseException) -> tuple[str, str]:
        reason = job.cancel_reason
        if reason == TIMEOUT:
            self.stats.timed_out += 1
            ms = self.config.job_timeout_ms
            return "failed", f"TimeoutError: the handler ran longer than {ms} ms"
        if reason in (SHUTDOWN, LEASE_LOST) or isinstance(exc, asyncio.CancelledError):
            # told to stop (or the loop is going away): hand the job back, no failure
            return "release", ""
        if isinstance(exc, JobCancelled):
            return "failed", f"JobCancelled: {exc}"
        text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
        head = f"{type(exc).__name__}: {exc}"
        return "failed", (head + "\n\n" + text)[: self.config.error_max_chars]

    def _record(self, run: _Running, outcome: str, error: str) -> None:
        if not run.recorded:
            run.recorded = True
            self._outcomes.append((run.job, outcome, error))
            self._poke()

    async def _settle(self, aq: AsyncQueue) -> None:
        """Settle finished jobs: completions in one pipelined call, then the rest."""
        if not self._outcomes:
            return
        batch, self._outcomes = self._outcomes, []
        try:
            done = [(j.id, j.attempt) for j, o, _ in batch if o == "done"]
            if done:
                refused = await aq.complete_many(done)
                self.stats.completed += len(done) - len(refused)
                self.stats.stale += len(refused)
            back = [(j.id, j.attempt) for j, o, _ in batch if o == "release"]
            if back:
                refused = await aq.runner.drive(settle.release_many(aq.ctx, back))
                self.stats.released += len(back) - len(refused)
                self.stats.stale += len(refused)
            for job, outcome, error in batch:
                if outcome == "failed":
                    await self._fail(aq, job, error)
                elif outcome == "lost":
                    self.stats.lost += 1
        except _RECOVERABLE:
            # the server did not answer: the leases run out and the jobs are served
            # again (at least once); forget them here so the slots free up
            self._forget(batch)
            raise
        self._forget(batch)

    async def _fail(self, aq: AsyncQueue, job: JobContext, error: str) -> None:
        plan = settle.fail(aq.ctx, job.id, job.attempt, error, self.config.backoff, self._rng)
        try:
            verdict = await aq.runner.drive(plan)
        except (JobGone, StaleToken):
            self.stats.stale += 1
            return
        if verdict == "dead":
            self.stats.dead += 1
        else:
            self.stats.retried += 1

    def _forget(self, batch: list[tuple[JobContext, str, str]]) -> None:
        for job, _, _ in batch:
            self._running.pop((job.id, job.attempt), None)

    # ---- the beat and shutdown ------------------------------------------------------

    async def _beat_loop(self, aq: AsyncQueue) -> None:
        failures = 0
        while True:
            await asyncio.sleep(self.config.beat / 1000)
            try:
                await self._beat(aq)
                failures = 0
            except _RECOVERABLE as exc:
                self.stats.errors += 1
                failures += 1
                log.warning("worker %s beat: %r", self.queue_name, exc)

    async def _beat(self, aq: AsyncQueue) -> None:
        cfg = self.config
        held = {k: r for k, r in self._running.items() if not r.recorded}
        if held:
            lost = set(await aq.extend_locks(list(held), cfg.lease_ms, lock_ms=cfg.lock))
            for (job_id, _), run in held.items():
                if job_id in lost:
                    self._cancel(run, LEASE_LOST)
        if self._stop:
            return  # a stopping worker only keeps its own leases alive
        await aq.check_stalled(cfg.max_stalled, cfg.maintenance_budget)
        await aq.promote(cfg.maintenance_budget)
        if cfg.repeat_budget:
            await aq.runner.drive(repeat.fire_due(aq.ctx, cfg.repeat_budget))

    async def _wind_down(self, aq: AsyncQueue) -> None:
        """Stop claiming, let running jobs finish within the grace, release the rest."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.config.grace_ms / 1000
        while self._running and not self._force:
            await self._settle_quietly(aq)
            left = deadline - loop.time()
            if not self._running or left <= 0:
                break
            assert self._poke_fut is not None
            await asyncio.wait([self._poke_fut], timeout=left)
            if self._poke_fut.done():
                self._poke_fut = loop.create_future()
        pending = [r for r in self._running.values() if not r.recorded]
        for run in pending:
            self._cancel(run, SHUTDOWN)
        tasks = [r.task for r in pending if r.task is not None]
        if tasks:
            # an async handler that swallows the cancel gets one more second
            await asyncio.wait(tasks, timeout=1.0)
        for run in pending:
            self._record(run, "release", "")
        await self._settle_quietly(aq)

    async def _settle_quietly(self, aq: AsyncQueue) -> None:
        try:
            await self._settle(aq)
        except _RECOVERABLE as exc:
            self.stats.errors += 1
            log.warning("worker %s: settling at shutdown: %r", self.queue_name, exc)
