"""What the worker registry and the cancel read add to a worker's beat, in server time.

A beat sends, in one round trip, the lease extensions of the jobs in hand
(``extend_lock``) and the registry write with the cancel read (``worker_beat``). This
fills a private server with ``--jobs`` claimed jobs, runs each script ``--rounds`` times
over all of them, and reads ``SLOWLOG`` (threshold 0) for each call's server time.

    python bench/worker_beat.py               # 50 jobs in hand (the default claim batch)
    python bench/worker_beat.py --jobs 1000
"""

from __future__ import annotations

import argparse
import statistics
from collections.abc import Callable
from typing import Any

import redis

from echomq import Queue, lifecycle, registry
from echomq.embedded import EmbeddedServer
from echomq.scripts import Batch, Eval, Plan


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=50)
    ap.add_argument("--rounds", type=int, default=200)
    args = ap.parse_args()
    with EmbeddedServer() as server:
        r = redis.Redis.from_url(server.url, decode_responses=True)
        q = Queue("beat", url=server.url, executor="scripts")
        q.enqueue_many(list(range(args.jobs)))
        got = q.claim_many(args.jobs, lease_ms=600_000)
        pairs = [(c.id, c.token) for c in got]
        fields = registry.record_fields(
            {"host": "h", "pid": 1, "queues": ["beat"], "concurrency": args.jobs,
             "jobs": len(pairs), "job_ids": [j for j, _ in pairs[: registry.JOB_IDS_SHOWN]],
             "interval_ms": 1000, "version": "x", "claimed": len(pairs), "completed": 0,
             "failed": 0, "cancelled": 0}
        )  # fmt: skip

        def drive(make: Callable[[], Eval]) -> None:
            def plan() -> Plan[Any]:
                return (yield Batch((make(),)))

            q.runner.drive(plan())

        cases: list[tuple[str, Callable[[], Eval]]] = [
            ("extend_lock", lambda: lifecycle.extend_op(q.ctx, pairs, 600_000, 0)),
            (
                "worker_beat",
                lambda: registry.beat_op(q.ctx, "00ff00ff00ff00ff", 5000, fields, pairs),
            ),
        ]
        print(f"{len(pairs)} jobs in hand, {args.rounds} rounds")
        for label, make in cases:
            r.config_set("slowlog-log-slower-than", 0)
            r.slowlog_reset()
            for _ in range(args.rounds):
                drive(make)
            us = [
                e["duration"]
                for e in r.slowlog_get(args.rounds * 4)
                if str(e["command"]).upper().startswith(("EVALSHA", "B'EVALSHA"))
            ]
            print(f"{label:12} median {statistics.median(us):7.1f} us   max {max(us):5d} us")
        q.close()


if __name__ == "__main__":
    main()
