"""Obliterate: refuses a live queue, changes nothing when it refuses, is bounded per
call, and ends with no ``emq:{q}:*`` key at all while other queues stay untouched."""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable
from typing import Any

import pytest
import redis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from redis.cluster import RedisCluster

from conftest import dump, queue_keys
from echomq import AsyncQueue, InvalidArgument, Queue, QueueHasActiveJobs, QueueNotPaused, new_id
from operator_support import LATER_MS, put_job, row_keys

# run under both executors: the native twins must equal the scripts
pytestmark = [pytest.mark.both_executors, pytest.mark.both_servers]

_examples = itertools.count()


def build_mixed(q: Queue, r: redis.Redis, n: int = 4) -> int:
    """Fill ``q`` with every kind of key a queue can hold; returns how many job rows.

    Flat and grouped jobs in every state, in-flight jobs (one locked), logs, dedup
    keys, lane settings, metrics, repeat records and keys with no row behind them.
    """
    # in flight and dead first: the builders claim the job they just enqueued
    locked, token = put_job(q, "active")
    assert token is not None
    q.lock_job(locked, token)
    put_job(q, "active", group="ga")
    put_job(q, "dead")
    put_job(q, "dead", group="gb")
    done, done_token = put_job(q, "active")
    assert done_token is not None
    q.complete(done, done_token)  # metrics:completed
    q.enqueue_many(range(n), delay_ms=LATER_MS)
    q.enqueue("later", delay_ms=LATER_MS, group="ga", dedup_id="sched-d")
    flat = q.enqueue_many(range(n))
    for jid in flat[:2]:
        q.add_log(jid, "a log line")
    q.enqueue("deduped", dedup_id="pending-d")
    q.enqueue_many(range(n), group="ga")
    q.enqueue_many(range(n), group="gb")
    q.set_group_limit("ga", 3)
    q.set_group_weight("gb", 2)
    q.pause_group("gb")
    q.update_progress(flat[0], 50)
    for name in ("hourly", "nightly"):
        r.zadd(q.keys.repeat, {name: 1_900_000_000_000})
        r.hset(q.keys.repeat_record(name), mapping={"every_ms": "3600000", "payload": "{}"})
    # keys with no row behind them: an orphan dedup key, a stray log list, a lock key,
    # and a key some other module keeps under the queue base
    r.set(q.keys.dedup("orphan"), new_id())
    stray = new_id()
    r.rpush(q.keys.logs(stray), "left over")
    r.set(q.keys.lock(stray), "1", px=600_000)
    r.set(q.keys.base + "module:state", "x")
    return 5 + n + 1 + n + 1 + 2 * n


def _queues(make_queue: Callable[..., Queue], qname: str) -> tuple[Queue, Queue]:
    return make_queue(qname), make_queue(qname + "-other")


