"""The busiest lanes' history (issue 29, item 5): per queue-hour, a table of the lanes
(a job's ``group``) that ended the most jobs, inside the hour's history key
(``schema.HIST_LANE_FIELDS``), their names in the queue's ``lanenames``.

Every test runs under both executors (the native complete and retry write the same
bytes as the scripts) and asserts the reply and the keys left.
"""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
import redis

from conftest import _built, dump, hist_keys, hour_lanes, plant_lane, queue_keys
from echomq import AsyncQueue, BusiestLanes, InvalidArgument, Queue, StaleToken
from echomq.embedded import EmbeddedServer
from echomq.ids import new_id
from echomq.reads.series import lane_hash
from echomq.schema import (
    HIST_AT,
    HIST_BYTES,
    HIST_BYTES_V1,
    HIST_KEEP_MS,
    HIST_LANE_BITS,
    HIST_LANE_HASH_AT,
    HIST_LANE_TYPE,
    HIST_LANES,
    HIST_LANES_AT,
    HIST_MARK,
    HIST_SLOT_BITS,
    HIST_TYPE,
    HIST_WAIT_UNIT_MS,
    hist_lane_admits,
    hist_lane_at,
)
from worker_support import server_ms

pytestmark = [pytest.mark.both_executors]


def lanes(r: redis.Redis, q: Queue) -> dict[int, list[int]]:
    """Every lane of the queue's hour keys by hash: [ended, dead, wait units, run_ms],
    summed over the hours (two when the hour turned during the test)."""
    out: dict[int, list[int]] = {}
    for key in hist_keys(r, q):
        for h, *figures in hour_lanes(r, key):
            if h:
                cell = out.setdefault(h, [0, 0, 0, 0])
                for k, v in enumerate(figures):
                    cell[k] += v
    return out


def counts(r: redis.Redis, q: Queue) -> dict[int, list[int]]:
    """:func:`lanes`' ended and dead only (wait and run are timing)."""
    return {h: v[:2] for h, v in lanes(r, q).items()}


def H(name: str) -> int:
    return lane_hash(name)


def run_jobs(
    q: Queue, groups: list[str | None], *, dead: bool = False, job_ids: list[str] | None = None
) -> list[str]:
    """Enqueue, claim and end one job per group (job_ids: the caller's ids, in order)."""
    chosen = job_ids or [None] * len(groups)
    ids = [
        q.enqueue({"i": i}, group=g, max_attempts=1, job_id=chosen[i]) for i, g in enumerate(groups)
    ]
    got = q.claim_many(len(ids), lock_ms=60_000)
    assert sorted(j.id for j in got) == sorted(ids)
    for job in got:
        if dead:
            assert q.retry(job.id, job.token, "boom") == "dead"
        else:
            assert q.complete(job.id, job.token) is None
    return ids


def test_the_lane_hash_is_djb2_never_zero() -> None:
    assert lane_hash("") == 5381
    h = 5381
    for b in b"tenant-0042":
        h = (h * 33 + b) % 2**32
    assert lane_hash("tenant-0042") == lane_hash(b"tenant-0042") == h
    assert HIST_LANE_BITS == 99 and HIST_LANES == 8
    # the string's header (5 bytes) and its terminating zero: within the 896-byte class
    assert HIST_BYTES == 890 and HIST_BYTES + 6 <= 896
    # the hashes from the first whole byte past the first layout's marker bit
    assert HIST_LANE_HASH_AT == 6064 == 60 * HIST_SLOT_BITS + 4
    assert HIST_LANES_AT == HIST_LANE_HASH_AT + 32 * HIST_LANES
    assert HIST_MARK == HIST_LANES_AT + HIST_LANES * HIST_LANE_BITS


def test_flat_jobs_write_no_lane(q: Queue, r: redis.Redis) -> None:
    run_jobs(q, [None, None])
    run_jobs(q, [None], dead=True)
    assert lanes(r, q) == {}
    assert r.exists(q.keys.lanenames) == 0
    assert q.busiest_lanes("1h").lanes == []


