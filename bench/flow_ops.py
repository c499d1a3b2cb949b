"""The flows' operator plane on big flows: the server time of each script call (SLOWLOG,
threshold 0) and the client's time per verb.

Writes one parent with ``--children`` children (one queue), ``--parents`` parents of
``--deps`` children each (the sweep's work: their rows deleted by hand, so every
dependency is "missing"), then measures ``flow`` (default limit 500, and 10,000),
``flow_impact`` (budget 1,000 and 10,000), ``sweep_flows`` (defaults: 50 parents, 1,000
dependencies) and ``cancel_flow`` of the big parent (calls of 500 nodes). The law is
that every call is bounded by its budget, not by the flow or the queue: the largest
server time per script call is the figure to read.

    python bench/flow_ops.py
    python bench/flow_ops.py --children 10000 --parents 50 --deps 200
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any

import redis

from _common import bench_server, report
from echomq import Flow, Queue


def measured(r: redis.Redis, fn: Callable[[], Any]) -> tuple[Any, float, int, int]:
    """``fn()``'s result, its wall time (ms), its script calls and their max server us."""
    r.slowlog_reset()
    t0 = time.perf_counter()
    got = fn()
    wall = (time.perf_counter() - t0) * 1e3
    entries = r.slowlog_get(100_000)
    us = [e["duration"] for e in entries if str(e["command"]).upper().startswith("B'EVALSHA")]
    return got, wall, len(us), max(us, default=0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--children", type=int, default=10_000)
    ap.add_argument("--parents", type=int, default=50)
    ap.add_argument("--deps", type=int, default=200)
    args = ap.parse_args()
    with bench_server() as url:
        q = Queue(f"bench-flowops-{time.time_ns()}", url=url)
        r = redis.Redis.from_url(url, decode_responses=True)
        big = q.enqueue_flow(
            Flow(payload=0, children=[Flow(payload=i) for i in range(args.children)])
        )
        for p in range(args.parents):
            ids = q.enqueue_flow(
                Flow(payload=p, children=[Flow(payload=i) for i in range(args.deps)])
            )
            for c in ids.children:  # lost without an ending: the sweep's work
                r.delete(q.keys.job(c.id))
                r.zrem(q.keys.pending, c.id)
        old = r.config_get("slowlog-*")
        r.config_set("slowlog-log-slower-than", 0)
        r.config_set("slowlog-max-len", 100_000)
        rows: list[tuple[object, ...]] = [
            ("verb", "jobs in queue", "client ms", "script calls", "max server us per call")
        ]
        jobs = q.counts().pending + q.counts().waiting_children
        got, wall, n, mx = measured(r, lambda: q.flow(big.id))
        rows.append((f"flow (limit 500): {got.nodes} nodes", jobs, wall, n, mx))
        got, wall, n, mx = measured(r, lambda: q.flow(big.id, limit=10_000))
        rows.append((f"flow (limit 10000): {got.nodes} nodes", jobs, wall, n, mx))
        for budget in (1000, 2000):
            got, wall, n, mx = measured(r, lambda b=budget: q.flow_impact(budget=b))  # type: ignore[misc]
            rows.append((f"flow_impact (budget {budget})", jobs, wall, n, mx))
        got, wall, n, mx = measured(r, lambda: q.sweep_flows(grace_ms=0))
        rows.append(
            (f"sweep_flows: {got.parents} parents, {got.resolved} resolved", jobs, wall, n, mx)
        )
        got, wall, n, mx = measured(r, lambda: q.cancel_flow(big.id))
        rows.append((f"cancel_flow: {got.removed} removed", jobs, wall, n, mx))
        r.config_set("slowlog-log-slower-than", old["slowlog-log-slower-than"])
        r.config_set("slowlog-max-len", old["slowlog-max-len"])
        q.pause()
        while not q.obliterate(force=True, budget=10_000):
            pass
    report(rows)


if __name__ == "__main__":
    main()
