"""The worker's engine: the serve loop, the handler tasks, settling, the beat and
the wind-down of one :class:`~echomq.worker.Worker` run.

The serve loop completes the jobs that finished and claims up to the free slots in
two round trips (the completions pipelined with the pause-gate read, then one claim
script call), and starts a task per ``async def`` handler's job; a plain handler's
jobs go to its threads as one list (:mod:`echomq.worker.threads`). A batch worker of
two batches or more keeps two such round trips in flight (:mod:`echomq.worker.serving`).
When nothing is ready it blocks on the queue's wake list (``BLPOP`` on a connection
of its own, see
:class:`~echomq.worker.waker.Waker`) instead of polling. The beat
(:mod:`echomq.worker.beat`, one loop for every queue of the worker) extends every
in-flight lease in one ``extend_locks`` call, in the same round trip as the worker's
record in the registry (:mod:`echomq.registry`), the read of the cancel requests for
the jobs it holds, the stalled check, promote and the due repeatables, bounded, so
scheduled and crashed work moves without any other process.
A job an operator cancelled (``cancel_job``) is cancelled in its handler's context;
if the handler then stops, the job goes dead (:func:`~echomq.worker.plans.fail_cancelled`).

Every job claimed ends in exactly one counter of :class:`WorkerStats`. An outcome
(a completion, a failure, a release) stays queued here until the server answered it:
after an error it is sent again, and a "gone" answer to a completion sent again is
read as the completion that landed before its reply was lost
(:mod:`echomq.worker.outcomes`).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import random
import secrets
import threading
from collections.abc import Awaitable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .. import checks, lifecycle, registry
from ..errors import (
    InvalidArgument,
    RateLimited,
    ServerUnavailable,
)
from ..lifecycle import Claimed
from ..observability.worker import WorkerObserver
from ..queue import AsyncQueue
from . import outcomes, serving
from .beat import Beats
from .config import WorkerConfig
from .job import CANCELLED, LEASE_LOST, SHUTDOWN, TIMEOUT, JobContext
from .limits import Throttle
from .outage import Outage
from .pipeline import Pipeline
from .routes import Handler, Routes
from .stats import WorkerStats
from .threads import Call, HandlerThreads
from .waker import Waker

if TYPE_CHECKING:
    from .batch import Batcher
    from .multi import Coordinator

log = logging.getLogger("echomq.worker")

_RECOVERABLE = outcomes.RECOVERABLE


@dataclass(slots=True)
class _Running:
    job: JobContext
    task: asyncio.Task[None] | None = None
    timer: asyncio.TimerHandle | None = None
    value: Any = None  # the handler's return value (sent with the completion)
    recorded: bool = False
    is_async: bool = False
    call: Call | None = None  # a plain handler's call, while the threads have it


class Engine:
    """One run of a worker. The flags are written from any thread; everything else
    lives on the loop that calls :meth:`run`."""

    def __init__(
        self, config: WorkerConfig, routes: Routes, name: str, observer: WorkerObserver
    ) -> None:
        self.config, self.routes, self.name = config, routes, name
        self.observer = observer
        self.stats = WorkerStats()
        self.stop_requested = self.force = False
        self._more = True  # whether the backlog may hold more than the last claim took
        self._thread = 0
        self._running: dict[tuple[str, int], _Running] = {}
        # (id, token) of the jobs finished, not yet taken for completion
        self._done: list[tuple[str, int]] = []
        self._completing: list[tuple[str, int]] = []  # completions the server has not answered
        # serialized handler results of finished jobs, sent with their completions
        self._results: dict[tuple[str, int], str] = {}
        self._relay_task: asyncio.Task[None] | None = None  # the flow relay's (outcomes)
        self._relay_again = False
        self.flow_swept: dict[str, float] = {}  # queue -> its last flow sweep (monotonic s)
        #: The queue served (set by :meth:`run`).
        self.aq: AsyncQueue | None = None
        self._other: list[tuple[JobContext, str, str]] = []  # other outcomes, unanswered
        self._nudged: asyncio.Future[None] | None = None
        #: Whether the beat keeps this engine's leases and record (:mod:`.beat`).
        self.beating = False
        #: The beat loop: the worker's shared one over several queues, else the
        #: engine's own (made by :meth:`run`).
        self.beats: Beats | None = None
        #: Set by a worker over several queues: the round trips its engines share.
        self.pipeline: Pipeline | None = None
        self._waker: Waker | None = None
        self._rng = random.Random()
        self._outage = Outage(log, name)
        #: The queue's flow control as the last claim answered it (worker/limits.py).
        self.throttle = Throttle()
        self._limited: dict[tuple[str, int], RateLimited] = {}  # handlers' RateLimited
        #: This run's id in the queue's worker registry (random, hex).
        self.wid = secrets.token_hex(8)
        #: The queues one worker serves, as its registry record shows them.
        self.queues = [name]
        #: More of the registry record: ``order`` and ``batch`` when set.
        self.shape: dict[str, str] = {}
        #: Set by a worker over several queues (:mod:`echomq.worker.multi`): the
        #: shared slots, the claim order and the one idle wait.
        self.coord: Coordinator | None = None
        #: Set by a batch worker (:mod:`echomq.worker.batch`): jobs go to the
        #: handler in lists.
        self.batcher: Batcher | None = None
        self.wake_key: str | None = None  # the queue's wake list (set by run)
        self.claiming = 0  # slots asked for by the claim in flight (the coordinator counts them)

    async def run(
        self, aq: AsyncQueue, blocker: Any, pool: HandlerThreads, ready: threading.Event
    ) -> None:
        """Check the keyspace version, serve until a stop is requested, then wind down."""
        loop = asyncio.get_running_loop()
        self.aq = aq
        self._thread = threading.get_ident()
        self._nudged = loop.create_future()
        if not await self._fence(aq):
            return  # stopped before the server ever answered
        self.wake_key = aq.keys.wake
        self._waker = Waker(blocker, aq.keys.wake, lifecycle.claim_gate(aq.ctx).args)
        own = self.beats is None
        beats = self.beats = self.beats or Beats([self], self.config.beat / 1000)
        self.beating = True
        beats.start()
        try:
            ready.set()
            await serving.serve(self, aq, pool)
            await self._wind_down(aq)
        finally:
            if own:
                self.beating = False
                await beats.close()
            else:
                await beats.leave(self)
            if self._waker is not None:
                with contextlib.suppress(*_RECOVERABLE):
                    await self._waker.close()  # the connection its waits kept
            # a flow relay in flight finishes (bounded; what it leaves, a beat relays)
            await asyncio.gather(*outcomes.relaying(self), return_exceptions=True)
            # out of the registry at once (a crashed worker drops out with its ttl)
            with contextlib.suppress(*_RECOVERABLE):
                await aq.runner.drive(registry.leave(aq.ctx, self.wid))

    def nudge(self) -> None:
        """Wake the serve loop (a job finished, a stop was requested). Loop thread only."""
        if self._nudged is not None and not self._nudged.done():
            self._nudged.set_result(None)

    async def _pause(self, timeout: float | None) -> None:
        """Wait for a nudge or ``timeout`` seconds."""
        assert self._nudged is not None
        await asyncio.wait([self._nudged], timeout=timeout)
        if self._nudged.done():
            self._nudged = asyncio.get_running_loop().create_future()

    async def _fence(self, aq: AsyncQueue) -> bool:
        """The version check (``{emq}:version``), tried again while the server is
        unreachable, with the serve loop's pause and outage lines; a version mismatch
        still raises. False when a stop came first."""
        failures = 0
        while not self.stop_requested:
            try:
                await aq.runner.fence()
            except ServerUnavailable as exc:
                self.stats.errors += 1
                self._outage.failed(exc, "the version check")
                await self._pause(serving.error_pause(failures))
                failures = min(failures + 1, 10)
            else:
                self._outage.ok("the version check")
                return True
        return False

    def free(self) -> int:
        """The job slots this engine may fill now (the coordinator's share when the
        worker serves several queues)."""
        if self.coord is not None:
            return self.coord.free_for(self)
        return self.capacity - len(self._running) - self.claiming

    @property
    def capacity(self) -> int:
        """The most jobs in hand: ``concurrency``, or ``concurrency`` batches."""
        size = self.batcher.batch.size if self.batcher is not None else 1
        return self.config.concurrency * size

    @property
    def holding(self) -> int:
        """The slots in use: jobs in hand and the claim in flight."""
        return len(self._running) + self.claiming

    @property
    def more(self) -> bool:
        """Whether the queue may hold work the last claim did not take."""
        return self._more

    def woke(self) -> None:
        """The shared wait saw this queue's wake token (or timed out): claim next."""
        self._more = True

    def want(self, free: int) -> int:
        """How many jobs to claim with ``free`` slots (a batch worker fills a batch
        in one call)."""
        if self.batcher is not None:
            return min(free, self.batcher.wanted())
        return min(free, self.config.claim_batch)

    def _claimed(self, aq: AsyncQueue, got: list[Claimed], want: int, pool: HandlerThreads) -> None:
        loop = asyncio.get_running_loop()
        if want:
            # held back by the queue's limits: no claim until the wait it answered
            held = self.throttle.note(got, loop.time())
            self._more = len(got) == want and not held
        self.stats.claimed += len(got)
        running, thread = self._running, self._thread
        if self.batcher is not None:  # the batcher starts them, in lists
            runs = [_Running(JobContext(claimed, aq, loop, thread)) for claimed in got]
            for run in runs:
                running[(run.job.id, run.job.attempt)] = run
            self.batcher.add(runs, pool)
            return
        timeout = self.config.job_timeout_ms
        find, only = self.routes.find, self.routes.only
        finish = functools.partial(outcomes.finish_plain, self)
        calls: list[Call] = []
        for claimed in got:
            run = _Running(JobContext(claimed, aq, loop, thread))
            running[(claimed.id, claimed.token)] = run
            route = only or find(claimed.name)
            if route is not None and not route[1]:
                # a plain handler: straight to the threads, settled by finish_plain
                # on the loop (no task or future per job: see threads.py)
                run.call = Call(route[0], run.job, finish, run)
                calls.append(run.call)
            else:
                # the route found here goes along: no second look-up in the task
                run.task = loop.create_task(self._execute(run, route))
            if timeout is not None:
                run.timer = loop.call_later(timeout / 1000, self._cancel, run, TIMEOUT)
        if calls:
            pool.start(calls)

    def _cancel(self, run: _Running, reason: str) -> None:
        run.job._cancel(reason)
        if self.batcher is not None and reason in (CANCELLED, LEASE_LOST):
            return  # one member's: the batch's call runs on for the others (a flag only)
        # an operator's cancel is cooperative: a plain handler's thread sees the flag
        # (the worker does not stop waiting for it); an async one is also cancelled
        # at its next await, as for the other reasons
        if reason == CANCELLED and not run.is_async:
            return
        if run.task is not None:
            if not run.task.done():
                run.task.cancel()
        elif run.call is not None and not run.recorded:
            # a plain handler's job: settled now, as a cancelled task would be (the
            # thread cannot be interrupted: a call not started yet never starts, a
            # running one's value is dropped when it comes back)
            run.call.dropped = True
            outcomes.settle_plain(self, run, asyncio.CancelledError())

    async def _execute(
        self,
        run: _Running,
        route: tuple[Handler, bool] | None = None,
        value: Awaitable[Any] | None = None,
    ) -> None:
        """An ``async def`` handler's job (``route``: its handler as the claim found it;
        ``None``: one with no handler, which fails), or with ``value``, a plain
        handler's that returned an awaitable: awaited here."""
        job = run.job
        outcome, error = "done", ""
        try:
            if value is None:
                fn, is_async = route or self.routes.pick(job.name)
                run.is_async = is_async
                run.value = await fn(job)
            else:
                run.value = await value
            job.raise_marked()
        except (asyncio.CancelledError, Exception) as exc:
            outcome, error = outcomes.classify(self, job, exc)
        finally:
            if run.timer is not None:
                run.timer.cancel()
        self._record(run, "lost" if job.cancel_reason == LEASE_LOST else outcome, error)

    def failure(self, job: JobContext, exc: BaseException) -> tuple[str, str]:
        """The outcome and error text of a job whose handler raised ``exc``."""
        return outcomes.classify(self, job, exc)

    def cancel(self, run: _Running, reason: str) -> None:
        """Cancel a job in hand for ``reason`` (see :data:`~echomq.worker.job.TIMEOUT`)."""
        self._cancel(run, reason)

    def record(self, run: _Running, outcome: str, error: str) -> None:
        """Queue a job's outcome for the serve loop to send."""
        self._record(run, outcome, error)

    def record_done(self, runs: list[_Running]) -> None:
        """Queue the completions of jobs done with no result to keep (a batch's
        members), with one nudge of the serve loop."""
        done = self._done
        for run in runs:
            if not run.recorded:
                run.recorded = True
                done.append((run.job.id, run.job.attempt))
        if runs:
            self.nudge()

    def _record(self, run: _Running, outcome: str, error: str) -> None:
        if run.recorded:
            return
        run.recorded = True
        job = run.job
        if outcome == "done":
            self._done.append((job.id, job.attempt))
            if run.value is not None:
                self._result_of(run)
        else:
            self._other.append((job, outcome, error))
        nudged = self._nudged  # nudge(), inline: once per job
        if nudged is not None and not nudged.done():
            nudged.set_result(None)

    def _result_of(self, run: _Running) -> None:
        """Serialize a handler's return value for its completion (a kept job stores
        it; see ``Queue.result``). A value the serializer refuses is logged and left
        out: the job did its work, so it still completes."""
        assert self.aq is not None
        try:
            text = checks.payload(self.aq.ctx.serializer, run.value)
        except InvalidArgument as exc:
            log.warning("job %s: its result is not kept: %s", run.job.id, exc)
            return
        self._results[(run.job.id, run.job.attempt)] = text

    # ---- sending outcomes -----------------------------------------------------------

    def _take_done(self) -> None:
        """Queue the finished jobs' completions; they stay queued (and are sent again
        after an error) until the server answers them."""
        if not self._done:
            return
        done, self._done = self._done, []
        pop = self._running.pop
        for pair in done:
            pop(pair, None)
        self._completing += done

    def _count_completions(self, sent: list[tuple[str, int]], stale: list[str]) -> None:
        # a "gone" answer is a completion: ours, landed before its reply was lost
        self.stats.completed += len(sent) - len(stale)
        self.stats.stale += len(stale)
        results = self._results
        if results:  # most handlers return nothing: no look-up per job then
            for pair in sent:
                results.pop(pair, None)

    # ---- the beat and shutdown ------------------------------------------------------

    def beat_failed(self, exc: Exception) -> None:
        """A beat failed (the next tries again): counted and logged."""
        self.stats.errors += 1
        self._outage.failed(exc, "the beat")

    async def _wind_down(self, aq: AsyncQueue) -> None:
        """Stop claiming, let running jobs finish within the grace, release the rest."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.config.grace_ms / 1000
        if self.batcher is not None:
            self.batcher.flush()  # members held for a fuller batch run now, in the grace
        while True:
            await outcomes.send_at_shutdown(self, aq)
            left = deadline - loop.time()
            if not self._running or left <= 0 or self.force:
                break
            await self._pause(left)
        pending = [run for run in self._running.values() if not run.recorded]
        for run in pending:
            self._cancel(run, SHUTDOWN)
        tasks = [run.task for run in pending if run.task is not None]
        if tasks:
            # an async handler that swallows the cancel gets one more second
            await asyncio.wait(tasks, timeout=1.0)
        for run in pending:
            self._record(run, "release", "")
        await outcomes.send_at_shutdown(self, aq, last=True)
