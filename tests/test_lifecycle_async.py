"""The lifecycle through ``AsyncQueue``: the same plans, driven by the asyncio runner.

Replies and the keys left are checked as in ``test_lifecycle.py``; refusals compare a
dump of the queue's keys before and after.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
import redis

from conftest import claim_records, dump, native, queue_keys, tombstones
from echomq import (
    AsyncQueue,
    InvalidArgument,
    InvalidJobId,
    JobGone,
    StaleToken,
    new_id,
)
from echomq.embedded import EmbeddedServer, free_port
from echomq.lifecycle import ENQUEUE_CHUNK
from echomq.results import Counts
from test_lifecycle import run_score

# run under both executors: the native twins must equal the scripts
pytestmark = [pytest.mark.both_executors, pytest.mark.both_servers, pytest.mark.evalsha_too]


def server_ms(r: redis.Redis) -> int:
    sec, usec = r.time()
    return int(sec) * 1000 + int(usec) // 1000


async def expire_leases(r: redis.Redis, aq: AsyncQueue) -> None:
    top = r.zrange(aq.keys.active, -1, -1, withscores=True)
    while top and server_ms(r) <= top[0][1]:
        await asyncio.sleep(0.01)


def row(r: redis.Redis, aq: AsyncQueue, jid: str) -> dict[str, str]:
    return r.hgetall(aq.keys.job(jid))  # type: ignore[return-value]


@pytest.fixture()
async def nowhere(qname: str) -> AsyncIterator[AsyncQueue]:
    queue = AsyncQueue(qname, url=f"redis://127.0.0.1:{free_port()}/0")
    yield queue
    await queue.aclose()


async def test_enqueue_claim_complete(aq: AsyncQueue, r: redis.Redis) -> None:
    jid = await aq.enqueue({"a": 1}, name="n", max_attempts=4, priority=2)
    assert row(r, aq, jid) == {
        "state": "pending",
        "attempts": "0",
        "payload": '{"a":1}',
        "name": "n",
        "priority": "2",
        "max_attempts": "4",
        "seq": "0",
    }
    assert r.zscore(aq.keys.pending, jid) == run_score(2, 0)
    c = await aq.claim(10_000)
    assert c is not None
    assert (c.id, c.payload, c.token, c.name, c.group) == (jid, {"a": 1}, 1, "n", None)
    assert row(r, aq, jid)["state"] == "active"
    assert await aq.complete(c.id, c.token) is None
    # the settled tombstone (the native complete keeps none yet: CONTRACTS.md)
    assert (r.zscore(aq.keys.settled, jid) is None) == native(aq)
    assert len(claim_records(r, aq)) == (0 if native(aq) else 1)
    # the history series: the hour's key (the completion's minute)
    hours = {k for k in queue_keys(r, aq) if k.startswith(aq.keys.base + "hist:")}
    assert len(hours) == 1 and sum((await aq.history("1h")).completed) == 1
    assert queue_keys(r, aq) == {
        aq.keys.wake,
        aq.keys.metrics_completed,
        aq.keys.seq,
        *hours,
        *tombstones(aq),
    }
    assert await aq.counts() == Counts(
        pending=0, active=0, scheduled=0, dead=0, completed=1, failed=0, paused=False
    )


async def test_duplicates_and_dedup_write_nothing(aq: AsyncQueue, r: redis.Redis) -> None:
    jid = new_id()
    assert await aq.enqueue("x", job_id=jid) == jid
    holder = await aq.enqueue("y", dedup_id="k")
    before = dump(r, aq)
    assert await aq.enqueue("z", job_id=jid) == jid
    assert await aq.enqueue("z", dedup_id="k") == holder
    assert dump(r, aq) == before
    assert r.get(aq.keys.dedup("k")) == holder


async def test_delay_and_run_at_use_the_schedule(aq: AsyncQueue, r: redis.Redis) -> None:
    lo = server_ms(r)
    a = await aq.enqueue("a", delay_ms=50_000)
    hi = server_ms(r)
    at = hi + 70_000
    b = await aq.enqueue("b", run_at_ms=at)
    due_a = r.zscore(aq.keys.schedule, a)
    assert due_a is not None and lo + 50_000 <= due_a <= hi + 50_000
    assert r.zscore(aq.keys.schedule, b) == at
    assert await aq.job_state(a) == "scheduled"
    assert await aq.browse("scheduled") == [b, a]
    assert await aq.promote() == 0
    assert await aq.claim() is None


async def test_enqueue_many_and_claim_many(aq: AsyncQueue, r: redis.Redis) -> None:
    got = await aq.enqueue_many(range(ENQUEUE_CHUNK + 5))
    assert len(got) == ENQUEUE_CHUNK + 5 and got == sorted(got)
    assert r.zrange(aq.keys.pending, 0, -1) == got
    cs = await aq.claim_many(3, 10_000, lock_ms=5_000)
    assert [c.id for c in cs] == got[:3]
    assert all(r.get(aq.keys.lock(c.id)) == "1" for c in cs)
    missed = await aq.complete_many([(cs[0].id, cs[0].token), (cs[1].id, 7)])
    assert missed == [cs[1].id]
    assert r.exists(aq.keys.job(cs[0].id)) == 0
    assert await aq.browse("pending", 2) == list(reversed(got))[:2]
    assert await aq.browse("active") == [cs[2].id, cs[1].id]  # one deadline: id desc


async def test_pause_gate(aq: AsyncQueue, r: redis.Redis) -> None:
    await aq.enqueue_many(["a", "b"])
    r.hset(aq.keys.meta, "paused", "1")
    assert await aq.is_paused() is True
    before = dump(r, aq)
    assert await aq.claim() is None
    assert await aq.claim_many(2) == []
    assert dump(r, aq) == before
    r.hdel(aq.keys.meta, "paused")
    assert await aq.claim() is not None


async def test_retry_scheduled_then_dead(aq: AsyncQueue, r: redis.Redis) -> None:
    jid = await aq.enqueue("x", max_attempts=2)
    c = await aq.claim()
    assert c is not None
    assert await aq.retry(jid, c.token, "one") == "scheduled"
    assert row(r, aq, jid)["failures"] == "1"
    assert await aq.promote() == 1
    c = await aq.claim()
    assert c is not None and c.token == 2
    assert await aq.retry(jid, c.token, "two") == "dead"
    assert row(r, aq, jid)["last_error"] == "two"
    assert r.zrange(aq.keys.dead, 0, -1) == [jid]
    assert (await aq.metrics())["failed"]["count"] == 1
    assert await aq.browse("dead") == [jid]


async def test_delay_and_extend(aq: AsyncQueue, r: redis.Redis) -> None:
    a, b = await aq.enqueue_many(["a", "b"])
    ca, cb = await aq.claim_many(2, 1_000)
    lo = server_ms(r)
    await aq.extend_lock(a, ca.token, 80_000)
    assert (r.zscore(aq.keys.active, a) or 0) >= lo + 80_000
    assert await aq.extend_locks([(a, ca.token), (b, 9)], 90_000) == [b]
    due = await aq.delay(b, cb.token, 40_000)
    assert r.zscore(aq.keys.schedule, b) == due
    got = row(r, aq, b)
    assert lo - 1000 <= int(got.pop("started_at")) <= lo  # every claim stamps its start
    assert got == {"state": "scheduled", "attempts": "1", "payload": '"b"', "seq": "1"}


async def test_refusals_change_nothing(aq: AsyncQueue, r: redis.Redis) -> None:
    jid = await aq.enqueue("x")
    c = await aq.claim()
    assert c is not None
    before = dump(r, aq)
    ghost = new_id()
    for call, exc in [
        (aq.complete(jid, c.token + 1), StaleToken),
        (aq.retry(jid, c.token + 1, "e"), StaleToken),
        (aq.delay(jid, c.token + 1, 5), StaleToken),
        (aq.extend_lock(jid, c.token + 1, 5), StaleToken),
        (aq.complete(ghost, 1), JobGone),
        (aq.retry(ghost, 1, "e"), JobGone),
        (aq.delay(ghost, 1, 5), JobGone),
        (aq.extend_lock(ghost, 1, 5), JobGone),
    ]:
        with pytest.raises(exc):
            await call
    assert dump(r, aq) == before


async def test_stale_token_after_reap_and_reclaim(aq: AsyncQueue, r: redis.Redis) -> None:
    jid = await aq.enqueue("x")
    first = await aq.claim(50)
    assert first is not None
    await expire_leases(r, aq)
    assert await aq.reap() == 1
    second = await aq.claim()
    assert second is not None and second.token == first.token + 1
    before = dump(r, aq)
    with pytest.raises(StaleToken):
        await aq.complete(jid, first.token)
    assert dump(r, aq) == before
    await aq.complete(jid, second.token)
    assert await aq.get_job(jid) is None


async def test_check_stalled(aq: AsyncQueue, r: redis.Redis) -> None:
    jid = await aq.enqueue("x")
    await aq.claim(50)
    await expire_leases(r, aq)
    assert await aq.check_stalled(max_stalled=0) == ([], [jid])
    assert row(r, aq, jid)["state"] == "dead" and row(r, aq, jid)["stalled"] == "1"
    assert r.zrange(aq.keys.dead, 0, -1) == [jid]


async def test_reads(aq: AsyncQueue, r: redis.Redis) -> None:
    jid = await aq.enqueue([1])
    job = await aq.get_job(jid)
    assert job is not None and job.data == [1] and job.id == jid
    assert await aq.job_state(jid) == "pending"
    assert await aq.is_paused() is False
    assert await aq.metrics() == {"completed": {}, "failed": {}}
    assert await aq.get_job(new_id()) is None
    assert queue_keys(r, aq) == {aq.keys.job(jid), aq.keys.pending, aq.keys.wake, aq.keys.seq}


@pytest.mark.parametrize(
    "bad", ["", "JOB1", "JOBzzzzzzzzzzz", "JOB0000000000?"], ids=["empty", "short", "big", "char"]
)
async def test_malformed_ids_raise_before_any_io(nowhere: AsyncQueue, bad: str) -> None:
    for call in (
        lambda: nowhere.enqueue("x", job_id=bad),
        lambda: nowhere.complete(bad, 1),
        lambda: nowhere.retry(bad, 1, "e"),
        lambda: nowhere.delay(bad, 1, 1),
        lambda: nowhere.extend_lock(bad, 1, 1),
        lambda: nowhere.extend_locks([(bad, 1)], 1),
        lambda: nowhere.complete_many([(bad, 1)]),
        lambda: nowhere.get_job(bad),
        lambda: nowhere.job_state(bad),
    ):
        with pytest.raises(InvalidJobId):
            await call()
    with pytest.raises(InvalidArgument):
        await nowhere.claim(0)


async def test_two_async_claimers_never_share(server: EmbeddedServer, qname: str) -> None:
    queues = [AsyncQueue(qname, url=server.url) for _ in range(3)]
    producer, a, b = queues
    try:
        enqueued = await producer.enqueue_many(range(1000))

        async def drain(q: AsyncQueue) -> list[str]:
            got: list[str] = []
            while (c := await q.claim()) is not None:
                got.append(c.id)
            return got

        got_a, got_b = await asyncio.gather(drain(a), drain(b))
        assert not set(got_a) & set(got_b)
        assert sorted(got_a + got_b) == enqueued
    finally:
        for q in queues:
            await q.aclose()


async def test_verbs_survive_script_flush(aq: AsyncQueue, r: redis.Redis) -> None:
    jid = await aq.enqueue("x")
    r.script_flush()
    c = await aq.claim()
    assert c is not None and c.id == jid
    r.script_flush()
    await aq.complete(c.id, c.token)
    r.script_flush()
    got = await aq.enqueue_many(range(ENQUEUE_CHUNK + 1))  # NOSCRIPT inside the pipeline
    assert r.zcard(aq.keys.pending) == len(got) == ENQUEUE_CHUNK + 1
    r.script_flush()
    cs = await aq.claim_many(2)
    r.script_flush()
    assert await aq.complete_many([(x.id, x.token) for x in cs]) == []
    assert r.hget(aq.keys.metrics_completed, "count") == "3"


async def test_concurrent_verbs_on_one_async_queue(aq: AsyncQueue, r: redis.Redis) -> None:
    # many coroutines share one AsyncQueue (one pool): each gets its own reply
    ids_: list[Any] = await asyncio.gather(*(aq.enqueue(i) for i in range(50)))
    assert len(set(ids_)) == 50
    assert r.zcard(aq.keys.pending) == 50
    claims = await asyncio.gather(*(aq.claim() for _ in range(50)))
    assert sorted(c.id for c in claims if c is not None) == sorted(ids_)
    assert {c.payload for c in claims if c is not None} == set(range(50))
