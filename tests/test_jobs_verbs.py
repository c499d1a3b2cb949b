"""The job-scope operator verbs: each reaches into one row, fenced and typed.

Every test checks the reply and the keys left behind: a refusal leaves ``dump(r, q)``
exactly as it was, a success changes exactly the keys it should.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import redis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import dump
from echomq import (
    AsyncQueue,
    InvalidArgument,
    InvalidJobId,
    InvalidName,
    JobGone,
    JobLocked,
    JobNotDead,
    Queue,
    StaleToken,
    new_id,
)
from operator_support import STATES, changed, put_job, ring
from test_lifecycle import run_score
from worker_support import wait_until

# run under both executors: the native twins must equal the scripts
pytestmark = [pytest.mark.both_executors, pytest.mark.both_servers]

GROUPS = [None, "g"]


def _set_of(q: Queue, state: str, group: str | None) -> str:
    """The key holding a job of ``state`` (its lane when grouped and pending)."""
    if state == "pending" and group:
        return q.keys.lane(group)
    return q.keys.state_set(state)


# -- the per-job verbs, each called the same way for the missing / malformed matrix --

VERBS: dict[str, Callable[[Queue, str], Any]] = {
    "update_data": lambda q, j: q.update_data(j, {"x": 1}),
    "update_progress": lambda q, j: q.update_progress(j, 50),
    "add_log": lambda q, j: q.add_log(j, "a line"),
    "get_job_logs": lambda q, j: q.get_job_logs(j),
    "get_job_log_entries": lambda q, j: q.get_job_log_entries(j),
    "remove_job": lambda q, j: q.remove_job(j),
    "reprocess_job": lambda q, j: q.reprocess_job(j),
    "lock_job": lambda q, j: q.lock_job(j, 1),
    "unlock_job": lambda q, j: q.unlock_job(j, 1),
}

BAD_IDS = ["", "JOB123", "job0000000000A", "JOB0000000000!", "JOBzzzzzzzzzzz", "x" * 14]


@pytest.fixture()
def busy(q: Queue) -> Queue:
    """A queue with a job in every state, flat and grouped, so a dump has content."""
    put_job(q, "dead")
    put_job(q, "active", group="g")
    put_job(q, "scheduled")
    put_job(q, "pending")
    put_job(q, "pending", group="g")
    return q


@pytest.mark.parametrize("verb", sorted(VERBS))
def test_missing_job_is_gone_and_nothing_is_written(busy: Queue, r: redis.Redis, verb: str) -> None:
    missing = new_id()
    before = dump(r, busy)
    with pytest.raises(JobGone) as err:
        VERBS[verb](busy, missing)
    assert err.value.reason == "gone"
    assert err.value.job_id == missing
    assert dump(r, busy) == before


@pytest.fixture()
def unreachable(qname: str) -> Iterator[Queue]:
    """A queue whose server does not exist: any I/O would raise ServerUnavailable."""
    dead = Queue(qname, url="redis://127.0.0.1:1/0")
    yield dead
    dead.close()


@pytest.mark.parametrize("bad", BAD_IDS, ids=[f"bad{i}" for i in range(len(BAD_IDS))])
@pytest.mark.parametrize("verb", sorted(VERBS))
def test_malformed_id_raises_before_any_io(
    busy: Queue, unreachable: Queue, r: redis.Redis, verb: str, bad: str
) -> None:
    with pytest.raises(InvalidJobId):
        VERBS[verb](unreachable, bad)
    before = dump(r, busy)
    with pytest.raises(InvalidJobId):
        VERBS[verb](busy, bad)
    assert dump(r, busy) == before


# -- update_data ----------------------------------------------------------------------


@pytest.mark.parametrize("group", GROUPS)
@pytest.mark.parametrize("state", STATES)
def test_update_data_replaces_the_payload_in_every_state(
    q: Queue, r: redis.Redis, state: str, group: str | None
) -> None:
    jid, _ = put_job(q, state, group=group)
    row = r.hgetall(q.keys.job(jid))
    before = dump(r, q)
    assert q.update_data(jid, {"new": [1, 2], "t": "é"}) is None
    assert changed(before, dump(r, q)) == {q.keys.job(jid), q.keys.audit}
    assert r.hgetall(q.keys.job(jid)) == {**row, "payload": '{"new":[1,2],"t":"é"}'}
    assert q.get_job(jid).data == {"new": [1, 2], "t": "é"}


# -- update_progress ------------------------------------------------------------------


@pytest.mark.parametrize("group", GROUPS)
@pytest.mark.parametrize("state", STATES)
def test_update_progress_writes_the_field_in_every_state(
    q: Queue, r: redis.Redis, state: str, group: str | None
) -> None:
    jid, _ = put_job(q, state, group=group)
    row = r.hgetall(q.keys.job(jid))
    before = dump(r, q)
    assert q.update_progress(jid, 30) is None
    assert changed(before, dump(r, q)) == {q.keys.job(jid)}
    assert r.hgetall(q.keys.job(jid)) == {**row, "progress": "30"}


@pytest.mark.parametrize(
    ("value", "stored"),
    [
        (42, "42"),
        (-7, "-7"),
        (2.5, "2.5"),
        ("half way", "half way"),
        ("50", "50"),
        ({"done": 3, "of": 10}, '{"done":3,"of":10}'),
        ([1, "a"], '[1,"a"]'),
        (True, "true"),
        (None, "null"),
    ],
    ids=["int", "negative", "float", "str", "digits", "dict", "list", "bool", "none"],
)
def test_progress_is_stored_as_decimal_text_string_or_json(
    q: Queue, r: redis.Redis, value: Any, stored: str
) -> None:
    jid = q.enqueue("x")
    q.update_progress(jid, value)
    assert r.hget(q.keys.job(jid), "progress") == stored


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), {"x": float("nan")}, {1, 2}])
def test_progress_that_json_cannot_carry_is_refused_before_io(
    q: Queue, r: redis.Redis, bad: Any
) -> None:
    jid = q.enqueue("x")
    before = dump(r, q)
    with pytest.raises(InvalidArgument):
        q.update_progress(jid, bad)
    assert dump(r, q) == before


@pytest.fixture()
def events(r: redis.Redis, q: Queue) -> Iterator[Callable[[], Any]]:
    """Subscribe to the queue's events channel; yields ``next_event()`` (parsed JSON,
    or ``None`` when nothing arrives in a short while)."""
    sub = r.pubsub()
    sub.subscribe(q.keys.events)
    confirm = sub.get_message(timeout=2.0)
    assert confirm is not None and confirm["type"] == "subscribe"

    def next_event(timeout: float = 2.0) -> Any:
        msg = sub.get_message(ignore_subscribe_messages=True, timeout=timeout)
        return None if msg is None else json.loads(msg["data"])

    yield next_event
    sub.close()


@pytest.mark.parametrize(
    "value",
    [75, 0.25, "step 3 of 4", {"done": 3, "of": 4, "tag": "a/b"}],
    ids=["int", "float", "str", "dict"],
)
@pytest.mark.single_node("a plain SUBSCRIBE: a cluster's events are sharded (test_cluster.py)")
def test_progress_subscriber_receives_exactly_the_event(
    q: Queue, r: redis.Redis, value: Any, events: Callable[..., Any]
) -> None:
    jid = q.enqueue("x")
    events(timeout=0.05)  # nothing queued for this subscriber before the update
    q.update_progress(jid, value)
    assert events() == {"event": "progress", "job": jid, "progress": value}
    assert events(timeout=0.1) is None


@pytest.mark.single_node("a plain SUBSCRIBE: a cluster's events are sharded (test_cluster.py)")
def test_progress_of_a_missing_job_publishes_nothing(
    q: Queue, r: redis.Redis, events: Callable[..., Any]
) -> None:
    present = q.enqueue("x")
    assert events() == {"event": "enqueued", "job": present}
    before = dump(r, q)
    with pytest.raises(JobGone):
        q.update_progress(new_id(), 10)
    assert dump(r, q) == before
    # a later event for a real job is the first thing the subscriber sees
    q.update_progress(present, 11)
    assert events() == {"event": "progress", "job": present, "progress": 11}


# -- add_log / get_job_logs -----------------------------------------------------------


@pytest.mark.parametrize("group", GROUPS)
@pytest.mark.parametrize("state", STATES)
def test_add_log_appends_in_every_state(
    q: Queue, r: redis.Redis, state: str, group: str | None
) -> None:
    jid, _ = put_job(q, state, group=group)
    before = dump(r, q)
    assert q.add_log(jid, "first") == 1
    assert q.add_log(jid, "second") == 2
    assert changed(before, dump(r, q)) == {q.keys.logs(jid), q.keys.logtimes(jid)}
    assert r.lrange(q.keys.logs(jid), 0, -1) == ["first", "second"]
    assert r.llen(q.keys.logtimes(jid)) == 2
    assert q.get_job_logs(jid) == ["first", "second"]


def test_add_log_with_keep_trims_to_the_newest_lines(q: Queue, r: redis.Redis) -> None:
    jid = q.enqueue("x")
    for i in range(1, 6):
        assert q.add_log(jid, f"line {i}") == i
    assert q.add_log(jid, "line 6", keep=3) == 3
    assert r.lrange(q.keys.logs(jid), 0, -1) == ["line 4", "line 5", "line 6"]
    assert q.get_job_logs(jid) == ["line 4", "line 5", "line 6"]
    # keep above the count trims nothing and answers the count
    assert q.add_log(jid, "line 7", keep=10) == 4
    assert q.add_log(jid, "line 8", keep=1) == 1
    assert q.get_job_logs(jid) == ["line 8"]


def test_get_job_logs_is_empty_when_none_and_writes_nothing(q: Queue, r: redis.Redis) -> None:
    jid = q.enqueue("x")
    before = dump(r, q)
    assert q.get_job_logs(jid) == []
    assert dump(r, q) == before
    assert not r.exists(q.keys.logs(jid))


def test_add_log_negative_keep_is_refused_before_io(q: Queue, r: redis.Redis) -> None:
    jid = q.enqueue("x")
    before = dump(r, q)
    with pytest.raises(InvalidArgument):
        q.add_log(jid, "x", keep=-1)
    assert dump(r, q) == before


# -- remove_job -----------------------------------------------------------------------


@pytest.mark.parametrize("group", GROUPS)
@pytest.mark.parametrize("state", STATES)
def test_remove_job_in_every_state(q: Queue, r: redis.Redis, state: str, group: str | None) -> None:
    jid, _ = put_job(q, state, group=group)
    q.add_log(jid, "a line")
    holder = _set_of(q, state, group)
    assert r.zscore(holder, jid) is not None
    before = dump(r, q)
    assert q.remove_job(jid) is None
    after = dump(r, q)
    # the settled tombstone: a re-sent enqueue of this id answers duplicate for 60 s
    expected = {
        q.keys.job(jid), q.keys.logs(jid), q.keys.logtimes(jid), holder, q.keys.audit,
        q.keys.settled,
    }  # fmt: skip
    assert r.zscore(q.keys.settled, jid) is not None
    if group and state == "pending":
        expected.add(q.keys.ring)  # the lane emptied, so the group left the ring
        expected.add(q.keys.gindex)  # and the lanes' index lost the job
    if group and state == "active":
        expected.add(q.keys.gactive)  # the slot the claim took is given back
    if group and state in ("pending", "active"):
        expected.add(q.keys.groups)  # the group now holds nothing, so it is forgotten
    assert changed(before, after) == expected
    assert not r.exists(q.keys.groups)
    assert not r.exists(q.keys.job(jid), q.keys.logs(jid), q.keys.lock(jid))
    assert r.zscore(holder, jid) is None
    assert r.hget(q.keys.gactive, "g") is None
    assert ring(r, q) == []
    assert q.job_state(jid) is None


def test_remove_in_flight_grouped_job_gives_its_slot_back_and_the_ring_follows(
    q: Queue, r: redis.Redis
) -> None:
    q.set_group_limit("g", 1)
    first, second = q.enqueue(1, group="g"), q.enqueue(2, group="g")
    got = q.claim()
    assert got is not None and got.id == first
    assert r.hget(q.keys.gactive, "g") == "1"
    assert ring(r, q) == []  # at its limit: off the ring
    wake = r.llen(q.keys.wake)
    q.remove_job(first)
    assert r.hget(q.keys.gactive, "g") is None
    assert ring(r, q) == ["g"]
    assert r.llen(q.keys.wake) == min(wake + 1, 64)
    assert r.zrange(q.keys.lane("g"), 0, -1) == [second]
    nxt = q.claim()
    assert nxt is not None and nxt.id == second and nxt.group == "g"


def test_remove_pending_grouped_job_keeps_the_ring_while_the_lane_has_work(
    q: Queue, r: redis.Redis
) -> None:
    first, second = q.enqueue(1, group="g"), q.enqueue(2, group="g")
    q.remove_job(first)
    assert ring(r, q) == ["g"]
    assert r.zrange(q.keys.lane("g"), 0, -1) == [second]
    q.remove_job(second)
    assert ring(r, q) == []
    assert not r.exists(q.keys.lane("g"))


def test_remove_refuses_a_job_with_a_lock_key(q: Queue, r: redis.Redis) -> None:
    jid, token = put_job(q, "active")
    assert token is not None
    q.lock_job(jid, token)
    before = dump(r, q)
    with pytest.raises(JobLocked) as err:
        q.remove_job(jid)
    assert err.value.reason == "locked"
    assert dump(r, q) == before


@pytest.mark.parametrize("state", STATES)
def test_remove_refuses_a_job_with_a_lock_field(q: Queue, r: redis.Redis, state: str) -> None:
    jid, _ = put_job(q, state, group="g")
    r.hset(q.keys.job(jid), "lock", "worker-7")
    before = dump(r, q)
    with pytest.raises(JobLocked):
        q.remove_job(jid)
    assert dump(r, q) == before


def test_remove_refuses_a_pending_job_with_a_hand_set_lock_key(q: Queue, r: redis.Redis) -> None:
    jid = q.enqueue("x", dedup_id="d")
    r.set(q.keys.lock(jid), "3", px=60_000)
    before = dump(r, q)
    with pytest.raises(JobLocked):
        q.remove_job(jid, dedup_id="d")
    assert dump(r, q) == before


def test_remove_releases_the_dedup_key_of_the_row(q: Queue, r: redis.Redis) -> None:
    jid = q.enqueue("x", dedup_id="order-1")
    assert r.get(q.keys.dedup("order-1")) == jid
    q.remove_job(jid)
    assert not r.exists(q.keys.dedup("order-1"))
    again = q.enqueue("y", dedup_id="order-1")
    assert again != jid and r.get(q.keys.dedup("order-1")) == again


def test_remove_releases_a_named_dedup_key_only_when_it_names_this_job(
    q: Queue, r: redis.Redis
) -> None:
    jid, other = q.enqueue("x"), q.enqueue("y")
    r.set(q.keys.dedup("mine"), jid)
    r.set(q.keys.dedup("theirs"), other)
    q.remove_job(jid, dedup_id="mine")
    assert not r.exists(q.keys.dedup("mine"))
    third = q.enqueue("z")
    q.remove_job(third, dedup_id="theirs")
    assert r.get(q.keys.dedup("theirs")) == other


def test_remove_keeps_a_dedup_key_the_row_names_but_another_job_holds(
    q: Queue, r: redis.Redis
) -> None:
    jid = q.enqueue("x", dedup_id="d")
    other = q.enqueue("y")
    r.set(q.keys.dedup("d"), other)  # the key moved on to another job
    q.remove_job(jid)
    assert r.get(q.keys.dedup("d")) == other


def test_remove_with_a_malformed_dedup_id_is_refused_before_io(
    q: Queue, unreachable: Queue, r: redis.Redis
) -> None:
    jid = q.enqueue("x")
    with pytest.raises(InvalidName):
        unreachable.remove_job(jid, dedup_id="")
    before = dump(r, q)
    with pytest.raises(InvalidName):
        q.remove_job(jid, dedup_id="x" * 300)
    assert dump(r, q) == before


# -- reprocess_job --------------------------------------------------------------------


def test_reprocess_moves_a_dead_flat_job_to_pending_keeping_its_counters(
    q: Queue, r: redis.Redis
) -> None:
    jid, _ = put_job(q, "dead")
    r.hset(q.keys.job(jid), "stalled", "2")
    row = r.hgetall(q.keys.job(jid))
    assert row["last_error"] == "boom" and row["attempts"] == "1" and row["failures"] == "1"
    wake = r.llen(q.keys.wake)
    before = dump(r, q)
    assert q.reprocess_job(jid) is None
    assert changed(before, dump(r, q)) == {
        q.keys.job(jid),
        q.keys.dead,
        q.keys.pending,
        q.keys.wake,
        q.keys.audit,
        q.keys.seq,  # the enqueue sequence
    }
    expected = {k: v for k, v in row.items() if k != "last_error"}
    # a fresh place: the back of its priority, as a new arrival (its enqueue took 0)
    assert r.hgetall(q.keys.job(jid)) == {**expected, "state": "pending", "seq": "1"}
    assert r.zscore(q.keys.pending, jid) == run_score(0, 1)
    assert not r.exists(q.keys.dead)
    assert r.llen(q.keys.wake) == min(wake + 1, 64)
    got = q.claim()
    assert got is not None and got.id == jid and got.token == 2


def test_reprocess_returns_a_grouped_job_to_its_lane_and_the_ring(q: Queue, r: redis.Redis) -> None:
    jid, _ = put_job(q, "dead", group="g")
    row = r.hgetall(q.keys.job(jid))
    assert ring(r, q) == []
    wake = r.llen(q.keys.wake)
    before = dump(r, q)
    q.reprocess_job(jid)
    after = dump(r, q)
    # the group was forgotten when its last job died (nothing left in its lane or in
    # flight); reprocess gives it work again, so it is listed again
    assert changed(before, after) == {
        q.keys.job(jid),
        q.keys.dead,
        q.keys.lane("g"),
        q.keys.gindex,
        q.keys.ring,
        q.keys.wake,
        q.keys.groups,
        q.keys.audit,
        q.keys.seq,
    }
    assert r.zscore(q.keys.lane("g"), jid) == run_score(0, 1)
    assert r.zscore(q.keys.pending, jid) is None
    assert r.sismember(q.keys.groups, "g")
    assert ring(r, q) == ["g"]
    assert r.llen(q.keys.wake) == min(wake + 1, 64)
    assert r.hgetall(q.keys.job(jid)) == {
        **{k: v for k, v in row.items() if k != "last_error"},
        "state": "pending",
        "seq": "1",
    }
    assert r.hget(q.keys.gactive, "g") is None
    got = q.claim()
    assert got is not None and got.id == jid and got.group == "g" and got.token == 2
    assert r.hget(q.keys.gactive, "g") == "1"


def test_reprocess_into_a_paused_group_waits_off_the_ring(q: Queue, r: redis.Redis) -> None:
    jid, _ = put_job(q, "dead", group="g")
    q.pause_group("g")
    q.reprocess_job(jid)
    assert r.zscore(q.keys.lane("g"), jid) == run_score(0, 1)
    assert ring(r, q) == []
    assert q.claim() is None
    q.resume_group("g")
    assert ring(r, q) == ["g"]
    got = q.claim()
    assert got is not None and got.id == jid


@pytest.mark.parametrize("group", GROUPS)
@pytest.mark.parametrize("state", ["pending", "active", "scheduled"])
def test_reprocess_refuses_a_job_that_is_not_dead(
    q: Queue, r: redis.Redis, state: str, group: str | None
) -> None:
    jid, _ = put_job(q, state, group=group)
    before = dump(r, q)
    with pytest.raises(JobNotDead) as err:
        q.reprocess_job(jid)
    assert err.value.reason == "not_dead"
    assert dump(r, q) == before


def test_reprocess_twice_refuses_the_second_time(q: Queue, r: redis.Redis) -> None:
    jid, _ = put_job(q, "dead")
    q.reprocess_job(jid)
    before = dump(r, q)
    with pytest.raises(JobNotDead):
        q.reprocess_job(jid)
    assert dump(r, q) == before


def test_reprocess_on_a_paused_queue_waits_then_claims_with_the_next_token(
    q: Queue, r: redis.Redis
) -> None:
    jid, token = put_job(q, "dead")
    q.pause()
    q.reprocess_job(jid)
    assert r.zscore(q.keys.pending, jid) == run_score(0, 1)
    assert q.job_state(jid) == "pending"
    before = dump(r, q)
    assert q.claim() is None
    assert dump(r, q) == before
    q.resume()
    got = q.claim()
    assert got is not None and got.id == jid and token is not None
    assert got.token == token + 1
    assert r.hget(q.keys.job(jid), "attempts") == str(token + 1)
    assert r.zscore(q.keys.active, jid) is not None


def test_a_reprocessed_job_gets_one_more_try_before_it_is_dead_again(q: Queue) -> None:
    jid, _ = put_job(q, "dead")
    q.reprocess_job(jid)
    got = q.claim()
    assert got is not None
    assert q.retry(jid, got.token, "again") == "dead"
    assert q.get_job(jid).failures == 2


# -- lock_job / unlock_job ------------------------------------------------------------


@pytest.mark.parametrize("group", GROUPS)
def test_lock_job_sets_the_lock_key_with_the_token_and_a_ttl(
    q: Queue, r: redis.Redis, group: str | None
) -> None:
    jid, token = put_job(q, "active", group=group)
    before = dump(r, q)
    assert q.lock_job(jid, token, ttl_ms=5000) is None
    assert changed(before, dump(r, q)) == {q.keys.lock(jid)}
    assert r.get(q.keys.lock(jid)) == str(token)
    assert 0 < r.pttl(q.keys.lock(jid)) <= 5000


def test_lock_job_refuses_a_stale_token(q: Queue, r: redis.Redis) -> None:
    jid, token = put_job(q, "active")
    assert token is not None
    before = dump(r, q)
    for stale in (token + 1, token + 5):
        with pytest.raises(StaleToken) as err:
            q.lock_job(jid, stale)
        assert err.value.reason == "stale"
    assert dump(r, q) == before


@pytest.mark.parametrize("state", ["pending", "scheduled", "dead"])
def test_lock_job_refuses_a_job_not_in_flight(q: Queue, r: redis.Redis, state: str) -> None:
    jid, _ = put_job(q, state)
    before = dump(r, q)
    with pytest.raises(StaleToken):
        q.lock_job(jid, 1)
    assert dump(r, q) == before


def test_unlock_only_with_the_matching_token(q: Queue, r: redis.Redis) -> None:
    jid, token = put_job(q, "active")
    assert token is not None
    q.lock_job(jid, token)
    before = dump(r, q)
    with pytest.raises(StaleToken):
        q.unlock_job(jid, token + 1)
    assert dump(r, q) == before
    assert q.unlock_job(jid, token) is True
    assert changed(before, dump(r, q)) == {q.keys.lock(jid)}
    assert not r.exists(q.keys.lock(jid))
    after = dump(r, q)
    assert q.unlock_job(jid, token) is False  # nothing held any more: nothing changes
    assert dump(r, q) == after
    q.remove_job(jid)  # no lock: the job can be removed now
    assert not r.exists(q.keys.job(jid))


def test_an_expired_lock_no_longer_blocks_remove(q: Queue, r: redis.Redis) -> None:
    jid, token = put_job(q, "active")
    assert token is not None
    # long enough that the refusal below comes first on a busy machine too
    q.lock_job(jid, token, ttl_ms=500)
    with pytest.raises(JobLocked):
        q.remove_job(jid)
    wait_until(lambda: not r.exists(q.keys.lock(jid)))  # its ttl ran out
    q.remove_job(jid)
    assert not r.exists(q.keys.job(jid))
    assert r.zscore(q.keys.active, jid) is None


def test_lock_and_unlock_arguments_are_gated_before_io(unreachable: Queue) -> None:
    jid = new_id()
    for call in (
        lambda: unreachable.lock_job(jid, 0),
        lambda: unreachable.lock_job(jid, 1, ttl_ms=0),
        lambda: unreachable.unlock_job(jid, -1),
    ):
        with pytest.raises(InvalidArgument):
            call()


# -- the async shell runs the same plans ----------------------------------------------


async def test_async_job_verbs(aq: AsyncQueue, r: redis.Redis) -> None:
    jid = await aq.enqueue({"a": 1}, max_attempts=1)
    await aq.update_data(jid, {"a": 2})
    assert r.hget(aq.keys.job(jid), "payload") == '{"a":2}'
    await aq.update_progress(jid, {"pct": 10})
    assert r.hget(aq.keys.job(jid), "progress") == '{"pct":10}'
    assert await aq.add_log(jid, "one") == 1
    assert await aq.add_log(jid, "two", keep=1) == 1
    assert await aq.get_job_logs(jid) == ["two"]
    got = await aq.claim()
    assert got is not None and got.id == jid
    await aq.lock_job(jid, got.token)
    with pytest.raises(JobLocked):
        await aq.remove_job(jid)
    assert await aq.unlock_job(jid, got.token) is True
    assert await aq.retry(jid, got.token, "boom") == "dead"
    await aq.reprocess_job(jid)
    assert r.zscore(aq.keys.pending, jid) == run_score(0, 1)
    with pytest.raises(JobNotDead):
        await aq.reprocess_job(jid)
    await aq.remove_job(jid)
    assert not r.exists(aq.keys.job(jid), aq.keys.logs(jid))
    with pytest.raises(JobGone):
        await aq.get_job_logs(jid)
    with pytest.raises(InvalidJobId):
        await aq.remove_job("JOBnope")


# -- property: a refused per-job verb changes nothing ---------------------------------

_examples = itertools.count()


def _refusal(q: Queue, r: redis.Redis, kind: str, state: str, group: str | None, verb: str) -> Any:
    """Set up one refusing call of ``kind``; returns ``(call, exception class)``."""
    jid, token = put_job(q, state, group=group)
    if kind == "missing":
        return (lambda: VERBS[verb](q, new_id())), JobGone
    if kind == "not_dead":
        return (lambda: q.reprocess_job(jid)), JobNotDead
    if kind == "locked":
        r.hset(q.keys.job(jid), "lock", "w1")
        return (lambda: q.remove_job(jid, dedup_id="d")), JobLocked
    if kind == "stale_lock":
        return (lambda: q.lock_job(jid, (token or 0) + 1)), StaleToken
    assert kind == "stale_unlock"
    r.set(q.keys.lock(jid), "7", px=60_000)
    return (lambda: q.unlock_job(jid, 8)), StaleToken


@settings(
    max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    kind=st.sampled_from(["missing", "not_dead", "locked", "stale_lock", "stale_unlock"]),
    state=st.sampled_from(STATES),
    grouped=st.booleans(),
    backlog=st.integers(0, 3),
    verb=st.sampled_from(sorted(VERBS)),
)
def test_a_refused_job_verb_changes_nothing(
    make_queue: Callable[..., Queue],
    r: redis.Redis,
    kind: str,
    state: str,
    grouped: bool,
    backlog: int,
    verb: str,
) -> None:
    """Missing rows (any verb), reprocess of a live job, remove of a locked one, a stale
    lock or unlock: each refusal leaves every key of the queue as it was."""
    if kind == "not_dead" and state == "dead":
        state = "pending"
    q = make_queue(f"refuse-job-{next(_examples)}-{new_id()}")
    call, refusal = _refusal(q, r, kind, state, "g" if grouped else None, verb)
    q.enqueue_many(range(backlog), group="g" if grouped else None)
    before = dump(r, q)
    with pytest.raises(refusal):
        call()
    assert dump(r, q) == before
