"""Bulk verbs by filter: one bounded Lua step per call, a cursor to resume, a dry run
that counts; every test checks the reply and the keys left."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from typing import Any

import pytest
import redis

from conftest import dump
from echomq import (
    BulkResult,
    InvalidArgument,
    JobGone,
    JobLocked,
    JobNotScheduled,
    Queue,
)
from echomq.bulk import JobFilter
from echomq.embedded import EmbeddedServer
from echomq.ids import minted_at_ms
from operator_support import LATER_MS, changed, put_job
from test_lifecycle import run_score

pytestmark = pytest.mark.both_servers


def kill(q: Queue, n: int, *, error: str = "boom", **kw: Any) -> list[str]:
    """Enqueue ``n`` jobs and drive each to dead with ``error`` (no other ready work)."""
    out = []
    for _ in range(n):
        jid = q.enqueue({"n": len(out)}, max_attempts=1, **kw)
        got = q.claim()
        assert got is not None and got.id == jid
        assert q.retry(jid, got.token, error) == "dead"
        out.append(jid)
    return out


def test_reprocess_jobs_by_error_moves_only_the_matches(q: Queue, r: redis.Redis) -> None:
    boom = kill(q, 5, error="db timeout: boom")
    other = kill(q, 3, error="bad input")
    lane = kill(q, 2, error="boom again", group="g")
    before = dump(r, q)
    dry = q.reprocess_jobs(error="boom", dry_run=True, scan=3)
    assert dry == BulkResult(
        "reprocess_jobs", matched=7, examined=10, calls=4, cursor=None, dry_run=True
    )
    assert dump(r, q) == before  # a dry run writes nothing, not even an audit entry
    seen: list[BulkResult] = []
    res = q.reprocess_jobs(error="boom", scan=3, progress=seen.append)
    assert (res.matched, res.examined, res.done, res.dry_run) == (7, 10, True, False)
    assert [s.matched for s in seen] == sorted(s.matched for s in seen) and seen[-1] == res
    assert list(r.zrange(q.keys.dead, 0, -1)) == other
    assert set(r.zrange(q.keys.pending, 0, -1)) == set(boom)
    assert list(r.zrange(q.keys.lane("g"), 0, -1)) == lane and r.lrange(q.keys.ring, 0, -1) == ["g"]
    for jid in boom + lane:
        row = r.hgetall(q.keys.job(jid))
        assert row["state"] == "pending" and "last_error" not in row and row["failures"] == "1"
    assert r.hget(q.keys.job(other[0]), "last_error") == "bad input"
    after = dump(r, q)
    assert changed(before, after) == {
        *(q.keys.job(j) for j in boom + lane),
        q.keys.dead,
        q.keys.pending,
        q.keys.lane("g"),
        q.keys.gindex,
        q.keys.ring,
        q.keys.groups,
        q.keys.wake,
        q.keys.audit,
        q.keys.seq,  # the enqueue sequence: each a fresh place
    }
    journal = q.audit()
    assert {e.verb for e in journal} == {"reprocess_jobs"}
    assert sum(e.count for e in journal) == 7 and journal[0].outcome == "done"
    assert journal[0].args == {"error": "boom"}


def test_a_run_stopped_by_max_calls_resumes_from_its_cursor(q: Queue, r: redis.Redis) -> None:
    jobs = kill(q, 9, name="a")
    part = q.reprocess_jobs(name="a", scan=2, max_calls=2)
    assert (part.matched, part.calls, part.done) == (4, 2, False) and part.cursor == "0"
    rest = q.reprocess_jobs(name="a", scan=2, cursor=part.cursor)
    assert (rest.matched, rest.done) == (5, True)
    assert r.zcard(q.keys.pending) == 9 and not r.exists(q.keys.dead)
    assert set(r.zrange(q.keys.pending, 0, -1)) == set(jobs)


def test_the_time_range_reads_the_creation_time_from_the_id(q: Queue, r: redis.Redis) -> None:
    old = kill(q, 2)
    time.sleep(0.01)
    new = kill(q, 2)
    cut = minted_at_ms(new[0])
    assert q.reprocess_jobs(until_ms=cut - 1, dry_run=True).matched == 2
    res = q.reprocess_jobs(since_ms=cut)
    assert res.matched == 2
    assert set(r.zrange(q.keys.pending, 0, -1)) == set(new)
    assert list(r.zrange(q.keys.dead, 0, -1)) == old
    lo, hi = JobFilter(since_ms=cut, until_ms=cut).argv()[3:]
    assert lo <= new[0] <= hi


def test_remove_jobs_walks_the_flat_set_then_every_lane_and_skips_held_jobs(
    q: Queue, r: redis.Redis
) -> None:
    held, token = put_job(q, "active", name="x")
    flat = [q.enqueue(i, name="x") for i in range(3)] + [q.enqueue(9, name="y")]
    lanes = [q.enqueue(i, name="x", group=f"g{i % 2}") for i in range(4)]
    sched, _ = put_job(q, "scheduled", name="x")
    q.lock_job(held, token)
    before = dump(r, q)
    with pytest.raises(JobLocked):
        q.remove_jobs("active")
    assert dump(r, q) == before
    assert q.remove_jobs("pending", name="x", dry_run=True).matched == 7
    assert dump(r, q) == before
    res = q.remove_jobs("pending", name="x", scan=2)
    assert (res.matched, res.done, res.locked) == (7, True, 0)
    after = dump(r, q)
    assert changed(before, after) == {
        *(q.keys.job(j) for j in flat[:3] + lanes),
        q.keys.pending,
        q.keys.lane("g0"),
        q.keys.lane("g1"),
        q.keys.gindex,
        q.keys.ring,
        q.keys.groups,
        q.keys.audit,
        q.keys.settled,  # each removed job's tombstone, as remove_job leaves one
    }
    assert sorted(r.zrange(q.keys.settled, 0, -1)) == sorted(flat[:3] + lanes)
    assert list(r.zrange(q.keys.pending, 0, -1)) == [flat[3]]
    assert r.lrange(q.keys.ring, 0, -1) == [] and not r.exists(q.keys.groups)
    assert r.zscore(q.keys.schedule, sched) is not None and r.exists(q.keys.job(held))


def test_remove_jobs_of_one_lane_and_a_locked_scheduled_job(q: Queue, r: redis.Redis) -> None:
    a = [q.enqueue(i, group="a") for i in range(3)]
    b = q.enqueue(0, group="b")
    s, _ = put_job(q, "scheduled")
    r.hset(q.keys.job(s), "lock", "1")  # a row-level lock: remove_job refuses it too
    res = q.remove_jobs("pending", group="a")
    assert (res.matched, res.done) == (3, True)
    assert not r.exists(q.keys.lane("a"), *(q.keys.job(j) for j in a))
    assert r.lrange(q.keys.ring, 0, -1) == ["b"] and r.exists(q.keys.job(b))
    before = dump(r, q)
    res = q.remove_jobs("scheduled")
    assert (res.matched, res.locked) == (0, 1)
    assert dump(r, q) == before  # nothing went: no entry either


def test_promote_job_and_promote_jobs(q: Queue, r: redis.Redis) -> None:
    s1 = q.enqueue(1, delay_ms=LATER_MS, priority=5)
    s2 = q.enqueue(2, delay_ms=LATER_MS, group="g")
    s3 = q.enqueue(3, delay_ms=LATER_MS, name="later")
    p = q.enqueue(4)
    before = dump(r, q)
    with pytest.raises(JobNotScheduled) as exc:
        q.promote_job(p)
    assert exc.value.reason == "not_scheduled"
    with pytest.raises(JobGone):
        q.promote_job("JOB00000000001")
    assert dump(r, q) == before
    assert q.promote_job(s1) is None
    # at its priority, in the place its enqueue gave it (seq 0)
    assert r.zscore(q.keys.pending, s1) == run_score(5, 0)
    assert r.hget(q.keys.job(s1), "state") == "pending"
    assert changed(before, dump(r, q)) == {
        q.keys.schedule, q.keys.pending, q.keys.job(s1), q.keys.wake, q.keys.audit,
    }  # fmt: skip
    res = q.promote_jobs(group="g")
    assert (res.matched, res.examined) == (1, 2)
    assert r.zscore(q.keys.lane("g"), s2) == run_score(0, 1)
    assert r.lrange(q.keys.ring, 0, -1) == ["g"]
    assert list(r.zrange(q.keys.schedule, 0, -1)) == [s3]
    assert [e.verb for e in q.audit(2)] == ["promote_jobs", "promote_job"]


def test_clean_deletes_dead_jobs_older_than_the_age(q: Queue, r: redis.Redis) -> None:
    old = kill(q, 3)
    r.zadd(q.keys.dead, {j: 1000 for j in old})  # died long ago
    new = kill(q, 2)
    q.add_log(old[0], "why")
    before = dump(r, q)
    dry = q.clean(60_000, dry_run=True)
    assert (dry.matched, dry.dry_run) == (3, True) and dump(r, q) == before
    res = q.clean(60_000, budget=2)
    assert (res.matched, res.calls) == (3, 2)
    assert list(r.zrange(q.keys.dead, 0, -1)) == new
    assert changed(before, dump(r, q)) == {
        *(q.keys.job(j) for j in old), q.keys.logs(old[0]), q.keys.logtimes(old[0]),
        q.keys.dead, q.keys.audit,
    }  # fmt: skip
    assert q.audit(1)[0].args == {"state": "dead", "older_than_ms": 60000}


def test_bad_arguments_raise_before_anything_is_sent(q: Queue, r: redis.Redis) -> None:
    kill(q, 1)
    before = dump(r, q)
    for call in (
        lambda: q.reprocess_jobs(scan=0),
        lambda: q.reprocess_jobs(cursor="x1"),
        lambda: q.reprocess_jobs(since_ms=10, until_ms=5),
        lambda: q.remove_jobs("nope"),
        lambda: q.remove_jobs("pending", cursor="1|2"),
        lambda: q.clean(-1),
        lambda: q.clean(0, state="pending"),
        lambda: q.promote_jobs(dry_run="yes"),  # type: ignore[arg-type]
    ):
        with pytest.raises(InvalidArgument):
            call()
    assert dump(r, q) == before


def test_emq_bulk_commands(server: EmbeddedServer, q: Queue, r: redis.Redis) -> None:
    def emq(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "echomq.cli", "--url", server.url, *args],
            capture_output=True,
            text=True,
            timeout=60,
            stdin=subprocess.DEVNULL,
        )

    kill(q, 3, error="boom")
    kill(q, 1, error="fine")
    before = dump(r, q)
    p = emq("--json", "bulk", "reprocess", q.name, "--error", "boom", "--dry-run")
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["matched"] == 3 and dump(r, q) == before
    p = emq("bulk", "reprocess", q.name, "--error", "boom")
    assert p.returncode == 5 and dump(r, q) == before  # not confirmed off a terminal
    p = emq("--json", "bulk", "reprocess", q.name, "--error", "boom", "--yes")
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    assert (doc["matched"], doc["done"]) == (3, True)
    assert r.zcard(q.keys.pending) == 3 and r.zcard(q.keys.dead) == 1
    assert "@" in q.audit(1)[0].actor
    p = emq("bulk", "remove", q.name, "active", "--yes")
    assert p.returncode == 11 and p.stderr.startswith("refused: locked")
    p = emq("bulk", "remove", q.name, "pending", "--yes")
    assert p.returncode == 0 and "removed 3 jobs" in p.stdout
    p = emq("bulk", "clean", q.name, "--older-than-ms", "0", "--yes")
    assert p.returncode == 0 and "deleted 1 dead jobs" in p.stdout
    assert not r.exists(q.keys.pending, q.keys.dead)
    s = q.enqueue(1, delay_ms=LATER_MS)
    assert emq("job", "promote", q.name, s).returncode == 0
    p = emq("job", "promote", q.name, s)
    assert p.returncode == 17 and "not_scheduled" in p.stderr
