"""Opt-in history (issue 13, item 1): retention, keep_ms, the timeline, the result, the
error history, the completed set and its bounded trimming, and ``result()``.

Every test runs under both executors: the native twins (enqueue, claim, complete,
retry) keep the same history as the scripts. A queue with no retention and a job with
no ``keep_ms`` write nothing new (the last tests hold the keys to the seed's).
"""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest
import redis

from conftest import dump, queue_keys
from echomq import (
    AsyncQueue,
    ErrorRecord,
    InvalidArgument,
    JobFailed,
    JobGone,
    JobNotKept,
    Queue,
    ResultTimeout,
    Retention,
    Worker,
)

pytestmark = [pytest.mark.both_executors, pytest.mark.both_servers]


def J(n: int) -> str:
    return f"JOB{n:011d}"


def run_job(q: Queue, job_id: str, result: Any = None) -> int:
    """Claim the next job (it must be ``job_id``) and complete it; returns the token."""
    got = q.claim()
    assert got is not None and got.id == job_id
    q.complete(job_id, got.token, result=result)
    return got.token


# ---------------------------------------------------------------- retention


def test_retention_is_kept_in_meta_and_cleared_by_zero_or_none(q: Queue, r: redis.Redis) -> None:
    assert q.retention() == Retention() and not q.retention().keeps
    assert q.set_retention(completed=100, completed_age_ms=86_400_000, dead=5) == 0
    assert r.hgetall(q.keys.meta) == {
        "keep_completed": "100",
        "keep_completed_ms": "86400000",
        "keep_dead": "5",
    }
    assert q.retention() == Retention(100, 86_400_000, 5, None)
    q.set_retention(completed=0, dead_age_ms=60_000)  # 0 and None clear
    assert r.hgetall(q.keys.meta) == {"keep_dead_ms": "60000"}
    assert r.get(q.keys.keeps) == "1"  # the marker enqueue reads
    q.set_retention()
    assert r.exists(q.keys.meta, q.keys.keeps) == 0
    entries = q.audit(10)
    assert [e.verb for e in entries] == ["set_retention"] * 3
    assert entries[-1].args == {
        "completed": 100,
        "completed_age_ms": 86_400_000,
        "dead": 5,
        "dead_age_ms": 0,
    }
    before = dump(r, q)
    q.set_retention()  # nothing changes: nothing is written, nothing journaled
    assert dump(r, q) == before


@pytest.mark.parametrize(
    "kw",
    [{"completed": -1}, {"dead": 1.5}, {"completed_age_ms": "1"}, {"dead_age_ms": True}],
)
def test_retention_refuses_bad_limits_before_io(q: Queue, r: redis.Redis, kw: Any) -> None:
    with pytest.raises(InvalidArgument):
        q.set_retention(**kw)
    assert r.exists(q.keys.meta, q.keys.audit) == 0


def test_enqueue_refuses_a_bad_keep_ms_before_io(q: Queue, r: redis.Redis) -> None:
    for bad in (-1, 1.5, "5", True):
        with pytest.raises(InvalidArgument):
            q.enqueue("x", keep_ms=bad)
    assert queue_keys(r, q) == set()


# ---------------------------------------------------------------- a kept completion


