"""Backoff policies: the delays, the spec stored on a row, and the fail plan reading it;
the release verb (a shutdown's hand-back) and its refusals."""

from __future__ import annotations

import random

import pytest
import redis

from conftest import dump
from echomq import AsyncQueue, Backoff, InvalidArgument, JobGone, Queue, StaleToken
from echomq.backoff import HORIZON_MS
from echomq.worker.plans import fail
from test_lifecycle import run_score
from worker_support import server_ms


def test_fixed_waits_the_same_every_time() -> None:
    policy = Backoff.fixed(250)
    assert [policy.delay_for(n) for n in (1, 2, 10)] == [250, 250, 250]


def test_exponential_doubles_up_to_its_cap() -> None:
    policy = Backoff.exponential(100, max_ms=1000)
    assert [policy.delay_for(n) for n in range(1, 7)] == [100, 200, 400, 800, 1000, 1000]
    # no cap of its own: clamped to the horizon, and a huge count builds no huge int
    assert Backoff.exponential(1).delay_for(10_000) == HORIZON_MS
    assert Backoff.exponential(HORIZON_MS).delay_for(2) == HORIZON_MS


def test_jitter_takes_at_most_its_share_off() -> None:
    policy = Backoff.exponential(1000, jitter=0.5)
    rng = random.Random(7)
    waits = [policy.delay_for(3, rng) for _ in range(200)]
    assert all(2000 <= w <= 4000 for w in waits)
    assert len(set(waits)) > 50  # spread, not one value


BAD_SPECS = (
    "nonsense",
    "[1]",
    '{"type":"linear"}',
    '{"delay":-1}',
    "1e400",  # OverflowError once, and the failure was lost
    '{"delay":1e400}',
    '{"delay":1.5}',
    '{"type":1}',
    '{"jitter":"0.5"}',
    '{"jitter":NaN}',
    str(HORIZON_MS + 1),
    '{"max":1e20}',
    "true",
    "[" * 5000,
)


def test_spec_round_trips_and_bad_specs_raise_or_read_as_none() -> None:
    for policy in (Backoff.fixed(5), Backoff.exponential(10, max_ms=99, jitter=0.25)):
        assert Backoff.parse(policy.spec()) == policy
        assert Backoff.read(policy.spec()) == policy
    assert Backoff.exponential(10, max_ms=99).spec() == '{"type":"exponential","delay":10,"max":99}'
    assert str(Backoff.fixed(5)) == '{"type":"fixed","delay":5}'
    assert Backoff.parse("1500") == Backoff.fixed(1500)
    assert Backoff.parse("1500.0") == Backoff.fixed(1500)
    assert Backoff.parse(str(HORIZON_MS)) == Backoff.fixed(HORIZON_MS)
    assert Backoff.parse(None) is None and Backoff.parse("") is None
    for bad in BAD_SPECS:
        with pytest.raises(InvalidArgument):
            Backoff.parse(bad)
        assert Backoff.read(bad) is None  # what a worker reads off a row: its default then


def test_a_bad_spec_is_refused_before_anything_is_sent(q: Queue, r: redis.Redis) -> None:
    before = dump(r, q)
    for bad in BAD_SPECS:
        with pytest.raises(InvalidArgument):
            q.enqueue("x", backoff=bad)
        with pytest.raises(InvalidArgument):
            q.repeat("rep", every_ms=1000, backoff=bad)
    with pytest.raises(InvalidArgument):
        q.enqueue("x", backoff=5)  # type: ignore[arg-type]
    assert dump(r, q) == before == {}


def test_out_of_range_fields_raise() -> None:
    with pytest.raises(InvalidArgument):
        Backoff("linear")
    with pytest.raises(InvalidArgument):
        Backoff.fixed(-1)
    with pytest.raises(InvalidArgument):
        Backoff.exponential(1, max_ms=-5)
    with pytest.raises(InvalidArgument):
        Backoff.fixed(1, jitter=1.5)
    with pytest.raises(InvalidArgument):
        Backoff.fixed(1, jitter=float("nan"))
    with pytest.raises(InvalidArgument):
        Backoff.fixed(HORIZON_MS + 1)
    with pytest.raises(InvalidArgument):
        Backoff.exponential(1, max_ms=2**63)


def test_enqueue_stores_the_policy_on_the_row(q: Queue, r: redis.Redis) -> None:
    jid = q.enqueue("x", backoff=Backoff.fixed(5))
    assert r.hget(q.keys.job(jid), "backoff") == '{"type":"fixed","delay":5}'
    other = q.enqueue("y", backoff='{"type":"fixed","delay":7}')
    assert r.hget(q.keys.job(other), "backoff") == '{"type":"fixed","delay":7}'


