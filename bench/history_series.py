"""What the history series costs in memory: bytes per queue-hour, measured on a server.

The history series (issue 29, ``echomq.reads.series``) keeps one string per queue-hour,
``emq:{q}:hist:<hour>``, of 60 minute slots (completed, dead, wait and run sums), with a
marker bit past the last slot that sizes the key at its full length on its first write.
This measures, on a private server (``EMQ_URL`` for another):

- ``live key``: ``MEMORY USAGE`` of the hour key after real jobs ran through enqueue,
  claim and complete (and a few went dead) on queue ``orders``;
- ``full hour``: ``MEMORY USAGE`` of an hour key whose 60 minutes were all written
  (synthetic load: each minute's slot incremented as the transitions do, ``--per-minute``
  completions a minute, one in 50 dead), through the same ``BITFIELD`` the scripts send;
- ``with expiry``: the server's ``used_memory`` growth per key over ``--keys`` such full
  hour keys with their expiry, named as long as ``orders``' (what ``MEMORY USAGE``
  leaves out: the expires table's entry and both tables' slots);
- ``old buckets``: what the per-minute buckets of ``metrics:completed`` and
  ``metrics:failed`` (the record this replaces: a field per minute for a day in each
  hash) cost per queue-hour, a day of them written and divided by 24;
- ``7 days``: a queue's whole series (168 hour keys);
- ``busiest lanes``: ``MEMORY USAGE`` of the hour key after ``--lane-jobs`` real grouped
  jobs over ``--lanes`` lanes completed (one in 50 dead; lane ids like ``tenant-0042``,
  then ids of the longest form, 128 bytes): the lanes' table (issue 29 item 5) is inside
  the hour key, so this is the whole history of the queue-hour; and the queue's
  ``lanenames`` (every lane that took a slot, per queue, not per hour).

Run: ``.venv/bin/python bench/history_series.py``. Deterministic (no timing).
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import redis

from _common import bench_server, report
from echomq import Queue
from echomq.schema import (
    HIST_AT,
    HIST_BYTES,
    HIST_KEEP_MS,
    HIST_LANE_BITS,
    HIST_LANE_HASH_AT,
    HIST_LANES,
    HIST_MARK,
    HIST_SLOT_BITS,
    HIST_TYPE,
    HIST_WAIT_UNIT_MS,
)


def hist_write(
    r: Any, key: str, minute: int, completed: int, dead: int, wait: int, run: int
) -> None:
    """One minute's counts, as lib/common.lua's count_metric writes them (both columns)."""
    at = minute * HIST_SLOT_BITS
    ops: list[Any] = ["OVERFLOW", "SAT"]
    values = {
        "completed": completed,
        "dead": dead,
        "wait": wait // HIST_WAIT_UNIT_MS,
        "run_ms": run,
    }
    for name, value in values.items():
        ops += ["INCRBY", HIST_TYPE[name], at + HIST_AT[name], value]
    r.execute_command("BITFIELD", key, *ops, "SET", "u1", HIST_MARK, 1)


def full_hour(r: Any, key: str, per_minute: int) -> None:
    for minute in range(60):
        dead = per_minute // 50
        hist_write(r, key, minute, per_minute - dead, dead, per_minute * 1500, per_minute * 220)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=500, help="real jobs run on queue orders")
    ap.add_argument("--per-minute", type=int, default=10_000, help="synthetic jobs a minute")
    ap.add_argument("--keys", type=int, default=2000, help="full hour keys for used_memory")
    ap.add_argument("--lanes", type=int, default=1000, help="busy lanes")
    ap.add_argument("--lane-jobs", type=int, default=3000, help="grouped jobs over the lanes")
    args = ap.parse_args()
    with bench_server() as url:
        r: Any = redis.Redis.from_url(url)
        rows: list[list[Any]] = [["what", "bytes", "per queue-hour"]]
        with Queue("orders", url=url) as q:
            for i in range(args.jobs):
                q.enqueue({"n": i}, max_attempts=1)
            for i in range(args.jobs):
                job = q.claim()
                assert job is not None
                if i % 50 == 0:
                    q.retry(job.id, job.token, "boom")
                else:
                    q.complete(job.id, job.token)
            hour = int(r.time()[0]) // 3600
            live = q.keys.hist(hour)
            size = int(r.memory_usage(live, samples=0))
            strlen = int(r.strlen(live))
            rows.append([f"live key {live} ({strlen} bytes of data)", size, size])
            hist = q.history("1h")
            assert sum(hist.completed) + sum(hist.dead) == args.jobs, hist
            synth = q.keys.hist(hour - 2)
            full_hour(r, synth, args.per_minute)
            full = int(r.memory_usage(synth, samples=0))
            rows.append([f"full hour ({args.per_minute:,} jobs a minute)", full, full])
            assert int(r.strlen(synth)) == HIST_BYTES
            r.delete(synth)
        # used_memory per full key with its expiry, over many keys
        # names as long as the live key's (a queue named like "orders")
        names = [f"emq:{{o{i:05d}}}:hist:{hour}" for i in range(args.keys)]
        until = (hour + 1) * 3_600_000 + HIST_KEEP_MS
        before = int(r.info("memory")["used_memory"])
        pipe = r.pipeline(transaction=False)
        for name in names:
            pipe.execute_command("BITFIELD", name, "SET", "u1", HIST_MARK, 1)
            pipe.execute_command("PEXPIREAT", name, until)
        pipe.execute()
        for name in names:
            full_hour(pipe, name, args.per_minute)
        pipe.execute()
        grown = (int(r.info("memory")["used_memory"]) - before) / args.keys
        rows.append(["with expiry (used_memory per key)", round(grown), round(grown)])
        for i in range(0, len(names), 500):
            r.delete(*names[i : i + 500])
        # the old record: a day of per-minute buckets in both metrics hashes
        old = ["emq:{bench-old}:metrics:completed", "emq:{bench-old}:metrics:failed"]
        minute0 = int(time.time()) // 60
        for m in range(minute0 - 1439, minute0 + 1):
            pipe.hincrby(old[0], "count", args.per_minute)
            pipe.hincrby(old[0], str(m), args.per_minute)
            pipe.hincrby(old[1], "count", 1)
            pipe.hincrby(old[1], str(m), 1)
        pipe.execute()
        day = sum(int(r.memory_usage(k, samples=0)) for k in old)
        rows.append(["old buckets: a day of both metrics hashes", day, round(day / 24)])
        r.delete(*old)
        rows.append(["7 days of the series (168 hour keys)", 168 * full, full])
        # the busiest lanes: real grouped jobs over many lanes, then the hour key (series
        # and lanes' table in one), and the queue's names of the lanes
        for label, width in (("tenant-0042", 0), ("128-byte ids", 1)):
            with Queue(f"lanes{width}", url=url) as q:

                def lane(i: int, width: int = width) -> str:
                    name = f"tenant-{i % args.lanes:04d}"
                    return name.ljust(128, "x") if width else name

                for start in range(0, args.lane_jobs, 500):
                    n = min(500, args.lane_jobs - start)
                    for i in range(start, start + n):
                        q.enqueue({"n": i}, group=lane(i), max_attempts=1)
                    got = q.claim_many(n, lock_ms=60_000)
                    for k, job in enumerate(got):
                        if (start + k) % 50 == 0:
                            q.retry(job.id, job.token, "boom")
                        else:
                            q.complete(job.id, job.token)
                hour = int(r.time()[0]) // 3600
                key = q.keys.hist(hour)
                size = int(r.memory_usage(key, samples=0))
                assert int(r.strlen(key)) == HIST_BYTES
                rows.append(
                    [f"hour key with lanes {key} ({args.lanes:,} lanes, {label})", size, size]
                )
                names = int(r.memory_usage(q.keys.lanenames, samples=0))
                rows.append(
                    [
                        f"  lanenames ({r.zcard(q.keys.lanenames):,} names, per queue)",
                        names,
                        "",
                    ]
                )
                q.pause()
                while not q.obliterate(budget=5000):
                    pass
        report(rows)
        print(
            f"\nlayout: {HIST_SLOT_BITS} bits a minute x 60, {HIST_LANES} lane hashes x 32"
            f" bits from bit {HIST_LANE_HASH_AT}, {HIST_LANES} lanes x {HIST_LANE_BITS} bits"
            f" of sums, a marker bit = {HIST_BYTES} bytes"
            f" of data; server {r.info('server')['redis_version']}"
        )


if __name__ == "__main__":
    main()