def test_a_kept_completion_keeps_its_row_timeline_and_result(q: Queue, r: redis.Redis) -> None:
    q.set_retention(completed=10)
    jid = q.enqueue({"n": 1}, job_id=J(1), dedup_id="d1")
    row = r.hgetall(q.keys.job(jid))
    assert row["keep"] == "0" and int(row["enqueued_at"]) > 0
    got = q.claim()
    assert got is not None
    claimed = r.hgetall(q.keys.job(jid))
    # the first claim writes started_at only (last_start reads it)
    assert int(claimed["started_at"]) > 0 and "last_started_at" not in claimed
    view = q.get_job(jid)
    assert view is not None and view.last_start == int(claimed["started_at"])
    q.complete(jid, got.token, result={"sent": True})
    row = r.hgetall(q.keys.job(jid))
    assert row["state"] == "completed" and row["result"] == '{"sent":true}'
    assert int(row["enqueued_at"]) <= int(row["started_at"]) <= int(row["finished_at"])
    assert r.zrange(q.keys.completed, 0, -1, withscores=True) == [(jid, float(row["finished_at"]))]
    assert r.exists(q.keys.dedup("d1"), q.keys.lock(jid)) == 0  # the dedup id is free again
    assert r.hget(q.keys.metrics_completed, "count") == "1"
    # the reads cover it
    assert q.job_state(jid) == "completed"
    job = q.get_job(jid)
    assert job is not None
    assert (job.state, job.keep, job.result, job.errors) == ("completed", 0, '{"sent":true}', ())
    assert job.finished_at == int(row["finished_at"]) and job.died_at is None
    assert q.browse("completed") == [jid]
    assert q.counts().kept == 1 and q.counts().completed == 1
    assert q.result(jid) == {"sent": True}
    # a repeated complete answers gone, as for a deleted row; nothing changes
    before = dump(r, q)
    with pytest.raises(JobGone):
        q.complete(jid, got.token)
    assert dump(r, q) == before


def test_an_enqueue_of_a_kept_id_answers_the_existing_job(q: Queue, r: redis.Redis) -> None:
    q.set_retention(completed=10)
    jid = q.enqueue("first", job_id=J(1))
    run_job(q, jid, "done")
    before = dump(r, q)
    # a re-sent enqueue (even long after the tombstone) cannot run the job again
    r.delete(q.keys.settled)
    before = dump(r, q)
    assert q.enqueue("again", job_id=jid) == jid
    assert q.enqueue("again", job_id=jid, dedup_id="x") == jid
    assert dump(r, q) == before
    assert q.claim() is None


def test_keep_ms_keeps_one_job_on_a_queue_that_keeps_none(q: Queue, r: redis.Redis) -> None:
    kept = q.enqueue("k", job_id=J(1), keep_ms=60_000)
    plain = q.enqueue("p", job_id=J(2))
    run_job(q, kept, 7)
    run_job(q, plain, 8)
    assert q.job_state(plain) is None and q.result(kept) == 7
    finished = int(r.hget(q.keys.job(kept), "finished_at") or 0)
    assert r.zrange(q.keys.keepuntil, 0, -1, withscores=True) == [(kept, finished + 60_000.0)]
    # its keep runs out: the next kept completion trims it (bounded)
    r.zadd(q.keys.keepuntil, {kept: 1})
    other = q.enqueue("o", job_id=J(3), keep_ms=60_000)
    run_job(q, other)
    assert q.job_state(kept) is None
    assert r.zrange(q.keys.completed, 0, -1) == [other]
    assert r.zrange(q.keys.keepuntil, 0, -1) == [other]


def test_enqueue_many_takes_keep_ms(q: Queue, r: redis.Redis) -> None:
    ids = q.enqueue_many(["a", "b"], keep_ms=1000)
    assert [r.hget(q.keys.job(j), "keep") for j in ids] == ["1000", "1000"]


# ---------------------------------------------------------------- the error history


def test_the_error_history_grows_per_failure_and_reprocess_keeps_it(
    q: Queue, r: redis.Redis
) -> None:
    q.set_retention(dead=100)
    jid = q.enqueue("x", job_id=J(1), max_attempts=2)
    tokens = []
    for err in ("first", 'second "/"'):
        got = q.claim()
        assert got is not None
        tokens.append(got.token)
        q.retry(jid, got.token, err)
        q.promote()
    row = r.hgetall(q.keys.job(jid))
    assert row["state"] == "dead" and int(row["died_at"]) >= int(row["last_started_at"])
    job = q.get_job(jid)
    assert job is not None
    assert [(e.attempt, e.error) for e in job.errors] == [(1, "first"), (2, 'second "/"')]
    assert all(isinstance(e, ErrorRecord) and e.time_ms > 0 for e in job.errors)
    with pytest.raises(JobFailed) as failed:
        q.result(jid)
    assert (failed.value.error, failed.value.attempt) == ('second "/"', 2)
    q.reprocess_job(jid)
    after = q.get_job(jid)
    assert after is not None and after.last_error is None
    assert after.errors == job.errors  # reprocess keeps the history
    got = q.claim()
    assert got is not None and got.token == 3
    q.retry(jid, got.token, "third")
    assert [e.attempt for e in q.get_job(jid).errors] == [1, 2, 3]  # type: ignore[union-attr]


