"""The lanes' index (gindex) on a queue written before it existed: `reindex` rebuilds it
(bounded, resumable, idempotent), and drain and obliterate still reach every lane."""

from __future__ import annotations

import pytest
import redis
from click.testing import CliRunner

from conftest import dump
from echomq import InvalidArgument, Queue, ReindexResult
from echomq.cli import cli
from echomq.embedded import EmbeddedServer
from echomq.ids import new_ids
from test_bounded_reads import lanes_index, merged
from test_lifecycle import run_score


def old_layout(r: redis.Redis, q: Queue, flat: int, lanes: dict[str, int]) -> list[str]:
    """Write a queue as a client from before the index did: rows, the flat pending
    set, each lane, `groups` and the ring; no `gindex`. Returns every job id."""
    ids = new_ids(flat + sum(lanes.values()))
    it = iter(ids)
    pipe = r.pipeline(transaction=False)
    for _ in range(flat):
        jid = next(it)
        pipe.hset(q.keys.job(jid), mapping={"state": "pending", "attempts": 0, "payload": "1"})
        pipe.zadd(q.keys.pending, {jid: 0})
    for g, n in lanes.items():
        for i in range(n):
            jid = next(it)
            row = {"state": "pending", "attempts": 0, "payload": "2", "group": g}
            pipe.hset(q.keys.job(jid), mapping=row)
            pipe.zadd(q.keys.lane(g), {jid: i % 3})
        pipe.sadd(q.keys.groups, g)
        pipe.rpush(q.keys.ring, g)
    pipe.execute()
    return ids


LANES = {f"t{i}": 1 + i % 7 for i in range(40)}
IN_LANES = sum(LANES.values())


def test_an_old_layout_queue_counts_right_after_reindex(q: Queue, r: redis.Redis) -> None:
    old_layout(r, q, 5, LANES)
    # before: the lanes are invisible to counts and pages (the index is empty)
    assert q.counts().pending == 5
    assert len(q.browse("pending", 200)) == 5

    # a dry run says what a run would fix, and writes nothing
    before = dump(r, q)
    dry = q.reindex(dry_run=True)
    assert (dry.added, dry.removed, dry.cursor, dry.dry_run) == (IN_LANES, 0, None, True)
    assert dump(r, q) == before

    # bounded and resumable: stop after a few calls, go on from the cursor
    part = q.reindex(scan=16, max_calls=3)
    assert part.calls == 3 and part.cursor is not None and part.cursor.startswith("lanes|")
    assert 0 < part.added < IN_LANES
    seen: list[ReindexResult] = []
    rest = q.reindex(scan=16, cursor=part.cursor, progress=seen.append)
    assert rest.cursor is None and seen[-1] == rest
    assert part.added + rest.added == IN_LANES and rest.removed == 0

    # after: counts and every page see every lane's job, in the merged order
    assert q.counts().pending == 5 + IN_LANES
    assert set(r.zrange(q.keys.gindex, 0, -1)) == lanes_index(r, q)
    for run in (False, True):
        want = merged(r, q, run)
        got = q.browse("pending", 200, order="run" if run else "newest")
        assert got == want[:200]
    # the index carries each lane's score
    for jid in list(lanes_index(r, q))[:20]:
        g = r.hget(q.keys.job(jid), "group")
        assert r.zscore(q.keys.gindex, jid) == r.zscore(q.keys.lane(g), jid)
    # idempotent: a second run finds nothing to do and journals nothing
    entries = len(q.audit(1000))
    again = q.reindex()
    assert (again.added, again.removed) == (0, 0)
    assert len(q.audit(1000)) == entries
    verbs = {e.verb for e in q.audit(1000)}
    assert verbs == {"reindex"}


def test_reindex_removes_members_no_lane_holds_and_fixes_scores(q: Queue, r: redis.Redis) -> None:
    ids = [q.enqueue(i, group="a") for i in range(4)]
    flat = q.enqueue("flat")
    # what a pre-index client's claim and removal would leave behind
    r.zrem(q.keys.lane("a"), ids[0])
    r.hset(q.keys.job(ids[0]), "state", "active")
    r.delete(q.keys.job(ids[1]))
    r.zrem(q.keys.lane("a"), ids[1])
    r.zadd(q.keys.gindex, {flat: 0})  # a flat job the index must not hold
    r.zadd(q.keys.gindex, {ids[2]: 5})  # another score than its lane's
    assert q.counts().pending == 6  # the flat job counted twice, two ghosts
    res = q.reindex()
    assert (res.added, res.removed) == (1, 3)
    assert set(r.zrange(q.keys.gindex, 0, -1)) == {ids[2], ids[3]}
    assert r.zscore(q.keys.gindex, ids[2]) == run_score(0, 2)  # its lane's score
    # only the index changed: the rows stay as they were
    assert r.hget(q.keys.job(ids[0]), "state") == "active"
    assert r.exists(q.keys.job(flat))
    assert q.counts().pending == 3


def test_a_bad_cursor_or_bound_is_refused_before_io(q: Queue, r: redis.Redis) -> None:
    bad = ["", "lanes", "lanes|0|g|x", "index|0||1", "nope|||0", "lanes|x||0", "lanes|0|a b|0"]
    for cursor in bad:
        with pytest.raises(InvalidArgument):
            q.reindex(cursor=cursor)
    for kw in ({"scan": 0}, {"scan": 5001}, {"max_calls": 0}, {"dry_run": "yes"}):
        with pytest.raises(InvalidArgument):
            q.reindex(**kw)  # type: ignore[arg-type]
    assert dump(r, q) == {}


def test_drain_and_obliterate_reach_lanes_the_index_misses(q: Queue, r: redis.Redis) -> None:
    old_layout(r, q, 3, LANES)
    assert q.drain(budget=7) == 3 + IN_LANES
    assert lanes_index(r, q) == set() and not r.exists(q.keys.ring)
    assert [k for k in r.scan_iter(match=q.keys.pattern()) if ":job:" in k] == []

    old_layout(r, q, 3, LANES)
    q.pause()
    calls = 1
    while not q.obliterate(budget=5):
        calls += 1
    assert calls > IN_LANES // 5
    assert set(r.scan_iter(match=q.keys.pattern())) == set()


def test_an_obliterate_resumed_part_way_starts_a_fresh_pass(q: Queue, r: redis.Redis) -> None:
    old_layout(r, q, 0, LANES)
    q.pause()
    for _ in range(3):
        assert q.obliterate(budget=5) is False
    assert r.hget(q.keys.meta, "lanes") is not None
    q.resume()
    assert r.hget(q.keys.meta, "lanes") is None
    q.pause()
    while not q.obliterate(budget=5):
        pass
    assert set(r.scan_iter(match=q.keys.pattern())) == set()


def test_emq_reindex(server: EmbeddedServer, q: Queue, r: redis.Redis) -> None:
    old_layout(r, q, 0, {"a": 3, "b": 2})
    run = CliRunner()
    dry = run.invoke(cli, ["--url", server.url, "reindex", q.name, "--dry-run"])
    assert dry.exit_code == 0, dry.output
    assert "would add 5 lane jobs" in dry.output and q.counts().pending == 0
    out = run.invoke(cli, ["--url", server.url, "--json", "reindex", q.name, "--scan", "2"])
    assert out.exit_code == 0, out.output
    assert '"added":5' in out.output and '"done":true' in out.output
    assert q.counts().pending == 5