def test_a_grouped_completion_counts_in_its_lane_with_wait_and_run(
    q: Queue, r: redis.Redis
) -> None:
    job = q.enqueue({"n": 1}, group="tenant-a")
    time.sleep(0.05)
    got = q.claim()
    assert got is not None and got.id == job
    time.sleep(0.06)
    before = server_ms(r)
    assert q.complete(job, got.token) is None
    (key,) = hist_keys(r, q)
    hour = int(key.rsplit(":", 1)[1])
    # one key: the minute's slot and the lane's, the key at its full length
    assert r.strlen(key) == HIST_BYTES
    table = hour_lanes(r, key)
    h, ended, dead, wait, run = table[0]
    assert (h, ended, dead) == (H("tenant-a"), 1, 0)
    assert 30 <= wait * HIST_WAIT_UNIT_MS < 5000 and 50 <= run < 5000
    assert table[1:] == [(0, 0, 0, 0, 0)] * (HIST_LANES - 1)
    # expiring 7 days after its hour ends
    assert r.pexpiretime(key) == (hour + 1) * 3_600_000 + HIST_KEEP_MS
    # the name, at the time it took its slot
    ((name, score),) = r.zrange(q.keys.lanenames, 0, -1, withscores=True)
    assert name == "tenant-a" and before <= score <= server_ms(r)
    assert r.pttl(q.keys.lanenames) == -1
    # the read
    busy = q.busiest_lanes("1h")
    assert isinstance(busy, BusiestLanes)
    assert busy.end_hour == server_ms(r) // 3_600_000 and busy.first_hour in (hour - 1, hour)
    (lane,) = busy.lanes
    assert (lane.lane, lane.completed, lane.dead, lane.wait_ms, lane.run_ms) == (
        "tenant-a",
        1,
        0,
        wait * HIST_WAIT_UNIT_MS,
        run,
    )
    assert busy.lanes_seen == 1
    # a second ending adds to the slot and names nothing new
    run_jobs(q, ["tenant-a"])
    assert counts(r, q) == {H("tenant-a"): [2, 0]}
    assert r.zcard(q.keys.lanenames) == 1


def test_batches_deaths_and_stalls_count_per_lane(q: Queue, r: redis.Redis) -> None:
    # the batch form: each lane once, with its jobs' counts
    ids = [q.enqueue({"i": i}, group=g) for i, g in enumerate(["a", "b", "a", None, "a"])]
    got = q.claim_many(5, lock_ms=60_000)
    assert q.complete_many([(j.id, j.token) for j in got]) == []
    assert counts(r, q) == {H("a"): [3, 0], H("b"): [1, 0]}
    assert all(r.exists(q.keys.job(i)) == 0 for i in ids)
    # retry to dead
    run_jobs(q, ["b"], dead=True)
    # check_stalled to dead
    c = q.enqueue("c", group="c")
    got1 = q.claim(lease_ms=1)
    assert got1 is not None and got1.id == c
    time.sleep(0.01)
    assert q.check_stalled(max_stalled=0) == ([], [c])
    assert counts(r, q) == {H("a"): [3, 0], H("b"): [2, 1], H("c"): [1, 1]}
    busy = q.busiest_lanes("24h", top=2)
    assert [(x.lane, x.completed, x.dead) for x in busy.lanes] == [("a", 3, 0), ("b", 1, 1)]
    assert busy.lanes_seen == 3 and busy.end_hour - busy.first_hour + 1 in (24, 25)
    assert r.hget(q.keys.metrics_failed, "count") == "2"
    assert set(r.zrange(q.keys.lanenames, 0, -1)) == {"a", "b", "c"}


def test_more_lanes_than_slots_the_busiest_stay_exact(q: Queue, r: redis.Redis) -> None:
    # two busy lanes, then many more lanes than slots: the table stays at its slots,
    # the busy lanes' counts exact; the first others take the empty slots, a later one
    # takes over a slot only if its job id admits it (then holds it afresh)
    run_jobs(q, ["busy"] * 6 + ["second"] * 4)
    others = [f"l{i:02d}" for i in range(3 * HIST_LANES)]
    admitted = []
    for k, name in enumerate(others):
        ids = run_jobs(q, [name, "busy", "second"])
        if k < HIST_LANES - 2 or hist_lane_admits(ids[0]):
            admitted.append(name)
    keys = hist_keys(r, q)
    got = counts(r, q)
    assert got[H("busy")] == [6 + len(others), 0]
    assert got[H("second")] == [4 + len(others), 0]
    if len(keys) == 1:  # the hour did not turn
        (key,) = keys
        table = hour_lanes(r, key)
        assert all(slot[0] for slot in table) and len({s[0] for s in table}) == HIST_LANES
        # the newest admitted lane holds a slot, afresh: its own one ending
        assert [s[1:3] for s in table if s[0] == H(admitted[-1])] == [(1, 0)]
        assert r.strlen(key) == HIST_BYTES
    busy = q.busiest_lanes("1h", top=3)
    assert [(x.lane, x.completed) for x in busy.lanes[:2]] == [
        ("busy", 6 + len(others)),
        ("second", 4 + len(others)),
    ]
    # every lane that took a slot is named, no other
    assert set(r.zrange(q.keys.lanenames, 0, -1)) == {"busy", "second", *admitted}
    assert busy.lanes_seen == len(got)


