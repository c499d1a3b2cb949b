"""Queue scope: pause and resume (a gate, not a move), and the bounded drain."""

from __future__ import annotations

from pathlib import Path

import pytest
import redis

from conftest import dump
from echomq import AsyncQueue, InvalidArgument, Queue, admin
from echomq.embedded import EmbeddedServer
from echomq.repeat import fire_due
from echomq.results import Counts
from operator_support import changed, put_job, ring, row_keys

# run under both executors: the native twins must equal the scripts
pytestmark = [pytest.mark.both_executors, pytest.mark.both_servers]

# -- pause / resume -------------------------------------------------------------------


def _mixed_backlog(q: Queue) -> dict[str, str]:
    """A job in every state, flat and grouped, with logs, a dedup key and a limit."""
    made = {
        "dead": put_job(q, "dead")[0],
        "active_g": put_job(q, "active", group="a")[0],
        "scheduled": put_job(q, "scheduled")[0],
        "pending": put_job(q, "pending", dedup_id="d-1")[0],
        "pending2": put_job(q, "pending")[0],
        "lane_a": put_job(q, "pending", group="a")[0],
        "lane_b": put_job(q, "pending", group="b")[0],
    }
    q.add_log(made["pending"], "note")
    q.set_group_limit("b", 5)
    return made


def test_pause_is_a_meta_field_and_moves_nothing(q: Queue, r: redis.Redis) -> None:
    _mixed_backlog(q)
    before = dump(r, q)
    assert q.pause() is None
    after = dump(r, q)
    # the gate and the audit journal's entry, nothing else
    assert changed(before, after) == {q.keys.meta, q.keys.audit}
    assert r.hgetall(q.keys.meta) == {"paused": "1"}
    assert q.is_paused() is True


def test_pause_is_idempotent(q: Queue, r: redis.Redis) -> None:
    q.enqueue("x")
    q.pause()
    once = dump(r, q)
    assert q.pause() is None
    assert dump(r, q) == once


def test_resume_of_a_running_queue_changes_nothing(q: Queue, r: redis.Redis) -> None:
    q.enqueue("x")
    q.enqueue("y", group="g")
    before = dump(r, q)
    assert q.resume() is None
    assert dump(r, q) == before
    assert q.is_paused() is False


def test_pause_gates_both_claim_paths_and_leaves_the_backlog_intact(
    q: Queue, r: redis.Redis
) -> None:
    _mixed_backlog(q)
    q.pause()
    paused = dump(r, q)
    # claims alternate which side they try first: try both sides, and the batch form
    for _ in range(4):
        assert q.claim() is None
    assert q.claim_many(10) == []
    assert q.claim_many(10, lock_ms=1000) == []
    assert dump(r, q) == paused


def test_resume_serves_the_head_of_pending(q: Queue, r: redis.Redis) -> None:
    first, second = q.enqueue(1), q.enqueue(2)
    q.pause()
    assert q.claim() is None
    q.resume()
    assert r.hgetall(q.keys.meta) == {}
    got = q.claim()
    assert got is not None and got.id == first and got.token == 1
    assert r.zrange(q.keys.pending, 0, -1) == [second]


def test_resume_serves_the_head_of_a_lane(q: Queue, r: redis.Redis) -> None:
    first, _ = q.enqueue(1, group="g"), q.enqueue(2, group="g")
    q.pause()
    assert q.claim() is None
    assert ring(r, q) == ["g"]
    q.resume()
    got = q.claim()
    assert got is not None and got.id == first and got.group == "g"


def test_resume_wakes_idle_workers_for_the_backlog(q: Queue, r: redis.Redis) -> None:
    q.enqueue_many(range(3))
    q.enqueue("g", group="g")
    q.pause()
    r.delete(q.keys.wake)  # idle workers took every token while the queue was paused
    q.resume()
    assert r.llen(q.keys.wake) == 4  # 3 flat + 1 group on the ring


async def test_async_pause_and_resume(aq: AsyncQueue, r: redis.Redis) -> None:
    jid = await aq.enqueue("x")
    await aq.pause()
    assert r.hget(aq.keys.meta, "paused") == "1"
    assert await aq.claim() is None
    assert await aq.is_paused() is True
    await aq.resume()
    got = await aq.claim()
    assert got is not None and got.id == jid