def test_the_error_history_is_capped(q: Queue, r: redis.Redis) -> None:
    jid = q.enqueue("x", job_id=J(1), keep_ms=60_000, max_attempts=100)
    for i in range(25):
        got = q.claim()
        assert got is not None
        q.retry(jid, got.token, f"e{i}")
        q.promote()
    errors = r.lrange(q.keys.errors(jid), 0, -1)
    assert len(errors) == 20 and '"error":"e5"' in errors[0] and '"error":"e24"' in errors[-1]


# ---------------------------------------------------------------- bounded trimming


def test_completed_is_trimmed_by_count_a_bounded_amount_per_completion(
    q: Queue, r: redis.Redis
) -> None:
    q.set_retention(completed=100)
    ids = [q.enqueue(i, job_id=J(i + 1)) for i in range(12)]
    for jid in ids:
        run_job(q, jid)
    assert r.zcard(q.keys.completed) == 12
    # a lower retention: this call trims the excess (at most 500 per call)
    assert q.set_retention(completed=2) == 10
    assert r.zrange(q.keys.completed, 0, -1) == ids[-2:]
    assert not any(r.exists(q.keys.job(j)) for j in ids[:-2])
    # grown past the limit behind its back: each completion trims at most 4
    for jid in ids[:8]:
        r.zadd(q.keys.completed, {jid: 1})
    nxt = q.enqueue("n", job_id=J(50))
    run_job(q, nxt)
    assert r.zcard(q.keys.completed) == 11 - 4


def test_a_deep_retention_trims_in_batches_and_never_holds_more_than_its_count(
    q: Queue, r: redis.Redis
) -> None:
    # count 48: b = 48 // 16 = 3, so a completion past the count drops the oldest 3
    q.set_retention(completed=48)
    ids = [q.enqueue(i, job_id=J(i + 1)) for i in range(55)]
    sizes = []
    for jid in ids:
        run_job(q, jid)
        sizes.append(r.zcard(q.keys.completed))
    assert sizes[:48] == list(range(1, 49))
    assert sizes[48:] == [46, 47, 48, 46, 47, 48, 46]
    # the oldest went, each with its row (and its tombstone: it completed just now);
    # the rest are the newest, in order
    kept = r.zrange(q.keys.completed, 0, -1)
    assert kept == ids[-46:]
    assert sorted(r.zrange(q.keys.settled, 0, -1)) == ids[:9]
    assert not any(r.exists(q.keys.job(j)) for j in ids[:9])
    assert all(r.hget(q.keys.job(j), "state") == "completed" for j in kept)


def test_a_shallow_retention_trims_to_its_count_exactly(q: Queue, r: redis.Redis) -> None:
    q.set_retention(completed=3)
    ids = [q.enqueue(i, job_id=J(i + 1)) for i in range(7)]
    for n, jid in enumerate(ids, 1):
        run_job(q, jid)
        assert r.zrange(q.keys.completed, 0, -1) == ids[max(0, n - 3) : n]
    assert not any(r.exists(q.keys.job(j)) for j in ids[:4])


def test_a_kept_completion_leaves_its_tombstone_when_its_row_is_trimmed(
    q: Queue, r: redis.Redis
) -> None:
    q.set_retention(completed=1)
    a, b, c = (q.enqueue(x, job_id=J(n)) for n, x in enumerate("abc", 1))
    run_job(q, a)
    # a kept row needs no tombstone: a re-sent enqueue sees the row itself
    assert r.zrange(q.keys.settled, 0, -1) == []
    finished = float(r.hget(q.keys.job(a), "finished_at") or 0)
    run_job(q, b)
    # a completed less than 60 s ago: its trim leaves its tombstone, stamped at the trim
    # (b's completion), as remove_job stamps one
    ((tomb, at),) = r.zrange(q.keys.settled, 0, -1, withscores=True)
    assert tomb == a and finished <= at <= float(r.hget(q.keys.job(b), "finished_at") or 0)
    before = dump(r, q)
    assert q.enqueue("again", job_id=a) == a  # a duplicate: nothing written
    assert dump(r, q) == before
    # a row that settled over 60 s ago (the tombstone's life) is trimmed without one
    r.zadd(q.keys.completed, {b: 1000})
    run_job(q, c)
    assert r.exists(q.keys.job(b)) == 0
    assert r.zrange(q.keys.settled, 0, -1) == [a]


