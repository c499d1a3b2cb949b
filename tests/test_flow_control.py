"""Flow control decided inside the claim (issue 26): the queue's rate limit (a sliding
window), its concurrency cap, lane rate limits, and a handler's ``RateLimited``.

Each test asserts the verb's reply and the keys it leaves (the start logs, ``gwait``,
the ring, meta); a refused or invalid call is checked to change nothing.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
import redis
from click.testing import CliRunner
from prometheus_client import generate_latest

from conftest import dump
from echomq import InvalidArgument, InvalidName, Queue, RateLimited, StaleToken, registry
from echomq.cli import app as cli_app
from echomq.observability.prometheus import SnapshotCollector as _Collector
from echomq.observability.scrape import snapshots
from echomq.results import ClaimHold, Limits, RateLimit
from echomq.worker.limits import rate_limited
from lanes_law import assert_law
from test_lifecycle import run_score
from worker_support import server_ms

pytestmark = [pytest.mark.both_executors, pytest.mark.both_servers]

LEASE = 30_000


def starts(r: redis.Redis, q: Queue) -> list[int]:
    """The server ms each active job started at (its lease deadline less the lease)."""
    return sorted(int(s) - LEASE for _, s in r.zrange(q.keys.active, 0, -1, withscores=True))


# ---- the verbs ------------------------------------------------------------------------


def test_set_read_and_clear_the_queue_limits_each_journaled(q: Queue, r: redis.Redis) -> None:
    assert q.rate_limit() is None
    assert q.set_rate_limit(5, 1000, burst=2) is None
    assert q.set_concurrency(3) is None
    assert q.set_group_rate_default(2, 500) is None
    assert q.rate_limit() == RateLimit(5, 1000, 2)
    assert r.hgetall(q.keys.meta) == {
        "rate_max": "5",
        "rate_ms": "1000",
        "rate_burst": "2",
        "concurrency": "3",
        "group_rate_max": "2",
        "group_rate_ms": "500",
        "limits": "1",  # the claim's flag: it reads the limits only when set
    }
    got = q.limits()
    assert isinstance(got, Limits)
    assert (got.rate, got.concurrency, got.group_rate_default) == (
        RateLimit(5, 1000, 2),
        3,
        RateLimit(2, 500),
    )
    assert (got.starts_in_window, got.active, got.held_lanes, got.rate_limited) == (0, 0, 0, False)
    q.clear_rate_limit()
    q.clear_concurrency()
    q.clear_group_rate_default()
    assert q.rate_limit() is None
    assert r.hgetall(q.keys.meta) == {}
    verbs = [e.verb for e in reversed(q.audit())]
    assert verbs == [
        "set_rate_limit",
        "set_concurrency",
        "set_group_rate_default",
        "clear_rate_limit",
        "clear_concurrency",
        "clear_group_rate_default",
    ]
    assert q.audit()[-1].args == {"max_jobs": 5, "per_ms": 1000, "burst": 2}


def test_group_rate_limit_set_read_clear_journaled(q: Queue, r: redis.Redis) -> None:
    q.set_group_rate_limit("tenant-a", 10, 1000)
    assert q.group_rate_limit("tenant-a") == RateLimit(10, 1000)
    assert r.hgetall(q.keys.grate) == {"tenant-a": "10:1000"}
    assert r.smembers(q.keys.groups) == {"tenant-a"}
    q.clear_group_rate_limit("tenant-a")
    assert q.group_rate_limit("tenant-a") is None
    assert not r.exists(q.keys.grate, q.keys.groups)
    assert [e.verb for e in q.audit()] == ["clear_group_rate_limit", "set_group_rate_limit"]


INVALID: dict[str, Callable[[Queue], None]] = {
    "max0": lambda q: q.set_rate_limit(0, 1000),
    "per0": lambda q: q.set_rate_limit(10, 0),
    "max_big": lambda q: q.set_rate_limit(100_001, 1000),
    "per_big": lambda q: q.set_rate_limit(10, 86_400_001),
    "max_bool": lambda q: q.set_rate_limit(True, 1000),
    "max_text": lambda q: q.set_rate_limit("10", 1000),
    "cap0": lambda q: q.set_concurrency(0),
    "cap_float": lambda q: q.set_concurrency(1.5),
    "default_neg": lambda q: q.set_group_rate_default(1, -1),
    "lane0": lambda q: q.set_group_rate_limit("g", 0, 10),
    "burst0": lambda q: q.set_rate_limit(10, 1000, burst=0),
    "burst_big": lambda q: q.set_rate_limit(10, 1000, burst=11),
}


@pytest.mark.parametrize("case", sorted(INVALID))
def test_an_invalid_limit_sends_nothing(q: Queue, r: redis.Redis, case: str) -> None:
    q.enqueue({"n": 1})
    before = dump(r, q)
    with pytest.raises(InvalidArgument):
        INVALID[case](q)
    assert dump(r, q) == before
    assert q.audit() == []


def test_a_malformed_group_sends_nothing(q: Queue, r: redis.Redis) -> None:
    before = dump(r, q)
    with pytest.raises(InvalidName):
        q.set_group_rate_limit("bad group", 1, 10)
    with pytest.raises(InvalidName):
        q.clear_group_rate_limit("a:b")
    assert dump(r, q) == before


def test_rate_limited_checks_its_arguments_where_raised() -> None:
    with pytest.raises(InvalidArgument):
        RateLimited(0)
    with pytest.raises(InvalidArgument):
        RateLimited(1000, group=1)  # type: ignore[arg-type]
    exc = RateLimited(1500, group=True)
    assert (exc.retry_after_ms, exc.group) == (1500, True)


# ---- the queue's rate limit -----------------------------------------------------------


def test_the_rate_limit_admits_max_starts_then_answers_the_wait(q: Queue, r: redis.Redis) -> None:
    q.set_rate_limit(3, 60_000, burst=3)  # the plain window: all three at once
    ids = [q.enqueue({"n": i}) for i in range(5)]
    got = q.claim_many(5)
    assert [c.id for c in got] == ids[:3]
    assert got.hold is not None and got.hold.scope == "rate"
    assert 59_000 <= got.hold.wait_ms <= 60_000
    # the start log holds one entry for the call: the running count, at its time
    log = r.zrange(q.keys.rate, 0, -1, withscores=True)
    assert [m for m, _ in log] == ["000000000000003"]
    assert 0 < r.pttl(q.keys.rate) <= 60_000
    # a full window claims nothing and changes nothing but the answer
    before = dump(r, q)
    again = q.claim_many(5)
    assert again == [] and again.hold is not None and again.hold.scope == "rate"
    assert dump(r, q) == before
    assert q.claim() is None
    assert q.limits().starts_in_window == 3 and q.limits().rate_limited


def test_the_window_slides_a_start_frees_its_place_per_ms_later(q: Queue, r: redis.Redis) -> None:
    q.set_rate_limit(2, 1000, burst=2)
    for i in range(4):
        q.enqueue({"n": i})
    now = server_ms(r)
    # three calls logged in the past (running counts 1, 2, 3): two left the window, the
    # third (one start) is still in it
    r.zadd(
        q.keys.rate,
        {
            "000000000000001": now - 2500,
            "000000000000002": now - 1500,
            "000000000000003": now - 400,
        },
    )
    got = q.claim_many(4)
    assert len(got) == 1  # one place in the window
    assert got.hold is not None and got.hold.scope == "rate"
    # the next start is allowed when the older start in the window leaves it
    assert 500 <= got.hold.wait_ms <= 600
    # the oldest expired entry was trimmed; the newest expired one stays: the base
    assert r.zrange(q.keys.rate, 0, -1) == ["000000000000002", "000000000000003", "000000000000004"]


def test_the_burst_spreads_the_starts_over_the_window(q: Queue, r: redis.Redis) -> None:
    # 20 per 60 s, 5 at once: at most 5 starts in any 13.5 s (0.9 * 5 * 60000 / 20)
    q.set_rate_limit(20, 60_000, burst=5)
    assert q.rate_limit() == RateLimit(20, 60_000, 5)
    for i in range(30):
        q.enqueue({"n": i})
    got = q.claim_many(30)
    assert len(got) == 5
    assert got.hold is not None and got.hold.scope == "rate"
    assert 13_000 <= got.hold.wait_ms <= 13_500
    # five starts 14 s ago have left the spreading window, not the window of 60 s
    now = server_ms(r)
    old = {m: now - 14_000 for m in r.zrange(q.keys.rate, 0, -1)}
    r.zadd(q.keys.rate, old)
    assert len(q.claim_many(30)) == 5
    assert r.zrange(q.keys.rate, -1, -1) == ["000000000000010"]


def test_the_default_burst_is_a_twentieth_of_the_limit(q: Queue) -> None:
    q.set_rate_limit(200, 1000)
    assert q.rate_limit() == RateLimit(200, 1000, 10)
    q.set_rate_limit(3, 1000)
    assert q.rate_limit() == RateLimit(3, 1000, 1)


def test_clear_rate_limit_lets_claims_through_and_removes_the_log(q: Queue, r: redis.Redis) -> None:
    q.set_rate_limit(1, 60_000)
    q.enqueue({"n": 1})
    q.enqueue({"n": 2})
    assert len(q.claim_many(2)) == 1
    q.clear_rate_limit()
    assert not r.exists(q.keys.rate)
    got = q.claim_many(2)
    assert len(got) == 1 and got.hold is None


# ---- the concurrency cap --------------------------------------------------------------


def test_the_concurrency_cap_counts_active_jobs_across_claimers(
    make_queue: Callable[..., Queue], qname: str, r: redis.Redis
) -> None:
    a, b = make_queue(qname), make_queue(qname)
    a.set_concurrency(2)
    for i in range(5):
        a.enqueue({"n": i})
    first = a.claim_many(1)
    second = b.claim_many(5)
    assert len(first) == 1 and len(second) == 1
    assert second.hold == ClaimHold("concurrency", 0)
    assert r.zcard(a.keys.active) == 2
    before = dump(r, a)
    held = b.claim_many(5)
    assert held == [] and held.hold == ClaimHold("concurrency", 0)
    assert dump(r, a) == before
    # an ending frees a slot and pushes a wake token for a waiting worker
    r.delete(a.keys.wake)
    a.complete(first[0].id, first[0].token)
    assert r.llen(a.keys.wake) == 1
    assert len(b.claim_many(5)) == 1
    assert r.zcard(a.keys.active) == 2


# ---- lane rate limits -----------------------------------------------------------------


def test_a_limited_lane_is_held_off_the_ring_and_never_delays_another(
    q: Queue, r: redis.Redis
) -> None:
    q.set_group_rate_limit("slow", 2, 60_000)
    slow = [q.enqueue({"n": i}, group="slow") for i in range(4)]
    fast = [q.enqueue({"n": i}, group="fast") for i in range(6)]
    got = q.claim_many(10)
    served = [c.id for c in got]
    # the slow lane gives its two starts, then is held; the fast lane drains fully
    assert [i for i in served if i in slow] == slow[:2]
    assert [i for i in served if i in fast] == fast
    assert got.hold is not None and got.hold.scope == "lanes"
    assert 59_000 <= got.hold.wait_ms <= 60_000
    assert r.zrange(q.keys.gwait, 0, -1) == ["slow"]
    assert r.lrange(q.keys.ring, 0, -1) == []
    assert r.zcard(q.keys.lane_starts("slow")) == 2
    assert q.limits().held_lanes == 1
    # held: an enqueue in its lane does not ring it again
    q.enqueue({"n": 9}, group="slow")
    assert r.lrange(q.keys.ring, 0, -1) == []
    assert_law(r, q)


def test_a_held_lane_returns_to_the_ring_head_when_its_window_frees(
    q: Queue, r: redis.Redis
) -> None:
    q.set_group_rate_limit("a", 1, 60_000)
    for g in ("a", "b", "c"):
        q.enqueue({"g": g}, group=g)
        q.enqueue({"g": g}, group=g)
    assert [c.group for c in q.claim_many(3)] == ["a", "b", "c"]
    assert r.zrange(q.keys.gwait, 0, -1) == ["a"]
    # the window frees (its start pushed back in time, and its hold due)
    r.zadd(q.keys.lane_starts("a"), {m: 0 for m in r.zrange(q.keys.lane_starts("a"), 0, -1)})
    r.zadd(q.keys.gwait, {"a": 0})
    got = q.claim_many(1)
    # "a" comes back at the ring's head: served first, before b and c
    assert [c.group for c in got] == ["a"]
    assert r.zrange(q.keys.gwait, 0, -1) == ["a"]  # and held again by its one start
    assert_law(r, q)


def test_the_lanes_default_limits_each_lane_on_its_own(q: Queue, r: redis.Redis) -> None:
    q.set_group_rate_default(1, 60_000)
    q.set_group_rate_limit("vip", 3, 60_000)
    for g in ("x", "y", "vip"):
        for i in range(3):
            q.enqueue({"i": i}, group=g)
    groups = [c.group for c in q.claim_many(20)]
    assert sorted(groups) == ["vip", "vip", "vip", "x", "y"]
    assert sorted(r.zrange(q.keys.gwait, 0, -1)) == ["vip", "x", "y"]


def test_clearing_a_lane_limit_serves_the_held_lane_again(q: Queue, r: redis.Redis) -> None:
    q.set_group_rate_limit("a", 1, 60_000)
    for _ in range(3):
        q.enqueue({}, group="a")
    assert len(q.claim_many(3)) == 1
    r.delete(q.keys.wake)
    q.clear_group_rate_limit("a")
    assert r.zcard(q.keys.gwait) == 0 and r.lrange(q.keys.ring, 0, -1) == ["a"]
    assert r.llen(q.keys.wake) == 1  # re-ringed with a wake token
    assert not r.exists(q.keys.lane_starts("a"))
    assert len(q.claim_many(3)) == 2
    assert_law(r, q)


# ---- a handler's RateLimited ----------------------------------------------------------


def test_a_rate_limited_job_goes_back_to_its_place_spending_no_failure(
    q: Queue, r: redis.Redis
) -> None:
    ids = [q.enqueue({"n": i}) for i in range(3)]
    job = q.claim()
    assert job is not None and job.id == ids[0]
    q.runner.drive(rate_limited(q.ctx, job.id, job.token, 60_000, False))
    row = r.hgetall(q.keys.job(job.id))
    assert row["state"] == "pending" and "failures" not in row
    assert row["attempts"] == "1"  # the token: every claim counts one, a failure none
    # its old place: the head of pending again, not the tail
    assert r.zrange(q.keys.pending, 0, 0) == [job.id]
    row_seq = int(r.hget(q.keys.job(job.id), "seq") or 0)
    assert r.zscore(q.keys.pending, job.id) == run_score(0, row_seq)
    assert not r.exists(q.keys.lock(job.id)) and r.zcard(q.keys.active) == 0
    # the queue is held: the claim answers the hold and takes nothing
    until = int(r.hget(q.keys.meta, "limited_until"))
    assert 59_000 <= until - server_ms(r) <= 60_000
    before = dump(r, q)
    got = q.claim_many(3)
    assert got == [] and got.hold is not None and got.hold.scope == "blocked"
    assert dump(r, q) == before
    assert 59_000 <= q.limits().limited_for_ms <= 60_000
    # an operator lets it flow again: clear_rate_limit clears a handler's hold too
    q.clear_rate_limit()
    assert [c.id for c in q.claim_many(3)] == ids


def test_a_rate_limited_lane_is_held_the_others_flow(q: Queue, r: redis.Redis) -> None:
    a = [q.enqueue({"n": i}, group="a") for i in range(2)]
    b = [q.enqueue({"n": i}, group="b") for i in range(2)]
    job = q.claim()
    assert job is not None and job.id == a[0]
    q.runner.drive(rate_limited(q.ctx, job.id, job.token, 60_000, True))
    assert r.zrange(q.keys.gwait, 0, -1) == ["a"]
    assert r.zrange(q.keys.lane("a"), 0, 0) == [a[0]]  # back at its lane's head
    assert r.hget(q.keys.gactive, "a") is None  # its slot given back
    got = q.claim_many(5)
    assert [c.id for c in got] == b
    assert got.hold is not None and got.hold.scope == "lanes"
    assert_law(r, q)


def test_a_stale_rate_limited_changes_nothing(q: Queue, r: redis.Redis) -> None:
    q.enqueue({"n": 1})
    job = q.claim()
    assert job is not None
    before = dump(r, q)
    with pytest.raises(StaleToken):
        q.runner.drive(rate_limited(q.ctx, job.id, job.token + 1, 1000, False))
    assert dump(r, q) == before


def test_the_claim_reads_limits_only_under_the_flag_and_drops_it_when_none_is_left(
    q: Queue, r: redis.Redis
) -> None:
    ids = [q.enqueue({"n": i}) for i in range(3)]
    # no limit anywhere: no flag, and the claim writes nothing of flow control
    (first,) = q.claim_many(1)
    assert first.id == ids[0]
    assert r.hgetall(q.keys.meta) == {} and not r.exists(q.keys.rate, q.keys.gwait)
    # a handler's short hold sets it; the claim answers the hold while it lasts
    q.runner.drive(rate_limited(q.ctx, first.id, first.token, 300, False))
    assert r.hget(q.keys.meta, "limits") == "1"
    held = q.claim_many(3)
    assert held == [] and held.hold is not None and held.hold.scope == "blocked"
    assert r.hget(q.keys.meta, "limits") == "1"
    # the hold runs out: the next claim serves, finds nothing left to apply, drops it
    deadline = server_ms(r) + 5000
    while int(r.hget(q.keys.meta, "limited_until")) >= server_ms(r):
        assert server_ms(r) < deadline
    got = q.claim_many(3)
    assert [c.id for c in got] == ids and got.hold is None
    assert r.hgetall(q.keys.meta) == {"limited_until": r.hget(q.keys.meta, "limited_until")}
    # a lane's own rate sets it and keeps it while grate holds one; clearing drops it
    q.set_group_rate_limit("a", 5, 1000)
    assert r.hget(q.keys.meta, "limits") == "1"
    q.enqueue({"n": 9}, group="a")
    assert [c.group for c in q.claim_many(1)] == ["a"]
    assert r.hget(q.keys.meta, "limits") == "1"
    q.clear_group_rate_limit("a")
    assert r.hget(q.keys.meta, "limits") is None


def test_a_limit_written_without_the_flag_applies_from_the_next_beat(
    q: Queue, r: redis.Redis
) -> None:
    # a 0.2.0 client's set_limits writes the cap but no flag: claims miss it until a beat
    q.enqueue({"n": 1})
    q.enqueue({"n": 2})
    r.hset(q.keys.meta, "concurrency", "1")
    q.runner.execute(registry.beat_op(q.ctx, "cd" * 8, 3000, {"host": "h"}, []))
    assert r.hget(q.keys.meta, "limits") == "1"
    got = q.claim_many(2)
    assert len(got) == 1 and got.hold is not None and got.hold.scope == "concurrency"
    # a beat with nothing to change writes nothing to meta (waiting workers WATCH it)
    meta = r.hgetall(q.keys.meta)
    q.runner.execute(registry.beat_op(q.ctx, "cd" * 8, 3000, {"host": "h"}, []))
    assert r.hgetall(q.keys.meta) == meta


# ---- the operator's tools -------------------------------------------------------------


def test_the_cli_sets_shows_and_clears_limits(q: Queue, r: redis.Redis, server: Any) -> None:
    runner = CliRunner()

    def emq(*args: str) -> Any:
        res = runner.invoke(cli_app.cli, ["--url", server.url, "--json", *args])
        assert res.exit_code == 0, res.output
        return json.loads(res.stdout)

    # a queue with no key yet is refused as a likely typo (nothing written); --create
    # configures it before its first job
    before = dump(r, q)
    typo = runner.invoke(cli_app.cli, ["--url", server.url, "limit", "rate", q.name, "100", "1s"])
    assert typo.exit_code == 8 and "no queue named" in typo.output
    assert dump(r, q) == before
    got = emq("--create", "limit", "rate", q.name, "100", "1s")
    assert got["rate"] == {"max_jobs": 100, "per_ms": 1000, "burst": 5}
    assert got["rate_limited"] is False
    got = emq("limit", "rate", q.name, "100", "1s", "--burst", "100")
    assert got["rate"] == {"max_jobs": 100, "per_ms": 1000, "burst": 100}
    assert emq("limit", "concurrency", q.name, "4")["concurrency"] == 4
    assert emq("limit", "group-default", q.name, "5", "500ms")["group_rate_default"] == {
        "max_jobs": 5,
        "per_ms": 500,
        "burst": None,
    }
    assert emq("limit", "group", q.name, "t1", "2", "2s")["rate_limit"] == {
        "max_jobs": 2,
        "per_ms": 2000,
    }
    assert r.hgetall(q.keys.grate) == {"t1": "2:2000"}
    shown = emq("limit", "show", q.name)
    assert (shown["concurrency"], shown["starts_in_window"]) == (4, 0)
    stats = emq("stats", q.name)
    assert stats["limits"]["rate"] == {"max_jobs": 100, "per_ms": 1000, "burst": 100}
    assert stats["groups"][0]["rate_limit"] == [2, 2000]
    for args in (
        ("rate", q.name, "--clear"),
        ("concurrency", q.name, "--clear"),
        ("group-default", q.name, "--clear"),
        ("group", q.name, "t1", "--clear"),
    ):
        emq("limit", *args)
    assert r.hgetall(q.keys.meta) == {} and not r.exists(q.keys.grate)
    assert [e.verb for e in q.audit()][:4] == [
        "clear_group_rate_limit",
        "clear_group_rate_default",
        "clear_concurrency",
        "clear_rate_limit",
    ]
    # a usage error sends nothing
    before = dump(r, q)
    res = runner.invoke(cli_app.cli, ["--url", server.url, "limit", "rate", q.name, "5"])
    assert res.exit_code == 2
    res = runner.invoke(cli_app.cli, ["--url", server.url, "limit", "rate", q.name, "0", "1s"])
    assert res.exit_code == 2
    assert dump(r, q) == before
    text = runner.invoke(cli_app.cli, ["--url", server.url, "limit", "show", q.name])
    assert text.exit_code == 0 and "rate limit" in text.stdout


def test_the_scrape_reports_a_limited_queue(q: Queue, r: redis.Redis) -> None:
    q.set_rate_limit(1, 60_000)
    q.enqueue({})
    q.enqueue({}, group="a")
    (snap,) = q.runner.drive(snapshots([q.ctx]))
    assert (snap.rate_limited, snap.rate_limited_for_s, snap.held_lanes) == (False, 0.0, 0)
    assert len(q.claim_many(5)) == 1
    (snap,) = q.runner.drive(snapshots([q.ctx]))
    assert snap.rate_limited and 59.0 <= snap.rate_limited_for_s <= 60.0
    text = generate_latest(_Collector([snap])).decode()
    assert f'echomq_queue_rate_limited{{queue="{q.name}"}} 1.0' in text