# -- drain ----------------------------------------------------------------------------


def _repeat_by_hand(r: redis.Redis, q: Queue) -> None:
    """A repeat registry entry, written the way the repeat module lays it out."""
    r.zadd(q.keys.repeat, {"nightly": 1_900_000_000_000})
    r.hset(q.keys.repeat_record("nightly"), mapping={"every_ms": "60000", "payload": "{}"})


def test_drain_deletes_the_pending_backlog_and_spares_the_rest(q: Queue, r: redis.Redis) -> None:
    made = _mixed_backlog(q)
    _repeat_by_hand(r, q)
    q.add_log(made["active_g"], "working")
    drained = {made["pending"], made["pending2"], made["lane_a"], made["lane_b"]}
    before = dump(r, q)
    assert q.drain() == 4
    after = dump(r, q)
    logged = made["pending"]
    gone = {q.keys.job(j) for j in drained} | {q.keys.logs(logged), q.keys.logtimes(logged)}
    assert gone.isdisjoint(after)
    assert not r.exists(q.keys.dedup("d-1"))
    assert not r.exists(q.keys.pending, q.keys.lane("a"), q.keys.lane("b"))
    assert ring(r, q) == []
    # exactly those keys changed: the rows, a log list, the dedup key, the backlog sets
    # and the ring; active, schedule, dead, lanes' settings and the registry survive
    assert changed(before, after) == gone | {
        q.keys.dedup("d-1"),
        q.keys.pending,
        q.keys.lane("a"),
        q.keys.lane("b"),
        q.keys.gindex,
        q.keys.ring,
        q.keys.audit,
    }
    assert q.counts() == Counts(
        pending=0, active=1, scheduled=1, dead=1, completed=0, failed=1, paused=False
    )
    assert q.get_job_logs(made["active_g"]) == ["working"]


def test_drain_with_the_schedule(q: Queue, r: redis.Redis) -> None:
    made = _mixed_backlog(q)
    _repeat_by_hand(r, q)
    extra = q.enqueue("later", delay_ms=10_000, dedup_id="later-1", group="c")
    q.add_log(extra, "x")
    repeat = {k: v for k, v in dump(r, q).items() if ":repeat" in k}
    assert q.drain(include_schedule=True) == 6
    assert not r.exists(
        q.keys.schedule, q.keys.job(extra), q.keys.logs(extra), q.keys.logtimes(extra)
    )
    assert not r.exists(q.keys.job(made["scheduled"]), q.keys.dedup("later-1"))
    assert {k: v for k, v in dump(r, q).items() if ":repeat" in k} == repeat
    assert r.zrange(q.keys.active, 0, -1) == [made["active_g"]]
    assert r.zrange(q.keys.dead, 0, -1) == [made["dead"]]
    assert row_keys(r, q) == {q.keys.job(made["active_g"]), q.keys.job(made["dead"])}


def test_drain_spares_active_so_it_can_still_complete(q: Queue, r: redis.Redis) -> None:
    jid, token = put_job(q, "active", group="g")
    q.enqueue_many(range(5), group="g")
    assert q.drain() == 5
    assert r.hget(q.keys.gactive, "g") == "1"
    assert token is not None
    q.complete(jid, token)
    assert r.hget(q.keys.gactive, "g") is None
    assert q.counts().completed == 1


def test_drain_is_bounded_and_loops_to_the_end(q: Queue, r: redis.Redis) -> None:
    q.enqueue_many(range(6))
    q.enqueue_many(range(4), group="g")
    assert q.drain(budget=3) == 10
    assert row_keys(r, q) == set()
    assert q.counts().pending == 0


def test_one_drain_call_deletes_at_most_budget_jobs(q: Queue, r: redis.Redis) -> None:
    q.enqueue_many(range(5))
    q.enqueue_many(range(5), group="g")
    plan = admin.drain(q.ctx, budget=3)
    op = next(plan)
    seen = []
    try:
        while True:
            rows = len(row_keys(r, q))
            reply = q.runner.execute(op)
            seen.append(rows - len(row_keys(r, q)))
            op = plan.send(reply)
    except StopIteration as stop:
        assert stop.value == 10
    # at most the budget a call; a call also stops after about 1 ms of server time, so
    # on a loaded machine one may delete fewer (seen: [3, 2, 3, 2]), never none
    assert all(1 <= n <= 3 for n in seen) and sum(seen) == 10 and len(seen) >= 4, seen
    assert row_keys(r, q) == set()


