"""The threads that run plain (``def``) handlers, handing jobs over in batches.

A :class:`~concurrent.futures.ThreadPoolExecutor` behind ``run_in_executor`` cost a
plain handler a thread wake-up and a ``call_soon_threadsafe`` (a self-pipe write, an
``epoll`` wake-up of the loop, a GIL hand-over) for every job. The finished jobs then
reached the serve loop one or two at a time, so its completions and claims went out
in small batches: more round trips and more server calls per job. Measured at
concurrency 10 (``bench/plain_handlers.py``, ``docs/performance.md``), a plain handler
cost about twice the worker CPU of an ``async def`` one.

:class:`HandlerThreads` keeps the contract (at most ``size`` handlers at once, each on
a thread of its own; the loop awaits one future per job) and hands over in batches:

- a batch of jobs wakes one thread; a thread that finishes a job takes the next one
  queued without sleeping, so short handlers run back to back on one thread instead
  of waking a thread each (and fighting over the GIL at every system call);
- the loop looks at the queue every :data:`START_S` while jobs are queued, and wakes
  a thread for each job queued longer than that: jobs queued behind a handler that
  blocks (I/O, ``sleep``) start within about that time, each on a thread of its own;
- finished results go back to the loop in one hand-over when a thread finds the
  queue empty; the loop also collects them every :data:`COLLECT_S` while jobs are
  out, so no finished job waits behind a long one;
- threads start on demand, up to ``size`` (an ``async def``-only worker starts none).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import threading
import time
from collections.abc import Callable
from typing import Any

#: How often the loop collects finished results while jobs are out (seconds): the
#: most a finished job waits behind a long handler that its thread took next.
COLLECT_S = 0.005
#: How often the loop looks at the queued jobs while any are queued (seconds), and how
#: long the oldest may have waited before more threads are woken for them: about the
#: most a job waits behind a handler that blocks. Longer than a batch of short handlers
#: takes on one thread (measured: at 1 ms, looks in the middle of such batches woke
#: threads that then fought over the GIL, and the plain path cost twice the async
#: one's CPU; at 3-5 ms, 1.3-1.4x); the GIL's own switch interval is 5 ms.
START_S = 0.005

#: A queued job: the handler, its argument, the future the loop awaits, when queued.
_Item = tuple[Callable[[Any], Any], Any, "asyncio.Future[Any]", float]


class HandlerThreads:
    """At most ``size`` threads running plain handlers for one event loop.

    Args:
        size: the most handlers running at once (``WorkerConfig.pool_size``).
        name: the threads' name prefix.
    """

    def __init__(self, size: int, name: str = "emq-handler") -> None:
        self.size, self.name = size, name
        self._lock = threading.Lock()  # guards the jobs, the parked threads, the counts
        self._jobs: collections.deque[_Item] = collections.deque()
        self._parked: list[threading.Lock] = []  # idle threads, each blocked on its lock
        self._waking = 0  # threads woken (or started) that have not looked at the jobs yet
        self._started = 0
        self._closed = False
        self._hand_over_pending = False
        # (future, value, error) of finished jobs, not yet given to the loop
        self._finished: collections.deque[tuple[asyncio.Future[Any], Any, Any]] = (
            collections.deque()
        )
        # on the loop's thread only
        self._loop: asyncio.AbstractEventLoop | None = None
        self._out = 0  # submitted, not yet collected
        self._collector: asyncio.TimerHandle | None = None

    def submit(self, fn: Callable[[Any], Any], arg: Any) -> asyncio.Future[Any]:
        """Queue ``fn(arg)`` for a thread; loop thread only.

        Returns:
            A future of the loop that resolves to ``fn``'s value or error. Cancelling
            it does not stop the handler (a thread cannot be interrupted): its thread
            stays busy until ``fn`` returns, and the value is dropped.

        Raises:
            RuntimeError: called after :meth:`shutdown`.
        """
        loop = self._loop = self._loop or asyncio.get_running_loop()
        fut: asyncio.Future[Any] = loop.create_future()
        with self._lock:
            if self._closed:
                raise RuntimeError("the handler threads are shut down")
            self._jobs.append((fn, arg, fut, time.monotonic()))
            self._wake_one()
        self._out += 1
        if self._collector is None:
            self._collector = loop.call_later(START_S, self._collect)
        return fut

    def shutdown(self) -> None:
        """Stop the threads once they finish what they run; jobs still queued are
        dropped (their futures cancelled). Returns at once."""
        with self._lock:
            self._closed = True
            dropped = list(self._jobs)
            self._jobs.clear()
            parked, self._parked = self._parked, []
            self._waking += len(parked)  # each looks at the jobs once more, then ends
        for _, _, fut, _ in dropped:
            fut.cancel()
        self._out -= len(dropped)
        if self._collector is not None:
            self._collector.cancel()
            self._collector = None
        for parker in parked:
            parker.release()

    # ---- the threads -----------------------------------------------------------------

    def _wake_one(self) -> None:
        """Make sure a thread is on its way to the queued jobs (under ``_lock``)."""
        if not self._waking:
            self._wake()

    def _wake(self) -> bool:
        """Wake a parked thread, or start one; False when every thread is busy
        (under ``_lock``)."""
        if self._parked:
            self._waking += 1
            self._parked.pop().release()
            return True
        if self._started < self.size:
            self._waking += 1
            self._started += 1
            name = f"{self.name}_{self._started}"
            threading.Thread(target=self._work, name=name, daemon=False).start()
            return True
        return False

    def _work(self) -> None:
        parker = threading.Lock()
        parker.acquire()
        lock, jobs, finished = self._lock, self._jobs, self._finished
        while True:
            with lock:
                self._waking -= 1  # woken (or started): looking at the jobs now
                item = jobs.popleft() if jobs else None
                if item is None:
                    if self._closed:
                        return
                    self._parked.append(parker)
            if item is None:
                parker.acquire()  # released by _wake_one or shutdown (counted there)
                continue
            while item is not None:
                fn, arg, fut, _ = item
                if fut.cancelled():
                    # its task was cancelled before a thread took it (a timeout, a
                    # shutdown that released the job): the handler must not run
                    value, error = None, None
                else:
                    try:
                        value, error = fn(arg), None
                    except BaseException as exc:  # given to the loop, raised in the task
                        value, error = None, exc
                finished.append((fut, value, error))
                with lock:
                    # more queued: run it and keep the result (the next hand-over, or
                    # the loop's collection, takes it); else hand over what is done
                    item = jobs.popleft() if jobs else None
                    if item is None and not self._hand_over_pending:
                        self._hand_over_pending = True
                        hand_over = True
                    else:
                        hand_over = False
                    self._waking += item is None  # counted as woken: it looks again
                if hand_over:
                    self._hand_over()

    def _hand_over(self) -> None:
        loop = self._loop
        assert loop is not None
        # the loop may be closed by now: then nobody waits for the value
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(self._take_finished)

    # ---- on the loop -------------------------------------------------------------------

    def _take_finished(self) -> None:
        with self._lock:
            self._hand_over_pending = False
        self._resolve()

    def _collect(self) -> None:
        """The loop's look: resolve what finished; wake a thread for each job queued
        longer than :data:`START_S` (its thread is held by a handler that blocks)."""
        self._collector = None
        self._resolve()
        if self._closed or self._loop is None:
            return
        with self._lock:
            queued = len(self._jobs)
            if queued and time.monotonic() - self._jobs[0][3] >= START_S:
                for _ in range(queued - self._waking):
                    if not self._wake():
                        break
            # look again soon only while a queued job could get a thread of its own
            soon = queued and (self._parked or self._started < self.size)
        if soon:
            self._collector = self._loop.call_later(START_S, self._collect)
        elif self._out > 0:
            self._collector = self._loop.call_later(COLLECT_S, self._collect)

    def _resolve(self) -> None:
        """Resolve the futures of every job finished so far."""
        finished = self._finished
        while finished:
            fut, value, error = finished.popleft()
            self._out -= 1
            if fut.done():
                continue  # its task was cancelled (a timeout, a shutdown)
            if isinstance(error, StopIteration):
                # a future cannot carry StopIteration (it ends a coroutine)
                fut.set_exception(RuntimeError(f"the handler raised {error!r}"))
            elif error is not None:
                fut.set_exception(error)
            else:
                fut.set_result(value)