def minutes_completed(r: redis.Redis, key: str) -> int:
    ops: list[Any] = []
    for m in range(60):
        ops += ["GET", HIST_TYPE["completed"], m * HIST_SLOT_BITS + HIST_AT["completed"]]
    return sum(int(v) for v in r.execute_command("BITFIELD_RO", key, *ops))


def end_one(q: Queue, group: str, job_id: str) -> None:
    assert q.enqueue({"g": group}, group=group, job_id=job_id, max_attempts=1) == job_id
    job = q.claim(lease_ms=60_000)
    assert job is not None and job.id == job_id
    assert q.complete(job.id, job.token) is None


def test_a_full_table_admits_a_lane_by_its_job_ids(q: Queue, r: redis.Redis) -> None:
    # the admission filter (schema.hist_lane_admits): with every slot taken, a lane
    # not in the table takes over a slot only on an admitting job id; chosen ids make
    # it deterministic
    fill = [f"f{i}" for i in range(HIST_LANES)]
    run_jobs(q, fill)
    (key,) = hist_keys(r, q)
    before, table_before = minutes_completed(r, key), hour_lanes(r, key)
    names = set(r.zrange(q.keys.lanenames, 0, -1))
    assert names == set(fill)
    # one ending of a new lane, its id not admitted: only the minute counts it
    shy = next(i for i in iter(new_id, "") if not hist_lane_admits(i))
    end_one(q, "shy", shy)
    if hist_keys(r, q) != {key}:
        pytest.skip("the hour turned during the test")
    assert hour_lanes(r, key) == table_before
    assert minutes_completed(r, key) == before + 1  # the minute counted it
    assert set(r.zrange(q.keys.lanenames, 0, -1)) == names
    assert r.hget(q.keys.metrics_completed, "count") == str(HIST_LANES + 1)
    # a busy lane: its endings not admitted leave no trace in the table; the first
    # admitted one takes over the fewest-ended slot (all 1: the first) and from there
    # every ending counts
    ids = iter(new_id, "")
    hot = [next(i for i in ids if not hist_lane_admits(i)) for _ in range(5)]
    hot += [next(i for i in ids if hist_lane_admits(i))]
    hot += [next(ids) for _ in range(10)]
    first = 5
    for i in hot:
        end_one(q, "hot", i)
    if hist_keys(r, q) != {key}:
        pytest.skip("the hour turned during the test")
    table = hour_lanes(r, key)
    assert table[0][0] == H("hot") and table[0][1:3] == (len(hot) - first, 0)
    assert [s[0] for s in table[1:]] == [H(f) for f in fill[1:]]
    assert set(r.zrange(q.keys.lanenames, 0, -1)) == names | {"hot"}
    assert q.busiest_lanes("1h", top=1).lanes[0].lane == "hot"


def test_a_batch_of_more_new_lanes_than_slots(q: Queue, r: redis.Redis) -> None:
    names = [f"b{i:02d}" for i in range(HIST_LANES + 3)]
    run_ids = [q.enqueue({"i": i}, group=g) for i, g in enumerate([*names, "b00"])]
    got = q.claim_many(len(run_ids), lock_ms=60_000)
    assert q.complete_many([(j.id, j.token) for j in got]) == []
    got_counts = counts(r, q)
    # b00 had two jobs: it stays; the others took over each other's slots in turn
    assert got_counts[H("b00")] == [2, 0]
    assert len(got_counts) <= HIST_LANES or len(hist_keys(r, q)) == 2
    assert q.busiest_lanes("1h", top=1).lanes[0].lane == "b00"


def test_long_and_odd_lane_names(q: Queue, r: redis.Redis) -> None:
    # a group name is at most 128 of [A-Za-z0-9._-] (checks.NAME_RE): the table holds
    # its hash only, whatever its length; the read names it in full
    long = "tenant." + "x" * 119 + "-z"
    odd = ["-", "...", "_._", "0", "A" * 128]
    run_jobs(q, [long, long, *odd])
    got = counts(r, q)
    assert got[H(long)] == [2, 0] and all(got[H(n)] == [1, 0] for n in odd)
    for key in hist_keys(r, q):
        assert r.strlen(key) == HIST_BYTES
    names = {x.lane: x.completed for x in q.busiest_lanes("1h", top=10).lanes}
    assert names == {long: 2, **{n: 1 for n in odd}}