def test_clean_leaves_the_tombstones_of_jobs_settled_in_the_last_minute(
    q: Queue, r: redis.Redis
) -> None:
    q.set_retention(completed=10)
    a, b = q.enqueue("a", job_id=J(1)), q.enqueue("b", job_id=J(2))
    run_job(q, a)
    run_job(q, b)
    r.zadd(q.keys.completed, {a: 1000})  # a finished long ago
    finished = float(r.hget(q.keys.job(b), "finished_at") or 0)
    assert q.clean(0, "completed").matched == 2
    ((tomb, at),) = r.zrange(q.keys.settled, 0, -1, withscores=True)
    assert tomb == b and finished <= at <= finished + 10_000
    assert r.exists(q.keys.job(a), q.keys.job(b), q.keys.completed) == 0


def test_remove_jobs_takes_kept_completed_jobs_by_filter(q: Queue, r: redis.Redis) -> None:
    q.set_retention(completed=10)
    x = [q.enqueue(i, job_id=J(i + 1), name="x", keep_ms=60_000) for i in range(2)]
    y = q.enqueue("y", job_id=J(9), name="y")
    for jid in [*x, y]:
        run_job(q, jid)
    before = dump(r, q)
    assert q.remove_jobs("completed", name="x", dry_run=True).matched == 2
    assert dump(r, q) == before
    res = q.remove_jobs("completed", name="x")
    assert (res.matched, res.done) == (2, True)
    assert r.zrange(q.keys.completed, 0, -1) == [y] and r.exists(q.keys.keepuntil) == 0
    assert not any(r.exists(q.keys.job(j)) for j in x)
    # each removed job leaves its tombstone: a re-sent enqueue answers duplicate
    assert sorted(r.zrange(q.keys.settled, 0, -1)) == x
    assert q.enqueue("again", job_id=x[0]) == x[0] and not r.exists(q.keys.job(x[0]))
    assert q.audit(1)[0].verb == "remove_jobs"


def test_completed_is_trimmed_by_age(q: Queue, r: redis.Redis) -> None:
    q.set_retention(completed_age_ms=60_000)
    old, new = q.enqueue("o", job_id=J(1)), q.enqueue("n", job_id=J(2))
    run_job(q, old)
    r.zadd(q.keys.completed, {old: 1000})  # it finished long ago
    run_job(q, new)
    assert r.zrange(q.keys.completed, 0, -1) == [new]
    assert r.exists(q.keys.job(old)) == 0


def test_dead_is_trimmed_by_count_and_age(q: Queue, r: redis.Redis) -> None:
    q.set_retention(dead=2, dead_age_ms=60_000)
    ids = []
    for i in range(4):
        jid = q.enqueue(i, job_id=J(i + 1), max_attempts=1)
        got = q.claim()
        assert got is not None
        q.retry(jid, got.token, "boom")
        ids.append(jid)
    assert r.zrange(q.keys.dead, 0, -1) == ids[-2:]
    assert not any(r.exists(q.keys.job(j), q.keys.errors(j)) for j in ids[:2])
    r.zadd(q.keys.dead, {ids[2]: 1000})
    jid = q.enqueue("x", job_id=J(9), max_attempts=1)
    got = q.claim()
    assert got is not None
    q.retry(jid, got.token, "boom")
    assert r.zrange(q.keys.dead, 0, -1) == [ids[3], jid]


# ---------------------------------------------------------------- operator verbs


