"""The history series (issue 29, item 5): per-minute completed, dead, wait and run of a
queue, one small key per queue-hour kept 7 days, read in bounded calls.

Every test runs under both executors (the native complete and retry write the same
keys as the scripts) and asserts the reply and the keys left.
"""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
import redis

from conftest import dump, hist_keys, queue_keys
from echomq import History, InvalidArgument, JobGone, Queue, ids
from echomq.schema import (
    HIST_AT,
    HIST_BYTES,
    HIST_FIELDS,
    HIST_KEEP_MS,
    HIST_MARK,
    HIST_SLOT_BITS,
    HIST_TYPE,
    HIST_WAIT_UNIT_MS,
)
from worker_support import server_ms

pytestmark = [pytest.mark.both_executors]


def slot(r: redis.Redis, q: Queue, minute: int) -> dict[str, int]:
    """One minute's slot of its hour key, each field in its own unit (wait: 4 ms)."""
    at = (minute % 60) * HIST_SLOT_BITS
    ops: list[Any] = []
    for name, _ in HIST_FIELDS:
        ops += ["GET", HIST_TYPE[name], at + HIST_AT[name]]
    raw = r.execute_command("BITFIELD_RO", q.keys.hist(minute // 60), *ops)
    return {name: int(v) for (name, _), v in zip(HIST_FIELDS, raw)}


def test_a_completion_counts_in_its_minute_with_its_wait_and_run(q: Queue, r: redis.Redis) -> None:
    job = q.enqueue({"n": 1})  # a minted id: its time is its enqueue
    time.sleep(0.06)
    got = q.claim()
    assert got is not None and got.id == job
    time.sleep(0.08)
    before = server_ms(r)
    assert q.complete(job, got.token) is None
    after = server_ms(r)
    minute = after // 60000
    if before // 60000 != minute:  # the minute turned in between: read the one it used
        minute = before // 60000 if slot(r, q, before // 60000)["completed"] else minute
    cell = slot(r, q, minute)
    assert cell["completed"] == 1 and cell["dead"] == 0
    assert 80 <= cell["run_ms"] < 5000
    # the wait: from the id's mint (client clock) to the claim, in 4 ms units
    assert 40 <= cell["wait"] * HIST_WAIT_UNIT_MS < 5000
    # one key for the hour, at its full size from the first write, expiring 7 days after
    # its hour ends (the same instant whoever wrote it first)
    (key,) = hist_keys(r, q)
    hour = minute // 60
    assert key == q.keys.hist(hour)
    assert r.strlen(key) == HIST_BYTES
    assert r.getbit(key, HIST_MARK) == 1
    assert r.pexpiretime(key) == (hour + 1) * 3_600_000 + HIST_KEEP_MS
    # the row is gone (not kept), the total counted
    assert r.exists(q.keys.job(job)) == 0
    assert r.hget(q.keys.metrics_completed, "count") == "1"
    # the read: the last point of the hour's view holds it (or the one before it)
    hist = q.history("1h")
    assert isinstance(hist, History)
    assert (hist.span, hist.step, len(hist.completed)) == ("1h", 1, 60)
    assert sum(hist.completed) == 1 and sum(hist.dead) == 0
    assert hist.run_ms[hist.completed.index(1)] == cell["run_ms"]
    waits, runs = hist.averages()
    assert runs[hist.completed.index(1)] == cell["run_ms"]
    assert waits.count(None) == 59


def test_a_batch_completion_counts_once_with_the_summed_times(q: Queue, r: redis.Redis) -> None:
    made = q.enqueue_many([1, 2, 3])
    got = q.claim_many(3)
    assert [g.id for g in got] == made
    time.sleep(0.03)
    assert q.complete_many([(g.id, g.token) for g in got]) == []
    hist = q.history("1h")
    assert sum(hist.completed) == 3
    assert sum(hist.run_ms) >= 3 * 30
    assert r.hget(q.keys.metrics_completed, "count") == "3"
    assert len(hist_keys(r, q)) in (1, 2)  # an hour may turn


def test_death_by_retry_and_by_stall_counts_dead(q: Queue, r: redis.Redis) -> None:
    a = q.enqueue("a", max_attempts=2)
    got = q.claim()
    assert got is not None
    assert q.retry(a, got.token, "boom", delay_ms=0) == "scheduled"  # a failed attempt
    assert sum(q.history("1h").dead) == 0
    q.promote()
    got = q.claim()
    assert got is not None and got.token == 2
    assert q.retry(a, got.token, "boom again") == "dead"
    b = q.enqueue("b")
    got = q.claim(lease_ms=1)
    assert got is not None and got.id == b
    time.sleep(0.01)
    assert q.check_stalled(max_stalled=0) == ([], [b])
    hist = q.history("1h")
    assert (sum(hist.completed), sum(hist.dead)) == (0, 2)
    assert r.hget(q.keys.metrics_failed, "count") == "2"
    # the run of the dead one: its last start (attempt 2) to its death
    assert sum(hist.run_ms) >= 0 and sum(hist.wait_ms) >= 0
    assert len(hist_keys(r, q)) in (1, 2)


def test_a_kept_row_waits_from_its_enqueued_at(q: Queue, r: redis.Redis) -> None:
    # a caller's own id that no clock minted (its time is 2024-01-01): a kept row's
    # enqueued_at is what its wait starts from
    q.set_retention(completed=10)
    job = q.enqueue("k", job_id="JOB00000000001")
    got = q.claim()
    assert got is not None
    row = r.hgetall(q.keys.job(job))
    assert int(row["started_at"]) - int(row["enqueued_at"]) < 5000
    q.complete(job, got.token)
    hist = q.history("1h")
    assert sum(hist.completed) == 1 and sum(hist.wait_ms) < 5000
    # an unkept one with such an id: its wait is capped at what the series keeps
    q.set_retention()
    other = q.enqueue("o", job_id="JOB00000000002")
    got = q.claim()
    assert got is not None and got.id == other
    q.complete(other, got.token)
    assert sum(q.history("1h").wait_ms) <= 5000 + HIST_KEEP_MS + HIST_WAIT_UNIT_MS


def test_a_refused_ending_changes_nothing(q: Queue, r: redis.Redis) -> None:
    job = q.enqueue("x")
    got = q.claim()
    assert got is not None
    q.complete(job, got.token)
    before = dump(r, q)
    with pytest.raises(JobGone):
        q.complete(job, got.token)
    assert dump(r, q) == before
    assert sum(q.history("1h").completed) == 1


def test_the_views_span_and_align_their_points(q: Queue, r: redis.Redis) -> None:
    job = q.enqueue("x")
    got = q.claim()
    assert got is not None
    q.complete(job, got.token)
    for span, step, points in (("1h", 1, 60), ("24h", 15, 96), ("7d", 60, 168)):
        h = q.history(span)
        assert (h.span, h.step) == (span, step)
        assert len(h.completed) == len(h.dead) == len(h.wait_ms) == len(h.run_ms) == points
        assert h.first_minute % step == 0
        assert h.first_minute + (points - 1) * step <= h.end_minute < h.first_minute + points * step
        assert sum(h.completed) == 1
    with pytest.raises(InvalidArgument):
        q.history("2d")
    # a read writes nothing
    before = dump(r, q)
    q.history("7d")
    q.throughput(60)
    assert dump(r, q) == before


def test_throughput_reads_the_series(q: Queue, r: redis.Redis) -> None:
    a, b = q.enqueue("a"), q.enqueue("b", max_attempts=1)
    for job in (a, b):
        got = q.claim()
        assert got is not None and got.id == job
        if job == a:
            q.complete(a, got.token)
        else:
            q.retry(b, got.token, "no")
    t = q.throughput(5)
    assert (t.completed.total, sum(t.completed.series)) == (1, 1)
    assert (t.failed.total, sum(t.failed.series)) == (1, 1)
    assert len(t.completed.series) == 5
    # the metrics hashes hold their totals only now
    assert set(r.hgetall(q.keys.metrics_completed)) == {"count"}


def test_obliterate_removes_every_hour_key(q: Queue, r: redis.Redis) -> None:
    job = q.enqueue("x")
    got = q.claim()
    assert got is not None
    q.complete(job, got.token)
    # an hour key from 3 days ago (as the scripts wrote it then) and the oldest that
    # can still exist
    hour = server_ms(r) // 3_600_000
    for h in (hour - 72, hour - HIST_KEEP_MS // 3_600_000 - 1):
        r.execute_command("BITFIELD", q.keys.hist(h), "SET", "u1", HIST_MARK, 1)
        r.pexpireat(q.keys.hist(h), (h + 1) * 3_600_000 + HIST_KEEP_MS)
    assert len(hist_keys(r, q)) >= 2
    q.pause()
    while not q.obliterate():  # True: the queue is gone
        pass
    assert queue_keys(r, q) == set()


def test_id_times_match_the_minted_ones(q: Queue, r: redis.Redis) -> None:
    # the scripts read a minted id's time as ids.minted_at_ms does: a job minted 3 s
    # ago and claimed at once waited 3 s
    job = ids.encode((server_ms(r) - 3000 - ids.EPOCH_MS) << (ids.NODE_BITS + ids.SEQ_BITS))
    assert abs(ids.minted_at_ms(job) - (server_ms(r) - 3000)) < 50
    q.enqueue("x", job_id=job)
    got = q.claim()
    assert got is not None
    q.complete(job, got.token)
    assert 2900 <= sum(q.history("1h").wait_ms) < 4000


def test_emq_stats_history_text_and_json(
    q: Queue, r: redis.Redis, server: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    from echomq.cli import app as cli_app

    def emq(*args: str) -> tuple[int, str]:
        capsys.readouterr()
        code = cli_app.main(["--url", server.url, *args])
        return code, capsys.readouterr().out

    a = q.enqueue("a")
    b = q.enqueue("b", max_attempts=1)
    for job in (a, b):
        got = q.claim()
        assert got is not None and got.id == job
        if job == a:
            time.sleep(0.02)
            q.complete(a, got.token)
        else:
            q.retry(b, got.token, "\x1b[31mred\u202e")  # job text: data
    before = dump(r, q)
    code, out = emq("stats", q.name, "--history")
    assert code == 0
    assert "history over 1h, a row per 1 min that saw jobs end" in out
    assert "1 completed, 1 dead over 1h; mean wait" in out
    assert "\x1b" not in out and "\u202e" not in out
    code, out = emq("--json", "stats", q.name, "--history", "7d")
    assert code == 0
    doc = json.loads(out)["history"]
    assert (doc["span"], doc["step_minutes"], len(doc["points"])) == ("7d", 60, 168)
    assert (doc["completed"], doc["dead"]) == (1, 1)
    point = next(p for p in doc["points"] if p["completed"] or p["dead"])
    assert point["at_ms"] % 3_600_000 == 0
    assert point["mean_run_ms"] is not None and point["mean_run_ms"] >= 10
    code, out = emq("--raw", "stats", q.name, "--history", "24h")
    assert code == 0 and "at (ms)" in out
    code, out = emq("--json", "stats", q.name, "--history", "2d")
    assert code == 2 and json.loads(out)["error"]
    # the reads wrote nothing
    assert dump(r, q) == before


def test_the_exporter_adds_up_closed_minutes_once(q: Queue, r: redis.Redis) -> None:
    pytest.importorskip("prometheus_client")
    from prometheus_client import CollectorRegistry, generate_latest

    from echomq.observability.prometheus import QueueCollector

    collector = QueueCollector(q.client, [q.name])
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    text = generate_latest(registry).decode()  # the first sight: counting starts now
    assert f'echomq_job_wait_seconds_count{{queue="{q.name}"}} 0.0' in text
    seen = collector.tally.get(q.name)
    assert seen is not None
    # five jobs ended three minutes ago (as the transitions write them), the tally
    # last counted ten minutes ago
    minute = server_ms(r) // 60000 - 3
    at = (minute % 60) * HIST_SLOT_BITS
    key = q.keys.hist(minute // 60)
    ops: list[Any] = ["OVERFLOW", "SAT"]
    for name, value in (("completed", 4), ("dead", 1), ("wait", 250), ("run_ms", 2000)):
        ops += ["INCRBY", HIST_TYPE[name], at + HIST_AT[name], value]
    r.execute_command("BITFIELD", key, *ops, "SET", "u1", HIST_MARK, 1)
    seen.minute -= 10
    before = dump(r, q)
    for _ in range(2):  # the second scrape counts nothing again
        text = generate_latest(registry).decode()
        assert f'echomq_job_wait_seconds_count{{queue="{q.name}"}} 5.0' in text
        assert f'echomq_job_wait_seconds_sum{{queue="{q.name}"}} 1.0' in text
        assert f'echomq_job_run_seconds_sum{{queue="{q.name}"}} 2.0' in text
    assert dump(r, q) == before  # a scrape writes nothing
