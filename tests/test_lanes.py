"""Lanes: grouped enqueue, the ring, rotation, weights, limits, per-group pause, and
every transition that moves a grouped job (issue 3).

Each test asserts the verb's reply and the lane keys it leaves behind (the ring, the
lanes, ``gactive``, ``groups``); :func:`lanes_law.assert_law` checks the ring law and
the ``gactive`` balance on top.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

import pytest
import redis

from conftest import dump
from echomq import (
    AsyncQueue,
    GroupInfo,
    InvalidArgument,
    InvalidName,
    JobGone,
    JobNotPending,
    Queue,
    StaleToken,
    new_id,
)
from echomq.lanes import GROUP_FIELDS
from echomq.scripts import Eval, script
from lanes_law import assert_law, lanes_of
from test_lifecycle import run_score

# run under both executors: the native twins must equal the scripts
pytestmark = [pytest.mark.both_executors, pytest.mark.both_servers]


def claim_all(q: Queue, limit: int = 10_000) -> list[tuple[str, str | None]]:
    """Claim until nothing is served; ``[(id, group)]`` in claim order."""
    out: list[tuple[str, str | None]] = []
    while len(out) < limit:
        c = q.claim()
        if c is None:
            break
        out.append((c.id, c.group))
    return out


def expire(r: redis.Redis, q: Queue, job_id: str) -> None:
    """Force a lease to have expired by rewriting its deadline (no sleeping)."""
    assert r.zadd(q.keys.active, {job_id: 0}, xx=True, ch=True) == 1


# --- enqueue ------------------------------------------------------------------------


def test_enqueue_grouped_goes_to_its_lane_and_the_ring(q: Queue, r: redis.Redis) -> None:
    jid = q.enqueue({"n": 1}, group="a")
    snap = assert_law(r, q)
    assert snap.lanes == {"a": [jid]}
    assert snap.pending == []
    assert snap.groups == {"a"}
    assert snap.ring == ["a"]
    assert snap.wake >= 1
    assert r.hget(q.keys.job(jid), "group") == "a"
    assert q.job_state(jid) == "pending"

    wake_before = snap.wake
    ids = q.enqueue_many(["x", "y", "z"], group="b")
    snap = assert_law(r, q)
    assert snap.lanes == {"a": [jid], "b": ids}
    assert snap.groups == {"a", "b"}
    assert snap.ring == ["a", "b"]
    assert snap.wake >= wake_before + 3
    assert [r.hget(q.keys.job(i), "group") for i in ids] == ["b", "b", "b"]

    # more work in a group already on the ring does not ring it twice
    more = q.enqueue_many([1, 2], group="a")
    snap = assert_law(r, q)
    assert snap.ring == ["a", "b"]
    assert snap.lanes["a"] == [jid, *more]


def test_enqueue_grouped_priority_orders_the_lane(q: Queue, r: redis.Redis) -> None:
    late = q.enqueue("late", group="a", priority=5)
    early = q.enqueue("early", group="a", priority=-1)
    assert lanes_of(r, q).lanes["a"] == [early, late]
    c = q.claim()
    assert c is not None and (c.id, c.group, c.payload) == (early, "a", "early")


def test_enqueue_into_paused_group_keeps_it_off_the_ring(q: Queue, r: redis.Redis) -> None:
    q.pause_group("a")
    # a group paused before its first job is listed already
    assert q.groups() == [GroupInfo("a", 0, 0, None, 1, True)]
    assert lanes_of(r, q).groups == {"a"}
    jid = q.enqueue("x", group="a")
    snap = assert_law(r, q)
    assert snap.lanes == {"a": [jid]}
    assert snap.groups == {"a"}
    assert snap.ring == []
    assert q.claim() is None


def test_group_name_is_gated_before_io(q: Queue, r: redis.Redis) -> None:
    before = dump(r, q)
    for bad in ("", "a b", "x" * 129, "a:b", "{a}"):
        with pytest.raises(InvalidName):
            q.enqueue("x", group=bad)
        with pytest.raises(InvalidName):
            q.pause_group(bad)
    assert dump(r, q) == before


# --- the grouped claim: rotation, pause ----------------------------------------------


def test_rotation_over_two_equal_lanes(q: Queue, r: redis.Redis) -> None:
    a = q.enqueue_many(["a1", "a2", "a3"], group="a")
    b = q.enqueue_many(["b1", "b2", "b3"], group="b")
    served = []
    for _ in range(6):
        c = q.claim()
        assert c is not None
        assert c.token == 1
        served.append((c.id, c.group))
        assert_law(r, q)
    assert served == [(a[0], "a"), (b[0], "b"), (a[1], "a"), (b[1], "b"), (a[2], "a"), (b[2], "b")]
    assert q.claim() is None
    snap = assert_law(r, q)
    assert snap.ring == []
    assert snap.lanes == {}
    assert snap.gactive == {"a": 3, "b": 3}
    assert sorted(snap.active) == sorted(a + b)
    # the lease runs on the server clock and the row is active under its token
    row = r.hgetall(q.keys.job(a[0]))
    assert row["state"] == "active" and row["attempts"] == "1"


def test_group_pause_serves_only_the_other_lanes(q: Queue, r: redis.Redis) -> None:
    a = q.enqueue_many(["a1", "a2", "a3"], group="a")
    b = q.enqueue_many(["b1", "b2"], group="b")
    lane_a = q.keys.lane("a")
    before = (r.dump(lane_a), r.zrange(lane_a, 0, -1, withscores=True))

    assert q.pause_group("a") is None
    q.pause_group("a")  # idempotent
    snap = assert_law(r, q)
    assert snap.ring == ["b"]
    assert snap.gpaused == {"a"}

    served = claim_all(q)
    assert served == [(b[0], "b"), (b[1], "b")]
    assert (r.dump(lane_a), r.zrange(lane_a, 0, -1, withscores=True)) == before
    snap = assert_law(r, q)
    assert snap.ring == []
    assert snap.lanes == {"a": a}
    assert snap.gactive == {"b": 2}

    # resume re-rings with a wake token, and the backlog is served in order
    wake = snap.wake
    assert q.resume_group("a") is None
    snap = assert_law(r, q)
    assert snap.ring == ["a"]
    assert snap.gpaused == set()
    assert snap.wake == wake + 1
    assert [i for i, _ in claim_all(q)] == a
    q.resume_group("a")  # idempotent on a running group
    assert assert_law(r, q).ring == []


def test_queue_pause_gates_the_grouped_claim(q: Queue, r: redis.Redis) -> None:
    a = q.enqueue_many(["a1", "a2"], group="a")
    q.enqueue("flat")
    q.pause()
    before = dump(r, q)
    assert q.claim() is None
    assert q.claim_many(5) == []
    assert dump(r, q) == before
    q.resume()
    got = q.claim_many(5)
    assert sorted(c.id for c in got if c.group == "a") == a
    assert_law(r, q)


async def test_async_facade_lane_verbs(aq: AsyncQueue, r: redis.Redis) -> None:
    jid = await aq.enqueue("x", group="t1")
    await aq.set_group_limit("t1", 1)
    await aq.set_group_weight("t1", 2)
    await aq.pause_group("t1")
    assert await aq.claim() is None
    assert await aq.group_depth("t1") == 1
    assert await aq.groups() == [GroupInfo("t1", 1, 0, 1, 2, True)]
    await aq.resume_group("t1")
    c = await aq.claim()
    assert c is not None and (c.id, c.group) == (jid, "t1")
    snap = assert_law(r, aq)
    assert snap.gactive == {"t1": 1} and snap.ring == []
    await aq.complete(c.id, c.token)
    snap = assert_law(r, aq)
    assert snap.gactive == {} and snap.active == []


# --- limits ---------------------------------------------------------------------------


def test_limit_of_one_holds_the_second_job(q: Queue, r: redis.Redis) -> None:
    assert q.set_group_limit("a", 1) is None
    a1, a2 = q.enqueue_many(["a1", "a2"], group="a")
    c = q.claim()
    assert c is not None and c.id == a1
    snap = assert_law(r, q)
    assert snap.ring == []  # at its limit: off the ring though its lane holds a2
    assert snap.lanes == {"a": [a2]}
    assert snap.gactive == {"a": 1}
    before = dump(r, q)
    assert q.claim() is None
    assert dump(r, q) == before

    wake = snap.wake
    q.complete(c.id, c.token)
    snap = assert_law(r, q)
    assert snap.ring == ["a"]
    assert snap.gactive == {}
    assert snap.wake == wake + 1
    c2 = q.claim()
    assert c2 is not None and c2.id == a2


def test_raising_and_clearing_a_limit_re_rings(q: Queue, r: redis.Redis) -> None:
    q.set_group_limit("a", 1)
    q.enqueue_many(["a1", "a2", "a3"], group="a")
    assert q.claim() is not None
    snap = assert_law(r, q)
    assert snap.ring == []

    wake = snap.wake
    q.set_group_limit("a", 2)
    snap = assert_law(r, q)
    assert snap.ring == ["a"] and snap.glimit == {"a": 2}
    assert snap.wake == wake + 1
    assert q.claim() is not None
    snap = assert_law(r, q)
    assert snap.ring == [] and snap.gactive == {"a": 2}

    wake = snap.wake
    q.clear_group_limit("a")
    snap = assert_law(r, q)
    assert snap.ring == ["a"] and snap.glimit == {}
    assert snap.wake == wake + 1

    # lowering a limit below the in-flight count takes the group off the ring
    q.set_group_limit("a", 1)
    snap = assert_law(r, q)
    assert snap.ring == [] and snap.gactive == {"a": 2}


def test_limit_zero_or_negative_is_refused_before_io(q: Queue, r: redis.Redis) -> None:
    before = dump(r, q)
    for bad in (0, -1, True, 1.5):
        with pytest.raises(InvalidArgument):
            q.set_group_limit("a", bad)  # type: ignore[arg-type]
        with pytest.raises(InvalidArgument):
            q.set_group_weight("a", bad)  # type: ignore[arg-type]
    assert dump(r, q) == before


# --- weights and skew -----------------------------------------------------------------


def test_weights_three_to_one_under_a_flood(q: Queue, r: redis.Redis) -> None:
    q.set_group_weight("heavy", 3)
    q.enqueue_many(range(60), group="heavy")
    q.enqueue_many(range(60), group="light")
    served = [g for _, g in claim_all(q, limit=40)]
    assert Counter(served) == {"heavy": 30, "light": 10}
    # the light lane is never starved: it is served in every window of four claims
    for i in range(0, len(served) - 3):
        assert "light" in served[i : i + 4], (i, served)
    snap = assert_law(r, q)
    assert snap.gweight == {"heavy": 3}
    assert snap.gactive == {"heavy": 30, "light": 10}
    assert set(snap.ring) == {"heavy", "light"}


def test_weighted_claim_many_serves_weight_per_turn(q: Queue, r: redis.Redis) -> None:
    q.set_group_weight("a", 2)
    a = q.enqueue_many(range(4), group="a")
    b = q.enqueue_many(range(4), group="b")
    got = q.claim_many(6)
    assert [c.id for c in got] == [a[0], a[1], b[0], a[2], a[3], b[1]]
    snap = assert_law(r, q)
    assert snap.ring == ["b"]
    # weight back to 1 clears the field
    q.set_group_weight("a", 1)
    assert lanes_of(r, q).gweight == {}


def test_skewed_load_drains_every_lane(q: Queue, r: redis.Redis) -> None:
    heavy = q.enqueue_many(range(300), group="heavy")
    light = {f"t{i}": q.enqueue_many([i, i], group=f"t{i}") for i in range(20)}
    order: list[str] = []
    while True:
        c = q.claim()
        if c is None:
            break
        order.append(c.id)
        q.complete(c.id, c.token)
    assert sorted(order) == sorted(heavy + [j for ids in light.values() for j in ids])
    # every light job is served within the first two turns of the 21-group ring
    first_turns = set(order[: 2 * 21])
    for ids in light.values():
        assert set(ids) <= first_turns
    snap = assert_law(r, q)
    assert snap.ring == [] and snap.lanes == {} and snap.gactive == {} and snap.active == []
    assert q.counts().completed == 340


# --- flat and grouped interleave -----------------------------------------------------


def test_flat_and_grouped_alternate(q: Queue, r: redis.Redis) -> None:
    flat = q.enqueue_many(range(4))
    grouped = q.enqueue_many(range(4), group="g")
    served = claim_all(q)
    assert [g for _, g in served] in (["g", None] * 4, [None, "g"] * 4)
    assert {i for i, _ in served} == set(flat + grouped)
    assert_law(r, q)

    flat2 = q.enqueue_many(range(4))
    grouped2 = q.enqueue_many(range(4), group="g")
    got = q.claim_many(8)
    groups = [c.group for c in got]
    assert groups in (["g", None] * 4, [None, "g"] * 4)
    assert {c.id for c in got} == set(flat2 + grouped2)


def test_neither_side_starves(make_queue: Callable[..., Queue], qname: str, r: redis.Redis) -> None:
    # a flood of flat work: the lone grouped job is served within two claims
    q1 = make_queue(qname + "-1")
    q1.enqueue_many(range(50))
    lone = q1.enqueue("lone", group="g")
    first_two = [c for c in (q1.claim(), q1.claim()) if c is not None]
    assert lone in [c.id for c in first_two]
    assert_law(r, q1)

    # a flood of grouped work: the lone flat job is in the first batch of two
    q2 = make_queue(qname + "-2")
    q2.enqueue_many(range(50), group="g")
    lone_flat = q2.enqueue("lone-flat")
    assert lone_flat in [c.id for c in q2.claim_many(2)]
    assert_law(r, q2)


# --- transitions return grouped jobs to their lane ------------------------------------


def test_complete_gives_the_slot_back_exactly_once(q: Queue, r: redis.Redis) -> None:
    q.set_group_limit("a", 1)
    a1, a2 = q.enqueue_many(["a1", "a2"], group="a")
    c = q.claim()
    assert c is not None and c.id == a1
    q.complete(c.id, c.token)
    snap = assert_law(r, q)
    assert snap.gactive == {} and snap.ring == ["a"] and snap.lanes == {"a": [a2]}

    # a second complete is refused and gives nothing back
    before = dump(r, q)
    with pytest.raises(JobGone):
        q.complete(c.id, c.token)
    assert dump(r, q) == before

    c2 = q.claim()
    assert c2 is not None and c2.id == a2
    before = dump(r, q)
    with pytest.raises(StaleToken):
        q.complete(c2.id, c2.token + 1)
    assert dump(r, q) == before
    assert lanes_of(r, q).gactive == {"a": 1}


def test_complete_without_a_slot_to_give_back_keeps_the_law(q: Queue, r: redis.Redis) -> None:
    # gactive lost its count (an operator's hand edit): complete cannot trust the
    # count to say where the group is, and searches the ring instead
    q.set_group_limit("a", 1)
    a1, a2, a3 = q.enqueue_many(["a1", "a2", "a3"], group="a")
    c = q.claim()
    assert c is not None and c.id == a1
    assert lanes_of(r, q).ring == []
    r.hdel(q.keys.gactive, "a")
    q.complete(c.id, c.token)
    snap = assert_law(r, q)
    assert snap.ring == ["a"] and snap.gactive == {} and snap.lanes == {"a": [a2, a3]}


def test_retry_returns_the_job_to_its_lane(q: Queue, r: redis.Redis) -> None:
    q.set_group_limit("a", 1)
    a1, a2 = q.enqueue_many(["a1", "a2"], group="a")
    c = q.claim()
    assert c is not None and c.id == a1
    assert q.retry(c.id, c.token, "boom", delay_ms=0) == "scheduled"
    snap = assert_law(r, q)
    assert snap.gactive == {} and snap.schedule == [a1]
    assert snap.ring == ["a"] and snap.lanes == {"a": [a2]}
    assert q.promote() == 1
    snap = assert_law(r, q)
    assert snap.lanes == {"a": [a1, a2]} and snap.ring == ["a"] and snap.schedule == []
    c = q.claim()
    assert c is not None and (c.id, c.token, c.group) == (a1, 2, "a")

    # at max_attempts the job goes dead and still gives its slot back
    assert q.retry(c.id, c.token, "boom", max_attempts=2) == "dead"
    snap = assert_law(r, q)
    assert snap.dead == [a1] and snap.gactive == {} and snap.ring == ["a"]


def test_delay_returns_the_job_to_its_lane(q: Queue, r: redis.Redis) -> None:
    q.set_group_limit("a", 1)
    a1, a2 = q.enqueue_many(["a1", "a2"], group="a")
    c = q.claim()
    assert c is not None and c.id == a1
    due = q.delay(c.id, c.token, 0)
    assert isinstance(due, int) and due > 0
    snap = assert_law(r, q)
    assert snap.gactive == {} and snap.schedule == [a1] and snap.ring == ["a"]
    assert r.hget(q.keys.job(a1), "failures") is None
    assert q.promote() == 1
    snap = assert_law(r, q)
    assert snap.lanes == {"a": [a1, a2]}


def test_reap_returns_the_job_to_its_lane(q: Queue, r: redis.Redis) -> None:
    q.set_group_limit("a", 1)
    (a1,) = q.enqueue_many(["a1"], group="a", priority=3)
    c = q.claim()
    assert c is not None
    assert q.reap() == 0  # not expired yet: nothing moves
    assert lanes_of(r, q).gactive == {"a": 1}
    expire(r, q, a1)
    wake = lanes_of(r, q).wake
    assert q.reap() == 1
    snap = assert_law(r, q)
    assert snap.active == [] and snap.gactive == {}
    assert snap.lanes == {"a": [a1]} and snap.ring == ["a"]
    assert r.zscore(q.keys.lane("a"), a1) == run_score(3, 0)  # its old place
    assert snap.wake == wake + 1  # one token for the job, none extra for the ring
    assert q.reap() == 0
    assert assert_law(r, q).gactive == {}
    # the old holder's token is stale once the job is claimed again
    c2 = q.claim()
    assert c2 is not None and c2.token == c.token + 1
    with pytest.raises(StaleToken):
        q.complete(a1, c.token)


def test_check_stalled_returns_or_dead_letters_grouped_jobs(q: Queue, r: redis.Redis) -> None:
    a1, a2 = q.enqueue_many(["a1", "a2"], group="a")
    got = q.claim_many(2)
    assert [c.id for c in got] == [a1, a2]
    r.hset(q.keys.job(a2), "stalled", "1")
    expire(r, q, a1)
    expire(r, q, a2)
    back, dead = q.check_stalled(max_stalled=1)
    assert (back, dead) == ([a1], [a2])
    snap = assert_law(r, q)
    assert snap.gactive == {} and snap.active == []
    assert snap.lanes == {"a": [a1]} and snap.dead == [a2] and snap.ring == ["a"]
    assert r.hget(q.keys.job(a1), "stalled") == "1"


def test_stalled_dead_letter_frees_a_limited_lane(q: Queue, r: redis.Redis) -> None:
    q.set_group_limit("a", 1)
    a1, a2 = q.enqueue_many(["a1", "a2"], group="a")
    c = q.claim()
    assert c is not None and c.id == a1
    assert assert_law(r, q).ring == []
    expire(r, q, a1)
    wake = lanes_of(r, q).wake
    assert q.check_stalled(max_stalled=0) == ([], [a1])
    snap = assert_law(r, q)
    assert snap.dead == [a1] and snap.gactive == {}
    assert snap.ring == ["a"] and snap.lanes == {"a": [a2]}
    assert snap.wake == wake + 1  # the re-rung group wakes a worker for a2
    assert r.hget(q.keys.job(a1), "state") == "dead"


def test_promote_records_the_group_of_a_delayed_job(q: Queue, r: redis.Redis) -> None:
    jid = q.enqueue("later", group="late", run_at_ms=1)
    snap = assert_law(r, q)
    assert snap.schedule == [jid] and snap.ring == [] and snap.lanes == {}
    assert q.promote() == 1
    snap = assert_law(r, q)
    assert snap.groups == {"late"}
    assert snap.lanes == {"late": [jid]} and snap.ring == ["late"]
    assert q.counts().pending == 1
    c = q.claim()
    assert c is not None and (c.id, c.group) == (jid, "late")


def test_remove_and_reprocess_keep_lanes_balanced(q: Queue, r: redis.Redis) -> None:
    a1, a2 = q.enqueue_many(["a1", "a2"], group="a", max_attempts=1)
    q.set_group_limit("a", 1)
    c = q.claim()
    assert c is not None and c.id == a1
    q.remove_job(a1)
    snap = assert_law(r, q)
    assert snap.gactive == {} and snap.ring == ["a"] and snap.active == []

    c = q.claim()
    assert c is not None and c.id == a2
    assert q.retry(c.id, c.token, "boom") == "dead"
    assert assert_law(r, q).ring == []
    q.reprocess_job(a2)
    snap = assert_law(r, q)
    assert snap.lanes == {"a": [a2]} and snap.ring == ["a"] and snap.dead == []
    # a pending grouped job removed empties its lane and leaves the ring
    q.remove_job(a2)
    snap = assert_law(r, q)
    assert snap.lanes == {} and snap.ring == []


# --- operator verbs -------------------------------------------------------------------


def test_groups_info_and_depth(q: Queue, r: redis.Redis) -> None:
    q.enqueue_many(range(3), group="b")
    q.enqueue_many(range(2), group="a")
    q.set_group_limit("a", 5)
    q.set_group_weight("b", 4)
    q.pause_group("a")
    c = q.claim()
    assert c is not None and c.group == "b"
    assert q.groups() == [
        GroupInfo(name="a", depth=2, in_flight=0, limit=5, weight=1, paused=True),
        GroupInfo(name="b", depth=2, in_flight=1, limit=None, weight=4, paused=False),
    ]
    assert q.group_depth("a") == 2
    assert q.group_depth("b") == 2
    assert q.group_depth("nobody") == 0
    assert_law(r, q)


def test_groups_walks_the_set_page_by_page(q: Queue, r: redis.Redis) -> None:
    names = [f"t{i:02d}" for i in range(25)]
    for i, g in enumerate(names):
        q.enqueue_many(range(i % 3 + 1), group=g)
    # one server call reads one SSCAN page and hands back the cursor
    reply = q.runner.execute(Eval(script("groups"), (q.keys.base,), ("0", "5")))
    assert len(reply) % GROUP_FIELDS == 1 and len(reply) < GROUP_FIELDS * 25
    infos = q.groups(page=5)
    assert [g.name for g in infos] == names
    assert [g.depth for g in infos] == [i % 3 + 1 for i in range(25)]
    assert q.groups() == infos
    assert sum(g.depth for g in infos) == q.counts().pending
    with pytest.raises(InvalidArgument):
        q.groups(page=0)


def test_drain_group_is_bounded_and_releases_dedup(q: Queue, r: redis.Redis) -> None:
    held = q.enqueue("held", group="a", dedup_id="d1")
    q.enqueue_many(range(4), group="a")
    b = q.enqueue_many(["b"], group="b")
    flat = q.enqueue("flat")
    q.add_log(held, "a line")
    assert r.get(q.keys.dedup("d1")) == held

    # one server call drains at most its budget and says whether more remains
    n, more = q.runner.execute(Eval(script("drain_group"), (q.keys.base,), ("a", "2")))
    assert (n, more) == (2, 1)
    assert q.group_depth("a") == 3

    assert q.drain_group("a", budget=2) == 3
    snap = assert_law(r, q)
    assert "a" not in snap.lanes and snap.ring == ["b"]
    assert snap.lanes == {"b": b} and snap.pending == [flat]
    assert r.get(q.keys.dedup("d1")) is None
    assert not r.exists(q.keys.job(held), q.keys.logs(held))
    assert q.drain_group("a") == 0
    # the dedup id is free again
    assert q.enqueue("again", group="a", dedup_id="d1") != held


def test_reassign_moves_pending_jobs(q: Queue, r: redis.Redis) -> None:
    a1 = q.enqueue("a1", group="a", priority=2)
    q.set_group_limit("b", 1)

    q.reassign(a1, "b")
    snap = assert_law(r, q)
    assert snap.lanes == {"b": [a1]} and snap.ring == ["b"]
    assert r.hget(q.keys.job(a1), "group") == "b"
    assert r.zscore(q.keys.lane("b"), a1) == run_score(2, 0)  # its score moves with it

    q.reassign(a1, None)
    snap = assert_law(r, q)
    assert snap.lanes == {} and snap.pending == [a1] and snap.ring == []
    assert r.hget(q.keys.job(a1), "group") is None
    assert r.zscore(q.keys.pending, a1) == run_score(2, 0)

    q.reassign(a1, "c")
    snap = assert_law(r, q)
    assert snap.lanes == {"c": [a1]} and snap.pending == [] and snap.ring == ["c"]
    c = q.claim()
    assert c is not None and (c.id, c.group) == (a1, "c")


def test_reassign_refusals_change_nothing(q: Queue, r: redis.Redis) -> None:
    jid = q.enqueue("x", group="a")
    c = q.claim()
    assert c is not None
    before = dump(r, q)
    with pytest.raises(JobNotPending) as exc:
        q.reassign(jid, "b")
    assert exc.value.reason == "not_pending"
    assert dump(r, q) == before
    with pytest.raises(JobGone):
        q.reassign(new_id(), "b")
    assert dump(r, q) == before
    with pytest.raises(InvalidName):
        q.reassign(jid, "not a group")
    assert dump(r, q) == before
    # scheduled and dead jobs are not pending either
    q.retry(jid, c.token, "boom", delay_ms=60_000)
    before = dump(r, q)
    with pytest.raises(JobNotPending):
        q.reassign(jid, None)
    assert dump(r, q) == before


def test_reads_see_lanes(q: Queue, r: redis.Redis) -> None:
    flat = q.enqueue("f")
    a = q.enqueue_many(["a1", "a2"], group="a")
    b = q.enqueue("b1", group="b")
    counts = q.counts()
    assert counts.pending == 4 and counts.active == 0
    assert q.browse("pending") == [b, a[1], a[0], flat]
    assert q.browse("pending", n=2, offset=1) == [a[1], a[0]]
    assert q.job_state(a[0]) == "pending"
    got = q.claim_many(4)
    grouped = {c.id for c in got if c.group}
    assert grouped == {*a, b}
    assert q.job_state(a[0]) == "active"
    assert q.counts().pending == 0 and q.counts().active == 4
    assert set(q.browse("active")) == {flat, *a, b}
    assert_law(r, q)


def test_drain_and_obliterate_see_lanes(
    make_queue: Callable[..., Queue], qname: str, r: redis.Redis
) -> None:
    q = make_queue(qname)
    q.enqueue_many(range(3), group="a")
    q.enqueue("later", group="z", run_at_ms=1)
    q.promote()
    c = q.claim()
    assert c is not None
    assert q.drain() == 3
    snap = assert_law(r, q)
    assert snap.lanes == {} and snap.ring == [] and snap.gactive == {c.group: 1}
    q.pause()
    assert q.obliterate(force=True) is True
    assert list(r.scan_iter(match=q.keys.pattern())) == []