@pytest.mark.parametrize("budget", [1, 2, 1000])
def test_obliterate_loops_to_nothing_and_spares_other_queues(
    make_queue: Callable[..., Queue], qname: str, r: redis.Redis, budget: int
) -> None:
    q, other = _queues(make_queue, qname)
    jobs = build_mixed(q, r)
    build_mixed(other, r)
    other.pause()
    other_before = dump(r, other)
    assert len(row_keys(r, q)) == jobs - 1  # the completed job left no row
    q.pause()
    calls = 0
    while True:
        rows = len(row_keys(r, q))
        done = q.obliterate(force=True, budget=budget, sweep=True)
        calls += 1
        assert rows - len(row_keys(r, q)) <= budget
        if done:
            break
        assert queue_keys(r, q), "False means something of the queue is left"
        assert calls < 10_000
    assert queue_keys(r, q) == set()
    assert dump(r, other) == other_before
    assert calls >= -(-(jobs - 1) // budget)


def test_obliterate_refuses_a_queue_that_is_not_paused(
    make_queue: Callable[..., Queue], qname: str, r: redis.Redis
) -> None:
    q, _ = _queues(make_queue, qname)
    build_mixed(q, r)
    before = dump(r, q)
    for force in (False, True):
        with pytest.raises(QueueNotPaused) as err:
            q.obliterate(force=force)
        assert err.value.reason == "not_paused"
    assert dump(r, q) == before


def test_obliterate_refuses_active_jobs_unless_forced(
    make_queue: Callable[..., Queue], qname: str, r: redis.Redis
) -> None:
    q, _ = _queues(make_queue, qname)
    build_mixed(q, r)
    q.pause()
    before = dump(r, q)
    for budget in (1, 1000):
        with pytest.raises(QueueHasActiveJobs) as err:
            q.obliterate(budget=budget)
        assert err.value.reason == "active"
    assert dump(r, q) == before


def test_obliterate_unforced_once_nothing_is_in_flight(q: Queue, r: redis.Redis) -> None:
    jid, token = put_job(q, "active")
    assert token is not None
    q.enqueue_many(range(5))
    q.pause()
    with pytest.raises(QueueHasActiveJobs):
        q.obliterate()
    q.complete(jid, token)
    assert q.obliterate() is True
    assert queue_keys(r, q) == set()


@pytest.mark.single_node("a plain SUBSCRIBE: a cluster's events are sharded (test_cluster.py)")
def test_obliterate_of_an_empty_paused_queue_is_one_call(q: Queue, r: redis.Redis) -> None:
    sub = r.pubsub()
    sub.subscribe(q.keys.events)
    assert sub.get_message(timeout=2.0) is not None  # the subscribe confirmation
    q.pause()
    assert q.obliterate() is True
    assert queue_keys(r, q) == set()
    seen = []
    while (msg := sub.get_message(ignore_subscribe_messages=True, timeout=1.0)) is not None:
        seen.append(json.loads(msg["data"]))
        if seen[-1]["event"] == "obliterated":
            break
    assert seen == [{"event": "paused"}, {"event": "obliterated"}]
    sub.close()


def test_an_obliterated_queue_is_not_paused_any_more(q: Queue, r: redis.Redis) -> None:
    q.enqueue("x")
    q.pause()
    assert q.obliterate() is True
    with pytest.raises(QueueNotPaused):
        q.obliterate()
    assert queue_keys(r, q) == set()
    # the name is free again: a new job starts a fresh, running queue
    jid = q.enqueue("again")
    got = q.claim()
    assert got is not None and got.id == jid and got.token == 1


def test_obliterate_of_a_queue_that_never_existed_creates_nothing(q: Queue, r: redis.Redis) -> None:
    with pytest.raises(QueueNotPaused):
        q.obliterate()
    assert queue_keys(r, q) == set()


def test_the_sweep_deletes_at_most_budget_keys_per_call(q: Queue, r: redis.Redis) -> None:
    for i in range(10):
        r.set(f"{q.keys.base}stray:{i}", i)
    q.pause()
    sizes = [len(queue_keys(r, q))]
    while not q.obliterate(budget=3, sweep=True):
        sizes.append(len(queue_keys(r, q)))
        assert len(sizes) < 100
    sizes.append(len(queue_keys(r, q)))
    assert sizes[0] == 12 and sizes[-1] == 0  # the strays, meta and the audit journal
    deleted = [a - b for a, b in itertools.pairwise(sizes)]
    assert all(0 <= d <= 3 for d in deleted[:-1])
    assert deleted[-1] <= 3 + 2  # the last call also deletes meta and the journal
    assert len(deleted) >= 4


def test_obliterate_deletes_jobs_enqueued_while_it_runs(q: Queue, r: redis.Redis) -> None:
    q.enqueue_many(range(4))
    q.pause()
    assert q.obliterate(budget=2) is False
    q.enqueue_many(range(3), group="late")  # a producer that was not stopped
    while not q.obliterate(budget=2):
        pass
    assert queue_keys(r, q) == set()


def test_without_sweep_keys_are_found_from_the_registries_only(
    make_queue: Callable[..., Queue], qname: str, r: redis.Redis
) -> None:
    q, other = _queues(make_queue, qname)
    build_mixed(q, r)
    for i in range(3000):  # a big neighbour: a keyspace scan would walk its keys too
        r.set(f"{other.keys.base}filler:{i}", i)
    q.pause()
    scans = _scan_calls(r, q)
    while not q.obliterate(force=True):
        pass
    # no pass over the keyspace, however many calls the server's time slices took
    assert _scan_calls(r, q) == scans
    # what no registry names is left (a scan would find it: sweep=True)
    base = q.keys.base
    stray = {k for k in queue_keys(r, q) if ":logs" in k or ":lock" in k}
    assert queue_keys(r, q) == {base + "de:orphan", base + "module:state", *stray}
    assert len(stray) == 2
    # the counter does see a scan: the sweep finds the strays
    q.pause()
    while not q.obliterate(force=True, sweep=True):
        pass
    assert _scan_calls(r, q) > scans
    assert queue_keys(r, q) == set()


def _scan_calls(r: redis.Redis, q: Queue) -> int:
    """How many SCANs the node holding ``q`` ran (INFO commandstats counts a script's
    calls too)."""
    node: Any = r
    if isinstance(r, RedisCluster):
        node = r.get_redis_connection(r.get_node_from_key(q.keys.base))
    return int(node.info("commandstats").get("cmdstat_scan", {}).get("calls", 0))


@pytest.mark.parametrize("budget", [0, -5, False])
def test_obliterate_budget_is_gated_before_io(qname: str, budget: object) -> None:
    dead = Queue(qname, url="redis://127.0.0.1:1/0")
    with pytest.raises(InvalidArgument):
        dead.obliterate(budget=budget)  # type: ignore[arg-type]
    dead.close()


async def test_async_obliterate(aq: AsyncQueue, r: redis.Redis) -> None:
    await aq.enqueue_many(range(5))
    await aq.enqueue_many(range(5), group="g")
    with pytest.raises(QueueNotPaused):
        await aq.obliterate()
    await aq.pause()
    calls = 1
    while not await aq.obliterate(budget=4):
        calls += 1
    assert calls >= 3
    assert set(r.scan_iter(match=aq.keys.pattern())) == set()


@settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    pending=st.integers(0, 3),
    scheduled=st.integers(0, 2),
    dead=st.integers(0, 2),
    active=st.integers(0, 2),
    grouped=st.booleans(),
    paused=st.booleans(),
    budget=st.integers(1, 5),
)
def test_a_refused_obliterate_changes_nothing(
    make_queue: Callable[..., Queue],
    r: redis.Redis,
    pending: int,
    scheduled: int,
    dead: int,
    active: int,
    grouped: bool,
    paused: bool,
    budget: int,
) -> None:
    q = make_queue(f"refuse-{next(_examples)}-{new_id()}")
    group = "g" if grouped else None
    # the refusing cases only: not paused, or paused with work in flight and no force
    active = max(active, 1) if paused else active
    for _ in range(dead):
        put_job(q, "dead", group=group)
    for _ in range(active):
        put_job(q, "active", group=group)
    for _ in range(scheduled):
        put_job(q, "scheduled", group=group)
    for _ in range(pending):
        put_job(q, "pending", group=group)
    if paused:
        q.pause()
    before = dump(r, q)
    with pytest.raises((QueueNotPaused, QueueHasActiveJobs)) as err:
        q.obliterate(force=not paused, budget=budget)
    assert err.value.reason == ("active" if paused else "not_paused")
    assert dump(r, q) == before


def test_resume_ends_an_interrupted_obliterate_so_the_next_starts_afresh(
    q: Queue, r: redis.Redis
) -> None:
    for i in range(5):
        r.set(f"{q.keys.base}stray:{i}", i)
    q.enqueue("kept")
    q.pause()
    while r.hget(q.keys.meta, "sweep") is None:
        assert q.obliterate(budget=1, sweep=True) is False  # into the sweep, mid-pass
    q.resume()
    assert r.hgetall(q.keys.meta) == {}
    q.pause()
    while not q.obliterate(budget=1, sweep=True):
        pass
    assert queue_keys(r, q) == set()
