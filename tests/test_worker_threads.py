"""The plain handlers' threads (``echomq.worker.threads``): the hand-over in batches
keeps the contract of a thread pool (every handler on a thread of its own, at most
``size`` at once, values and errors back to the awaiting task), and a worker with a
plain handler serves a backlog like an async one."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest
import redis

from echomq import JobContext, Queue, Worker
from echomq.worker.threads import COLLECT_S, START_S, HandlerThreads
from worker_support import FAST, job_keys, running, wait_until


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def test_values_and_errors_reach_the_awaiting_task() -> None:
    def boom(x: int) -> int:
        raise ValueError(f"bad {x}")

    def stops(_: int) -> int:
        raise StopIteration  # cannot travel in a future: it comes back as RuntimeError

    async def main() -> None:
        pool = HandlerThreads(3)
        try:
            assert await asyncio.gather(*(pool.submit(lambda x: x * 2, i) for i in range(50))) == [
                i * 2 for i in range(50)
            ]
            with pytest.raises(ValueError, match="bad 7"):
                await pool.submit(boom, 7)
            with pytest.raises(RuntimeError, match="StopIteration"):
                await pool.submit(stops, 0)
        finally:
            pool.shutdown()

    run(main())


def test_blocking_handlers_all_run_at_once_up_to_size() -> None:
    # a barrier of `size` parties passes only if every handler has a thread of its own
    # at the same time, although they were queued together (the loop wakes a thread
    # for each job left queued behind a handler that blocks)
    size = 6
    barrier = threading.Barrier(size, timeout=5)
    now = peak = 0
    lock = threading.Lock()

    def handle(_: int) -> None:
        nonlocal now, peak
        with lock:
            now += 1
            peak = max(peak, now)
        barrier.wait()
        time.sleep(0.01)
        with lock:
            now -= 1

    async def main() -> None:
        pool = HandlerThreads(size)
        try:
            await asyncio.gather(*(pool.submit(handle, i) for i in range(3 * size)))
        finally:
            pool.shutdown()

    run(main())
    assert peak == size  # never more than size at once


def test_a_job_queued_behind_a_blocking_handler_starts_on_another_thread() -> None:
    # one batch of two: the first thread blocks in the first handler; the loop's look
    # wakes a second thread for the second job within a few START_S
    release = threading.Event()
    started: dict[int, float] = {}

    def handle(i: int) -> str:
        started[i] = time.monotonic()
        if i == 0:
            release.wait(5)
        return threading.current_thread().name

    async def main() -> tuple[str, str]:
        pool = HandlerThreads(2)
        try:
            first, second = pool.submit(handle, 0), pool.submit(handle, 1)
            other = await asyncio.wait_for(second, 2)  # while the first still blocks
            assert not first.done()
            release.set()
            return await first, other
        finally:
            pool.shutdown()

    a, b = run(main())
    assert a != b
    assert started[1] - started[0] < 0.5  # START_S is 5 ms
    assert START_S <= 0.01


def test_a_finished_job_does_not_wait_behind_a_long_one_on_its_thread() -> None:
    # one thread: the short job's result is kept while the thread runs the long one
    # queued behind it; the loop's collection hands it over within a few ticks
    release = threading.Event()

    async def main() -> float:
        pool = HandlerThreads(1)
        try:
            t0 = time.monotonic()
            short = pool.submit(lambda _: "short", 0)
            long = pool.submit(lambda _: release.wait(5), 0)
            assert await asyncio.wait_for(short, 2) == "short"
            took = time.monotonic() - t0
            assert not long.done()
            release.set()
            assert await long is True
            return took
        finally:
            pool.shutdown()

    assert run(main()) < 1.0  # bounded by the collection tick, not by the long job
    assert COLLECT_S <= 0.05


def test_a_job_cancelled_before_a_thread_took_it_never_runs() -> None:
    # a timeout or a shutdown cancels the job's task while it waits for a thread: the
    # job is settled (failed, released), so its handler must not run later
    gate = threading.Event()
    ran: list[int] = []

    async def main() -> None:
        pool = HandlerThreads(1)
        try:
            first = pool.submit(lambda _: gate.wait(5), 0)
            second = pool.submit(ran.append, 1)
            await asyncio.sleep(0.05)  # the one thread is in the first job
            second.cancel()
            gate.set()
            assert await first is True
            third = pool.submit(ran.append, 3)  # the thread goes on with the next one
            await asyncio.wait_for(third, 2)
        finally:
            pool.shutdown()

    run(main())
    assert ran == [3]


def test_threads_start_on_demand_and_end_at_shutdown() -> None:
    before = {t.name for t in threading.enumerate()}

    async def main() -> None:
        pool = HandlerThreads(4, name="emq-test-pool")
        assert not [t for t in threading.enumerate() if t.name.startswith("emq-test-pool")]
        await asyncio.gather(*(pool.submit(time.sleep, 0.02) for _ in range(4)))
        mine = [t for t in threading.enumerate() if t.name.startswith("emq-test-pool")]
        assert 1 <= len(mine) <= 4
        pool.shutdown()
        with pytest.raises(RuntimeError, match="shut down"):
            pool.submit(time.sleep, 0)
        for t in mine:
            t.join(5)
            assert not t.is_alive()

    run(main())
    assert not {t.name for t in threading.enumerate()} - before


def test_shutdown_drops_the_jobs_still_queued() -> None:
    gate = threading.Event()
    ran: list[int] = []

    async def main() -> None:
        pool = HandlerThreads(1)
        first = pool.submit(lambda _: gate.wait(5), 0)
        await asyncio.sleep(0.05)  # the one thread is in the first job
        queued = [pool.submit(ran.append, i) for i in range(3)]
        pool.shutdown()
        gate.set()
        assert all(f.cancelled() for f in queued)
        assert await asyncio.wait_for(first, 5) is True  # the running one finishes

    run(main())
    assert ran == []


def test_a_plain_handler_serves_a_backlog_and_leaves_no_job_keys(q: Queue, r: redis.Redis) -> None:
    seen: set[Any] = set()
    threads: set[str] = set()

    def handle(job: JobContext) -> int:
        seen.add(job.data)
        threads.add(threading.current_thread().name)
        return 1

    q.enqueue_many(range(300))
    with running(Worker(q, handle, concurrency=8, config=FAST)) as w:
        wait_until(lambda: q.counts().completed == 300)
    assert seen == set(range(300))
    assert all(name.startswith("emq-handler") for name in threads)
    assert (w.stats.claimed, w.stats.completed, w.stats.stale) == (300, 300, 0)
    assert job_keys(r, q) == set()  # every row gone with its completion
    assert r.zcard(q.keys.active) == 0
