"""Reads bounded in server time: pending pages through the lanes' index (gindex), counts
without walking the groups, and the index kept exact by every transition."""

from __future__ import annotations

import random

import pytest
import redis

from conftest import dump
from echomq import InvalidArgument, Queue
from operator_support import changed


def merged(r: redis.Redis, q: Queue, run: bool) -> list[str]:
    """The brute-force order of every pending job: the flat set and every lane."""
    rows: list[tuple[float, str]] = list(
        (s, m) for m, s in r.zrange(q.keys.pending, 0, -1, withscores=True)
    )
    for g in r.smembers(q.keys.groups):
        rows += [(s, m) for m, s in r.zrange(q.keys.lane(g), 0, -1, withscores=True)]
    rows.sort(reverse=not run)
    return [m for _, m in rows]


def lanes_index(r: redis.Redis, q: Queue) -> set[str]:
    out: set[str] = set()
    for g in r.smembers(q.keys.groups):
        out |= set(r.zrange(q.keys.lane(g), 0, -1))
    return out


def test_pages_of_pending_match_the_merged_order_at_every_offset(q: Queue, r: redis.Redis) -> None:
    rnd = random.Random(7)
    for i in range(120):
        group = rnd.choice([None, None, "a", "b", "c"])
        q.enqueue(i, group=group, priority=rnd.choice([0, 0, 1, -2]))
    for run in (False, True):
        want = merged(r, q, run)
        order = "run" if run else "newest"
        for off in (0, 1, 7, 40, 59, 100, 119, 120, 130):
            for n in (1, 5, 20):
                assert q.browse("pending", n, off, order=order) == want[off : off + n]
    assert q.counts().pending == 120
    # a read writes nothing
    before = dump(r, q)
    q.browse("pending", 10, 50)
    q.counts()
    assert dump(r, q) == before


def test_the_index_follows_every_transition_of_a_lane(q: Queue, r: redis.Redis) -> None:
    ids = [q.enqueue(i, group=f"g{i % 3}") for i in range(12)]
    q.enqueue_many(range(5), group="g0")
    assert set(r.zrange(q.keys.gindex, 0, -1)) == lanes_index(r, q)
    got = q.claim_many(4)
    assert len(got) == 4
    q.complete(got[0].id, got[0].token)
    q.retry(got[1].id, got[1].token, "boom", delay_ms=0)
    q.promote()
    q.remove_job(ids[5])
    q.reassign(ids[6], None)
    q.reassign(ids[7], "g9")
    q.drain_group("g1")
    assert set(r.zrange(q.keys.gindex, 0, -1)) == lanes_index(r, q)
    assert q.counts().pending == len(lanes_index(r, q)) + r.zcard(q.keys.pending)
    q.remove_jobs("pending", group="g2")
    assert set(r.zrange(q.keys.gindex, 0, -1)) == lanes_index(r, q)
    q.drain()
    assert not r.exists(q.keys.gindex) and q.counts().pending == 0


def test_a_bad_order_is_refused_before_io(q: Queue, r: redis.Redis) -> None:
    with pytest.raises(InvalidArgument):
        q.browse("pending", order="oldest")
    assert changed(dump(r, q), dump(r, q)) == set()
