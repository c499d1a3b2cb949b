"""The worker runtime against the private server: handlers, context, leases,
failures, timeouts, shutdown, maintenance by the beat."""

from __future__ import annotations

import asyncio
import dataclasses
import threading
import time
from typing import Any

import pytest
import redis

from conftest import claim_records, dump
from echomq import (
    AsyncQueue,
    Backoff,
    InvalidArgument,
    InvalidName,
    JobCancelled,
    JobContext,
    Queue,
    Worker,
    WorkerConfig,
    lifecycle,
)
from echomq.embedded import EmbeddedServer
from echomq.results import Counts
from echomq.worker import plans
from test_lifecycle import run_score
from worker_support import FAST, job_keys, running, server_ms, wait_until

pytestmark = pytest.mark.both_servers


def settled_keys(r: redis.Redis, q: Queue) -> set[str]:
    """What a queue keeps once every job completed, beyond the metrics and the history
    series' hour keys, the wake tokens, the enqueue sequence and the 60 s receipts of
    at-most-once sending (the settled tombstones, one record per claim that leased a
    job)."""
    kept = {q.keys.metrics_completed, q.keys.wake, q.keys.settled, q.keys.claimreqs, q.keys.seq}
    kept |= claim_records(r, q)
    left = set(r.scan_iter(match=q.keys.pattern())) - kept
    return {k for k in left if not k.startswith(q.keys.base + "hist:")}


def test_async_handler_runs_each_job_with_its_context(q: Queue, r: redis.Redis) -> None:
    seen: list[tuple[Any, ...]] = []
    writes: list[Any] = []

    async def handle(job: JobContext) -> None:
        await job.progress({"step": 1})
        writes.append(await job.log("working"))
        writes.append(r.hget(q.keys.job(job.id), "progress"))
        seen.append((job.id, job.data, job.name, job.attempt, job.group, job.queue))

    flat = q.enqueue({"n": 1}, name="mail")
    grouped = q.enqueue({"n": 2}, group="g1")
    with running(Worker(q, handle, config=FAST)) as w:
        wait_until(lambda: q.counts().completed == 2)
    assert sorted(seen) == sorted(
        [
            (flat, {"n": 1}, "mail", 1, None, q.name),
            (grouped, {"n": 2}, None, 1, "g1", q.name),
        ]
    )
    assert writes == [1, '{"step":1}', 1, '{"step":1}']
    assert w.stats.claimed == 2 and w.stats.completed == 2 and w.stats.stale == 0
    assert job_keys(r, q) == set()
    assert r.zcard(q.keys.active) == 0 and r.hget(q.keys.gactive, "g1") is None


def test_sync_handler_writes_progress_and_logs_from_its_thread(
    q: Queue, r: redis.Redis, server: EmbeddedServer
) -> None:
    rows: list[Any] = []
    stamps: list[Any] = []
    loop_thread: list[bool] = []

    def handle(job: JobContext) -> None:
        loop_thread.append(threading.current_thread() is threading.main_thread())
        job.progress(40)  # blocks until written: nothing to await in a plain handler
        kept = job.log("one")
        rows.append((r.hget(q.keys.job(job.id), "progress"), r.lrange(q.keys.logs(job.id), 0, -1)))
        # the line's server time is written with it (add_log), aligned at the newest end
        (entry,) = q.get_job_log_entries(job.id)
        stamps.append((entry, r.lrange(q.keys.logtimes(job.id), 0, -1)))
        assert not job.cancelled
        rows.append(kept)

    q.enqueue("x")
    with running(Worker(q.name, handle, url=server.url, config=FAST)):
        wait_until(lambda: q.counts().completed == 1)
    assert rows[0] == ("40", ["one"])
    ((entry, raw),) = stamps
    assert entry.line == "one" and raw == [str(entry.time_ms)]
    assert loop_thread == [False]
    assert job_keys(r, q) == set()


def test_routes_by_job_name_with_fallback(q: Queue, r: redis.Redis) -> None:
    got: list[tuple[str, Any]] = []

    async def resize(job: JobContext) -> None:
        got.append(("resize", job.data))

    def anything(job: JobContext) -> None:
        got.append(("*", job.data))

    q.enqueue(1, name="resize")
    q.enqueue(2, name="other")
    q.enqueue(3)
    with running(Worker(q, {"resize": resize, "*": anything}, config=FAST)):
        wait_until(lambda: q.counts().completed == 3)
    assert sorted(got, key=lambda x: x[1]) == [("resize", 1), ("*", 2), ("*", 3)]