def test_remove_obliterate_and_drain_take_the_history(q: Queue, r: redis.Redis) -> None:
    q.set_retention(completed=10)
    a = q.enqueue("a", job_id=J(1), keep_ms=60_000, max_attempts=5)
    got = q.claim()
    assert got is not None
    q.retry(a, got.token, "boom")
    q.promote()
    run_job(q, a, "ok")
    b = q.enqueue("b", job_id=J(2))
    run_job(q, b)
    q.remove_job(a)
    assert r.exists(q.keys.job(a), q.keys.errors(a)) == 0
    assert r.zrange(q.keys.completed, 0, -1) == [b] and r.exists(q.keys.keepuntil) == 0
    c = q.enqueue("c", job_id=J(3), max_attempts=5)
    got = q.claim()
    assert got is not None
    q.retry(c, got.token, "boom", delay_ms=0)
    q.promote()
    assert q.drain() == 1
    assert r.exists(q.keys.job(c), q.keys.errors(c)) == 0
    q.pause()
    while not q.obliterate():
        pass
    assert queue_keys(r, q) == set()


# ---------------------------------------------------------------- result()


def test_result_waits_for_a_job_done_later(q: Queue, make_queue: Any) -> None:
    q.set_retention(completed=10)
    jid = q.enqueue({"n": 2}, job_id=J(1))
    other = make_queue(q.name)

    def work() -> None:
        time.sleep(0.2)
        run_job(other, jid, {"doubled": 4})

    t = threading.Thread(target=work)
    t.start()
    try:
        assert q.result(jid, timeout_s=10) == {"doubled": 4}
    finally:
        t.join()


def test_result_refuses_at_once_a_job_not_kept(q: Queue) -> None:
    jid = q.enqueue("x", job_id=J(1))
    t0 = time.monotonic()
    with pytest.raises(JobNotKept):
        q.result(jid, timeout_s=30)
    with pytest.raises(JobNotKept):
        q.result(J(99))
    q.set_retention(dead=5)  # kept for its failures, but no completed job stays
    kept = q.enqueue("y", job_id=J(2))
    with pytest.raises(JobNotKept):
        q.result(kept, timeout_s=30)
    assert time.monotonic() - t0 < 20  # "at once": well before any timeout given


def test_result_times_out(q: Queue) -> None:
    jid = q.enqueue("x", job_id=J(1), keep_ms=1000)
    with pytest.raises(ResultTimeout) as out:
        q.result(jid, timeout_s=0.2)
    assert out.value.job_id == jid and isinstance(out.value, TimeoutError)
    with pytest.raises(InvalidArgument):
        q.result(jid, timeout_s=-1)


async def test_async_result_for_done_later_dead_not_kept_and_timeout(
    aq: AsyncQueue, q: Queue
) -> None:
    await aq.set_retention(completed=10)
    done = await aq.enqueue("a", job_id=J(1))
    got = await aq.claim()
    assert got is not None
    await aq.complete(done, got.token, result=[1, 2])
    assert await aq.result(done) == [1, 2]  # already done

    later = await aq.enqueue("b", job_id=J(2))

    async def work() -> None:
        await asyncio.sleep(0.2)
        c = await aq.claim()
        assert c is not None
        await aq.complete(later, c.token, result="late")

    task = asyncio.create_task(work())
    assert await aq.result(later, timeout_s=10) == "late"
    await task

    dead = await aq.enqueue("c", job_id=J(3), max_attempts=1)
    c = await aq.claim()
    assert c is not None
    await aq.retry(dead, c.token, "nope")
    with pytest.raises(JobFailed) as failed:
        await aq.result(dead)
    assert failed.value.error == "nope"
    with pytest.raises(JobNotKept):
        await aq.result(J(77))
    waiting = await aq.enqueue("d", job_id=J(4))
    with pytest.raises(ResultTimeout):
        await aq.result(waiting, timeout_s=0.2)


