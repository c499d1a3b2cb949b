"""The worker runtime: run a handler for each job of a queue.

Usage::

    def handle(job):                       # or: async def handle(job)
        job.log(f"sending {job.data['to']}")
        ...

    Worker("emails", handle, url="redis://...", concurrency=20).run()

:class:`Worker` is the stable surface (constructor, :meth:`~Worker.run`,
:meth:`~Worker.arun`, :meth:`~Worker.request_stop`, :meth:`~Worker.stop`); the loop
itself lives in :mod:`echomq.worker.engine`. See ``docs/worker.md`` for the config,
the job context, retries, shutdown, events and repeatables.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import signal
import threading
from collections.abc import Mapping
from typing import Any

from ..keyspace import check_name
from ..native import choose
from ..observability.worker import worker_observer
from ..queue import AsyncQueue, Queue
from .config import WorkerConfig
from .connections import async_queue_for, blocking_client
from .engine import Engine
from .routes import Handler, Routes
from .stats import WorkerStats
from .threads import HandlerThreads

__all__ = ["Worker", "WorkerConfig", "WorkerStats"]


class Worker:
    """Runs a handler for each job of one queue.

    Args:
        queue_or_name: a queue name, a :class:`~echomq.Queue` (its connection
            settings, serializer and ``max_attempts`` are reused) or an
            :class:`~echomq.AsyncQueue` (used as is, on the loop that runs the worker).
        handler: ``handler(job)``, plain or ``async def``; or a mapping of job name to
            handler, with ``"*"`` as the fallback. A plain handler runs on the worker's
            handler threads (:mod:`echomq.worker.threads`).
        url: the server URL when ``queue_or_name`` is a name (default local).
        concurrency: shortcut for ``config.concurrency`` (default 10).
        lease_ms: shortcut for ``config.lease_ms`` (default 30000).
        config: every other setting (:class:`WorkerConfig`).
        metrics: a ``prometheus_client.CollectorRegistry`` to put the worker's metrics
            in (``True`` = the default registry); see ``docs/observability.md``.
        executor: ``auto``/``scripts``/``native`` for the queue the worker makes from a
            name (default ``EMQ_EXECUTOR`` or ``auto``) or from a sync ``Queue``
            (default: that queue's); an ``AsyncQueue`` keeps its own.

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
        metrics: Any = None,
        executor: str | None = None,
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
        self._executor = None if executor is None else choose(executor)
        observer = worker_observer(
            self.queue_name, metrics, self.config.failure_log_level, self.config.log_tracebacks
        )
        routes = Routes(observer.wrap_handler(handler))
        self._engine = Engine(self.config, routes, self.queue_name, observer)
        #: Set once the worker is connected and serving (for hosts and tests).
        self.ready = threading.Event()
        self._finished = threading.Event()
        self._started = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread = 0

    @property
    def stats(self) -> WorkerStats:
        """What the worker has done so far (claimed, completed, retried, dead, ...)."""
        return self._engine.stats

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
        aq, owned = async_queue_for(self._source, self._url, self._executor)
        blocker = blocking_client(aq)
        pool = HandlerThreads(self.config.pool_size)
        try:
            await self._engine.run(aq, blocker, pool, self.ready)
        finally:
            pool.shutdown()
            if blocker is not aq.client:
                await blocker.aclose()
            if owned:
                await aq.client.aclose()
            self._finished.set()
        return self.stats

    def request_stop(self, *, force: bool = False) -> None:
        """Ask the worker to stop; returns at once (safe from any thread or signal).

        It stops claiming, lets running jobs finish for up to ``grace_ms`` (not at all
        with ``force``), then releases the rest back to the backlog.
        """
        engine = self._engine
        engine.force = engine.force or force
        engine.stop_requested = True
        loop = self._loop
        if loop is not None and not loop.is_closed():
            # the loop may close in between: then there is nothing left to wake
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
