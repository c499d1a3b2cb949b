"""One worker over several queues: the shared slots, the claim order, one idle wait.

``Worker([high, default, low], handler, order="priority")`` runs one engine per queue
(:class:`~echomq.worker.engine.Engine`: each keeps its queue's pause gate, lane
limits, leases, beat, stalled check and registry record) under one
:class:`Coordinator`, which owns what they share:

- the slots: ``concurrency`` counts the jobs in hand over all the queues, a claim in
  flight included (:meth:`Coordinator.free_for`);
- the order in which queues with work get free slots:

  - ``"priority"`` (RQ's rule): a queue claims only while no queue before it in the
    list may have work; a queue "may have work" until a claim of its own comes back
    short (empty, paused, at its lanes' limits);
  - ``"fair"``: the queues that may have work claim in turns: the one whose turn it
    is fills the free slots (so a claim carries several jobs, as one queue's would)
    and the turn passes to the next with work, so a busy queue never keeps the slots
    a queue with work is owed: as its jobs finish, the next queue's turn claims them;

- one idle wait: every queue with no known work waits in ONE ``BLPOP`` over all their
  wake lists, on one connection (:class:`SharedWait`). No polling: an idle worker over
  ten queues is one blocked call, which idle queues stay in across their waits. A
  queue's wake token wakes that queue's engine, which claims behind its own pause-gate
  read (one round trip more than a single-queue worker, whose claim rides behind its
  ``BLPOP``). The wait times out every beat; then one round trip asks which waiting
  queues a claim could serve (:func:`~echomq.worker.plans.may_have_work`), and those
  claim once;
- the round trips: the engines' claims share them (:mod:`echomq.worker.pipeline`), and
  one beat loop serves every queue (:mod:`echomq.worker.beat`).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Literal

from ..context import as_str
from ..errors import InvalidArgument
from ..transport import HeldConnection
from . import plans

if TYPE_CHECKING:
    from .engine import Engine
    from .pipeline import Pipeline

#: A ``CLIENT UNBLOCK`` sent before its ``BLPOP`` blocked is tried again this often.
_UNBLOCK_TRIES, _UNBLOCK_PAUSE_S = 50, 0.002

Order = Literal["priority", "fair"]
ORDERS: tuple[str, ...] = ("priority", "fair")


def check_order(order: object) -> Order:
    """``order`` checked.

    Raises:
        InvalidArgument: not ``"priority"`` or ``"fair"``.
    """
    if order == "priority":
        return "priority"
    if order == "fair":
        return "fair"
    raise InvalidArgument(f"order must be 'priority' or 'fair', got {order!r}")


class Coordinator:
    """The engines of one worker over several queues, and what they share.

    Args:
        engines: one per queue, in the worker's order.
        order: ``"priority"`` or ``"fair"``.
        wait: the shared idle wait.
    """

    def __init__(
        self, engines: list[Engine], order: Order, wait: SharedWait, pipeline: Pipeline
    ) -> None:
        self.engines, self.order, self.wait = engines, order, wait
        self.pipeline = pipeline
        self._turn = 0  # under fair: the queue whose turn it is to claim, or the next with work
        self._probes: set[asyncio.Task[None]] = set()
        wait.on_timeout = self._timed_out
        for engine in engines:
            engine.coord = self
            engine.pipeline = pipeline

    def _timed_out(self, keys: list[str]) -> None:
        """The beat's timeout for the queues waiting on ``keys``: each with a job a
        claim could find claims once (:func:`~echomq.worker.plans.may_have_work`, one
        round trip for all); the others go on waiting."""
        engines = [e for e in self.engines if e.wake_key in keys and e.aq is not None]
        if not engines:
            return
        task = asyncio.get_running_loop().create_task(self._probe(engines))
        self._probes.add(task)
        task.add_done_callback(self._probes.discard)

    async def _probe(self, engines: list[Engine]) -> None:
        probes = []
        for engine in engines:
            aq = engine.aq
            assert aq is not None
            probes.append(self.pipeline.drive(aq, plans.may_have_work(aq.ctx)))
        answers = await asyncio.gather(*probes, return_exceptions=True)
        # a failed read wakes its queue: its claim meets the error and counts it
        wake = [e.wake_key for e, a in zip(engines, answers) if a is not False and e.wake_key]
        if wake:
            self.wait.wake(wake)

    async def close(self) -> None:
        """Cancel the probes in flight (the worker is done)."""
        tasks = list(self._probes)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    def free_for(self, engine: Engine) -> int:
        """The slots ``engine`` may fill now (0 while it must leave them to others)."""
        engines = self.engines
        if self.order == "priority":
            for other in engines:
                if other is engine:
                    return max(0, self.free_slots())
                if other.more:
                    return 0  # a queue before it may have work: it goes first
            return 0
        # fair: the queues with work take turns; the one whose turn it is may fill
        # every free slot (a claim of several jobs, as one queue's would be), and the
        # turn passes to the next queue with work as it claims
        if not engine.more:
            return 0
        free = self.free_slots()
        if free <= 0 or self._holder() is not engine:
            return 0
        self._turn = (engines.index(engine) + 1) % len(engines)
        return free

    def _holder(self) -> Engine | None:
        """Under ``fair``: the queue whose turn it is to claim, the first with work
        from the turn on (None: no queue has work)."""
        engines, turn = self.engines, self._turn
        for engine in engines[turn:] + engines[:turn]:
            if engine.more:
                return engine
        return None

    def changed(self, source: Engine) -> None:
        """Slots or demand moved (``source`` settled, claimed, or woke): nudge each
        other engine that may now claim."""
        if self.free_slots() <= 0:
            return  # no slot free (the common case under load): nobody can claim
        if self.order == "priority":
            for engine in self.engines:
                if engine.more:  # the first queue that may have work claims next
                    if engine is not source:
                        engine.nudge()
                    return
            return
        holder = self._holder()
        if holder is not None and holder is not source:
            holder.nudge()

    def busy(self, engine: Engine) -> None:
        """``engine``'s claim came back full: its queue leaves the idle wait (its
        tokens are for other workers' waits while this one is busy)."""
        if engine.wake_key is not None:
            self.wait.leave(engine.wake_key)

    def free_slots(self) -> int:
        """The slots free over every queue (a claim in flight counted as held)."""
        return self.engines[0].capacity - sum([e.holding for e in self.engines])

    async def idle(self, engine: Engine) -> None:
        """Wait (in the shared wait) for ``engine``'s wake token or the beat's timeout;
        then the engine claims."""
        assert engine.wake_key is not None
        await self.wait.wait(engine.wake_key)
        engine.woke()


