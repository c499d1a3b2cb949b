"""The worker runtime: run a handler for each job of a queue.

Usage::

    def handle(job):                       # or: async def handle(job)
        job.log(f"sending {job.data['to']}")
        ...

    Worker("emails", handle, url="redis://...", concurrency=20).run()

    # one process over several queues, the first with work served first
    Worker(["high", "default", "low"], handle, order="priority").run()

    # a handler that takes up to 100 jobs at once, each settled on its own
    Worker("rows", insert_rows, batch=Batch(size=100, wait_ms=500)).run()

:class:`Worker` is the stable surface (constructor, :meth:`~Worker.run`,
:meth:`~Worker.arun`, :meth:`~Worker.request_stop`, :meth:`~Worker.stop`); the loop
itself lives in :mod:`echomq.worker.engine`, several queues' coordination in
:mod:`echomq.worker.multi`, batches in :mod:`echomq.worker.batch`. See
``docs/worker.md`` for the config, the job context, retries, shutdown, events and
repeatables, and ``docs/worker-recipes.md`` for several queues and batches.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import signal
import threading
from collections.abc import Mapping, Sequence
from typing import Any

from ..errors import InvalidArgument
from ..keyspace import check_name
from ..native import choose
from ..observability.worker import worker_observer
from ..queue import AsyncQueue, Queue
from .batch import Batch, Batcher
from .beat import Beats
from .config import WorkerConfig
from .connections import async_queue_for, blocking_client
from .engine import Engine
from .multi import Coordinator, Order, SharedWait, check_order, close_quietly, per_queue
from .pipeline import Pipeline
from .routes import Handler, Routes
from .stats import WorkerStats
from .threads import HandlerThreads

__all__ = ["Batch", "Worker", "WorkerConfig", "WorkerStats"]

Source = str | Queue | AsyncQueue


class Worker:
    """Runs a handler for each job of one queue, or of several.

    Args:
        queue_or_name: a queue name, a :class:`~echomq.Queue` (its connection
            settings, serializer and ``max_attempts`` are reused) or an
            :class:`~echomq.AsyncQueue` (used as is, on the loop that runs the worker);
            or a list of them: one worker over several queues (see ``order``).
        handler: ``handler(job)``, plain or ``async def``; or a mapping of job name to
            handler, with ``"*"`` as the fallback. A plain handler runs on the worker's
            handler threads (:mod:`echomq.worker.threads`).
            Over several queues, a mapping whose keys are all queue names gives each
            queue its own handler (or job-name mapping). With ``batch``, the handler
            takes a list of jobs (see :class:`~echomq.worker.batch.Batch`).
        url: the server URL when ``queue_or_name`` is a name (default local).
        concurrency: shortcut for ``config.concurrency`` (default 10).
        lease_ms: shortcut for ``config.lease_ms`` (default 30000).
        config: every other setting (:class:`WorkerConfig`).
        metrics: a ``prometheus_client.CollectorRegistry`` to put the worker's metrics
            in (``True`` = the default registry); see ``docs/observability.md``.
        executor: ``auto``/``scripts``/``native`` for the queue the worker makes from a
            name (default ``EMQ_EXECUTOR`` or ``auto``) or from a sync ``Queue``
            (default: that queue's); an ``AsyncQueue`` keeps its own.
        order: over several queues, which queue's work goes first: ``"priority"``
            (default, RQ's rule: the first queue in the list with work) or ``"fair"``
            (the queues with work claim the free slots in turns: about an equal share
            each, none starved). ``concurrency`` is
            shared by all the queues; each keeps its own pause, limits and leases.
        batch: hand the handler lists of jobs claimed in one call
            (:class:`~echomq.worker.batch.Batch`); ``concurrency`` then counts batches.

    Raises:
        InvalidName, InvalidArgument: a bad queue name, handler or setting, no queue,
            or a queue named twice.
    """

    def __init__(
        self,
        queue_or_name: Source | Sequence[Source],
        handler: Handler | Mapping[str, Any],
        *,
        url: str | None = None,
        concurrency: int | None = None,
        lease_ms: int | None = None,
        config: WorkerConfig | None = None,
        metrics: Any = None,
        executor: str | None = None,
        order: Order = "priority",
        batch: Batch | None = None,
    ) -> None:
        cfg = config or WorkerConfig()
        shortcuts = {"concurrency": concurrency, "lease_ms": lease_ms}
        changes: dict[str, Any] = {k: v for k, v in shortcuts.items() if v is not None}
        self.config = dataclasses.replace(cfg, **changes) if changes else cfg
        if isinstance(queue_or_name, str | Queue | AsyncQueue):
            sources: list[Source] = [queue_or_name]
        else:
            sources = list(queue_or_name)
        if not sources:
            raise InvalidArgument("no queue given")
        names = [check_name(s) if isinstance(s, str) else s.name for s in sources]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise InvalidArgument(f"queue(s) named twice: {', '.join(twice)}")
        if batch is not None and not isinstance(batch, Batch):
            raise InvalidArgument(f"batch must be a Batch, got {batch!r}")
        self.order: Order = check_order(order)
        self.batch = batch
        #: The queues served, in the worker's order.
        self.queue_names = names
        self.queue_name = names[0]
        self._sources, self._url = sources, url
        self._executor = None if executor is None else choose(executor)
        self._engines = [
            self._engine_for(name, h, metrics) for name, h in zip(names, per_queue(handler, names))
        ]
        self._engine = self._engines[0]
        for engine in self._engines[1:]:
            engine.wid = self._engine.wid  # one worker: one id under every queue
        #: Set once the worker is connected and serving (for hosts and tests).
        self.ready = threading.Event()
        self._finished = threading.Event()
        self._started = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread = 0

    def _engine_for(self, name: str, handler: Any, metrics: Any) -> Engine:
        cfg = self.config
        observer = worker_observer(name, metrics, cfg.failure_log_level, cfg.log_tracebacks)
        # a batch handler takes a list: the per-job timing wrapper does not apply
        routes = Routes(handler if self.batch is not None else observer.wrap_handler(handler))
        engine = Engine(cfg, routes, name, observer)
        engine.queues = self.queue_names
        if len(self.queue_names) > 1:
            engine.shape["order"] = self.order
        if self.batch is not None:
            engine.batcher = Batcher(engine, self.batch)
            engine.shape["batch"] = self.batch.describe()
        return engine

    @property
    def stats(self) -> WorkerStats:
        """What the worker has done so far (claimed, completed, retried, dead, ...),
        over all its queues (:meth:`stats_of` gives one queue's)."""
        if len(self._engines) == 1:
            return self._engine.stats
        total = WorkerStats()
        for engine in self._engines:
            for f in dataclasses.fields(WorkerStats):
                setattr(total, f.name, getattr(total, f.name) + getattr(engine.stats, f.name))
        return total

    def stats_of(self, queue: str) -> WorkerStats:
        """What the worker has done on one of its queues.

        Raises:
            KeyError: not one of the worker's queues.
        """
        for engine in self._engines:
            if engine.name == queue:
                return engine.stats
        raise KeyError(queue)

    # ---- control ------------------------------------------------------------------

    def run(self) -> WorkerStats:
        """Serve until stopped (blocking). From the main thread, SIGINT/SIGTERM stop
        it gracefully; a second signal skips the rest of the grace period.

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
            VersionMismatch: the server speaks another keyspace version. A server
                not reachable at the start is waited for, as later in the run.
        """
        if self._started:
            raise RuntimeError("a Worker runs once; make a new one")
        self._started = True
        self._loop = asyncio.get_running_loop()
        self._thread = threading.get_ident()
        aqs, owned = self._async_queues()
        aq = aqs[0]
        blocker = blocking_client(aq)
        threads = self.config.pool_size
        if self.batch is not None and self.config.threads is None:
            threads = self.config.concurrency  # one thread per batch in flight
        pool = HandlerThreads(threads)
        wait = None
        try:
            if len(aqs) == 1:
                await self._engine.run(aq, blocker, pool, self.ready)
            else:
                wait = SharedWait(blocker, aq.client, self.config.beat / 1000)
                pipeline = Pipeline()
                coord = Coordinator(self._engines, self.order, wait, pipeline)
                beats = Beats(self._engines, self.config.beat / 1000)
                for engine in self._engines:
                    engine.beats = beats
                try:
                    await self._run_all(aqs, blocker, pool)
                finally:
                    await beats.close()
                    await coord.close()
                    await pipeline.close()
        finally:
            if wait is not None:
                await close_quietly(wait)
            pool.shutdown()
            if blocker is not aq.client:
                await blocker.aclose()
            for client in owned:
                await client.aclose()
            self._finished.set()
        return self.stats

    def _async_queues(self) -> tuple[list[AsyncQueue], list[Any]]:
        """An async queue per source, and the clients the worker made (it closes
        them). Queues given by name share the first one's client."""
        aqs: list[AsyncQueue] = []
        owned: list[Any] = []
        for source in self._sources:
            if isinstance(source, str) and aqs:
                first = aqs[0]
                aqs.append(
                    AsyncQueue(source, client=first.client, executor=first.ctx.executor.choice)
                )
                continue
            aq, made = async_queue_for(source, self._url, self._executor)
            aqs.append(aq)
            if made:
                owned.append(aq.client)
        return aqs, owned

    async def _run_all(self, aqs: list[AsyncQueue], blocker: Any, pool: HandlerThreads) -> None:
        """Run every queue's engine; the worker is ready when all are. One that fails
        (a keyspace version mismatch) stops the others, then raises."""
        ready = [threading.Event() for _ in aqs]
        tasks = [
            asyncio.ensure_future(e.run(q, blocker, pool, r))
            for e, q, r in zip(self._engines, aqs, ready)
        ]
        watcher = asyncio.ensure_future(self._all_ready(ready))
        try:
            done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
            failed = [t for t in done if not t.cancelled() and t.exception() is not None]
            if failed:
                self.request_stop()
            await asyncio.gather(*tasks, return_exceptions=True)
            error = failed[0].exception() if failed else None
            if error is not None:
                raise error
        finally:
            watcher.cancel()

    async def _all_ready(self, ready: list[threading.Event]) -> None:
        while not all(r.is_set() for r in ready):
            await asyncio.sleep(0.01)
        self.ready.set()

    def request_stop(self, *, force: bool = False) -> None:
        """Ask the worker to stop; returns at once (safe from any thread or signal).

        It stops claiming, lets running jobs finish for up to ``grace_ms`` (not at all
        with ``force``), then releases the rest back to the backlog.
        """
        for engine in self._engines:
            engine.force = engine.force or force
            engine.stop_requested = True
        loop = self._loop
        if loop is not None and not loop.is_closed():
            # the loop may close in between: then there is nothing left to wake
            for engine in self._engines:
                with contextlib.suppress(RuntimeError):
                    loop.call_soon_threadsafe(engine.nudge)

    def stop(self, timeout: float | None = None, *, force: bool = False) -> bool:
        """Request a stop from another thread and wait for the worker to finish.

        Args:
            timeout: the most seconds to wait (``None`` = until done).
            force: skip the grace period.

        Returns:
            ``True`` when the worker has finished (or never started).

        Raises:
            RuntimeError: called on the worker's own loop (use :meth:`request_stop`).
        """
        if self._loop is not None and threading.get_ident() == self._thread:
            raise RuntimeError("stop() would wait on its own loop; use request_stop()")
        self.request_stop(force=force)
        return not self._started or self._finished.wait(timeout)

    async def _run_with_signals(self) -> None:
        loop = asyncio.get_running_loop()
        installed: list[signal.Signals] = []
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                with contextlib.suppress(NotImplementedError, RuntimeError):
                    loop.add_signal_handler(
                        sig, lambda: self.request_stop(force=self._engine.stop_requested)
                    )
                    installed.append(sig)
        try:
            await self.arun()
        finally:
            for sig in installed:
                loop.remove_signal_handler(sig)