def test_drain_of_an_empty_queue_writes_nothing(q: Queue, r: redis.Redis) -> None:
    put_job(q, "active")
    before = dump(r, q)
    assert q.drain(include_schedule=True) == 0
    assert dump(r, q) == before


@pytest.mark.parametrize("budget", [0, -1, True, 2.5])
def test_drain_budget_is_gated_before_io(qname: str, budget: object) -> None:
    dead = Queue(qname, url="redis://127.0.0.1:1/0")
    with pytest.raises(InvalidArgument):
        dead.drain(budget=budget)  # type: ignore[arg-type]
    dead.close()


def test_drain_of_a_paused_queue_keeps_it_paused(q: Queue, r: redis.Redis) -> None:
    q.enqueue_many(range(3))
    q.pause()
    assert q.drain() == 3
    assert q.is_paused() is True
    jid = q.enqueue("after")
    assert q.claim() is None
    q.resume()
    got = q.claim()
    assert got is not None and got.id == jid


async def test_async_drain(aq: AsyncQueue, r: redis.Redis) -> None:
    await aq.enqueue_many(range(7))
    await aq.enqueue_many(range(3), group="g")
    assert await aq.drain(budget=4) == 10
    assert await aq.counts() == Counts(0, 0, 0, 0, 0, 0, paused=False)


# -- the runbook's session is a test ---------------------------------------------------


def test_the_runbook_session_runs(server: EmbeddedServer, r: redis.Redis, qname: str) -> None:
    text = (Path(__file__).resolve().parent.parent / "docs" / "runbook.md").read_text()
    session = text.split("## A runbook session", 1)[1]
    code = session.split("```python\n", 1)[1].split("```", 1)[0]
    assert '"runbook-demo"' in code
    code = code.replace('"runbook-demo"', repr(qname))  # this test's own queue
    # a key no registry of the queue names: obliterate finds keys from the registries
    # (no keyspace scan), so it is left (obliterate(sweep=True) would find it)
    r.set(f"emq:{{{qname}}}:marker", "1")
    exec(compile(code, "docs/runbook.md", "exec"), {"URL": server.url})
    # so are the claim records (claimreq:<rid>), which expire within a minute
    left = set(r.scan_iter(match=f"emq:{{{qname}}}:*"))
    records = {k for k in left if k.startswith(f"emq:{{{qname}}}:claimreq:")}
    assert all(0 < r.pttl(k) <= 60_000 for k in records)
    assert left - records == {f"emq:{{{qname}}}:marker"}
    r.delete(f"emq:{{{qname}}}:marker")


def test_a_registered_repeatable_keeps_producing_after_a_drain(q: Queue, r: redis.Redis) -> None:
    # a real registration through the repeat verb, due at once
    q.repeat("heartbeat", every_ms=60_000, payload={"beat": 1})
    first = q.runner.drive(fire_due(q.ctx))
    assert len(first) == 1 and r.zscore(q.keys.pending, first[0]) is not None
    q.enqueue_many(range(4))
    record = r.hgetall(q.keys.repeat_record("heartbeat"))
    assert q.drain(include_schedule=True) == 5
    assert not r.exists(q.keys.pending, q.keys.job(first[0]))
    # the registry and the record survive the drain untouched...
    assert r.hgetall(q.keys.repeat_record("heartbeat")) == record
    assert r.zcard(q.keys.repeat) == 1
    # ...so when its next slot comes the repeatable makes a fresh job
    r.zadd(q.keys.repeat, {"heartbeat": 1}, xx=True)  # bring the next slot forward
    again = q.runner.drive(fire_due(q.ctx))
    assert len(again) == 1 and again != first
    assert q.get_job(again[0]).data == {"beat": 1}
    assert q.counts().pending == 1
