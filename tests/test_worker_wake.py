"""The idle worker's wait (``echomq.worker.waker.Waker``): the claim that rides behind the
BLPOP under ``WATCH`` of the pause-gate read, and how a wait ends.

The beat here is long (4 s), so nothing below can be the beat's timeout at work.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
import redis

from echomq import JobContext, Queue, Worker, WorkerConfig
from worker_support import running, wait_until

SLOW_BEAT = WorkerConfig(lease_ms=20_000, beat_ms=4_000, grace_ms=2_000)


def waker_state(w: Worker) -> str:
    waker = w._engine._waker
    return "none" if waker is None else waker.state.value


def blocked_on(r: redis.Redis, q: Queue) -> list[dict[str, Any]]:
    """The clients blocked in BLPOP (on this test's server: its queues' workers)."""
    return [c for c in r.client_list() if c["cmd"] == "blpop" and "b" in c["flags"]]


def test_a_job_wakes_a_worker_waiting_with_a_claim_and_is_served(q: Queue, r: redis.Redis) -> None:
    seen: list[Any] = []

    async def handle(job: JobContext) -> None:
        seen.append(job.data)

    with running(Worker(q, handle, config=SLOW_BEAT)) as w:
        wait_until(lambda: waker_state(w) == "waiting_with_claim")
        # the state is set just before the BLPOP is sent: wait for the server to block it
        wait_until(lambda: blocked_on(r, q))
        jid = q.enqueue("now")
        wait_until(lambda: q.counts().completed == 1, timeout=2)
        assert seen == ["now"] and q.job_state(jid) is None
        assert w.stats.claimed == 1


def test_a_pause_after_the_gate_read_drops_the_claim_behind_the_wait(
    q: Queue, r: redis.Redis
) -> None:
    async def handle(job: JobContext) -> None:
        pass

    with running(Worker(q, handle, config=SLOW_BEAT)) as w:
        wait_until(
            lambda: waker_state(w) == "waiting_with_claim"
        )  # the gate read open, then blocked
        q.pause()
        jid = q.enqueue("held")  # its wake token ends the BLPOP; EXEC must not claim
        wait_until(lambda: r.llen(q.keys.wake) == 0 and waker_state(w) == "waiting")
        assert q.job_state(jid) == "pending"
        assert r.zrange(q.keys.pending, 0, -1) == [jid]
        assert r.zcard(q.keys.active) == 0 and w.stats.claimed == 0
        assert r.hget(q.keys.job(jid), "attempts") == "0"
        q.resume()
        wait_until(lambda: q.counts().completed == 1, timeout=2)
        assert w.stats.claimed == 1


def test_stopping_a_worker_waiting_with_a_claim_unblocks_it_at_once(
    q: Queue, r: redis.Redis
) -> None:
    async def handle(job: JobContext) -> None:
        pass

    w = Worker(q, handle, config=SLOW_BEAT)
    with running(w):
        wait_until(lambda: waker_state(w) == "waiting_with_claim")
        wait_until(lambda: blocked_on(r, q))  # the BLPOP follows the state
        assert len(blocked_on(r, q)) == 1
        started = time.monotonic()
        assert w.stop(timeout=10)
        # unblocked, not left to the 4 s beat
        assert time.monotonic() - started < 2.0
    assert blocked_on(r, q) == []
    assert r.zcard(q.keys.active) == 0
    assert w.stats.claimed == 0


@pytest.mark.parametrize("flush", ["SCRIPT", "FUNCTION"])
def test_a_script_flush_while_waiting_with_a_claim_is_recovered(
    q: Queue, r: redis.Redis, flush: str
) -> None:
    async def handle(job: JobContext) -> None:
        pass

    with running(Worker(q, handle, config=SLOW_BEAT)) as w:
        wait_until(lambda: waker_state(w) == "waiting_with_claim")
        # the queued claim will answer NOSCRIPT (EVALSHA) or Function not found
        # (FCALL, the default on this server) inside EXEC; FUNCTION FLUSH is also a
        # restarted server's state
        r.execute_command(flush, "FLUSH")
        jid = q.enqueue("after the flush")
        wait_until(lambda: q.counts().completed == 1, timeout=3)
        assert q.job_state(jid) is None and w.stats.errors == 0
