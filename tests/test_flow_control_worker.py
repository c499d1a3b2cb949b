"""Flow control under load (issue 26, item 6): the window property across several
clients (hypothesis), and the worker: it waits exactly what a held claim answers, a
handler's ``RateLimited`` spends no failure and keeps the job's place, a held lane never
delays another, and the concurrency cap holds across workers.

Timings are asserted with generous slack (a shared machine); the exact figures are
measured by ``bench/ratelimit.py``.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

import pytest
import redis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry

from echomq import JobContext, Queue, RateLimited, Worker, WorkerConfig
from worker_support import running, server_ms, wait_until

pytestmark = pytest.mark.both_executors

LEASE = 30_000
#: A worker whose beat is slow, so only the waits under test decide when claims run.
CONFIG = WorkerConfig(concurrency=4, lease_ms=LEASE, beat_ms=1000, grace_ms=2000)


def max_in_window(starts: list[int], per: int) -> int:
    """The most starts any window of ``per`` ms holds (a window [t, t + per) holds the
    most when it opens at a start)."""
    starts = sorted(starts)
    best, j = 0, 0
    for i, s in enumerate(starts):
        while starts[j] <= s - per:
            j += 1
        best = max(best, i - j + 1)
    return best


# ---- the property: no window ever holds more than max_jobs starts ----------------------

steps = st.lists(
    st.tuples(st.integers(0, 2), st.integers(1, 4), st.sampled_from([0, 0, 1, 5, 20])),
    min_size=5,
    max_size=40,
)


@settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    max_jobs=st.integers(1, 4),
    per_ms=st.sampled_from([15, 40, 80]),
    burst=st.integers(1, 4),
    plan=steps,
)
def test_no_window_holds_more_than_max_starts_across_clients(
    make_queue: Callable[..., Queue],
    qname: str,
    r: redis.Redis,
    max_jobs: int,
    per_ms: int,
    burst: int,
    plan: list[tuple[int, int, int]],
) -> None:
    name = f"{qname}-{time.monotonic_ns()}"
    clients = [make_queue(name) for _ in range(3)]
    burst = min(burst, max_jobs)
    clients[0].set_rate_limit(max_jobs, per_ms, burst=burst)
    clients[0].enqueue_many([{"n": i} for i in range(200)])
    claimed = 0
    for who, count, pause_ms in plan:
        claimed += len(clients[who].claim_many(count, LEASE))
        if pause_ms:
            time.sleep(pause_ms / 1000)

    # and the same from three threads at once, with no pauses at all
    def hammer(q: Queue) -> None:
        for _ in range(15):
            q.claim_many(3, LEASE)

    threads = [threading.Thread(target=hammer, args=(q,)) for q in clients]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    # each start read back from the server: its lease deadline less the lease
    starts = [int(s) - LEASE for _, s in r.zrange(clients[0].keys.active, 0, -1, withscores=True)]
    assert len(starts) >= min(claimed, max_jobs)
    assert max_in_window(starts, per_ms) <= max_jobs
    # and the spreading window: at most `burst` in any floor(0.9 * burst * per / max) ms
    span = max(1, burst * per_ms * 9 // (max_jobs * 10))
    assert max_in_window(starts, span) <= burst
    # the start log never outgrows its window by more than a call's trim allowance
    assert r.zcard(clients[0].keys.rate) <= max_jobs + 8 + 4


# ---- the worker ----------------------------------------------------------------------


def test_the_worker_waits_until_the_window_frees_not_sooner(
    make_queue: Callable[..., Queue], qname: str, r: redis.Redis
) -> None:
    q = make_queue(qname)
    q.set_retention(completed=100)  # kept rows carry started_at: the claim's server ms
    q.set_rate_limit(2, 1000, burst=2)
    ran: list[str] = []

    def handle(job: JobContext) -> None:
        ran.append(job.id)

    ids = [q.enqueue({"n": i}) for i in range(4)]
    reg = CollectorRegistry()
    with running(Worker(q, handle, config=CONFIG, metrics=reg)) as w:
        wait_until(lambda: len(ran) == 2)
        # an enqueue during the wait does not start anything early
        time.sleep(0.2)
        ids.append(q.enqueue({"n": 4}))
        wait_until(lambda: len(ran) == 4, timeout=5)
        time.sleep(0.1)
        assert len(ran) == 4  # the fifth waits for the next window
        wait_until(lambda: q.counts().completed == 5, timeout=5)
    started = [int(r.hget(q.keys.job(i), "started_at")) for i in ids]
    first, later = started[:2], started[2:4]
    assert max(first) - min(first) < 200
    gap = min(later) - min(first)
    # the third start comes when the first leaves the window: 1000 ms on the server's
    # clock at the soonest, and a little after (generous slack: the machine is shared)
    assert 1000 <= gap <= 1600, started
    assert started[4] - min(later) >= 1000
    assert w.stats.completed == 5 and w.stats.limited_ms > 500
    # the same waits, exported: echomq_worker_limited_seconds_total
    limited = reg.get_sample_value("echomq_worker_limited_seconds_total", {"queue": q.name})
    assert limited == pytest.approx(w.stats.limited_ms / 1000)


def test_a_rate_limited_handler_spends_no_failure_and_keeps_the_place(
    make_queue: Callable[..., Queue], qname: str, r: redis.Redis, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="echomq.worker")
    q = make_queue(qname)
    seen: list[tuple[str, int, int]] = []
    a = q.enqueue({"n": "a"})
    b = q.enqueue({"n": "b"})

    def handle(job: JobContext) -> None:
        seen.append((job.id, job.attempt, server_ms(r)))
        if job.id == a and job.attempt == 1:
            raise RateLimited(400)

    cfg = WorkerConfig(concurrency=1, lease_ms=LEASE, beat_ms=1000, grace_ms=2000)
    with running(Worker(q, handle, config=cfg)) as w:
        wait_until(lambda: q.counts().completed == 2, timeout=10)
    # a ran, was handed back to its place (the head, before b), and ran again first
    assert [(i, n) for i, n, _ in seen] == [(a, 1), (a, 2), (b, 1)]
    assert seen[1][2] - seen[0][2] >= 400  # the queue was held that long
    assert (w.stats.rate_limited, w.stats.retried, w.stats.dead) == (1, 0, 0)
    assert w.stats.completed == 2
    assert q.counts().dead == 0 and r.hget(q.keys.meta, "limited_until") is not None
    # handed back, not failed: no failure line in the worker's log
    assert not [rec for rec in caplog.records if "failed" in rec.getMessage()]


def test_a_lane_held_by_its_handler_never_delays_another_lane(
    make_queue: Callable[..., Queue], qname: str, r: redis.Redis
) -> None:
    q = make_queue(qname)
    done: dict[str, list[int]] = {"a": [], "b": []}
    q.enqueue({}, group="a")
    for _ in range(5):
        q.enqueue({}, group="b")
    t0 = server_ms(r)

    def handle(job: JobContext) -> None:
        assert job.group is not None
        if job.group == "a" and job.attempt == 1:
            raise RateLimited(2000, group=True)
        done[job.group].append(server_ms(r))

    with running(Worker(q, handle, config=CONFIG)) as w:
        wait_until(lambda: len(done["b"]) == 5, timeout=5)
        # lane b drained at full speed while lane a is held
        assert max(done["b"]) - t0 < 1500
        assert done["a"] == [] and r.zrange(q.keys.gwait, 0, -1) == ["a"]
        wait_until(lambda: len(done["a"]) == 1, timeout=10)
    assert done["a"][0] - t0 >= 2000
    assert w.stats.rate_limited == 1 and w.stats.retried == 0


def test_the_concurrency_cap_holds_across_workers(
    make_queue: Callable[..., Queue], qname: str
) -> None:
    q = make_queue(qname)
    q.set_concurrency(2)
    lock = threading.Lock()
    now = [0]
    peak = [0]

    def handle(job: JobContext) -> None:
        with lock:
            now[0] += 1
            peak[0] = max(peak[0], now[0])
        time.sleep(0.03)
        with lock:
            now[0] -= 1

    q.enqueue_many([{"n": i} for i in range(30)])
    w1, w2 = Worker(q, handle, config=CONFIG), Worker(make_queue(qname), handle, config=CONFIG)
    with running(w1), running(w2):
        # each ending wakes a worker the cap held back: no beat-long stalls
        wait_until(lambda: q.counts().completed == 30, timeout=10)
    assert peak[0] == 2
    assert w1.stats.completed + w2.stats.completed == 30
