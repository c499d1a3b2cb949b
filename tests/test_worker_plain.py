"""Plain (``def``) handlers' jobs go to the threads as one list of calls per claim and
come back through a callback on the loop (no asyncio task or future per job): each
job of a batch still settles on its own, a timed-out job queued behind a blocking
handler never runs, a plain handler's awaitable value is awaited on the loop."""

from __future__ import annotations

import asyncio
import dataclasses
import threading
from typing import Any

import pytest
import redis

from echomq import JobContext, Queue, Worker
from echomq.worker.threads import Call, HandlerThreads
from worker_support import FAST, job_keys, running, wait_until

pytestmark = pytest.mark.both_servers


def test_the_jobs_of_one_batch_settle_each_on_its_own(q: Queue, r: redis.Redis) -> None:
    # one claim takes the four (concurrency 4): one returns a value, one returns
    # nothing, one raises, one marks itself failed and returns
    ran: list[str] = []

    def handle(job: JobContext) -> Any:
        ran.append(job.data)
        if job.data == "raise":
            raise ValueError("bad input")
        if job.data == "mark":
            job.fail("refused")
            return "ignored"
        return {"got": job.data} if job.data == "value" else None

    ids = dict(
        zip(
            ("value", "none", "raise", "mark"),
            q.enqueue_many(["value", "none", "raise", "mark"], max_attempts=1, keep_ms=60_000),
        )
    )
    with running(Worker(q, handle, concurrency=4, config=FAST)) as w:
        wait_until(lambda: w.stats.completed + w.stats.dead == 4)
    assert sorted(ran) == ["mark", "none", "raise", "value"]
    assert (w.stats.claimed, w.stats.completed, w.stats.dead, w.stats.stale) == (4, 2, 2, 0)
    assert q.job_state(ids["value"]) == q.job_state(ids["none"]) == "completed"
    assert q.result(ids["value"], timeout_s=5) == {"got": "value"}
    assert q.result(ids["none"], timeout_s=5) is None
    assert q.job_state(ids["raise"]) == q.job_state(ids["mark"]) == "dead"
    assert r.hget(q.keys.job(ids["raise"]), "last_error").startswith("ValueError: bad input\n\n")
    assert r.hget(q.keys.job(ids["mark"]), "last_error").startswith("JobFailure: refused")
    assert r.zcard(q.keys.dead) == 2 and r.zcard(q.keys.active) == 0
    assert not any(r.exists(q.keys.lock(j)) for j in ids.values())


def test_a_timed_out_job_queued_behind_a_blocking_handler_never_runs(
    q: Queue, r: redis.Redis
) -> None:
    # one thread for two jobs: the first blocks past the timeout, the second waits
    # for the thread; both time out (settled at once, the thread still blocked) and
    # the second's handler must not run once the thread is free: the thread goes
    # from the first straight to a third job, queued after the second
    gate = threading.Event()
    ran: list[str] = []

    def handle(job: JobContext) -> None:
        ran.append(job.data)
        if job.data == "block":
            gate.wait(10)

    first, second = q.enqueue_many(["block", "queued"], max_attempts=1)
    cfg = dataclasses.replace(FAST, job_timeout_ms=200, threads=1)
    with running(Worker(q, handle, concurrency=2, config=cfg)) as w:
        wait_until(lambda: w.stats.dead == 2)
        assert ran == ["block"]  # settled while its thread still blocks
        third = q.enqueue("after", keep_ms=60_000)
        wait_until(lambda: q.job_state(third) == "active")  # queued behind the second
        gate.set()
        wait_until(lambda: w.stats.completed == 1)
    assert ran == ["block", "after"]
    assert (w.stats.timed_out, w.stats.dead, w.stats.completed) == (2, 2, 1)
    for jid in (first, second):
        row = r.hgetall(q.keys.job(jid))
        assert row["state"] == "dead" and row["attempts"] == "1"
        assert row["last_error"] == "TimeoutError: the handler ran longer than 200 ms"
        assert not r.exists(q.keys.lock(jid))
    assert q.job_state(third) == "completed" and not r.exists(q.keys.lock(third))
    assert r.zcard(q.keys.active) == 0


def test_a_plain_handlers_awaitable_value_is_awaited_on_the_loop(q: Queue, r: redis.Redis) -> None:
    loops: list[bool] = []

    async def later(job: JobContext) -> str:
        loops.append(asyncio.get_running_loop() is not None)
        await asyncio.sleep(0)
        return f"done {job.data}"

    def handle(job: JobContext) -> Any:
        return later(job)  # a coroutine: the worker awaits it

    jid = q.enqueue("x", keep_ms=60_000)
    with running(Worker(q, handle, config=FAST)) as w:
        assert q.result(jid, timeout_s=10) == "done x"
    assert loops == [True]
    assert (w.stats.completed, w.stats.dead) == (1, 0)
    assert q.job_state(jid) == "completed"
    assert job_keys(r, q) == {q.keys.job(jid)}  # kept for its result; no lock left


def test_calls_come_back_through_then_on_the_loop() -> None:
    def boom(x: int) -> int:
        raise KeyError(x)

    async def main() -> list[tuple[Any, Any, bool]]:
        pool = HandlerThreads(2)
        loop_thread = threading.get_ident()
        back: list[tuple[Any, Any, bool]] = []
        done = asyncio.get_running_loop().create_future()

        def then(call: Call) -> None:
            back.append((call.owner, call.value, threading.get_ident() == loop_thread))
            if isinstance(call.error, KeyError):
                back[-1] = (call.owner, "KeyError", back[-1][2])
            if len(back) == 20 and not done.done():
                done.set_result(None)

        calls = [Call(lambda x: x * 3, i, then, i) for i in range(19)]
        calls.append(Call(boom, 99, then, 99))
        dropped = calls[5]
        dropped.dropped = True  # given up before a thread took it: not run
        try:
            pool.start(calls)
            await asyncio.wait_for(done, 5)
        finally:
            pool.shutdown()
        return back

    back = asyncio.run(main())
    assert sorted(back, key=lambda b: b[0]) == [
        (i, None if i == 5 else "KeyError" if i == 99 else i * 3, True) for i in [*range(19), 99]
    ]


class _Abort(BaseException):
    """Not an Exception: a task would have died of it, the job left in hand."""


def test_a_plain_handler_raising_a_base_exception_fails_its_job(q: Queue, r: redis.Redis) -> None:
    def handle(job: JobContext) -> None:
        raise _Abort("stop here")

    jid = q.enqueue("x", max_attempts=1)
    with running(Worker(q, handle, config=FAST)) as w:
        wait_until(lambda: q.job_state(jid) == "dead")
    row = r.hgetall(q.keys.job(jid))
    assert row["last_error"].startswith("_Abort: stop here\n\n")
    assert row["failures"] == "1" and row["attempts"] == "1"
    assert (w.stats.dead, w.stats.completed, w.stats.released) == (1, 0, 0)
    assert not r.exists(q.keys.lock(jid)) and r.zcard(q.keys.active) == 0