def test_a_lane_no_longer_named_shows_as_its_hash(q: Queue, r: redis.Redis) -> None:
    run_jobs(q, ["gone", "kept"])
    r.zrem(q.keys.lanenames, "gone")
    busy = q.busiest_lanes("1h")
    assert sorted(x.lane for x in busy.lanes) == [f"#{H('gone'):08x}", "kept"]


def test_a_name_written_trims_a_few_old_names(q: Queue, r: redis.Redis) -> None:
    # each name written drops at most 8 of those past the series' 7 days and an hour
    # (bounded per call whatever the churn); a lane already in its slot writes none
    now = server_ms(r)
    stale = {f"stale{i}": now - HIST_KEEP_MS - 3_600_000 - 5 - i for i in range(20)}
    r.zadd(q.keys.lanenames, {**stale, "recent": now - 9})

    def left() -> set[str]:
        return {n for n in r.zrange(q.keys.lanenames, 0, -1) if n.startswith("stale")}

    run_jobs(q, [None, "fresh"])
    assert len(left()) == 12 and {"recent", "fresh"} <= set(r.zrange(q.keys.lanenames, 0, -1))
    assert left() == {f"stale{i}" for i in range(12)}  # the oldest went first
    run_jobs(q, ["fresh"])
    one_hour = len(hist_keys(r, q)) == 1  # the hour turned: fresh took a slot again
    if one_hour:
        assert len(left()) == 12
    run_jobs(q, ["other"])
    if one_hour and len(hist_keys(r, q)) == 1:
        assert len(left()) == 4
    assert "recent" in r.zrange(q.keys.lanenames, 0, -1)


