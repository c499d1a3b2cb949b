"""Batch handlers (issue 28, item 3).

``Worker(q, handler, batch=Batch(size, min_size, wait_ms))`` hands the handler a list
of jobs claimed in one call; each member is settled on its own (a per-item result, an
exception in its place, ``job.fail(err)``), a raise fails them all (each retried by its
own policy), cancel applies per job, and a killed batch worker loses no job.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import threading
import time
from typing import Any

import pytest
import redis

from echomq import (
    Backoff,
    Batch,
    InvalidArgument,
    JobContext,
    Queue,
    RateLimited,
    Worker,
    WorkerConfig,
)
from echomq.embedded import EmbeddedServer
from worker_support import FAST, job_keys, running, wait_until


def test_one_call_takes_up_to_size_jobs(q: Queue, r: redis.Redis) -> None:
    q.enqueue_many([{"n": i} for i in range(250)])
    sizes: list[int] = []

    def handle(jobs: list[JobContext]) -> None:
        sizes.append(len(jobs))

    with running(Worker(q, handle, config=FAST, concurrency=1, batch=Batch(size=100))):
        wait_until(lambda: q.counts().completed == 250)
    assert sizes == [100, 100, 50]  # each batch claimed in one call
    assert q.counts().pending == 0 and job_keys(r, q) == set()


def test_members_settle_independently(q: Queue, r: redis.Redis) -> None:
    ok = q.enqueue({"n": 0}, keep_ms=60_000)
    by_result = q.enqueue({"n": 1}, max_attempts=1)
    by_mark = q.enqueue({"n": 2}, max_attempts=1)
    retried = q.enqueue({"n": 3}, backoff=Backoff.fixed(60_000))
    seen: list[list[str]] = []

    def handle(jobs: list[JobContext]) -> list[Any]:
        seen.append([j.id for j in jobs])
        out: list[Any] = []
        for job in jobs:
            if job.data["n"] == 2:
                job.fail("bad row")
            out.append(ValueError("rejected") if job.data["n"] in (1, 3) else job.data["n"] * 10)
        return out

    with running(Worker(q, handle, config=FAST, batch=Batch(size=10, min_size=4))):
        wait_until(lambda: q.counts().dead == 2 and q.counts().scheduled == 1)
    assert seen == [sorted([ok, by_result, by_mark, retried], key=seen[0].index)]
    assert len(seen[0]) == 4
    assert q.counts().completed == 1 and q.result(ok, 1) == 0
    assert (r.hget(q.keys.job(by_result), "last_error") or "").startswith("ValueError: rejected")
    assert (r.hget(q.keys.job(by_mark), "last_error") or "").startswith("JobFailure: bad row")
    # the retried member keeps its own backoff: scheduled a minute out
    assert r.hget(q.keys.job(retried), "state") == "scheduled"
    due = r.zscore(q.keys.schedule, retried)
    assert due is not None and due - time.time() * 1000 > 30_000


def test_a_raise_fails_every_member_each_by_its_own_policy(q: Queue, r: redis.Redis) -> None:
    once = q.enqueue({"n": 1}, max_attempts=1)
    again = [q.enqueue({"n": n}, backoff=Backoff.fixed(60_000)) for n in (2, 3)]

    def handle(jobs: list[JobContext]) -> None:
        raise RuntimeError("the bulk insert failed")

    with running(Worker(q, handle, config=FAST, batch=Batch(size=10, min_size=3))):
        wait_until(lambda: q.counts().dead == 1 and q.counts().scheduled == 2)
    assert r.hget(q.keys.job(once), "state") == "dead"
    for jid in again:
        assert r.hget(q.keys.job(jid), "state") == "scheduled"
        assert "the bulk insert failed" in (r.hget(q.keys.job(jid), "last_error") or "")
    assert r.zcard(q.keys.active) == 0


def test_a_rate_limited_batch_hands_every_member_back(q: Queue, r: redis.Redis) -> None:
    # a bulk API answered 429 for the whole batch: each member goes back to its place,
    # no failure counted, and the queue is held; the next batch runs after the hold
    ids = [q.enqueue({"n": n}) for n in range(3)]
    calls: list[tuple[float, list[str]]] = []

    def handle(jobs: list[JobContext]) -> None:
        calls.append((time.monotonic(), [j.id for j in jobs]))
        if len(calls) == 1:
            raise RateLimited(800)

    with running(Worker(q, handle, config=FAST, batch=Batch(size=10, min_size=3))) as w:
        wait_until(lambda: q.counts().completed == 3, timeout=10)
    assert [sorted(c[1]) for c in calls] == [sorted(ids), sorted(ids)]
    assert calls[1][0] - calls[0][0] >= 0.7  # the hold (800 ms, server clock) was kept
    assert (w.stats.rate_limited, w.stats.retried, w.stats.dead) == (3, 0, 0)
    for jid in ids:
        assert r.hget(q.keys.job(jid), "failures") in (None, "0")
    assert r.zcard(q.keys.active) == 0 and q.counts().dead == 0


def test_min_size_waits_up_to_wait_ms(q: Queue) -> None:
    q.enqueue_many([{"n": i} for i in range(3)])
    calls: list[tuple[int, float]] = []
    t0 = time.monotonic()

    async def handle(jobs: list[JobContext]) -> None:
        calls.append((len(jobs), time.monotonic() - t0))

    batch = Batch(size=10, min_size=5, wait_ms=300)
    with running(Worker(q, handle, config=FAST, batch=batch)):
        wait_until(lambda: q.counts().completed == 3)
        # two more arrive: under min_size again, held until wait_ms
        q.enqueue_many([{"n": i} for i in range(2)])
        wait_until(lambda: q.counts().completed == 5)
    assert [n for n, _ in calls] == [3, 2]
    assert calls[0][1] >= 0.25  # held for the wait (never asserted tightly above)


def test_cancel_applies_per_member(q: Queue, r: redis.Redis) -> None:
    ids = q.enqueue_many([{"n": i} for i in range(3)])
    started = threading.Event()

    async def handle(jobs: list[JobContext]) -> list[Any]:
        started.set()
        # run until the cancelled member sees its flag (the operator's cancel)
        while not any(j.cancelled for j in jobs):
            await asyncio.sleep(0.01)
        return [JobFailureLike() if j.cancelled else "done" for j in jobs]

    with running(Worker(q, handle, config=FAST, batch=Batch(size=10, min_size=3))):
        started.wait(10)
        q.cancel_job(ids[1])
        wait_until(lambda: q.counts().completed == 2 and q.counts().dead == 1)
    assert r.hget(q.keys.job(ids[1]), "state") == "dead"
    assert "JobCancelled" in (r.hget(q.keys.job(ids[1]), "last_error") or "")


class JobFailureLike(Exception):
    """A member's error in a per-item result list."""