def test_fail_waits_as_the_row_says_then_dead(q: Queue, r: redis.Redis) -> None:
    jid = q.enqueue("x", backoff=Backoff.exponential(40_000), max_attempts=2)
    default = Backoff.fixed(1)
    c = q.claim()
    assert c is not None
    assert q.runner.drive(fail(q.ctx, jid, c.token, "E1", default)) == "scheduled"
    assert 35_000 < int(r.zscore(q.keys.schedule, jid)) - server_ms(r) <= 40_000
    r.zadd(q.keys.schedule, {jid: 0}, xx=True)
    q.promote()
    c = q.claim()
    assert c is not None
    assert q.runner.drive(fail(q.ctx, jid, c.token, "E2", default)) == "dead"
    row = r.hgetall(q.keys.job(jid))
    assert (row["state"], row["failures"], row["last_error"]) == ("dead", "2", "E2")


@pytest.mark.parametrize(
    "spec", ["1e400", '{"delay":1e400}', "nonsense"], ids=["num", "obj", "text"]
)
def test_a_row_with_an_unreadable_spec_fails_with_the_default(
    q: Queue, r: redis.Redis, spec: str
) -> None:
    # a spec written past the gate (by hand, or by an older client) must not lose the
    # failure: the worker's default applies and the job is scheduled as usual
    jid = q.enqueue("x")
    r.hset(q.keys.job(jid), "backoff", spec)
    c = q.claim()
    assert c is not None
    assert q.runner.drive(fail(q.ctx, jid, c.token, "E1", Backoff.fixed(5000))) == "scheduled"
    assert 4_000 < int(r.zscore(q.keys.schedule, jid)) - server_ms(r) <= 5_000
    row = r.hgetall(q.keys.job(jid))
    assert (row["state"], row["failures"], row["last_error"]) == ("scheduled", "1", "E1")
    assert q.counts().scheduled == 1


def test_a_huge_computed_delay_is_clamped_to_the_horizon(q: Queue, r: redis.Redis) -> None:
    jid = q.enqueue("x", backoff=Backoff.exponential(HORIZON_MS), max_attempts=100)
    r.hset(q.keys.job(jid), "failures", "40")
    c = q.claim()
    assert c is not None
    assert q.runner.drive(fail(q.ctx, jid, c.token, "E", Backoff.fixed(1))) == "scheduled"
    due = int(r.zscore(q.keys.schedule, jid))
    assert HORIZON_MS - 5_000 < due - server_ms(r) <= HORIZON_MS
    assert r.hget(q.keys.job(jid), "state") == "scheduled"


def test_fail_with_a_stale_token_changes_nothing(q: Queue, r: redis.Redis) -> None:
    jid = q.enqueue("x")
    assert q.claim() is not None
    before = dump(r, q)
    with pytest.raises(StaleToken):
        q.runner.drive(fail(q.ctx, jid, 9, "late", Backoff.fixed(1)))
    assert dump(r, q) == before


def test_release_hands_an_active_job_back_with_its_counters(q: Queue, r: redis.Redis) -> None:
    jid = q.enqueue("x", priority=4)
    c = q.claim()
    assert c is not None
    q.lock_job(jid, c.token)
    q.release(jid, c.token)
    row = r.hgetall(q.keys.job(jid))
    assert row["state"] == "pending" and row["attempts"] == "1" and "failures" not in row
    # at its priority, in its old place (its enqueue took seq 0)
    assert r.zscore(q.keys.pending, jid) == run_score(4, 0) and r.zcard(q.keys.active) == 0
    assert not r.exists(q.keys.lock(jid))
    assert r.llen(q.keys.wake) >= 1
    again = q.claim()
    assert again is not None and again.token == 2  # the released holder's token is stale


def test_release_gives_a_grouped_slot_back_once(q: Queue, r: redis.Redis) -> None:
    q.set_group_limit("g", 1)
    first = q.enqueue("a", group="g")
    q.enqueue("b", group="g")
    c = q.claim()
    assert c is not None and c.id == first
    assert r.hget(q.keys.gactive, "g") == "1" and "g" not in r.lrange(q.keys.ring, 0, -1)
    q.release(first, c.token)
    assert r.hget(q.keys.gactive, "g") is None
    assert r.zscore(q.keys.lane("g"), first) == 0
    assert r.lrange(q.keys.ring, 0, -1) == ["g"]  # servable again
    assert r.hget(q.keys.job(first), "state") == "pending"


def test_release_refusals_change_nothing(q: Queue, r: redis.Redis) -> None:
    jid = q.enqueue("x")
    before = dump(r, q)
    with pytest.raises(StaleToken):
        q.release(jid, 1)  # pending, not active
    assert dump(r, q) == before
    c = q.claim()
    assert c is not None
    before = dump(r, q)
    with pytest.raises(StaleToken):
        q.release(jid, c.token + 1)
    assert dump(r, q) == before
    with pytest.raises(JobGone):
        q.release("JOB00000000001", 1)
    assert dump(r, q) == before


async def test_release_on_the_async_facade(aq: AsyncQueue, r: redis.Redis) -> None:
    jid = await aq.enqueue("x")
    c = await aq.claim()
    assert c is not None
    await aq.release(jid, c.token)
    assert await aq.job_state(jid) == "pending"
