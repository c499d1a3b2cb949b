"""The worker under faults: a server at ``maxmemory`` that refuses MULTI/EXEC, replies
lost after the write landed, outages logged in two lines, counters that add up."""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
import redis

from echomq import JobContext, Queue, ServerUnavailable, Worker, WorkerConfig
from echomq.embedded import EmbeddedServer
from echomq.scripts import Batch, Eval, Op
from echomq.transport import AsyncRunner
from echomq.worker import waker as waker_module
from echomq.worker.outage import Outage
from echomq.worker.waker import WaitState
from worker_support import FAST, job_keys, running, wait_until

pytestmark = pytest.mark.slow  # a full server, lost replies, outages: fault scenarios

SLOW_BEAT = WorkerConfig(lease_ms=20_000, beat_ms=4_000, grace_ms=2_000)


def _is_completion(op: Op) -> bool:
    ops = op.ops if isinstance(op, Batch) else (op,)
    return any(isinstance(o, Eval) and o.script.name == "complete" for o in ops)


@pytest.fixture()
def lose_completion_replies(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """The worker's completions land on the server, then every other reply is lost
    (the call raises as a cut connection would). Yields the count of replies lost."""
    real = AsyncRunner.execute
    lost = [0]
    calls = [0]

    async def lossy(self: AsyncRunner, op: Op) -> Any:
        reply = await real(self, op)
        if _is_completion(op):
            calls[0] += 1
            if calls[0] % 2 == 1:
                lost[0] += 1
                raise ServerUnavailable("connection reset (test: reply lost)")
        return reply

    monkeypatch.setattr(AsyncRunner, "execute", lossy)
    yield lost


# ---- a full server ----------------------------------------------------------------------


@pytest.fixture()
def full_server() -> Iterator[EmbeddedServer]:
    """A private server (never the shared one) that gets ``maxmemory`` + ``noeviction``."""
    with EmbeddedServer() as srv:
        yield srv


def _fill(r: redis.Redis) -> None:
    # a limit under what the server holds: every write that may grow memory is refused
    r.config_set("maxmemory-policy", "noeviction")
    r.config_set("maxmemory", "1")


def _free(r: redis.Redis) -> None:
    r.config_set("maxmemory", "0")


def test_a_refused_claim_behind_the_wait_falls_back_to_a_plain_claim(
    full_server: EmbeddedServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(waker_module, "PLAIN_CLAIM_S", 0.5)
    r = redis.Redis.from_url(full_server.url, decode_responses=True)
    q = Queue("full", url=full_server.url)
    seen: list[Any] = []

    async def handle(job: JobContext) -> None:
        seen.append(job.data)

    with running(Worker(q, handle, config=SLOW_BEAT)) as w:
        wait_until(lambda: w._engine._waker is not None)
        waker = w._engine._waker
        wait_until(lambda: waker.state is WaitState.WAITING_WITH_CLAIM)
        # a full server refuses an enqueue: the job waits in the schedule meanwhile
        jid = q.enqueue("while full", delay_ms=300)
        _fill(r)
        with pytest.raises(redis.ResponseError, match="maxmemory"):
            r.set("more", "x")  # the server is full indeed
        time.sleep(0.4)
        started = time.monotonic()
        assert q.promote() == 1  # its wake token ends the wait; EXEC is refused (OOM)
        wait_until(lambda: q.metrics()["completed"].get("count") == 1, timeout=3)
        took_full = time.monotonic() - started
        # the worker counts the completion once the server's answer is back, a moment
        # after the server counted it: wait on the worker's own counter
        wait_until(lambda: w.stats.completed == 1)
        assert seen == ["while full"] and q.job_state(jid) is None
        assert waker.plain_until > 0  # the refusal was seen: claims went plainly
        assert (w.stats.claimed, w.stats.completed, w.stats.errors) == (1, 1, 0)
        _free(r)
        time.sleep(0.6)  # past PLAIN_CLAIM_S: the claim rides behind the wait again
        wait_until(lambda: waker.state is WaitState.WAITING_WITH_CLAIM, timeout=5)
        started = time.monotonic()
        jid2 = q.enqueue("after")
        wait_until(lambda: q.metrics()["completed"].get("count") == 2, timeout=3)
        took_freed = time.monotonic() - started
    # both well within one beat (4 s): neither waited for the beat's timeout
    assert took_full < 1.0 and took_freed < 1.0
    assert q.job_state(jid2) is None and r.zcard(q.keys.active) == 0
    assert job_keys(r, q) == set() and r.zcard(q.keys.pending) == 0
    assert w.stats.claimed == 2 == w.stats.completed == w.stats.accounted
    q.close()


# ---- lost replies, counters --------------------------------------------------------------


def test_a_gone_answer_to_a_completion_sent_again_is_read_as_completed(
    q: Queue, r: redis.Redis, lose_completion_replies: list[int]
) -> None:
    async def handle(job: JobContext) -> None:
        pass

    with running(Worker(q, handle, config=FAST)) as w:
        jid = q.enqueue("once")
        wait_until(lambda: w.stats.completed == 1)
    assert lose_completion_replies[0] == 1  # the first completion's reply was lost
    assert (w.stats.completed, w.stats.stale, w.stats.errors) == (1, 0, 1)
    assert w.stats.claimed == w.stats.accounted == 1
    assert q.metrics()["completed"]["count"] == 1  # completed once, on the server too
    assert q.job_state(jid) is None and job_keys(r, q) == set()
    assert r.zcard(q.keys.active) == 0 and r.zcard(q.keys.pending) == 0


def test_the_counters_add_up_under_lost_replies(
    q: Queue, r: redis.Redis, lose_completion_replies: list[int]
) -> None:
    n = 60

    async def handle(job: JobContext) -> None:
        if job.data % 5 == 0:
            raise RuntimeError("fails")

    cfg = WorkerConfig(lease_ms=2000, beat_ms=50, grace_ms=2000, concurrency=8, claim_batch=4)
    ids = q.enqueue_many(list(range(n)), max_attempts=1)
    with running(Worker(q, handle, config=cfg)) as w:
        wait_until(lambda: w.stats.completed + w.stats.dead == n)
    s = w.stats
    assert lose_completion_replies[0] >= 1 and s.errors >= 1
    assert s.claimed == n == s.accounted
    assert (s.completed, s.dead, s.retried, s.stale, s.released, s.lost) == (48, 12, 0, 0, 0, 0)
    # the server agrees, job by job
    assert q.metrics()["completed"]["count"] == 48
    assert sorted(r.zrange(q.keys.dead, 0, -1)) == sorted(ids[::5])
    assert r.zcard(q.keys.active) == 0 and r.zcard(q.keys.pending) == 0
    assert job_keys(r, q) == {q.keys.job(j) for j in ids[::5]}


def test_released_and_completed_add_up_at_shutdown(q: Queue, r: redis.Redis) -> None:
    async def handle(job: JobContext) -> None:
        if job.data == "slow":
            while True:
                await asyncio.sleep(0.01)

    cfg = WorkerConfig(lease_ms=5000, beat_ms=50, grace_ms=200, concurrency=4)
    slow = [q.enqueue("slow") for _ in range(2)]
    quick = [q.enqueue("quick") for _ in range(3)]
    with running(Worker(q, handle, config=cfg)) as w:
        wait_until(lambda: w.stats.completed == 3 and w.stats.claimed == 5)
    s = w.stats
    assert (s.claimed, s.completed, s.released, s.abandoned) == (5, 3, 2, 0)
    assert s.claimed == s.accounted
    assert sorted(r.zrange(q.keys.pending, 0, -1)) == sorted(slow)
    assert all(q.job_state(j) is None for j in quick) and r.zcard(q.keys.active) == 0
    assert job_keys(r, q) == {q.keys.job(j) for j in slow}


# ---- quiet recovery -----------------------------------------------------------------------


def test_an_outage_is_two_lines_and_tracebacks_only_at_debug(
    caplog: pytest.LogCaptureFixture,
) -> None:
    now = [100.0]
    outage = Outage(logging.getLogger("echomq.worker"), "q1", clock=lambda: now[0])
    caplog.set_level(logging.DEBUG, logger="echomq.worker")
    for _ in range(50):
        try:
            raise ConnectionResetError("reset by peer")
        except ConnectionResetError as exc:
            outage.failed(exc, "serving")
    outage.failed(OSError("down"), "the beat")
    now[0] += 1.0
    for _ in range(5):  # the beat still fails while serving works: no new line
        outage.ok("serving")
        outage.failed(OSError("down"), "the beat")
    now[0] += 1.5
    outage.ok("the beat")  # every failing part has worked again: recovered
    outage.ok("serving")  # no outage: nothing more to say
    warnings = [rec for rec in caplog.records if rec.levelno >= logging.WARNING]
    assert [rec.getMessage() for rec in warnings] == [
        "worker q1: serving failed: ConnectionResetError('reset by peer'); "
        "retrying quietly until it recovers",
        "worker q1: recovered after 2.5 s (56 errors)",
    ]
    assert all(rec.exc_info is None for rec in warnings)
    debug = [rec for rec in caplog.records if rec.levelno == logging.DEBUG]
    assert len(debug) == 56 and all(rec.exc_info is not None for rec in debug)
    assert not outage.ongoing and outage.errors == 0


def test_a_worker_logs_one_line_per_outage(
    q: Queue, r: redis.Redis, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    real = AsyncRunner.execute
    down = [True]

    async def unreachable(self: AsyncRunner, op: Op) -> Any:
        if down[0]:
            raise ServerUnavailable("connection refused (test)")
        return await real(self, op)

    async def handle(job: JobContext) -> None:
        pass

    caplog.set_level(logging.INFO, logger="echomq.worker")
    jid = q.enqueue("after the outage")
    monkeypatch.setattr(AsyncRunner, "execute", unreachable)
    with running(Worker(q, handle, config=FAST)) as w:
        wait_until(lambda: w.stats.errors >= 20)
        down[0] = False
        wait_until(lambda: w.stats.completed == 1)
        wait_until(lambda: not w._engine._outage.ongoing)  # the beat has worked too
    lines = [rec.getMessage() for rec in caplog.records if rec.levelno >= logging.WARNING]
    assert len(lines) == 2, lines
    assert "failed" in lines[0] and "recovered after" in lines[1]
    assert all(rec.exc_info is None for rec in caplog.records if rec.levelno >= logging.INFO)
    assert q.job_state(jid) is None and job_keys(r, q) == set()
    assert w.stats.claimed == 1 == w.stats.accounted


def test_outcomes_not_sent_by_shutdown_are_counted_abandoned(
    q: Queue, r: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = AsyncRunner.execute
    down = [False]

    async def maybe_down(self: AsyncRunner, op: Op) -> Any:
        if down[0]:
            raise ServerUnavailable("connection refused (test)")
        return await real(self, op)

    monkeypatch.setattr(AsyncRunner, "execute", maybe_down)
    release, returned = threading.Event(), threading.Event()

    def handle(job: JobContext) -> None:  # a plain handler, in the thread pool
        release.wait(10)
        returned.set()

    cfg = WorkerConfig(lease_ms=5000, beat_ms=50, grace_ms=300)
    jid = q.enqueue("finishes while the server is away")
    with running(Worker(q, handle, config=cfg)) as w:
        wait_until(lambda: w.stats.claimed == 1)
        down[0] = True  # from here the worker reaches nothing
        release.set()
        wait_until(returned.is_set)
        wait_until(lambda: w.stats.errors >= 1)
    s = w.stats
    assert (s.claimed, s.completed, s.abandoned) == (1, 0, 1) and s.accounted == 1
    # nothing was completed: the job is still leased, and its lease runs out
    assert r.zrange(q.keys.active, 0, -1) == [jid] and q.job_state(jid) == "active"
    assert job_keys(r, q) >= {q.keys.job(jid)}


# ---- a server that is not there yet ---------------------------------------------------------


def test_a_worker_started_before_its_server_waits_for_it(
    qname: str, caplog: pytest.LogCaptureFixture
) -> None:
    late = EmbeddedServer(module=False)  # its port is chosen now; nothing listens there yet
    seen: list[Any] = []
    failed: list[BaseException] = []

    async def handle(job: JobContext) -> None:
        seen.append(job.data)

    def main() -> None:
        try:
            w.run()
        except BaseException as exc:  # surfaced below
            failed.append(exc)

    caplog.set_level(logging.INFO, logger="echomq.worker")
    w = Worker(qname, handle, url=late.url, config=FAST)
    thread = threading.Thread(target=main, daemon=True)
    thread.start()
    try:
        # the version check meets no server: retried with the loop's pause, not fatal
        wait_until(lambda: w.stats.errors >= 3 or failed)
        assert not failed and thread.is_alive() and not w.ready.is_set()
        with late:
            wait_until(w.ready.is_set)
            q = Queue(qname, url=late.url)
            jid = q.enqueue("after the wait")
            wait_until(lambda: seen == ["after the wait"])
            wait_until(lambda: w.stats.completed == 1)
            assert q.job_state(jid) is None
            q.close()
            assert w.stop(timeout=15)
    finally:
        w.stop(timeout=15)
        thread.join(15)
    assert not failed, failed
    worker_records = [rec for rec in caplog.records if rec.name == "echomq.worker"]
    lines = [rec.getMessage() for rec in worker_records if rec.levelno >= logging.WARNING]
    assert len(lines) == 2, lines  # the worker's two outage lines (the client logs its own)
    assert lines[0].startswith(f"worker {qname}: the version check failed: ServerUnavailable(")
    assert lines[1].startswith(f"worker {qname}: recovered after ")
    assert w.stats.claimed == 1 == w.stats.accounted


def test_a_worker_stopped_while_waiting_for_its_server_returns(qname: str) -> None:
    nobody = EmbeddedServer(module=False)  # never started: nothing listens on its port
    w = Worker(qname, lambda job: None, url=nobody.url, config=FAST)
    thread = threading.Thread(target=w.run, daemon=True)
    thread.start()
    wait_until(lambda: w.stats.errors >= 2)
    assert w.stop(timeout=5)  # the pause between checks ends at the stop
    thread.join(5)
    assert not thread.is_alive() and not w.ready.is_set()
    assert w.stats.claimed == 0