class SharedWait:
    """One ``BLPOP`` over the wake lists of every idle queue, on one connection.

    A queue's key joins when its engine first waits and stays in the wait while the
    engine comes back to it: after a token woke it, or after the beat's timeout made
    it claim once, an engine whose claim came back short waits again on the ``BLPOP``
    already in flight, which needs no new command. The key leaves (:meth:`leave`)
    when its queue has work (so a busy queue's tokens stay for other workers' idle
    waits) or its engine stops waiting. A key that joins or leaves while the
    ``BLPOP`` is blocked ends it with ``CLIENT UNBLOCK`` (the call returns as if
    timed out, nothing is popped) and the wait is sent again with the keys as they
    are now. A token that arrives meanwhile stays in its list (the lists are the
    queues' own, capped), so none is missed; one popped while its engine is between
    two waits is kept for it (its next wait returns at once).

    The beat's timeout counts from the last time it woke the waiting queues, across
    the re-sent waits, so each idle queue claims once a beat.

    Args:
        blocker: the worker's blocking client (a connection of its own).
        control: a client to send ``CLIENT UNBLOCK`` on.
        timeout_s: the beat: after it, every waiting queue is woken to claim once.
    """

    def __init__(self, blocker: Any, control: Any, timeout_s: float) -> None:
        self.blocker, self.control, self.timeout_s = blocker, control, timeout_s
        self._keys: set[str] = set()  # the keys in the wait (their engines idle)
        self._waiting: dict[str, asyncio.Future[None]] = {}  # engines waiting now
        self._early: set[str] = set()  # popped while their engine was not waiting
        self._pump: asyncio.Task[None] | None = None
        # True from a pump's start until it leaves its loop, set back with no await in
        # between: a waiter that comes while a pump winds down starts a new one
        self._pumping = False
        self._blocked: frozenset[str] | None = None  # the keys of the BLPOP in flight
        self._unblocked = False  # the BLPOP in flight was ended by CLIENT UNBLOCK
        self._client_id: int | None = None
        self._resending: set[asyncio.Task[None]] = set()  # the resends leave started
        self._deadline = 0.0  # when the beat's timeout wakes the waiting queues
        #: Called with the waiting keys at the beat's timeout, in place of waking them
        #: all (the coordinator wakes those a claim could serve).
        self.on_timeout: Callable[[list[str]], None] | None = None

    async def wait(self, key: str) -> None:
        """Return when ``key``'s list gives a token or the beat's timeout passes.

        Raises:
            Exception: the wait's server error (the caller's loop recovers from it).
        """
        if key in self._early:
            self._early.discard(key)
            return
        loop = asyncio.get_running_loop()
        fut = self._waiting.get(key)
        if fut is None or fut.done():
            fut = self._waiting[key] = loop.create_future()
        self._keys.add(key)
        if not self._pumping:
            self._pumping = True
            self._deadline = loop.time() + self.timeout_s
            self._pump = loop.create_task(self._run())
        elif self._blocked is not None and key not in self._blocked:
            # in a task of its own: a cancel of this wait meets only the await below
            # (the client's call may swallow a cancel that lands in it)
            self._resend_soon()
        try:
            await asyncio.shield(fut)
        except asyncio.CancelledError:
            self.leave(key)  # the engine stopped waiting
            raise
        finally:
            # woken (the pump popped it) or the engine stopped waiting: forget the future
            if self._waiting.get(key) is fut:
                del self._waiting[key]

    def leave(self, key: str) -> None:
        """Take ``key`` out of the wait (its queue has work, or its engine stops); the
        ``BLPOP`` in flight is sent again without it. Loop thread only."""
        if key not in self._keys:
            return
        self._keys.discard(key)
        self._early.discard(key)
        fut = self._waiting.pop(key, None)
        if fut is not None and not fut.done():
            fut.set_result(None)  # woken: it claims
        if self._blocked is not None and key in self._blocked and self._pumping:
            self._resend_soon()

    def _resend_soon(self) -> None:
        """Have the ``BLPOP`` in flight sent again with the keys as they are now."""
        task = asyncio.get_running_loop().create_task(self._resend_quietly())
        self._resending.add(task)
        task.add_done_callback(self._resending.discard)

    async def close(self) -> None:
        """Stop the wait (the worker is done)."""
        pump, self._pump = self._pump, None
        self._pumping = False
        tasks = [*self._resending, *([pump] if pump is not None else [])]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def _resend_quietly(self) -> None:
        # a failed CLIENT UNBLOCK leaves the key in the BLPOP until its timeout: a
        # token it pops then only wakes a queue already busy
        with contextlib.suppress(Exception):
            await self._resend()

    async def _resend(self) -> None:
        """End the ``BLPOP`` in flight if its keys are not the wait's keys now.
        ``CLIENT UNBLOCK`` that reaches the server before the ``BLPOP`` it aims at
        unblocks nothing (it answers 0): then it is tried again, briefly, until the
        ``BLPOP`` is seen blocked."""
        for _ in range(_UNBLOCK_TRIES):
            blocked, client_id = self._blocked, self._client_id
            if blocked is None or blocked == self._keys or client_id is None:
                return  # between two waits: the next one has the keys
            if await self.control.client_unblock(client_id):
                if self._blocked is blocked:
                    self._unblocked = True
                return
            await asyncio.sleep(_UNBLOCK_PAUSE_S)

    def _wake(
        self, keys: list[str] | None, error: BaseException | None = None, *, popped: bool = False
    ) -> None:
        for key in list(self._waiting) if keys is None else keys:
            fut = self._waiting.pop(key, None)
            if fut is None or fut.done():
                if popped and key in self._keys:
                    self._early.add(key)  # its engine is between two waits
                continue
            if error is not None:
                fut.set_exception(error)
            else:
                fut.set_result(None)

    async def _run(self) -> None:
        try:
            pool = getattr(self.blocker, "connection_pool", None)
            if pool is None:
                await self._run_on_cluster()
            else:
                await self._run_on(pool)
        except asyncio.CancelledError:
            self._pumping, self._blocked = False, None
            raise
        except Exception as exc:
            self._pumping, self._blocked = False, None
            self._keys.clear()
            self._wake(None, exc)  # each engine's loop counts it and waits again

    async def _run_on(self, pool: Any) -> None:
        loop = asyncio.get_running_loop()
        async with HeldConnection(pool) as conn:
            await conn.send(("CLIENT", "ID"))
            (client_id,) = await conn.read(1)
            if isinstance(client_id, Exception):
                raise client_id
            self._client_id = int(client_id)
            while True:
                if not self._keys:
                    self._pumping = False
                    return
                keys = sorted(self._keys)
                left = self._deadline - loop.time()
                if left <= 0:
                    self._beat_timeout(loop.time())
                    continue
                self._blocked, self._unblocked = frozenset(keys), False
                # BLPOP reads 0 as "forever": at least a millisecond
                await conn.send(("BLPOP", *keys, max(0.001, round(left, 3))))
                (reply,) = await conn.read(1)
                self._blocked = None
                if isinstance(reply, Exception):
                    raise reply
                if reply is not None:
                    # the claim that follows sees every job whose token is in the list
                    # now (each enqueue pushes its token with the job, atomically), so
                    # the rest are dropped: left from a busy spell (the wait claims up
                    # to the free slots per token, and a busy worker pops none), each
                    # would wake the queue for a claim that finds nothing, holding the
                    # queues behind it under priority (measured: 10 queues ran at 0.4x
                    # of one when a woken queue only took its free slots' tokens). The
                    # cost: another idle worker of this queue is not woken by them; it
                    # joins a burst this one cannot take alone within a beat.
                    key = as_str(reply[0])
                    await conn.send(("DEL", key))
                    await conn.read(1)
                    self._wake([key], popped=True)
                elif not self._unblocked:
                    self._beat_timeout(loop.time())
                # else: unblocked for a key that joined or left; wait again

    def _beat_timeout(self, now: float) -> None:
        """The beat's timeout: each waiting queue claims once (or as ``on_timeout``
        decides)."""
        self._deadline = now + self.timeout_s
        if self.on_timeout is None:
            self._wake(None)
        else:
            self.on_timeout(list(self._waiting))

    def wake(self, keys: list[str]) -> None:
        """Wake the engines waiting on ``keys`` (those still waiting) to claim."""
        self._wake(keys)

    async def _run_on_cluster(self) -> None:
        # the queues' wake lists live in different slots, which one BLPOP cannot
        # span: on a cluster each list is waited on in turn, a slice of the beat each
        while True:
            if not self._waiting:
                self._pumping = False
                return
            keys = sorted(self._waiting)
            slice_s = max(0.05, self.timeout_s / len(keys))
            for key in keys:
                if key not in self._waiting:
                    continue
                reply = await self.blocker.blpop([key], timeout=slice_s)
                if reply is not None:
                    self._wake([key], popped=True)
                    break
            else:
                self._wake(keys)


def per_queue(handler: Any, names: list[str]) -> list[Any]:
    """The handler of each queue: one handler (or job-name mapping) for all, or a
    mapping whose keys are all queue names of the worker: each queue its own handler
    (itself a handler or a job-name mapping).

    Raises:
        InvalidArgument: a per-queue mapping that leaves a queue out.
    """
    if len(names) < 2 or not isinstance(handler, Mapping) or not handler:
        return [handler] * len(names)
    if not set(handler) <= set(names):
        return [handler] * len(names)  # a job-name mapping, shared by every queue
    missing = [name for name in names if name not in handler]
    if missing:
        raise InvalidArgument(f"no handler for queue(s) {', '.join(missing)}")
    return [handler[name] for name in names]


async def close_quietly(wait: SharedWait) -> None:
    """Close the shared wait, ignoring what its end raises."""
    with contextlib.suppress(Exception):
        await wait.close()
