"""What the engine does with a job's outcome: the outcome a handler's exception means
(:func:`classify`), a plain handler's job back from the threads (:func:`finish_plain`,
no task per job), and sending the outcomes that are not plain completions (releases,
failures, cancels, a handler's ``RateLimited``) until the server answered each
(:func:`send`, and at shutdown :func:`send_at_shutdown`).

Split from :mod:`echomq.worker.engine` to keep each module one subject; these functions
work on the engine's own queues of outcomes (its ``_other``, ``_running``,
``_completing``), so they are the engine's, kept in a file of their own.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from typing import TYPE_CHECKING

import redis

from .. import lifecycle
from ..errors import EchoMQError, JobGone, RateLimited, StaleToken
from ..flows.relay import relay_flows
from ..lifecycle.settle import DEAD_RELAY
from . import plans
from .job import CANCELLED, LEASE_LOST, TIMEOUT, JobCancelled, JobContext
from .limits import hand_back
from .routes import failure_text

if TYPE_CHECKING:
    from ..queue import AsyncQueue
    from .engine import Engine, _Running
    from .threads import Call

log = logging.getLogger("echomq.worker")

#: What the worker survives (counted, logged, tried again): the server's and the
#: network's errors and our own; anything else is a bug and propagates.
RECOVERABLE = (EchoMQError, redis.RedisError, OSError)


def classify(eng: Engine, job: JobContext, exc: BaseException) -> tuple[str, str]:
    """The outcome (``failed``, ``cancelled``, ``release``, ``rate_limited``) and error
    text of a job whose handler raised ``exc``, read with the reason it was told to
    stop (a timeout, an operator's cancel, a shutdown, a lost lease)."""
    reason = job.cancel_reason
    if reason == TIMEOUT:
        eng.stats.timed_out += 1
        ms = eng.config.job_timeout_ms
        return "failed", f"TimeoutError: the handler ran longer than {ms} ms"
    if reason == CANCELLED:
        # stopped on an operator's cancel (JobCancelled, CancelledError or another
        # error on the way out): dead, not retried
        return "cancelled", ""
    if reason is not None or isinstance(exc, asyncio.CancelledError):
        # told to stop (or the loop is going away): hand the job back, no failure
        return "release", ""
    if isinstance(exc, RateLimited):
        # the handler says the service it calls is limited: hand the job back
        eng._limited[(job.id, job.attempt)] = exc
        return "rate_limited", ""
    if isinstance(exc, JobCancelled):
        return "failed", f"JobCancelled: {exc}"
    return "failed", failure_text(exc, eng.config.error_max_chars)


def finish_plain(eng: Engine, call: Call) -> None:
    """A plain handler's call came back from the threads: record its job's outcome
    (on the loop; the ``then`` of the calls the engine hands over)."""
    run: _Running = call.owner
    run.call = None
    if run.recorded:
        return  # settled when its timeout, the shutdown or a lost lease came
    error = call.error
    if error is None:
        if call.dropped:  # the threads shut down before it started
            error = asyncio.CancelledError()
        elif call.value is not None and inspect.isawaitable(call.value):
            # a plain function that returned an awaitable: awaited on the loop
            run.task = asyncio.get_running_loop().create_task(eng._execute(run, value=call.value))
            return
        else:
            run.value = call.value
            error = run.job.marked
    elif isinstance(error, SystemExit | KeyboardInterrupt):
        raise error  # as from a task: it ends the loop
    if error is not None:
        settle_plain(eng, run, error)
        return
    if run.timer is not None:
        run.timer.cancel()
    eng._record(run, "lost" if run.job.cancel_reason == LEASE_LOST else "done", "")


def settle_plain(eng: Engine, run: _Running, error: BaseException) -> None:
    """Record the outcome of a plain handler's job that raised ``error``, or that the
    worker gave up on (``CancelledError``: a timeout, a shutdown, a lost lease)."""
    if run.timer is not None:
        run.timer.cancel()
    job = run.job
    outcome, text = classify(eng, job, error)
    eng.record(run, "lost" if job.cancel_reason == LEASE_LOST else outcome, text)


async def send(eng: Engine, aq: AsyncQueue) -> None:
    """Send the outcomes of the jobs that did not simply finish: releases,
    failures, losses. Each leaves the queue once the server has answered it."""
    if not eng._other:
        return
    for job, _, _ in eng._other:
        eng._running.pop((job.id, job.attempt), None)
    back = [(j.id, j.attempt) for j, outcome, _ in eng._other if outcome == "release"]
    if back:
        refused = await aq.runner.drive(lifecycle.release_many(aq.ctx, back))
        eng.stats.released += len(back) - len(refused)
        eng.stats.stale += len(refused)
        eng._other = [entry for entry in eng._other if entry[1] != "release"]
    while eng._other:
        job, outcome, error = eng._other[0]
        if outcome == "lost":
            eng.stats.lost += 1
        elif outcome == "failed":
            await _fail(eng, aq, job, error)
        elif outcome == "cancelled":
            await _settle_cancelled(eng, aq, job)
        elif outcome == "rate_limited":
            await hand_back(aq, job, eng._limited[(job.id, job.attempt)], eng.stats)
            # answered (a server error raises past here: the outcome is sent again)
            del eng._limited[(job.id, job.attempt)]
        eng._other.pop(0)


async def _fail(eng: Engine, aq: AsyncQueue, job: JobContext, error: str) -> None:
    plan = plans.fail(aq.ctx, job.id, job.attempt, error, eng.config.backoff, eng._rng)
    try:
        verdict = await aq.runner.drive(plan)
    except JobGone:
        # the row is gone: the failure is settled (ours, sent again after a lost
        # reply, or the job was removed); nothing is left to retry
        eng.stats.retried += 1
        return
    except StaleToken:
        eng.stats.stale += 1
        return
    if verdict == DEAD_RELAY:
        relay_soon(eng, aq)
    if verdict in ("dead", DEAD_RELAY):
        eng.stats.dead += 1
    else:
        eng.stats.retried += 1


async def _settle_cancelled(eng: Engine, aq: AsyncQueue, job: JobContext) -> None:
    try:
        verdict = await aq.runner.drive(plans.fail_cancelled(aq.ctx, job.id, job.attempt))
    except JobGone:
        eng.stats.cancelled += 1  # settled: ours, sent again, or removed
        return
    except StaleToken:
        eng.stats.stale += 1
        return
    if verdict == DEAD_RELAY:
        relay_soon(eng, aq)
    eng.stats.cancelled += 1


async def send_at_shutdown(eng: Engine, aq: AsyncQueue, *, last: bool = False) -> None:
    """Send the queued outcomes; errors are counted, not raised. The ``last`` call
    gives up on what it cannot send: counted ``abandoned``, logged once."""
    try:
        await send(eng, aq)
        eng._take_done()
        if eng._completing:
            done = eng._completing
            plan = plans.complete_and_claim(aq.ctx, done, 0, 1, 0, eng._results)
            got = await aq.runner.drive(plan)
            eng._completing = []  # answered (nothing adds to it meanwhile)
            eng._count_completions(done, got.stale)
            if got.relay:
                await relay_now(eng, aq)
    except RECOVERABLE as exc:
        eng.stats.errors += 1
        eng._outage.failed(exc, "sending outcomes at shutdown")
    if last:
        eng._take_done()
        lost = sum(1 for _, outcome, _ in eng._other if outcome == "lost")
        left = len(eng._completing) + len(eng._other) - lost
        eng.stats.lost += lost
        eng._completing, eng._other = [], []
        if left:
            eng.stats.abandoned += left
            log.warning(
                "worker %s: %d outcomes not sent at shutdown; their leases run out",
                eng.name,
                left,
            )


def relay_soon(eng: Engine, aq: AsyncQueue, due: bool = True) -> None:
    """A settle wrote a flow child's ending to the outbox (its parent is in another
    queue; ``due``): relay it now, in a task of its own (one at a time; one more round
    when asked again meanwhile; a failure is left to the next trigger or the beat)."""
    if not due:
        return
    if eng._relay_task is None or eng._relay_task.done():
        eng._relay_task = asyncio.get_running_loop().create_task(relay_now(eng, aq))
    else:
        eng._relay_again = True


async def relay_now(eng: Engine, aq: AsyncQueue) -> None:
    """Relay the queue's flow outbox (bounded); errors are counted and logged."""
    while True:
        eng._relay_again = False
        try:
            await aq.runner.drive(relay_flows(aq.ctx))
        except RECOVERABLE as exc:
            eng.stats.errors += 1
            eng._outage.failed(exc, "the flow relay")
            return
        if not eng._relay_again:
            return


def relaying(eng: Engine) -> list[asyncio.Task[None]]:
    """The flow relay in flight, for the engine to let finish when it stops (bounded;
    what it leaves, another worker's beat relays)."""
    return [eng._relay_task] if eng._relay_task is not None else []