def test_a_worker_sends_the_handler_result(q: Queue) -> None:
    q.set_retention(completed=10)
    ids = [q.enqueue(n, job_id=J(n + 1)) for n in range(3)]

    def handle(job: Any) -> Any:
        return None if job.data == 2 else {"twice": job.data * 2}

    worker = Worker(q, handle, concurrency=2)
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    try:
        assert q.result(ids[1], timeout_s=20) == {"twice": 2}
        assert q.result(ids[0], timeout_s=20) == {"twice": 0}
        assert q.result(ids[2], timeout_s=20) is None
    finally:
        worker.stop(timeout=10)
        thread.join(10)
    assert q.counts().kept == 3


# ---------------------------------------------------------------- nothing new when not kept


def test_a_queue_without_history_writes_nothing_new(q: Queue, r: redis.Redis) -> None:
    a = q.enqueue("a", job_id=J(1), dedup_id="d")
    b = q.enqueue("b", job_id=J(2), max_attempts=1)
    assert set(r.hgetall(q.keys.job(a))) == {"state", "attempts", "payload", "seq", "dedup"}
    got = q.claim()
    assert got is not None and got.id == a
    # every claim stamps its start (the history series reads it at the job's end)
    started = {"state", "attempts", "payload", "seq", "dedup", "started_at"}
    assert set(r.hgetall(q.keys.job(a))) == started
    q.complete(a, got.token, result={"ignored": True})  # a result of a job not kept is dropped
    got = q.claim()
    assert got is not None and got.id == b
    q.retry(b, got.token, "boom")
    assert set(r.hgetall(q.keys.job(b))) == {
        "state",
        "attempts",
        "payload",
        "seq",
        "max_attempts",
        "failures",
        "last_error",
        "started_at",
    }
    base = q.keys.base
    assert {k.removeprefix(base) for k in queue_keys(r, q)} == {
        "dead",
        f"job:{b}",
        "metrics:completed",
        "metrics:failed",
        "settled",
        "wake",
        "seq",  # the enqueue sequence
        *(k.removeprefix(base) for k in queue_keys(r, q) if k.startswith(base + "hist:")),
    }
    assert len([k for k in queue_keys(r, q) if k.startswith(base + "hist:")]) == 1
    assert q.counts().kept == 0 and q.browse("completed") == []


def test_views_page_and_clean_the_completed_jobs(q: Queue, r: redis.Redis) -> None:
    q.set_retention(completed=10)
    a, b = q.enqueue("a", job_id=J(1)), q.enqueue("b", job_id=J(2), keep_ms=60_000)
    run_job(q, a, "ra")
    run_job(q, b, "rb")
    page = q.job_page("completed")
    assert [line.id for line in page.jobs] == [b, a] and page.total == 2
    assert all(line.state == "completed" for line in page.jobs)
    found = q.find_jobs("completed", "a", fields=["id", "payload"])
    assert [line.id for line in found.jobs] == [a]
    view = q.job_view(a)
    assert view is not None and view.score == int(r.hget(q.keys.job(a), "finished_at") or 0)
    assert q.clean(0, "completed", dry_run=True).matched == 2
    assert q.clean(0, "completed").matched == 2
    assert r.exists(q.keys.completed, q.keys.keepuntil, q.keys.job(a), q.keys.job(b)) == 0
    assert q.audit(1)[0].args == {"state": "completed", "older_than_ms": 0}


def test_a_kept_job_that_keeps_stalling_dies_with_its_timeline(q: Queue, r: redis.Redis) -> None:
    q.set_retention(dead=1)
    old = q.enqueue("o", job_id=J(1), max_attempts=1)
    got = q.claim()
    assert got is not None
    q.retry(old, got.token, "boom")
    jid = q.enqueue("s", job_id=J(2))
    got = q.claim()
    assert got is not None
    r.zadd(q.keys.active, {jid: 0})  # its lease ran out
    assert q.check_stalled(max_stalled=0) == ([], [jid])
    row = r.hgetall(q.keys.job(jid))
    assert row["state"] == "dead" and int(row["died_at"]) > 0
    job = q.get_job(jid)
    assert job is not None and [e.error for e in job.errors] == [row["last_error"]]
    assert r.zrange(q.keys.dead, 0, -1) == [jid]  # the older dead job was trimmed
    assert r.exists(q.keys.job(old)) == 0
