"""The fault suite: real worker processes and producers talking to a private server
through a TCP fault proxy, under lost replies, resets, a black-hole, SIGKILL and
SIGSTOP of workers, a crash and restart of the server (AOF), and a full server.

Every scenario prints its report (enqueued / completed / lost / completed twice) and
asserts nothing was lost and nothing completed twice under one token. ``bench/faults.py``
runs the first scenario at 10,000 jobs.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from echomq import Queue, QueueNotPaused
from echomq.errors import EnqueuePartial, ServerFull
from faults.harness import Rig

pytestmark = pytest.mark.slow  # worker processes under a fault proxy, hundreds of jobs each

JOBS = int(os.environ.get("EMQ_FAULT_JOBS", "600"))


@pytest.fixture()
def rig(tmp_path: Path) -> Iterator[Rig]:
    made = Rig(tmp_path)
    yield made
    made.close()


def test_lost_replies_and_resets(rig: Rig) -> None:
    started = time.monotonic()
    name = "faults-drops"
    rig.spawn_worker(name)
    rig.spawn_worker(name)
    q = rig.queue(name)

    def chaos(i: int) -> None:
        if i % 10 == 0:
            rig.proxy.drop_replies(1)
        if i % 97 == 0:
            rig.proxy.reset_all()

    rig.proxy.reset_every(0.01)
    ids = rig.produce(q, JOBS, during=chaos)
    rig.wait_settled(name, ids, timeout=30)
    rig.proxy.reset_every(0.0)
    rig.wait_settled(name, ids, timeout=30)
    report = rig.report("lost replies and resets", name, ids, started)
    print(report.line())
    q.close()
    assert rig.proxy.replies_dropped > 0 and rig.proxy.resets > 0
    report.check()


def test_black_hole_and_delay(rig: Rig) -> None:
    started = time.monotonic()
    name = "faults-hole"
    rig.spawn_worker(name)
    q = rig.queue(name)
    ids = rig.produce(q, JOBS // 2)
    rig.proxy.blackhole(True)
    time.sleep(2.5)  # past the clients' 2 s socket timeout
    rig.proxy.blackhole(False)
    rig.proxy.reset_all()  # the black-holed connections are dead to their clients
    rig.proxy.delay(0.05)
    ids += rig.produce(q, JOBS // 2)
    rig.proxy.delay(0.0)
    rig.wait_settled(name, ids, timeout=60)
    report = rig.report("black-hole 2.5 s, then 50 ms replies", name, ids, started)
    print(report.line())
    q.close()
    report.check()


def test_workers_killed_and_stopped(rig: Rig) -> None:
    started = time.monotonic()
    name = "faults-signals"
    doomed = rig.spawn_worker(name)
    frozen = rig.spawn_worker(name)
    rig.spawn_worker(name)
    q = rig.queue(name)

    def signals(i: int) -> None:
        if i == JOBS // 3:
            os.kill(doomed.pid, signal.SIGKILL)
        if i == JOBS // 2:
            os.kill(frozen.pid, signal.SIGSTOP)

    ids = rig.produce(q, JOBS, during=signals)
    time.sleep(2.0)  # past the 1.5 s lease: the frozen worker's jobs go to the others
    os.kill(frozen.pid, signal.SIGCONT)
    rig.wait_settled(name, ids, timeout=60)
    report = rig.report("SIGKILL one worker, SIGSTOP another 2 s", name, ids, started)
    print(report.line())
    q.close()
    report.check()


def test_server_crash_and_restart_with_aof(tmp_path: Path) -> None:
    rig = Rig(tmp_path, aof=True)
    try:
        started = time.monotonic()
        name = "faults-restart"
        rig.spawn_worker(name)
        q = rig.queue(name)

        def crash(i: int) -> None:
            if i == JOBS // 2:
                rig.server.kill()
                time.sleep(0.5)
                rig.server.start()

        ids = rig.produce(q, JOBS, during=crash)
        rig.wait_settled(name, ids, timeout=60)
        report = rig.report("server SIGKILLed and restarted (AOF always)", name, ids, started)
        print(report.line())
        q.close()
        report.check()
    finally:
        rig.close()


def test_a_full_server_lets_the_operator_recover(tmp_path: Path) -> None:
    rig = Rig(tmp_path)
    try:
        name = "faults-full"
        q = rig.queue(name)
        jid = q.enqueue("first")
        c = q.claim()
        assert c is not None
        used = int(rig.direct.info("memory")["used_memory"])
        rig.direct.config_set("maxmemory-policy", "noeviction")
        rig.direct.config_set("maxmemory", used + 2_000_000)
        fill = "x" * 20_000
        landed = 0
        with pytest.raises(ServerFull):
            for _ in range(1000):
                q.enqueue(fill)
                landed += 1
        before = rig.direct.zcard(q.keys.pending)
        assert before == landed
        with pytest.raises((EnqueuePartial, ServerFull)) as err:
            q.enqueue_many(["y"] * 10)
        if isinstance(err.value, EnqueuePartial):
            assert rig.direct.zcard(q.keys.pending) == before + len(err.value.landed)
        else:
            assert rig.direct.zcard(q.keys.pending) == before
        # a fresh client's fence reads first: it gets in
        fresh = Queue(name, url=rig.via)
        assert fresh.counts().active == 1
        # what frees or keeps memory still runs
        fresh.extend_lock(jid, c.token, 30_000)
        fresh.pause()
        assert fresh.is_paused() is True
        fresh.resume()
        with pytest.raises(QueueNotPaused):
            fresh.obliterate()
        fresh.complete(jid, c.token)
        fresh.pause()
        assert fresh.drain() == before
        while not fresh.obliterate(force=True):
            pass
        rest = set(rig.direct.scan_iter(match=q.keys.pattern()))
        assert {k for k in rest if ":claimreq:" not in k} <= {q.keys.audit}
        rig.direct.config_set("maxmemory", 0)
        assert q.enqueue("after") is not None
        fresh.close()
        q.close()
    finally:
        rig.close()


def test_the_version_fence_reads_before_it_writes(tmp_path: Path) -> None:
    rig = Rig(tmp_path)
    try:
        Queue("fence", url=rig.via).counts()  # the first client writes the version
        used = int(rig.direct.info("memory")["used_memory"])
        rig.direct.config_set("maxmemory-policy", "noeviction")
        rig.direct.config_set("maxmemory", max(1, used - 100_000))
        with pytest.raises(redis.exceptions.OutOfMemoryError):
            rig.direct.set("some-key", "v")
        late = Queue("fence", url=rig.via)
        assert late.counts().pending == 0  # a fresh client gets in on a full server
        late.close()
        rig.direct.config_set("maxmemory", 0)
    finally:
        rig.close()