def test_a_job_timeout_cancels_the_batch_call(q: Queue, r: redis.Redis) -> None:
    ids = q.enqueue_many([{"n": i} for i in range(2)], max_attempts=1)

    async def handle(jobs: list[JobContext]) -> None:
        await asyncio.sleep(30)

    cfg = WorkerConfig(lease_ms=400, beat_ms=20, grace_ms=2000, job_timeout_ms=200)
    with running(Worker(q, handle, config=cfg, batch=Batch(size=5, min_size=2))) as w:
        wait_until(lambda: q.counts().dead == 2)
    assert w.stats.timed_out == 2
    for jid in ids:
        assert "TimeoutError" in (r.hget(q.keys.job(jid), "last_error") or "")


def test_overlapping_rounds_never_hold_more_than_the_batches(q: Queue, r: redis.Redis) -> None:
    # two batches or more: the serve loop keeps two round trips in flight, and the
    # claim in flight counts against the slots, so the jobs in handlers never pass
    # concurrency x size; the server's leases also hold the jobs done whose completions
    # are still on their way in the two rounds (done, not yet answered: at most the
    # slots' worth again); every job completes once
    q.enqueue_many([{"n": i} for i in range(300)])
    leased: list[int] = []
    in_hand: list[int] = []
    seen: list[int] = []
    lock = threading.Lock()
    now = [0]

    def handle(jobs: list[JobContext]) -> None:
        with lock:
            now[0] += len(jobs)
            in_hand.append(now[0])
        leased.append(int(r.zcard(q.keys.active)))
        seen.extend(job.data["n"] for job in jobs)
        time.sleep(0.002)
        with lock:
            now[0] -= len(jobs)

    worker = Worker(q, handle, config=FAST, concurrency=3, batch=Batch(size=10))
    with running(worker):
        wait_until(lambda: q.counts().completed == 300)
    assert sorted(seen) == list(range(300))  # each job handled once
    assert len(in_hand) >= 30 and max(in_hand) <= 30
    assert max(leased) <= 2 * 30
    assert worker.stats.completed == 300 and worker.stats.claimed == 300
    assert q.counts().pending == 0 and q.counts().active == 0 and job_keys(r, q) == set()


def test_the_registry_shows_the_batch(q: Queue) -> None:
    w = Worker(q, lambda jobs: None, config=FAST, batch=Batch(size=50, min_size=2, wait_ms=100))
    with running(w):
        (info,) = wait_until(q.workers)
    assert info.batch == "size=50,min_size=2,wait_ms=100" and info.order == ""


def test_bad_batches_are_refused() -> None:
    for bad in (
        {"size": 0},
        {"size": 1001},
        {"size": 10, "min_size": 11},
        {"min_size": 0},
        {"wait_ms": -1},
    ):
        with pytest.raises(InvalidArgument):
            Batch(**bad)
    with pytest.raises(InvalidArgument):
        Worker("somequeue", lambda jobs: None, batch=100)  # type: ignore[arg-type]


KILLED_BATCH_WORKER = """
import sys, time
from echomq import Batch, Worker, WorkerConfig

def handle(jobs):
    print("started", len(jobs), flush=True)
    time.sleep(60)  # killed long before this returns

config = WorkerConfig(lease_ms=300, beat_ms=50)
Worker(sys.argv[1], handle, url=sys.argv[2], config=config, batch=Batch(size=50)).run()
"""


@pytest.mark.slow
def test_a_killed_batch_worker_loses_no_job(
    q: Queue, r: redis.Redis, server: EmbeddedServer
) -> None:
    ids = q.enqueue_many([{"n": i} for i in range(30)])
    proc = subprocess.Popen(
        [sys.executable, "-c", KILLED_BATCH_WORKER, q.name, server.url],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().split() == ["started", "30"]
        assert r.zcard(q.keys.active) == 30
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
    assert proc.returncode == -signal.SIGKILL
    served: list[tuple[str, int]] = []

    def handle(jobs: list[JobContext]) -> None:
        served.extend((j.id, j.attempt) for j in jobs)

    with running(Worker(q, handle, config=FAST, batch=Batch(size=50))):
        wait_until(lambda: q.counts().completed == 30)
    assert sorted(served) == sorted((jid, 2) for jid in ids)  # each served once more
    assert q.metrics()["completed"]["count"] == 30
    assert r.zcard(q.keys.active) == 0 and job_keys(r, q) == set()
