"""How long the console's reads hold the server, on a big queue.

Fills a private server (never ``EMQ_URL``: this writes a million jobs) with one queue
of ``--jobs`` jobs, half of them in ``--lanes`` lanes, plus dead and scheduled jobs,
then runs every view verb the console uses and reads ``SLOWLOG`` (threshold 0) for the
longest single server command each call sent. The law: no call holds the server over
10 ms by default.

    python bench/views.py                 # 1,000,000 jobs, 1,000 lanes
    python bench/views.py --jobs 100000   # quicker
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any

import redis

import _common  # noqa: F401  (puts src/ on the path)
from echomq import Queue
from echomq.embedded import EmbeddedServer
from echomq.schema import HIST_AT, HIST_MARK, HIST_SLOT_BITS, HIST_TYPE


def fill(q: Queue, jobs: int, lanes: int, chunk: int = 5000) -> None:
    flat = jobs // 2
    for start in range(0, flat, chunk):
        q.enqueue_many([{"n": i} for i in range(start, min(flat, start + chunk))], name="send")
    per_lane = (jobs - flat) // lanes
    for g in range(lanes):
        q.enqueue_many([{"g": g, "i": i} for i in range(per_lane)], name="digest", group=f"t{g}")
    for _ in range(0, 10_000, chunk):
        q.enqueue_many([{"later": i} for i in range(chunk)], delay_ms=3_600_000)


def fill_hour(r: redis.Redis, key: str) -> None:
    """Every minute of an hour key written, as lib/common.lua's count_metric does."""
    pipe = r.pipeline(transaction=False)
    for minute in range(60):
        at = minute * HIST_SLOT_BITS
        ops: list[Any] = ["OVERFLOW", "SAT"]
        for name, value in (("completed", 900), ("dead", 9), ("wait", 9000), ("run_ms", 90000)):
            ops += ["INCRBY", HIST_TYPE[name], at + HIST_AT[name], value]
        pipe.execute_command("BITFIELD", key, *ops, "SET", "u1", HIST_MARK, 1)
    pipe.execute()


def longest(r: redis.Redis, call: Callable[[], Any]) -> tuple[float, int]:
    """(the longest single command in µs, commands sent) while ``call`` runs."""
    r.slowlog_reset()
    call()
    entries = [e for e in r.slowlog_get(100_000) if e["command"] not in (b"SLOWLOG RESET",)]
    entries = [e for e in entries if not str(e["command"]).startswith("b'SLOWLOG")]
    return max((e["duration"] for e in entries), default=0), len(entries)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--jobs", type=int, default=1_000_000)
    ap.add_argument("--lanes", type=int, default=1000)
    args = ap.parse_args()
    with EmbeddedServer() as srv:
        q = Queue("big", url=srv.url)
        r = redis.Redis.from_url(srv.url)
        started = time.monotonic()
        fill(q, args.jobs, args.lanes)
        # a few dead jobs (claimed from the flat head, retried into dead)
        for got in q.claim_many(200):
            q.retry(got.id, got.token, "HTTPError: 404 Not Found [/v1/charges]", max_attempts=1)
        print(f"filled {q.counts()} in {time.monotonic() - started:.0f} s, {args.lanes} lanes")
        # the history series: 7 days of full hour keys (every minute written), as the
        # transitions leave them on a queue busy all week
        hour = int(r.time()[0]) // 3600
        for h in range(hour - 168, hour + 1):
            fill_hour(r, q.keys.hist(h))
        some = q.job_page("pending", 1).jobs[0].id
        r.config_set("slowlog-log-slower-than", 0)
        r.config_set("slowlog-max-len", 100_000)
        deep = q.job_page("pending", 1).total - 50
        calls: list[tuple[str, Callable[[], Any]]] = [
            ("job_page pending (flat, first page)", lambda: q.job_page("pending", 20)),
            ("job_page pending (flat, deep offset)", lambda: q.job_page("pending", 20, deep)),
            ("job_page pending (one lane)", lambda: q.job_page("pending", 20, 0, "t500")),
            ("job_page scheduled", lambda: q.job_page("scheduled", 200)),
            ("job_page dead", lambda: q.job_page("dead", 200)),
            (
                "find_jobs pending, payload, default budget 1000",
                lambda: q.find_jobs("pending", "nothing-matches", fields=["payload"]),
            ),
            (
                "find_jobs pending, all fields, budget 5000 (max)",
                lambda: q.find_jobs("pending", "nothing-matches", budget=5000),
            ),
            ("find_jobs dead, error", lambda: q.find_jobs("dead", "/v1/charges", fields=["error"])),
            ("job_view", lambda: q.job_view(some)),
            ("groups_page (50)", lambda: q.groups_page("0", 50)),
            ("groups_page (100, max)", lambda: q.groups_page("0", 100)),
            ("throughput 60 min", lambda: q.throughput(60)),
            ("throughput 1440 min (max)", lambda: q.throughput(1440)),
            ("history 1h", lambda: q.history("1h")),
            ("history 24h", lambda: q.history("24h")),
            ("history 7d (168 hour keys)", lambda: q.history("7d")),
            ("queue_exists", q.queue_exists),
            ("server_time", q.server_time),
            ("counts", q.counts),
            ("groups() (lanes.groups: every page, many calls)", q.groups),
        ]
        print(f"{'call':52} {'longest command':>16} {'commands':>9}")
        for label, call in calls:
            worst, n = max(longest(r, call) for _ in range(3))
            print(f"{label:52} {worst / 1000:13.3f} ms {n:9}")
        q.close()


if __name__ == "__main__":
    main()
