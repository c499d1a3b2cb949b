"""At-least-once: a worker process killed with SIGKILL mid-job loses nothing.

The worker runs in a subprocess with a short lease. Once its handlers have started,
the process is killed; nothing settles the jobs. After the lease, the stalled check
of another worker's beat puts them back, they are served again with the next token,
and each completion is counted exactly once.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from typing import Any

import pytest
import redis

from echomq import JobContext, Queue, Worker
from echomq.embedded import EmbeddedServer
from worker_support import FAST, job_keys, running, wait_until

pytestmark = pytest.mark.slow  # worker processes killed and signalled: a fault scenario

CRASHING_WORKER = """
import sys, threading, time
from echomq import Worker, WorkerConfig

lock = threading.Lock()  # handlers run on several threads: one line at a time

def handle(job):
    with lock:
        print("started", job.id, flush=True)
    time.sleep(60)  # killed long before this returns

config = WorkerConfig(concurrency=int(sys.argv[3]), lease_ms=300, beat_ms=50)
Worker(sys.argv[1], handle, url=sys.argv[2], config=config).run()
"""


GRACEFUL_WORKER = """
import dataclasses, json, sys, threading, time
from echomq import Worker, WorkerConfig

lock = threading.Lock()

def handle(job):
    with lock:
        print("started", job.id, flush=True)
    if job.data == "quick":
        # still running when the signal comes, however slow the machine is (else its
        # slot would take the waiting job); then it finishes within the grace
        while not worker._engine.stop_requested:
            time.sleep(0.005)
        time.sleep(0.2)
        return
    while True:  # would run for ever: stops when told
        time.sleep(0.005)
        job.check_cancelled()

config = WorkerConfig(concurrency=2, lease_ms=5000, grace_ms=1200)
worker = Worker(sys.argv[1], handle, url=sys.argv[2], config=config)
stats = worker.run()
print("stats", json.dumps(dataclasses.asdict(stats)), flush=True)
"""


def start_worker(code: str, q: Queue, url: str, concurrency: int = 1) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", code, q.name, url, str(concurrency)],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )


def read_started(proc: subprocess.Popen[str], n: int, timeout: float = 20) -> list[str]:
    """The ids the subprocess reports as started (n of them), read off its stdout."""
    got: list[str] = []

    def reader() -> None:
        assert proc.stdout is not None
        while len(got) < n:
            line = proc.stdout.readline()
            if not line:
                return
            got.append(line.split()[1])

    thread = threading.Thread(target=reader, daemon=True)
    thread.start()
    thread.join(timeout)
    assert len(got) == n, f"the worker started {len(got)} of {n} jobs"
    return got


def test_jobs_of_a_killed_worker_are_served_again_once(
    q: Queue, r: redis.Redis, server: EmbeddedServer
) -> None:
    ids = q.enqueue_many([{"n": i} for i in range(3)])
    proc = start_worker(CRASHING_WORKER, q, server.url, concurrency=3)
    try:
        started = read_started(proc, 3)
        assert sorted(started) == sorted(ids)
        for jid in ids:  # leased and locked by the doomed process, token 1
            assert r.hget(q.keys.job(jid), "state") == "active"
            assert r.get(q.keys.lock(jid)) == "1"
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
    assert proc.returncode == -signal.SIGKILL
    assert r.zcard(q.keys.active) == 3  # nobody settled them

    served: list[tuple[str, Any, int, str | None]] = []

    def handle(job: JobContext) -> None:
        served.append((job.id, job.data, job.attempt, r.hget(q.keys.job(job.id), "stalled")))

    with running(Worker(q, handle, config=FAST)):
        wait_until(lambda: q.counts().completed == 3)
    assert sorted(served) == sorted((jid, {"n": i}, 2, "1") for i, jid in enumerate(ids))
    assert q.metrics()["completed"]["count"] == 3  # exactly one completion each
    assert q.counts().failed == 0
    assert job_keys(r, q) == set()
    assert r.zcard(q.keys.active) == 0


def test_sigterm_finishes_quick_jobs_and_releases_the_rest(
    q: Queue, r: redis.Redis, server: EmbeddedServer
) -> None:
    quick = q.enqueue("quick")
    endless = q.enqueue("endless")
    waiting = q.enqueue("waiting")
    proc = start_worker(GRACEFUL_WORKER, q, server.url)
    try:
        assert sorted(read_started(proc, 2)) == sorted([quick, endless])
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0
    stats = json.loads(out.strip().splitlines()[-1].split(" ", 1)[1])
    assert (stats["completed"], stats["released"], stats["claimed"]) == (1, 1, 2)
    assert q.job_state(quick) is None and q.metrics()["completed"]["count"] == 1
    row = r.hgetall(q.keys.job(endless))
    assert row["state"] == "pending" and row["attempts"] == "1" and "failures" not in row
    assert r.hget(q.keys.job(waiting), "attempts") == "0"  # never claimed after the signal
    assert r.zcard(q.keys.active) == 0 and not r.exists(q.keys.lock(endless))
