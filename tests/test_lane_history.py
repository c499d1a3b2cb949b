"""The busiest lanes' history (issue 29, item 5): per queue-hour, one small hash of the
lanes (a job's ``group``) that ended the most jobs, kept 7 days in bounded space.

Every test runs under both executors (the native complete and retry write the same
keys and values as the scripts) and asserts the reply and the keys left.
"""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
import redis

from conftest import _built, dump, queue_keys
from echomq import AsyncQueue, BusiestLanes, InvalidArgument, Queue, StaleToken
from echomq.embedded import EmbeddedServer
from echomq.schema import (
    HIST_KEEP_MS,
    HIST_LANE_NAME_MAX,
    HIST_LANES_CAP,
    HIST_LANES_TRIM,
)

pytestmark = [pytest.mark.both_executors]


def now_ms(r: redis.Redis) -> int:
    sec, usec = r.time()
    return int(sec) * 1000 + int(usec) // 1000


def lane_keys(r: redis.Redis, q: Queue) -> set[str]:
    return {k for k in queue_keys(r, q) if k.startswith(q.keys.base + "hl:")}


def lanes(r: redis.Redis, q: Queue) -> dict[str, list[int]]:
    """Every lane of the queue's hour keys: [ended, dead, wait_ms, run_ms], summed over
    the hours (two when the hour turned during the test)."""
    out: dict[str, list[int]] = {}
    for key in lane_keys(r, q):
        fields: dict[str, str] = r.hgetall(key)  # type: ignore[assignment]
        for lane, value in fields.items():
            cell = out.setdefault(lane, [0, 0, 0, 0])
            for k, part in enumerate(value.split()):
                cell[k] += int(part)
    return out


def run_jobs(q: Queue, groups: list[str | None], *, dead: bool = False) -> list[str]:
    ids = [q.enqueue({"i": i}, group=g, max_attempts=1) for i, g in enumerate(groups)]
    got = q.claim_many(len(ids), lock_ms=60_000)
    assert sorted(j.id for j in got) == sorted(ids)
    for job in got:
        if dead:
            assert q.retry(job.id, job.token, "boom") == "dead"
        else:
            assert q.complete(job.id, job.token) is None
    return ids


def test_flat_jobs_write_no_lane_key(q: Queue, r: redis.Redis) -> None:
    run_jobs(q, [None, None])
    run_jobs(q, [None], dead=True)
    assert lane_keys(r, q) == set()
    assert q.busiest_lanes("1h").lanes == []


def test_a_grouped_completion_counts_in_its_lane_with_wait_and_run(
    q: Queue, r: redis.Redis
) -> None:
    job = q.enqueue({"n": 1}, group="tenant-a")
    time.sleep(0.05)
    got = q.claim()
    assert got is not None and got.id == job
    time.sleep(0.06)
    assert q.complete(job, got.token) is None
    (key,) = lane_keys(r, q)
    hour = int(key.rsplit(":", 1)[1])
    assert key == q.keys.lanes_hist(hour)
    # the field: ended dead wait_ms run_ms
    (value,) = r.hgetall(key).values()
    ended, dead, wait, run = (int(x) for x in value.split())
    assert (ended, dead) == (1, 0)
    assert 30 <= wait < 5000 and 50 <= run < 5000
    # expiring 7 days after its hour ends, like hist:<hour>
    assert r.pexpiretime(key) == (hour + 1) * 3_600_000 + HIST_KEEP_MS
    assert r.type(key) == "hash"
    # the read
    busy = q.busiest_lanes("1h")
    assert isinstance(busy, BusiestLanes)
    assert busy.end_hour == now_ms(r) // 3_600_000 and busy.first_hour in (hour - 1, hour)
    (lane,) = busy.lanes
    assert (lane.lane, lane.completed, lane.dead, lane.wait_ms, lane.run_ms) == (
        "tenant-a",
        1,
        0,
        wait,
        run,
    )
    assert lane.averages() == (float(wait), float(run)) and busy.lanes_seen == 1