def test_unrouted_job_fails_and_is_dead_with_the_reason(q: Queue, r: redis.Redis) -> None:
    async def resize(job: JobContext) -> None:
        pass

    jid = q.enqueue(1, name="unknown", max_attempts=1)
    with running(Worker(q, {"resize": resize}, config=FAST)) as w:
        wait_until(lambda: q.job_state(jid) == "dead")
    row = r.hgetall(q.keys.job(jid))
    assert row["last_error"].startswith("LookupError: no handler for job name 'unknown'\n\n")
    assert row["failures"] == "1" and row["attempts"] == "1"
    assert w.stats.dead == 1 and w.stats.completed == 0
    assert not r.exists(q.keys.lock(jid))


def test_retries_follow_the_backoff_then_dead_with_traceback(q: Queue, r: redis.Redis) -> None:
    def boom(job: JobContext) -> None:
        raise ValueError(f"boom {job.attempt}")

    policy = Backoff.exponential(100_000, max_ms=150_000)
    jid = q.enqueue("x", max_attempts=3, backoff=policy)
    waits = []
    with running(Worker(q, boom, config=FAST)) as w:
        for failures in (1, 2):
            wait_until(lambda f=failures: r.hget(q.keys.job(jid), "failures") == str(f))
            wait_until(lambda: q.job_state(jid) == "scheduled")
            waits.append(int(r.zscore(q.keys.schedule, jid)) - server_ms(r))
            r.zadd(q.keys.schedule, {jid: 0}, xx=True)  # due now: the beat promotes it
        wait_until(lambda: q.job_state(jid) == "dead")
    # 1st failure waits 100 s, the 2nd 200 s capped at 150 s (less the ms elapsed since)
    assert 90_000 < waits[0] <= 100_000
    assert 140_000 < waits[1] <= 150_000
    row = r.hgetall(q.keys.job(jid))
    assert row["failures"] == "3" and row["attempts"] == "3" and row["state"] == "dead"
    assert row["last_error"].startswith("ValueError: boom 3\n\nTraceback (most recent call last)")
    assert r.zscore(q.keys.dead, jid) is not None
    assert q.metrics()["failed"]["count"] == 1
    assert (w.stats.retried, w.stats.dead) == (2, 1)
    assert not r.exists(q.keys.lock(jid))


def test_the_worker_default_backoff_applies_without_a_row_policy(q: Queue, r: redis.Redis) -> None:
    def boom(job: JobContext) -> None:
        raise RuntimeError("no")

    jid = q.enqueue("x")
    cfg = dataclasses.replace(FAST, backoff=Backoff.fixed(50_000))
    with running(Worker(q, boom, config=cfg)):
        wait_until(lambda: q.job_state(jid) == "scheduled")
    assert 45_000 < int(r.zscore(q.keys.schedule, jid)) - server_ms(r) <= 50_000
    assert r.hget(q.keys.job(jid), "last_error").startswith("RuntimeError: no")


def test_concurrency_limit_is_respected(q: Queue, r: redis.Redis) -> None:
    now = peak = active_peak = 0
    lock = threading.Lock()

    async def handle(job: JobContext) -> None:
        nonlocal now, peak, active_peak
        with lock:
            now += 1
            peak = max(peak, now)
        active_peak = max(active_peak, r.zcard(q.keys.active))
        await asyncio.sleep(0.03)
        with lock:
            now -= 1

    q.enqueue_many(range(12))
    with running(Worker(q, handle, concurrency=3, config=FAST)) as w:
        wait_until(lambda: q.counts().completed == 12)
    assert peak == 3  # the first claim takes 3 at once (12 were ready), never more
    assert active_peak <= 3
    assert w.stats.claimed == 12


def test_sync_handlers_respect_concurrency_too(q: Queue, r: redis.Redis) -> None:
    now = peak = 0
    lock = threading.Lock()

    def handle(job: JobContext) -> None:
        nonlocal now, peak
        with lock:
            now += 1
            peak = max(peak, now)
        time.sleep(0.02)
        with lock:
            now -= 1

    q.enqueue_many(range(8))
    with running(Worker(q, handle, concurrency=2, config=FAST)):
        wait_until(lambda: q.counts().completed == 8)
    assert peak == 2


def test_stale_completion_is_refused_after_the_lease_moved_on(q: Queue, r: redis.Redis) -> None:
    started, go_on = threading.Event(), threading.Event()
    jid = q.enqueue("x")

    async def blocks_the_loop(job: JobContext) -> None:
        started.set()
        go_on.wait(10)  # a handler that blocks the event loop: no beat can extend

    with running(Worker(q, blocks_the_loop, concurrency=1, config=FAST)) as w:
        started.wait(10)
        q.release(jid, 1)  # the lease moves on (as a reap would) ...
        taken = q.claim()  # ... and another worker holds the job now
        assert taken is not None and taken.id == jid and taken.token == 2
        go_on.set()
        wait_until(lambda: w.stats.stale == 1)
        assert w.stats.completed == 0
    row = r.hgetall(q.keys.job(jid))
    assert row["state"] == "active" and row["attempts"] == "2" and "failures" not in row
    assert q.metrics()["completed"].get("count", 0) == 0
    q.complete(jid, 2)  # the current holder's completion counts, once
    assert q.metrics()["completed"]["count"] == 1


