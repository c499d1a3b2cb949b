"""Flows under faults (issue 27): a worker SIGKILLed during a fan-in loses no child,
resolves no dependency twice, and leaves no parent waiting.

Ten children in queue b report to a parent in queue a (across queues: through b's
outbox and the relay). A worker process on b completes the even children at once and
holds the odd ones; it is killed with the odd ones in hand. Another worker on b serves
them again after their lease; the relay (its settles, its beat) resolves the parent,
which then runs once, with every child's result.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable
from typing import Any

import pytest
import redis

from echomq import Flow, Queue, Worker
from echomq.embedded import EmbeddedServer
from worker_support import FAST, job_keys, running, wait_until

pytestmark = pytest.mark.slow  # a worker process killed: a fault scenario

Make = Callable[..., Queue]

# completes the even children, holds the odd ones until it is killed
FAN_IN_WORKER = """
import sys, threading, time
from echomq import Worker, WorkerConfig

lock = threading.Lock()

def handle(job):
    with lock:
        print("started", job.id, job.data, flush=True)
    if job.data % 2 == 0:
        return job.data * 10
    time.sleep(60)  # killed long before this returns

config = WorkerConfig(concurrency=10, lease_ms=300, beat_ms=50)
Worker(sys.argv[1], handle, url=sys.argv[2], config=config).run()
"""


def test_a_worker_killed_during_a_fan_in_loses_no_child(
    make_queue: Make, qname: str, r: redis.Redis, server: EmbeddedServer
) -> None:
    qa, qb = make_queue(qname + "a"), make_queue(qname + "b")
    ids = qa.enqueue_flow(Flow(payload="assemble", children=[Flow(qb.name, i) for i in range(10)]))
    assert r.hget(qa.keys.job(ids.id), "state") == "waiting_children"

    proc = subprocess.Popen(
        [sys.executable, "-c", FAN_IN_WORKER, qb.name, server.url],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    started: list[str] = []

    def reader() -> None:
        assert proc.stdout is not None
        while len(started) < 10:
            line = proc.stdout.readline()
            if not line:
                return
            started.append(line.split()[1])

    try:
        thread = threading.Thread(target=reader, daemon=True)
        thread.start()
        thread.join(20)
        assert len(started) == 10, f"the worker started {len(started)} of 10 children"
        # the even children completed (or are completing): the odd ones are in hand
        wait_until(lambda: r.zcard(qb.keys.active) == 5, timeout=10)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
    assert proc.returncode == -signal.SIGKILL
    # the parent still waits: five children are held by a dead process
    assert r.hget(qa.keys.job(ids.id), "state") == "waiting_children"
    assert r.zcard(qb.keys.active) == 5

    runs: list[Any] = []

    async def handle(job: Any) -> Any:
        if job.data == "assemble":
            res = await job.children_results()
            runs.append((dict(res.completed), dict(res.failed)))
            return "done"
        return job.data * 10

    with running(Worker(qa, handle, config=FAST)), running(Worker(qb, handle, config=FAST)):
        wait_until(lambda: runs and r.exists(qa.keys.job(ids.id)) == 0, timeout=20)
    # the parent ran once, with every child's result and no failure
    assert len(runs) == 1
    completed, failed = runs[0]
    assert sorted(completed.values()) == [i * 10 for i in range(10)]
    assert failed == {}
    # every child completed exactly once (the odd ones on their second lease)
    assert qb.metrics()["completed"]["count"] == 10
    assert qa.metrics()["completed"]["count"] == 1
    assert qb.counts().failed == 0
    # nothing left: no row, no outbox entry, no waiting parent
    assert job_keys(r, qa) == set() and job_keys(r, qb) == set()
    assert r.exists(qb.keys.outbox, qb.keys.outmsg, qa.keys.waiting) == 0