def test_batches_deaths_and_stalls_count_per_lane(q: Queue, r: redis.Redis) -> None:
    # the batch form: each lane once, with its jobs' counts
    ids = [q.enqueue({"i": i}, group=g) for i, g in enumerate(["a", "b", "a", None, "a"])]
    got = q.claim_many(5, lock_ms=60_000)
    assert q.complete_many([(j.id, j.token) for j in got]) == []
    assert {k: v[:2] for k, v in lanes(r, q).items()} == {"a": [3, 0], "b": [1, 0]}
    assert all(r.exists(q.keys.job(i)) == 0 for i in ids)
    # retry to dead
    run_jobs(q, ["b"], dead=True)
    # check_stalled to dead
    c = q.enqueue("c", group="c")
    got1 = q.claim(lease_ms=1)
    assert got1 is not None and got1.id == c
    time.sleep(0.01)
    assert q.check_stalled(max_stalled=0) == ([], [c])
    assert {k: v[:2] for k, v in lanes(r, q).items()} == {"a": [3, 0], "b": [2, 1], "c": [1, 1]}
    busy = q.busiest_lanes("24h", top=2)
    assert [(x.lane, x.completed, x.dead) for x in busy.lanes] == [("a", 3, 0), ("b", 1, 1)]
    assert busy.lanes_seen == 3 and busy.end_hour - busy.first_hour + 1 in (24, 25)
    assert r.hget(q.keys.metrics_failed, "count") == "2"


def test_the_cap_keeps_the_busiest_lanes(q: Queue, r: redis.Redis) -> None:
    # a busy lane, then more lanes than the cap: the hour's key stays at the cap, the
    # busy lane's count exact
    run_jobs(q, ["busy"] * 6)
    others = [f"l{i:02d}" for i in range(3 * HIST_LANES_CAP)]
    for name in others:
        run_jobs(q, [name, "busy"])
    keys = lane_keys(r, q)
    if len(keys) == 1:  # the hour did not turn: exactly at or under the cap
        (key,) = keys
        n = r.hlen(key)
        assert HIST_LANES_CAP - HIST_LANES_TRIM + 1 <= n <= HIST_LANES_CAP
        # the newest lane is never the one trimmed
        assert r.hexists(key, others[-1])
    got = lanes(r, q)
    assert got["busy"][:2] == [6 + len(others), 0]
    busy = q.busiest_lanes("1h", top=3)
    assert busy.lanes[0].lane == "busy" and busy.lanes[0].completed == 6 + len(others)
    assert busy.lanes_seen == len(got)


def test_a_long_lane_id_is_kept_bounded(q: Queue, r: redis.Redis) -> None:
    # a group name is at most 128 of [A-Za-z0-9._-] (checks.NAME_RE): the keys hold 40
    long = "tenant." + "x" * 119 + "-z"
    run_jobs(q, [long, long])
    (name,) = lanes(r, q)
    raw = long.encode()
    h = 5381
    for b in raw:
        h = (h * 33 + b) % 2**32
    assert name.encode() == raw[: HIST_LANE_NAME_MAX - 9] + b"~" + f"{h:08x}".encode()
    assert len(name.encode()) == HIST_LANE_NAME_MAX
    assert lanes(r, q)[name][:2] == [2, 0]
    # exactly at the bound: kept as it is
    edge = "e" * HIST_LANE_NAME_MAX
    run_jobs(q, [edge])
    assert edge in lanes(r, q)


def test_a_refused_ending_changes_nothing(q: Queue, r: redis.Redis) -> None:
    job = q.enqueue("x", group="g")
    got = q.claim()
    assert got is not None
    before = dump(r, q)
    with pytest.raises(StaleToken):
        q.complete(job, got.token + 7)
    with pytest.raises(StaleToken):
        q.retry(job, got.token + 7, "boom")
    assert dump(r, q) == before
    assert lane_keys(r, q) == set()


def test_spans_and_arguments(q: Queue, r: redis.Redis) -> None:
    before = dump(r, q)
    for bad in ("2d", "", None):
        with pytest.raises(InvalidArgument):
            q.busiest_lanes(bad)  # type: ignore[arg-type]
    for top in (0, 101, "3"):
        with pytest.raises(InvalidArgument):
            q.busiest_lanes("1h", top=top)  # type: ignore[arg-type]
    hour = now_ms(r) // 3_600_000
    for span, hours in (("1h", (1, 2)), ("24h", (24, 25)), ("7d", (168,))):
        busy = q.busiest_lanes(span)
        assert busy.span == span and busy.end_hour == hour
        assert busy.end_hour - busy.first_hour + 1 in hours
    # an hour key 3 days back counts in 7d, not in 24h
    r.hset(q.keys.lanes_hist(hour - 72), "old", "4 1 40 80")
    assert [x.lane for x in q.busiest_lanes("7d").lanes] == ["old"]
    assert q.busiest_lanes("24h").lanes == []
    (old,) = q.busiest_lanes("7d").lanes
    assert (old.completed, old.dead, old.wait_ms, old.run_ms) == (3, 1, 40, 80)
    r.delete(q.keys.lanes_hist(hour - 72))
    assert dump(r, q) == before