def test_a_lost_lease_cancels_the_job_and_it_is_not_settled(q: Queue, r: redis.Redis) -> None:
    started = threading.Event()
    seen: list[str | None] = []
    jid = q.enqueue("x")

    def cooperative(job: JobContext) -> None:
        started.set()
        while not job.cancelled:
            time.sleep(0.005)
        seen.append(job.cancel_reason)
        job.check_cancelled()

    with running(Worker(q, cooperative, concurrency=1, config=FAST)) as w:
        started.wait(10)
        q.release(jid, 1)
        assert q.claim() is not None  # token 2 elsewhere; the next beat sees token 1 stale
        wait_until(lambda: w.stats.lost == 1)
        wait_until(lambda: seen)  # the handler's thread notices at its next check
    assert seen == ["lease_lost"]
    assert (w.stats.completed, w.stats.retried, w.stats.stale) == (0, 0, 0)
    row = r.hgetall(q.keys.job(jid))
    assert row["state"] == "active" and row["attempts"] == "2" and "failures" not in row


def test_a_handler_past_the_job_timeout_fails(q: Queue, r: redis.Redis) -> None:
    async def slow(job: JobContext) -> None:
        await asyncio.sleep(30)

    jid = q.enqueue("x", max_attempts=1)
    cfg = dataclasses.replace(FAST, job_timeout_ms=50)
    with running(Worker(q, slow, config=cfg)) as w:
        wait_until(lambda: q.job_state(jid) == "dead")
    assert r.hget(q.keys.job(jid), "last_error") == (
        "TimeoutError: the handler ran longer than 50 ms"
    )
    assert w.stats.timed_out == 1 and w.stats.dead == 1


def test_shutdown_releases_jobs_still_running_after_the_grace(q: Queue, r: redis.Redis) -> None:
    started = threading.Semaphore(0)

    async def forever(job: JobContext) -> None:
        started.release()
        await asyncio.sleep(60)

    ids = q.enqueue_many(range(6), priority=5)
    cfg = dataclasses.replace(FAST, grace_ms=100)
    with running(Worker(q, forever, concurrency=3, config=cfg)) as w:
        for _ in range(3):
            assert started.acquire(timeout=10)
    assert w.stats.released == 3 and w.stats.completed == 0
    assert q.counts() == Counts(
        pending=6, active=0, scheduled=0, dead=0, completed=0, failed=0, paused=False
    )
    attempts = sorted(r.hget(q.keys.job(j), "attempts") for j in ids)
    assert attempts == ["0", "0", "0", "1", "1", "1"]  # kept: the next claim counts on
    assert all(r.hget(q.keys.job(j), "failures") is None for j in ids)
    # back at its priority, in its old place (the batch took seqs 0..5)
    assert all(r.zscore(q.keys.pending, j) == run_score(5, i) for i, j in enumerate(ids))
    assert not any(r.exists(q.keys.lock(j)) for j in ids)


def test_shutdown_lets_running_jobs_finish_within_the_grace(q: Queue, r: redis.Redis) -> None:
    started = threading.Semaphore(0)
    stopping = threading.Event()

    def slowish(job: JobContext) -> None:
        started.release()
        # still running when the stop is asked for, however slow the machine is
        stopping.wait(10)
        time.sleep(0.15)

    q.enqueue_many(range(5))
    with running(Worker(q, slowish, concurrency=2, config=FAST)) as w:
        for _ in range(2):
            assert started.acquire(timeout=10)
        w.request_stop()
        stopping.set()
    # the two running jobs finished and were completed; the rest was never claimed
    assert (w.stats.completed, w.stats.released) == (2, 0)
    counts = q.counts()
    assert counts.completed == 2 and counts.pending == 3 and counts.active == 0


def test_a_sync_handler_sees_the_shutdown_and_its_job_is_released(q: Queue, r: redis.Redis) -> None:
    started = threading.Event()
    reasons: list[str] = []

    def cooperative(job: JobContext) -> None:
        started.set()
        try:
            while True:
                time.sleep(0.005)
                job.check_cancelled()
        except JobCancelled as exc:
            reasons.append(exc.reason)
            raise

    jid = q.enqueue("x")
    cfg = dataclasses.replace(FAST, grace_ms=50)
    with running(Worker(q, cooperative, config=cfg)) as w:
        started.wait(10)
    wait_until(lambda: reasons)
    assert reasons == ["shutdown"] and w.stats.released == 1
    row = r.hgetall(q.keys.job(jid))
    assert row["state"] == "pending" and row["attempts"] == "1"


