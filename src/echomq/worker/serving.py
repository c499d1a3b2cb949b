"""The engine's serve loop (:class:`~echomq.worker.engine.Engine`): complete the jobs
that finished and claim up to the free slots, round trip after round trip, and wait
when nothing is ready.

- :func:`serve`: the loop. Each turn sends the outcomes that are not plain completions,
  then one :func:`round_trip`: the completions pipelined with the pause-gate read, then
  one claim script call. A batch worker of two batches or more keeps two round trips in
  flight (:func:`overlap`): the server completes and claims one batch while this
  process starts and settles another.
- :func:`wake_then_claim`: the idle wait of a worker over one queue (``BLPOP`` on the
  wake list with the claim written behind it, :class:`~echomq.worker.waker.Waker`);
  over several queues the coordinator's shared wait (:mod:`echomq.worker.multi`).
- :func:`end_wait`: the wait ended at a stop, as its state says.

Split from :mod:`echomq.worker.engine` to keep each module one subject; these functions
work on the engine's own state, as :mod:`echomq.worker.outcomes` does.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import TYPE_CHECKING, Any

from .. import lifecycle
from . import outcomes, plans
from .threads import HandlerThreads

if TYPE_CHECKING:
    from ..queue import AsyncQueue
    from .engine import Engine

_RECOVERABLE = outcomes.RECOVERABLE
#: The pause after a server error before a loop tries again, doubling to the cap.
ERROR_PAUSE_S, ERROR_PAUSE_CAP_S = 0.05, 2.0


def error_pause(failures: int) -> float:
    """The pause in seconds after ``failures`` errors in a row (0: the first)."""
    return float(min(ERROR_PAUSE_CAP_S, ERROR_PAUSE_S * 2**failures))


async def serve(eng: Engine, aq: AsyncQueue, pool: HandlerThreads) -> None:
    loop = asyncio.get_running_loop()
    wake: asyncio.Task[None] | None = None
    rounds: set[asyncio.Task[None]] = set()  # round trips in flight (overlapping)
    limit = overlap(eng)
    failures = 0
    try:
        while not eng.stop_requested:
            try:
                if eng._other:  # failures, releases, losses: rare (no coroutine else)
                    await outcomes.send(eng, aq)
                eng._take_done()
                free = eng.free()
                # while a wake task exists `_more` is False: only it claims then
                want = eng.want(free) if eng._more else 0
                if (eng._completing or want) and len(rounds) < limit:
                    done, eng._completing = eng._completing, []
                    if limit == 1:
                        await round_trip(eng, aq, pool, done, want)
                        failures = 0
                    else:
                        rounds.add(loop.create_task(round_trip(eng, aq, pool, done, want)))
                    continue
                assert eng._nudged is not None
                waits: list[asyncio.Future[Any]] = [eng._nudged, *rounds]
                if rounds:
                    pass  # a claim in flight answers whether the queue has more
                elif eng.coord is not None:
                    # one wait over every queue: a queue with no known work waits
                    # even with no slot free, so its work counts as demand at once
                    if not eng._more:
                        wake = wake or loop.create_task(eng.coord.idle(eng))
                        waits.append(wake)
                elif free > 0:
                    wake = wake or loop.create_task(wake_then_claim(eng, aq, pool))
                    waits.append(wake)
                if len(waits) == 1:
                    # only the nudge (every slot busy): awaited as it is, where
                    # asyncio.wait would add a waiter future and a callback on each
                    # (about 45,000 instructions a turn, a turn per claimed batch). A
                    # cancel of this task cancels the nudge too: every reader takes a
                    # done nudge (cancelled or set) alike, and replaces it
                    await eng._nudged
                else:
                    await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
                if eng._nudged.done():
                    eng._nudged = loop.create_future()
                ended = [task for task in rounds if task.done()]
                if ended:
                    rounds.difference_update(ended)
                    errors = [task.exception() for task in ended]
                    for error in errors:
                        if error is not None:
                            raise error
                if wake is not None and wake.done():
                    finished, wake = wake, None
                    finished.result()
                    eng._outage.ok("serving")
                    if eng.coord is not None:
                        eng.coord.changed(eng)
                failures = 0
            except Exception as exc:
                # a server error, or a payload the serializer cannot read: the
                # worker stays up; outcomes not answered are sent again; leased
                # jobs it could not start come back when their leases run out
                # (and a repeat staller ends up dead)
                eng.stats.errors += 1
                eng._outage.failed(exc, "serving")
                await eng._pause(error_pause(failures))
                failures = min(failures + 1, 10)
    finally:
        if rounds:  # their claims join the jobs in hand, which the wind-down settles
            await asyncio.gather(*rounds, return_exceptions=True)
        if wake is not None:
            await end_wait(eng, aq, wake)


def overlap(eng: Engine) -> int:
    """How many round trips the serve loop keeps in flight: two for a batch worker
    of two batches or more on one queue, so the server works on one batch's
    completion and the next claim while this process starts and settles another
    (a batch of 100 costs the worker about as much as the server: in turn they
    add up, overlapped the slower sets the pace); one otherwise, where the handler
    tasks already overlap the round trip."""
    if eng.batcher is not None and eng.coord is None and eng.config.concurrency > 1:
        return 2
    return 1


async def round_trip(
    eng: Engine, aq: AsyncQueue, pool: HandlerThreads, done: list[tuple[str, int]], want: int
) -> None:
    """One round trip pair: complete ``done`` and claim up to ``want``. On a failure
    the completions go back to the queue of unanswered ones (sent again)."""
    cfg = eng.config
    plan = plans.complete_and_claim(aq.ctx, done, want, cfg.lease_ms, cfg.lock, eng._results)
    t0 = time.perf_counter()
    eng.claiming += want
    try:
        if eng.pipeline is not None:  # with the other queues'
            got = await eng.pipeline.drive(aq, plan)
        else:
            got = await aq.runner.drive(plan)
    except BaseException:
        eng._completing[:0] = done
        raise
    finally:
        eng.claiming -= want
    if want:
        eng.observer.claimed(len(got.claimed), time.perf_counter() - t0)
    eng._count_completions(done, got.stale)
    outcomes.relay_soon(eng, aq, got.relay)
    eng._claimed(aq, got.claimed, want, pool)
    eng._outage.ok("serving")
    if eng.coord is not None:
        if want and eng._more:  # work: out of the idle wait
            eng.coord.busy(eng)
        eng.coord.changed(eng)


async def end_wait(eng: Engine, aq: AsyncQueue, wake: asyncio.Task[None]) -> None:
    """Stop the idle wait as its state says (:class:`~echomq.worker.waker.WaitState`):
    with no claim behind it, it is cancelled (nothing is lost); with a claim behind
    it, it is unblocked so the claim's answer is read and its jobs wound down like
    the others; mid-claim, it finishes. A server that answers nothing for a beat
    and more gets the wait cancelled all the same."""
    if eng.coord is not None:
        # the shared wait carries no claim: cancelling it loses nothing (bounded:
        # a cancel swallowed below it must not hold the worker's end)
        wake.cancel()
        await asyncio.wait([wake], timeout=2.0)
        if wake.done() and not wake.cancelled():
            wake.exception()  # retrieved: the loop's error log stays quiet
        return
    assert eng._waker is not None
    loop = asyncio.get_running_loop()
    give_up = loop.time() + eng.config.beat / 1000 + 2.0
    while not wake.done():
        how = eng._waker.state.to_end
        if loop.time() > give_up or how == "cancel":
            wake.cancel()
        elif how == "unblock":
            with contextlib.suppress(*_RECOVERABLE):  # the beat's timeout ends it anyway
                await eng._waker.unblock(aq.client)
        await asyncio.wait([wake], timeout=0.05)
    await asyncio.gather(wake, return_exceptions=True)


async def wake_then_claim(eng: Engine, aq: AsyncQueue, pool: HandlerThreads) -> None:
    """Wait on the wake list and claim, the claim riding behind the BLPOP.

    A wake token or the beat's timeout both lead to one claim. With the gate open
    the claim runs on the server the moment the BLPOP returns (see
    :class:`~echomq.worker.waker.Waker`), so a job that wakes an idle worker costs
    it no further round trip; otherwise the gate read rides behind the BLPOP and
    the claim follows when it reads open. When the server refuses the claim
    behind the wait (a transaction refused as a whole, e.g. at ``maxmemory``),
    the worker claims plainly instead.
    """
    cfg = eng.config
    waker = eng._waker
    assert waker is not None
    want = eng.want(eng.free())
    if want <= 0:
        eng._more = True
        return
    waited = eng.stats.limited_ms
    if await eng.throttle.wait_out(eng.stats):
        eng.observer.limited((eng.stats.limited_ms - waited) / 1000)
        eng._more = True  # the wait a held claim answered is over: claim now
        return
    # never re-sent (a lost reply leaves its jobs to their leases): no request record
    op = lifecycle.claim_op(aq.ctx, want, cfg.lease_ms, cfg.lock, recorded=False)
    woke = await waker.wait(eng.throttle.timeout(cfg.beat / 1000), aq.runner.command(op))
    try:
        # the claim that rode along, decoded at once: the woken job's start waits on it
        got = plans.claimed_behind_wait(aq.ctx, woke)
        if got is not None:
            eng._claimed(aq, got, want, pool)
        elif woke.claim_sent or not eng.stop_requested:
            plan = plans.claim_after_wait(aq.ctx, woke, want, cfg.lease_ms, cfg.lock)
            eng._claimed(aq, await aq.runner.drive(plan), want, pool)
    finally:
        waker.done()