def test_obliterate_removes_every_lane_hour_key(q: Queue, r: redis.Redis) -> None:
    run_jobs(q, ["a", "b"])
    hour = now_ms(r) // 3_600_000
    for h in (hour - 72, hour - HIST_KEEP_MS // 3_600_000 - 1):
        r.hset(q.keys.lanes_hist(h), "a", "1 0 0 0")
        r.pexpireat(q.keys.lanes_hist(h), (h + 1) * 3_600_000 + HIST_KEEP_MS)
    assert len(lane_keys(r, q)) >= 2  # the oldest one expired at once
    q.pause()
    while not q.obliterate():
        pass
    assert queue_keys(r, q) == set()


async def test_the_async_facade_reads_the_same(q: Queue, aq: AsyncQueue, r: redis.Redis) -> None:
    run_jobs(q, ["a", "a", "b"])
    assert await aq.busiest_lanes("1h", top=5) == q.busiest_lanes("1h", top=5)


def test_emq_stats_lanes_text_and_json(
    q: Queue, r: redis.Redis, server: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    from echomq.cli import app as cli_app

    def emq(*args: str) -> tuple[int, str]:
        capsys.readouterr()
        code = cli_app.main(["--url", server.url, *args])
        return code, capsys.readouterr().out

    run_jobs(q, ["plain"])
    run_jobs(q, ["plain"], dead=True)
    # a lane's name is job text to the tools: one no enqueue would take (written to the
    # hour's key by someone else) prints escaped
    evil = "\x1b[31mred\u202e"
    hour = now_ms(r) // 3_600_000
    r.hset(q.keys.lanes_hist(hour), evil, "2 0 10 20")
    before = dump(r, q)
    code, out = emq("stats", q.name, "--lanes")
    assert code == 0
    assert "busiest lanes over 1h" in out and "2 lanes seen" in out
    assert "\x1b" not in out and "\u202e" not in out and "\\x1b[31mred" in out
    code, out = emq("--json", "stats", q.name, "--history", "7d", "--lanes", "1")
    assert code == 0
    doc = json.loads(out)["busiest_lanes"]
    assert doc["span"] == "7d" and doc["lanes_seen"] == 2
    (lane,) = doc["lanes"]
    assert (lane["lane"], lane["completed"], lane["dead"]) == (evil, 2, 0)
    assert lane["mean_run_ms"] is not None
    assert doc["until_ms"] - doc["from_ms"] == 168 * 3_600_000
    code, out = emq("--json", "stats", q.name, "--lanes", "0")
    assert code == 2
    assert dump(r, q) == before
    r.hdel(q.keys.lanes_hist(hour), evil)


@pytest.mark.skipif(_built is None, reason="the echomq native module is not built")
def test_native_writes_what_the_scripts_write(server: EmbeddedServer, qname: str) -> None:
    """The same grouped workload on both executors: the same fields, in the same order,
    with the same counts (wait and run are timing), the same expiry."""
    r = redis.Redis.from_url(server.url, decode_responses=True)
    pictures = []
    for executor in ("scripts", "native"):
        with Queue(f"{qname}-{executor}", url=server.url, executor=executor) as q:
            groups: list[str | None] = [f"g{i % 14}" for i in range(40)] + ["g3"] * 5 + [None]
            run_jobs(q, groups[:20])
            ids = [q.enqueue({"i": i}, group=g, max_attempts=1) for i, g in enumerate(groups[20:])]
            got = q.claim_many(len(ids), lock_ms=60_000)
            assert q.complete_many([(j.id, j.token) for j in got[:15]]) == []
            for j in got[15:]:
                assert q.retry(j.id, j.token, "boom") == "dead"
            run_jobs(q, ["y" * 60, "y" * 60 + "z"])
            keys = sorted(lane_keys(r, q))
            pictures.append(
                [
                    (
                        k.rsplit(":", 1)[1],
                        [(f, v.split()[:2]) for f, v in r.hgetall(k).items()],
                        r.pexpiretime(k),
                    )
                    for k in keys
                ]
            )
            q.pause()
            while not q.obliterate():
                pass
            assert queue_keys(r, q) == set()
    if [p[0] for p in pictures[0]] == [p[0] for p in pictures[1]]:  # no hour turned between
        assert pictures[0] == pictures[1]
