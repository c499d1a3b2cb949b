"""The worker registry (issue 16: see the workers) and cancelling a running job.

A running worker writes its record on every beat; ``q.workers()`` reads the live ones;
a stopped worker leaves at once, a crashed one when its ttl passes (and the read trims
its index entry). ``q.cancel_job(id)`` asks the worker holding a job to stop it: the
handler's ``job.cancelled`` turns true on the next beat; a handler that stops sends
the job dead with "JobCancelled: cancelled by an operator", one that returns completes
it; a job that is not active is refused (``not_active``) with nothing changed.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import threading
from typing import Any

import pytest
import redis

from conftest import dump
from echomq import JobContext, JobGone, JobNotActive, Queue, Worker, new_id, registry
from echomq.embedded import EmbeddedServer
from echomq.errors import InvalidArgument, InvalidName
from echomq.registry import TRIM_PER_READ
from operator_support import put_job
from worker_support import FAST, running, wait_until

pytestmark = pytest.mark.both_servers


def test_a_running_worker_is_listed_and_leaves_when_it_stops(q: Queue, r: redis.Redis) -> None:
    assert q.workers() == []
    gate = threading.Event()

    def handle(job: JobContext) -> None:
        gate.wait(10)

    w = Worker(q, handle, config=FAST, concurrency=3)
    with running(w):
        jid = q.enqueue({"n": 1})
        listed = wait_until(lambda: [x for x in q.workers() if x.jobs == 1])
        (info,) = listed
        assert info.id == w._engine.wid
        assert (info.host, info.pid) == (socket.gethostname(), os.getpid())
        assert info.queues == [q.name] and info.concurrency == 3
        assert info.job_ids == [jid] and info.claimed == 1
        assert info.started_ms <= info.beat_ms and info.interval_ms == FAST.beat
        assert 0 <= info.age_ms < 5000
        # the record: a hash with a ttl, and the index entry scored by the last beat
        assert 0 < r.pttl(q.keys.worker(info.id)) <= 3 * FAST.beat + 2000
        assert r.zscore(q.keys.workers, info.id) is not None
        gate.set()
        wait_until(lambda: q.workers()[0].completed == 1)
    assert q.workers() == []
    assert not r.exists(q.keys.worker(info.id), q.keys.workers)


def test_a_dead_worker_disappears_and_its_index_entry_is_trimmed(q: Queue, r: redis.Redis) -> None:
    # a crashed worker: its record's ttl ran out, its index entry is still there
    ghosts = [f"{n:016x}" for n in range(TRIM_PER_READ + 5)]
    r.zadd(q.keys.workers, {g: 1000 + i for i, g in enumerate(ghosts)})
    r.hset(q.keys.worker("ab" * 8), mapping={"host": "h", "pid": "7", "beat": "5000"})
    r.zadd(q.keys.workers, {"ab" * 8: 5000})
    got = q.workers(n=1)
    assert [w.id for w in got] == ["ab" * 8]
    # the newest n and the oldest TRIM_PER_READ entries were checked: those dead went
    left = set(r.zrange(q.keys.workers, 0, -1))
    assert left == {"ab" * 8, *ghosts[TRIM_PER_READ:]}
    q.workers()
    assert set(r.zrange(q.keys.workers, 0, -1)) == {"ab" * 8}


def test_a_beat_trims_dead_workers_and_an_idle_queues_expired_indexes(
    q: Queue, r: redis.Redis
) -> None:
    now = int(r.time()[0]) * 1000
    # dead workers (last beat long ago), expired tombstones and claim-record entries
    r.zadd(q.keys.workers, {f"{n:016x}": now - 60_000 - n for n in range(70)})
    r.zadd(q.keys.settled, {f"JOB000000{n:04d}z": now - 120_000 for n in range(70)})
    r.zadd(q.keys.claimreqs, {f"rid{n}": now - 1000 for n in range(70)})
    r.zadd(q.keys.settled, {"JOB00000009999": now})  # a fresh one stays
    beat = registry.beat_op(q.ctx, "cd" * 8, 3000, {"host": "h"}, [])
    assert q.runner.execute(beat) == []
    # 64 of each, the oldest first; the live worker and the fresh tombstone stay
    assert r.zcard(q.keys.workers) == 70 - 64 + 1
    assert r.zscore(q.keys.workers, "cd" * 8) is not None
    assert r.zcard(q.keys.settled) == 70 - 64 + 1
    assert r.zscore(q.keys.settled, "JOB00000009999") is not None
    assert r.zcard(q.keys.claimreqs) == 70 - 64
    # the index lives as long as the longest ttl a beat gave it
    assert 0 < r.pttl(q.keys.workers) <= 3000
    q.runner.execute(registry.beat_op(q.ctx, "cd" * 8, 9000, {"host": "h"}, []))
    assert 3000 < r.pttl(q.keys.workers) <= 9000
    q.runner.execute(registry.beat_op(q.ctx, "ef" * 8, 2000, {"host": "h"}, []))
    assert 3000 < r.pttl(q.keys.workers) <= 9000  # a shorter ttl never shortens it
    assert set(r.zrange(q.keys.workers, 0, -1)) == {"cd" * 8, "ef" * 8}  # ghosts gone


def test_the_index_of_workers_that_all_died_expires_on_its_own(q: Queue, r: redis.Redis) -> None:
    beat = registry.beat_op(q.ctx, "cd" * 8, 300, {"host": "h"}, [])
    q.runner.execute(beat)
    assert r.exists(q.keys.workers, q.keys.worker("cd" * 8)) == 2
    wait_until(lambda: r.exists(q.keys.workers, q.keys.worker("cd" * 8)) == 0)


def test_workers_reads_are_gated_before_io(q: Queue) -> None:
    for bad in (0, 1001, "5", True):
        with pytest.raises(InvalidArgument):
            q.workers(bad)  # type: ignore[arg-type]
    with pytest.raises(InvalidName):
        q.keys.worker("not-hex")


# ---------------------------------------------------------------- cancel


def test_cancel_refuses_a_job_that_is_not_running(q: Queue, r: redis.Redis) -> None:
    for state in ("dead", "pending", "scheduled"):
        jid, _ = put_job(q, state)
        before = dump(r, q)
        with pytest.raises(JobNotActive) as exc:
            q.cancel_job(jid)
        assert exc.value.reason == "not_active" and exc.value.job_id == jid
        assert dump(r, q) == before
    ghost = new_id()
    before = dump(r, q)
    with pytest.raises(JobGone):
        q.cancel_job(ghost)
    assert dump(r, q) == before


def test_cancel_marks_the_current_run_once_and_is_journaled(q: Queue, r: redis.Redis) -> None:
    jid, token = put_job(q, "active")
    with q.events() as stream:
        assert q.cancel_job(jid) is True
        ev = stream.get(5)
        while ev is not None and ev.name != "cancelling":
            ev = stream.get(5)
    assert ev is not None and ev.job == jid and ev.fields.get("attempt") == token
    assert r.hget(q.keys.job(jid), "cancel") == str(token)
    before = dump(r, q)
    assert q.cancel_job(jid) is False  # already asked: nothing written, nothing journaled
    assert dump(r, q) == before
    (entry,) = [e for e in q.audit(10) if e.verb == "cancel_job"]
    assert entry.args == {"job": jid} and entry.count == 1 and entry.actor == q.actor


def test_a_plain_handler_sees_cancelled_and_the_job_goes_dead(q: Queue, r: redis.Redis) -> None:
    started, seen = threading.Event(), threading.Event()

    def handle(job: JobContext) -> None:
        started.set()
        wait_until(lambda: job.cancelled, timeout=10)
        seen.set()
        job.check_cancelled()  # raises JobCancelled

    w = Worker(q, handle, config=FAST)
    with running(w):
        jid = q.enqueue({"x": 1})
        assert started.wait(10)
        assert q.cancel_job(jid) is True
        assert seen.wait(10)
        wait_until(lambda: q.job_state(jid) == "dead")
        row = q.get_job(jid)
        assert row is not None and row.last_error == "JobCancelled: cancelled by an operator"
        # the worker counts the run once the server's reply is back, after the row changed
        wait_until(lambda: w.stats.cancelled == 1)
        assert w.stats.dead == 0
    assert w.stats.accounted == w.stats.claimed
    # reprocess runs it again; the old request names the old run only
    q.reprocess_job(jid)
    assert q.job_state(jid) == "pending"


def test_an_async_handler_is_cancelled_at_its_next_await(q: Queue) -> None:
    started = threading.Event()
    saw: list[Any] = []

    async def handle(job: JobContext) -> None:
        started.set()
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            saw.append(job.cancel_reason)
            raise

    w = Worker(q, handle, config=FAST)
    with running(w):
        jid = q.enqueue({})
        assert started.wait(10)
        q.cancel_job(jid)
        wait_until(lambda: q.job_state(jid) == "dead")
    assert saw == ["cancelled"] and w.stats.cancelled == 1


def test_a_handler_that_finishes_anyway_completes(q: Queue) -> None:
    started, release = threading.Event(), threading.Event()

    def handle(job: JobContext) -> None:
        started.set()
        release.wait(10)  # never checks the flag

    w = Worker(q, handle, config=FAST)
    with running(w):
        jid = q.enqueue({})
        assert started.wait(10)
        q.cancel_job(jid)
        wait_until(lambda: w.stats.claimed and q.get_job(jid) is not None)
        release.set()
        wait_until(lambda: w.stats.completed == 1)
    assert q.get_job(jid) is None and w.stats.cancelled == 0


# ---------------------------------------------------------------- the CLI


def test_emq_job_cancel_and_emq_workers(q: Queue, r: redis.Redis, server: EmbeddedServer) -> None:
    def emq(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "echomq.cli", "--url", server.url, *args],
            capture_output=True,
            text=True,
            stdin=subprocess.DEVNULL,
            timeout=60,
        )

    p = emq("workers", q.name, "--create")  # no key yet: a typo unless --create
    assert p.returncode == 0 and "no live workers" in p.stdout
    # a record whose host is hostile text: shown escaped, never run
    wid = "0123456789abcdef"
    r.hset(q.keys.worker(wid), mapping={"host": "\x1b]0;pwn\x07[red]h", "pid": "9", "beat": "1"})
    r.zadd(q.keys.workers, {wid: 1})
    p = emq("workers", q.name)
    assert p.returncode == 0 and "\x1b" not in p.stdout and "\\x1b]0;pwn" in p.stdout
    doc = json.loads(emq("--json", "workers", q.name).stdout)
    assert doc["workers"][0]["pid"] == 9 and doc["workers"][0]["id"] == wid
    jid, token = put_job(q, "active")
    before = dump(r, q)
    p = emq("job", "cancel", q.name, jid)
    assert p.returncode == 5 and dump(r, q) == before  # not confirmed off a terminal
    p = emq("--json", "job", "cancel", q.name, jid, "--yes")
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout) == {"id": jid, "requested": True}
    assert r.hget(q.keys.job(jid), "cancel") == str(token)
    assert "@" in q.audit(1)[0].actor
    pending = q.enqueue(1)
    p = emq("job", "cancel", q.name, pending, "--yes")
    assert p.returncode == 18 and "not_active" in p.stderr


def test_emq_repeat_pause_resume_run(q: Queue, server: EmbeddedServer) -> None:
    def emq(*args: str) -> Any:
        return subprocess.run(
            [sys.executable, "-m", "echomq.cli", "--url", server.url, "--json", *args],
            capture_output=True,
            text=True,
            stdin=subprocess.DEVNULL,
            timeout=60,
        )

    q.repeat("nightly", cron="0 3 * * *")
    assert json.loads(emq("repeat", "pause", q.name, "nightly").stdout)["paused"] is True
    listed = json.loads(emq("repeat", "list", q.name).stdout)["repeats"]
    assert listed[0]["paused"] is True
    assert json.loads(emq("repeat", "run", q.name, "nightly").stdout)["id"] is None
    assert isinstance(
        json.loads(emq("repeat", "resume", q.name, "nightly").stdout)["next_run_ms"], int
    )
    made = json.loads(emq("repeat", "run", q.name, "nightly").stdout)["id"]
    assert q.job_state(made) == "pending"
