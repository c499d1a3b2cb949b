"""rerun_job on a big queue: the server time of each call (SLOWLOG, threshold 0).

Fills ``--lanes`` lanes with ``--per-lane`` pending jobs each, kills ``--reruns`` grouped
jobs (one per lane, round robin), then reruns each dead job once and reports the
client's time per call and the server's time per script call (p50, p99, max). The law
is that no call holds the server over 10 ms on a queue of 1M jobs and 1,000 lanes: a
rerun writes one row and adds one member to a lane and the lanes' index (O(log n)).

    python bench/rerun.py
    python bench/rerun.py --lanes 1000 --per-lane 1000 --reruns 2000
"""

from __future__ import annotations

import argparse
import time

import redis

from _common import bench_server, report
from echomq import Queue


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lanes", type=int, default=1000)
    ap.add_argument("--per-lane", type=int, default=200)
    ap.add_argument("--reruns", type=int, default=1000)
    args = ap.parse_args()
    with bench_server() as url:
        q = Queue(f"bench-rerun-{time.time_ns()}", url=url)
        r = redis.Redis.from_url(url, decode_responses=True)
        for g in range(args.lanes):
            q.enqueue_many([{"i": i} for i in range(args.per_lane)], group=f"g{g}")
        dead = [
            q.enqueue({"d": i}, group=f"g{i % args.lanes}", max_attempts=1, priority=-(2**20))
            for i in range(args.reruns)
        ]
        for _ in dead:
            got = q.claim()
            assert got is not None
            q.retry(got.id, got.token, "boom")
        old = r.config_get("slowlog-*")
        r.config_set("slowlog-log-slower-than", 0)
        r.config_set("slowlog-max-len", 4 * args.reruns + 100)
        r.slowlog_reset()
        t0 = time.perf_counter()
        for jid in dead:
            q.rerun_job(jid)
        wall = time.perf_counter() - t0
        entries = r.slowlog_get(4 * args.reruns + 100)
        r.config_set("slowlog-log-slower-than", old["slowlog-log-slower-than"])
        r.config_set("slowlog-max-len", old["slowlog-max-len"])
        us = sorted(
            e["duration"] for e in entries if str(e["command"]).upper().startswith("B'EVALSHA")
        )
        pending = r.zcard(q.keys.gindex)
        q.pause()
        while not q.obliterate(force=True, budget=10_000):
            pass
    report(
        [
            ("pending", "lanes", "reruns", "client ms/call", "server p50 us", "p99 us", "max us"),
            (
                pending,
                args.lanes,
                len(dead),
                wall / len(dead) * 1e3,
                us[len(us) // 2],
                us[int(len(us) * 0.99)],
                us[-1],
            ),
        ]
    )


if __name__ == "__main__":
    main()