def test_a_key_of_the_first_layout_reads_and_grows(q: Queue, r: redis.Redis) -> None:
    # the first layout: 60 slots and the marker at 60 * HIST_SLOT_BITS, 758 bytes
    hour = server_ms(r) // 3_600_000
    key = q.keys.hist(hour)
    minute = (server_ms(r) // 60000) % 60
    at = minute * HIST_SLOT_BITS
    r.execute_command(
        "BITFIELD", key, "SET", HIST_TYPE["completed"], at + HIST_AT["completed"], 5,
        "SET", "u1", 60 * HIST_SLOT_BITS, 1,
    )  # fmt: skip
    r.pexpireat(key, (hour + 1) * 3_600_000 + HIST_KEEP_MS)
    assert r.strlen(key) == HIST_BYTES_V1 == 758
    # its lanes read empty (the old marker bit is past no slot), its minutes as they were
    assert hour_lanes(r, key) == [(0, 0, 0, 0, 0)] * HIST_LANES
    assert q.busiest_lanes("1h").lanes == []
    assert sum(q.history("1h").completed) == 5
    # a grouped ending in that hour grows it to the new layout
    run_jobs(q, ["g"])
    if hist_keys(r, q) == {key}:
        assert r.strlen(key) == HIST_BYTES
        assert sum(q.history("1h").completed) == 6
        assert counts(r, q) == {H("g"): [1, 0]}
        assert [(x.lane, x.completed) for x in q.busiest_lanes("1h").lanes] == [("g", 1)]
        assert r.pexpiretime(key) == (hour + 1) * 3_600_000 + HIST_KEEP_MS


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
    assert hist_keys(r, q) == set() and r.exists(q.keys.lanenames) == 0


def test_spans_and_arguments(q: Queue, r: redis.Redis) -> None:
    before = dump(r, q)
    for bad in ("2d", "", None):
        with pytest.raises(InvalidArgument):
            q.busiest_lanes(bad)  # type: ignore[arg-type]
    for top in (0, 101, "3"):
        with pytest.raises(InvalidArgument):
            q.busiest_lanes("1h", top=top)  # type: ignore[arg-type]
    now = server_ms(r)
    hour = now // 3_600_000
    for span, hours in (("1h", (1, 2)), ("24h", (24, 25)), ("7d", (168,))):
        busy = q.busiest_lanes(span)
        assert busy.span == span and busy.end_hour == hour
        assert busy.end_hour - busy.first_hour + 1 in hours
    # an hour key 3 days back counts in 7d, not in 24h
    plant_lane(r, q, hour - 72, 0, "old", (4, 1, 10, 80), (hour - 72) * 3_600_000 + 5)
    assert [x.lane for x in q.busiest_lanes("7d").lanes] == ["old"]
    assert q.busiest_lanes("24h").lanes == []
    (old,) = q.busiest_lanes("7d").lanes
    assert (old.completed, old.dead, old.wait_ms, old.run_ms) == (3, 1, 40, 80)
    r.delete(q.keys.hist(hour - 72), q.keys.lanenames)
    assert dump(r, q) == before


def test_obliterate_leaves_nothing(q: Queue, r: redis.Redis) -> None:
    run_jobs(q, ["a", "b"])
    hour = server_ms(r) // 3_600_000
    for h in (hour - 72, hour - HIST_KEEP_MS // 3_600_000 - 1):
        plant_lane(r, q, h, 0, "a", (1, 0, 0, 0), h * 3_600_000)
        r.pexpireat(q.keys.hist(h), (h + 1) * 3_600_000 + HIST_KEEP_MS)
    assert len(hist_keys(r, q)) >= 2  # the oldest one expired at once
    assert r.exists(q.keys.lanenames) == 1
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
    # a lane's name is job text to the tools: one no enqueue would take (written by
    # someone else) prints escaped
    evil = "\x1b[31mred\u202e"
    now = server_ms(r)
    hour = now // 3_600_000
    plant_lane(r, q, hour, HIST_LANES - 1, evil, (2, 0, 3, 20), now)
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


def _table_bytes(r: redis.Redis, key: str) -> bytes:
    """The hour key's lanes' table with each slot's wait and run zeroed (timing): the
    bytes two executors must agree on for the same endings."""
    copy = key + ":copy"
    r.copy(key, copy)
    ops: list[Any] = []
    for slot in range(HIST_LANES):
        for name in ("wait", "run_ms"):
            ops += ["SET", HIST_LANE_TYPE[name], hist_lane_at(slot, name), 0]
    r.execute_command("BITFIELD", copy, *ops)
    raw = r.getrange(copy, HIST_LANE_HASH_AT // 8, HIST_MARK // 8)
    r.delete(copy)
    assert isinstance(raw, bytes)
    return raw


@pytest.mark.skipif(_built is None, reason="the echomq native module is not built")
def test_native_writes_the_bytes_the_scripts_write(server: EmbeddedServer, qname: str) -> None:
    """The same grouped workload on both executors (more lanes than slots, batches,
    deaths, long names): the same bytes in the hour's lanes' table (wait and run zeroed:
    timing), the same names, the same expiry. The same job ids on both (the admission
    filter decides by them)."""
    r = redis.Redis.from_url(server.url)
    rs = redis.Redis.from_url(server.url, decode_responses=True)
    pictures = []
    # every fifth id admits (the rest not): both sides of the filter, every run
    fresh = iter(new_id, "")
    same = [next(i for i in fresh if hist_lane_admits(i) == (k % 5 == 0)) for k in range(48)]
    for executor in ("scripts", "native"):
        with Queue(f"{qname}-{executor}", url=server.url, executor=executor) as q:
            groups: list[str | None] = [f"g{i % 14}" for i in range(40)] + ["g3"] * 5 + [None]
            run_jobs(q, groups[:20], job_ids=same[:20])
            ids = [
                q.enqueue({"i": i}, group=g, max_attempts=1, job_id=same[20 + i])
                for i, g in enumerate(groups[20:])
            ]
            got = q.claim_many(len(ids), lock_ms=60_000)
            assert q.complete_many([(j.id, j.token) for j in got[:15]]) == []
            for j in got[15:]:
                assert q.retry(j.id, j.token, "boom") == "dead"
            run_jobs(q, ["y" * 60, "y" * 60 + "z"], job_ids=same[46:])
            keys = sorted(hist_keys(rs, q))
            pictures.append(
                (
                    [(k.rsplit(":", 1)[1], _table_bytes(r, k), r.pexpiretime(k)) for k in keys],
                    sorted(rs.zrange(q.keys.lanenames, 0, -1)),
                )
            )
            q.pause()
            while not q.obliterate():
                pass
            assert queue_keys(rs, q) == set()
    if [p[0] for p in pictures[0][0]] == [p[0] for p in pictures[1][0]]:  # no hour turned
        assert pictures[0] == pictures[1]
        assert any(b.strip(b"\0") for _, b, _ in pictures[0][0])
