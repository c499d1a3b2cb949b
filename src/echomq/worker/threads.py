"""The threads that run plain (``def``) handlers, handing jobs over in batches.

A :class:`~concurrent.futures.ThreadPoolExecutor` behind ``run_in_executor`` cost a
plain handler a thread wake-up and a ``call_soon_threadsafe`` (a self-pipe write, an
``epoll`` wake-up of the loop, a GIL hand-over) for every job. The finished jobs then
reached the serve loop one or two at a time, so its completions and claims went out
in small batches: more round trips and more server calls per job. Measured at
concurrency 10 (``bench/plain_handlers.py``, ``docs/performance.md``), a plain handler
cost about twice the worker CPU of an ``async def`` one.

:class:`HandlerThreads` keeps the contract (at most ``size`` handlers at once, each on
a thread of its own) and hands over in batches:

- the serve loop hands a claimed batch over as a list of :class:`Call` (one lock, one
  thread woken, at the end of the loop's step) and gets each back through the call's
  ``then`` on the loop: no asyncio future or task per job (:meth:`~HandlerThreads.submit`
  still gives a future, for a batch handler's one call);
- a thread that finishes a job takes the next one queued without sleeping and without
  a lock (``deque.popleft`` is atomic), so short handlers run back to back on one
  thread instead of waking a thread each (and fighting over the GIL at every system
  call);
- the loop looks at the queue every :data:`START_S` while jobs are queued, and wakes
  a thread for each job queued longer than that: jobs queued behind a handler that
  blocks (I/O, ``sleep``) start within about that time, each on a thread of its own;
- finished calls go back to the loop in one hand-over when a thread finds the queue
  empty, as the last thing before it blocks (so the loop it wakes finds the GIL free);
  the loop also looks every :data:`COLLECT_S` while jobs are out and takes what
  finished if it was already there at its last look (a result kept behind a handler
  that blocks its thread), so no finished job waits long behind a long one, and a
  batch of short handlers is not taken in halves (which made the loop claim and write
  while the thread still ran handlers: the two then passed the GIL back and forth at
  every system call);
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

#: How often the loop looks for finished results kept behind a long handler (seconds):
#: such a result waits between one and two of these.
COLLECT_S = 0.005
#: How often the loop looks at the queued jobs while any are queued (seconds), and how
#: long the oldest may have waited before more threads are woken for them: about the
#: most a job waits behind a handler that blocks. Longer than a batch of short handlers
#: takes on one thread (measured: at 1 ms, looks in the middle of such batches woke
#: threads that then fought over the GIL, and the plain path cost twice the async
#: one's CPU; at 3-5 ms, 1.3-1.4x); the GIL's own switch interval is 5 ms.
START_S = 0.005


class Call:
    """One handler call handed to the threads: ``fn(arg)`` and what came of it.

    Args:
        fn: the handler.
        arg: its argument.
        then: called on the loop with this call once it finished (or was skipped).
        owner: the caller's own record of the job (the engine's run), kept here.

    Attributes:
        value: what ``fn`` returned (``None`` while not run).
        error: what it raised, or ``None``.
        dropped: set on the loop when the caller gave up on the job (a timeout, a
            shutdown, a lost lease): a thread that has not started it skips it.
    """

    __slots__ = ("arg", "dropped", "error", "fn", "owner", "queued", "then", "value")

    def __init__(
        self,
        fn: Callable[[Any], Any],
        arg: Any,
        then: Callable[[Call], None],
        owner: Any = None,
    ) -> None:
        self.fn, self.arg, self.then, self.owner = fn, arg, then, owner
        self.value: Any = None
        self.error: BaseException | None = None
        self.dropped = False
        self.queued = 0.0


class HandlerThreads:
    """At most ``size`` threads running plain handlers for one event loop.

    Args:
        size: the most handlers running at once (``WorkerConfig.pool_size``).
        name: the threads' name prefix.
    """

    def __init__(self, size: int, name: str = "emq-handler") -> None:
        self.size, self.name = size, name
        self._lock = threading.Lock()  # guards the parked threads, the counts, the flag
        self._jobs: collections.deque[Call] = collections.deque()
        self._parked: list[threading.Lock] = []  # idle threads, each blocked on its lock
        self._waking = 0  # threads woken (or started) that have not looked at the jobs yet
        self._started = 0
        self._closed = False
        self._hand_over_pending = False
        self._finished: collections.deque[Call] = collections.deque()  # not yet given back
        # on the loop's thread only
        self._loop: asyncio.AbstractEventLoop | None = None
        self._out = 0  # handed over, not yet given back
        self._collector: asyncio.TimerHandle | None = None
        self._seen: Call | None = None  # the oldest finished call at the last look
        self._wake_soon = False  # a wake-up for queued calls is due this step

    def start(self, calls: list[Call]) -> None:
        """Queue ``calls`` for the threads; loop thread only. Each call's ``then``
        runs on the loop once it finished (its ``value`` or ``error`` set), or was
        skipped (``dropped``, or :meth:`shutdown` came first: then with nothing set).

        Raises:
            RuntimeError: called after :meth:`shutdown`.
        """
        loop = self._loop = self._loop or asyncio.get_running_loop()
        now = time.monotonic()
        for call in calls:
            call.queued = now
        with self._lock:
            if self._closed:
                raise RuntimeError("the handler threads are shut down")
            self._jobs.extend(calls)
        if not self._wake_soon:
            # woken at the end of this step of the loop, just before it waits: a
            # thread woken now would find the GIL held and sleep on it once more
            self._wake_soon = True
            loop.call_soon(self._wake_queued)
        self._out += len(calls)
        if self._collector is None:
            self._collector = loop.call_later(START_S, self._collect)

    def submit(self, fn: Callable[[Any], Any], arg: Any) -> asyncio.Future[Any]:
        """Queue ``fn(arg)`` for a thread; loop thread only.

        Returns:
            A future of the loop that resolves to ``fn``'s value or error. Cancelling
            it does not stop the handler (a thread cannot be interrupted): its thread
            stays busy until ``fn`` returns, and the value is dropped; a call not
            started yet never starts.

        Raises:
            RuntimeError: called after :meth:`shutdown`.
        """
        loop = self._loop or asyncio.get_running_loop()
        fut: asyncio.Future[Any] = loop.create_future()
        # a cancelled future's call must not start: checked by the thread as it takes
        # it (a done callback would set ``dropped`` only at the loop's next step)
        self.start([Call(lambda a: None if fut.cancelled() else fn(a), arg, _to_future, fut)])
        return fut

    def shutdown(self) -> None:
        """Stop the threads once they finish what they run; calls still queued are
        dropped (a future of :meth:`submit` cancelled, a ``then`` called with nothing
        set). Returns at once."""
        with self._lock:
            self._closed = True
            dropped = list(self._jobs)
            self._jobs.clear()
            parked, self._parked = self._parked, []
            self._waking += len(parked)  # each looks at the jobs once more, then ends
        self._out -= len(dropped)
        if self._collector is not None:
            self._collector.cancel()
            self._collector = None
        for parker in parked:
            parker.release()
        for call in dropped:
            call.dropped = True
            if isinstance(call.owner, asyncio.Future):
                call.owner.cancel()
            else:
                call.then(call)

    # ---- the threads -----------------------------------------------------------------

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

    def _wake_queued(self) -> None:
        """Make sure a thread is on its way to the queued calls (on the loop)."""
        self._wake_soon = False
        with self._lock:
            if self._jobs and not self._waking and not self._closed:
                self._wake()

    def _work(self) -> None:
        parker = threading.Lock()
        parker.acquire()
        lock, jobs, finished = self._lock, self._jobs, self._finished
        popleft, keep = jobs.popleft, finished.append
        with lock:
            self._waking -= 1  # started: looking at the jobs now
            call = popleft() if jobs else None
        while True:
            while call is not None:
                if not call.dropped:  # else settled already: its handler must not run
                    try:
                        call.value = call.fn(call.arg)
                    except BaseException as exc:  # given to the loop with the call
                        call.error = exc
                keep(call)
                try:
                    call = popleft()  # more queued: run it, keep the result
                except IndexError:
                    call = None
            with lock:  # none left: look again under the lock, else park
                call = popleft() if jobs else None
                if call is None:
                    closed = self._closed
                    if not closed:
                        self._parked.append(parker)
                    hand_over = bool(finished) and not self._hand_over_pending
                    self._hand_over_pending |= hand_over
            if call is not None:
                continue
            # the hand-over last, just before blocking: the loop it wakes then finds
            # the GIL free instead of sleeping on it once more
            if hand_over:
                self._hand_over()
            if closed:
                return
            parker.acquire()  # released by _wake or shutdown (counted in _waking)
            with lock:
                self._waking -= 1  # woken: looking at the jobs now
                call = popleft() if jobs else None

    def _hand_over(self) -> None:
        loop = self._loop
        assert loop is not None
        # the loop may be closed by now: then nobody waits for the results
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(self._take_finished)

    # ---- on the loop -------------------------------------------------------------------

    def _take_finished(self) -> None:
        with self._lock:
            self._hand_over_pending = False
        self._give_back()

    def _collect(self) -> None:
        """The loop's look: take the results kept behind a long handler; wake a
        thread for each job queued longer than :data:`START_S` (its thread is held by
        a handler that blocks)."""
        self._collector = None
        finished = self._finished
        if finished and finished[0] is self._seen:
            self._give_back()  # already there at the last look: its thread is held
        self._seen = finished[0] if finished else None
        if self._closed or self._loop is None:
            return
        with self._lock:
            queued = len(self._jobs)
            if queued and time.monotonic() - self._jobs[0].queued >= START_S:
                for _ in range(queued - self._waking):
                    if not self._wake():
                        break
            # look again soon only while a queued job could get a thread of its own
            soon = queued and (self._parked or self._started < self.size)
        if soon:
            self._collector = self._loop.call_later(START_S, self._collect)
        elif self._out > 0:
            self._collector = self._loop.call_later(COLLECT_S, self._collect)

    def _give_back(self) -> None:
        """Call ``then`` of every call finished so far."""
        finished = self._finished
        self._seen = None
        while finished:
            call = finished.popleft()
            self._out -= 1
            call.then(call)


def _to_future(call: Call) -> None:
    """A :meth:`HandlerThreads.submit` call's ``then``: resolve its future."""
    fut: asyncio.Future[Any] = call.owner
    if fut.done():
        return  # cancelled (a timeout, a shutdown)
    error = call.error
    if isinstance(error, StopIteration):
        # a future cannot carry StopIteration (it ends a coroutine)
        fut.set_exception(RuntimeError(f"the handler raised {error!r}"))
    elif error is not None:
        fut.set_exception(error)
    else:
        fut.set_result(call.value)