def test_paused_queue_is_not_served_until_resumed(q: Queue, r: redis.Redis) -> None:
    async def handle(job: JobContext) -> None:
        pass

    q.pause()
    jid = q.enqueue("x")
    with running(Worker(q, handle, config=FAST)) as w:
        time.sleep(0.15)  # several beats and a wake token: the gate stays closed
        assert q.job_state(jid) == "pending" and w.stats.claimed == 0
        q.resume()
        wait_until(lambda: q.counts().completed == 1)
    assert settled_keys(r, q) - {q.keys.audit} == set()


def test_the_beat_promotes_due_jobs_and_recovers_expired_leases(q: Queue, r: redis.Redis) -> None:
    done: list[Any] = []

    async def handle(job: JobContext) -> None:
        done.append((job.data, job.attempt))

    q.enqueue("later", delay_ms=30)
    crashed = q.enqueue("crashed")
    c = q.claim(lease_ms=50)  # a worker that died holding it
    assert c is not None and c.id == crashed
    with running(Worker(q, handle, config=FAST)):
        wait_until(lambda: q.counts().completed == 2)
    assert sorted(done) == [("crashed", 2), ("later", 1)]
    assert settled_keys(r, q) == set()


async def test_arun_serves_on_the_hosts_loop(aq: AsyncQueue, r: redis.Redis) -> None:
    seen: list[int] = []

    async def handle(job: JobContext) -> None:
        seen.append(job.data)

    await aq.enqueue_many(range(5))
    worker = Worker(aq, handle, config=FAST)
    task = asyncio.create_task(worker.arun())
    while (await aq.counts()).completed < 5:
        await asyncio.sleep(0.005)
    worker.request_stop()
    stats = await asyncio.wait_for(task, 10)
    assert sorted(seen) == [0, 1, 2, 3, 4] and stats.completed == 5
    with pytest.raises(RuntimeError):
        await worker.arun()  # a worker runs once


def test_bad_settings_raise_before_any_connection() -> None:
    with pytest.raises(InvalidName):
        Worker("bad name!", lambda job: None)
    with pytest.raises(InvalidArgument):
        Worker("q", {})
    with pytest.raises(InvalidArgument):
        Worker("q", {"a": 3})  # type: ignore[dict-item]
    with pytest.raises(InvalidArgument):
        Worker("q", lambda job: None, concurrency=0)
    with pytest.raises(InvalidArgument):
        WorkerConfig(lease_ms=100, beat_ms=80)
    with pytest.raises(InvalidArgument):
        WorkerConfig(lease_ms=1000, lock_ms=10)
    cfg = WorkerConfig(lease_ms=30_000)
    assert (cfg.beat, cfg.lock, cfg.pool_size) == (1000, 60_000, 10)
    w = Worker("q", lambda job: None, concurrency=4, lease_ms=900)
    assert (w.config.concurrency, w.config.lease_ms, w.config.beat) == (4, 900, 300)
    assert w.stop(timeout=1)  # never started: nothing to wait for


def test_complete_and_claim_completes_but_never_claims_through_a_closed_gate(
    q: Queue, r: redis.Redis
) -> None:
    first = q.enqueue("a")
    q.enqueue("b")
    c = q.claim()
    assert c is not None and c.id == first
    q.pause()
    pending_before = r.zrange(q.keys.pending, 0, -1, withscores=True)
    got = q.runner.drive(plans.complete_and_claim(q.ctx, [(first, 1)], 5, 1000, 2000))
    assert got == plans.ClaimRound([], [], [])
    assert q.job_state(first) is None and q.metrics()["completed"]["count"] == 1
    assert r.zrange(q.keys.pending, 0, -1, withscores=True) == pending_before
    before = dump(r, q)
    assert q.runner.drive(lifecycle.claim_behind_gate(q.ctx, 1, 5, 1000, 2000)) == []  # paused
    assert dump(r, q) == before
    q.resume()
    got = q.runner.drive(plans.complete_and_claim(q.ctx, [(first, 1)], 5, 1000, 2000))
    # sent again: "gone", read as the completion that landed; nothing stale
    assert got.gone == [first] and got.stale == []
    assert [j.payload for j in got.claimed] == ["b"]
    assert q.metrics()["completed"]["count"] == 1
    assert r.get(q.keys.lock(got.claimed[0].id)) == "1"
