"""The flows' operator plane on big flows: the server time of each script call (SLOWLOG,
threshold 0) and the client's time per verb; or, with ``--callgrind``, the server's
instructions.

Writes one parent with ``--children`` children (one queue), ``--parents`` parents of
``--deps`` children each (the sweep's work: their rows deleted by hand, so every
dependency is "missing"), then measures ``flow`` (default limit 500, and 10,000),
``flow_impact`` (budget 1,000 and 2,000), ``sweep_flows`` (defaults: 50 parents, 1,000
dependencies) and ``cancel_flow`` of the big parent (calls of 50 nodes). The law is
that every call is bounded by its budget, not by the flow or the queue: the largest
server time per script call is the figure to read. On a busy machine read the
instructions instead (``--callgrind``: each verb's, all its calls, and per call on
average), which no neighbour disturbs.

    python bench/flow_ops.py
    python bench/flow_ops.py --children 10000 --parents 50 --deps 200
    python bench/flow_ops.py --callgrind
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any

import redis

from _common import Callgrind, bench_server, report
from echomq import Flow, Queue


class Meter:
    """Measures one verb: its wall time, its script calls and their largest server time
    (SLOWLOG), or under callgrind the instructions of all of them."""

    def __init__(self, r: redis.Redis, cg: Callgrind | None) -> None:
        self.r, self.cg = r, cg

    def __call__(self, fn: Callable[[], Any]) -> tuple[Any, float, int, int]:
        self.r.slowlog_reset()
        if self.cg is not None:
            self.cg.take()
        t0 = time.perf_counter()
        got = fn()
        wall = (time.perf_counter() - t0) * 1e3
        ir = self.cg.take() if self.cg is not None else 0
        entries = self.r.slowlog_get(100_000)
        us = [e["duration"] for e in entries if str(e["command"]).upper().startswith("B'EVALSHA")]
        return got, wall, len(us), ir if self.cg is not None else max(us, default=0)


def run(args: argparse.Namespace, url: str, cg: Callgrind | None) -> None:
    """Write the flows, measure each verb, print the table."""
    # under valgrind a 10,000-children write takes seconds: a patient client
    r = redis.Redis.from_url(url, decode_responses=True, socket_timeout=600)
    q = Queue(f"bench-flowops-{time.time_ns()}", client=r)
    kids = [Flow(payload=i) for i in range(args.children)]
    big = q.enqueue_flow(Flow(payload=0, children=kids))
    for p in range(args.parents):
        ids = q.enqueue_flow(Flow(payload=p, children=[Flow(payload=i) for i in range(args.deps)]))
        for c in ids.children:  # lost without an ending: the sweep's work
            r.delete(q.keys.job(c.id))
            r.zrem(q.keys.pending, c.id)
    old = r.config_get("slowlog-*")
    r.config_set("slowlog-log-slower-than", 0)
    r.config_set("slowlog-max-len", 100_000)
    last = "server Ir (all calls)" if cg else "max server us per call"
    rows: list[tuple[object, ...]] = [("verb", "jobs", "client ms", "script calls", last)]
    jobs = q.counts().pending + q.counts().waiting_children
    m = Meter(r, cg)
    got, wall, n, x = m(lambda: q.flow(big.id))
    rows.append((f"flow (limit 500): {got.nodes} nodes", jobs, wall, n, x))
    got, wall, n, x = m(lambda: q.flow(big.id, limit=10_000))
    rows.append((f"flow (limit 10000): {got.nodes} nodes", jobs, wall, n, x))
    for budget in (1000, 2000):
        got, wall, n, x = m(lambda b=budget: q.flow_impact(budget=b))  # type: ignore[misc]
        rows.append((f"flow_impact (budget {budget})", jobs, wall, n, x))
    got, wall, n, x = m(lambda: q.sweep_flows(grace_ms=0))
    rows.append((f"sweep_flows: {got.parents} parents, {got.resolved} resolved", jobs, wall, n, x))
    got, wall, n, x = m(lambda: q.cancel_flow(big.id))
    rows.append((f"cancel_flow: {got.removed} removed", jobs, wall, n, x))
    r.config_set("slowlog-log-slower-than", old["slowlog-log-slower-than"])
    r.config_set("slowlog-max-len", old["slowlog-max-len"])
    q.pause()
    while not q.obliterate(force=True, budget=10_000):
        pass
    if cg is not None:  # and per script call, on average
        rows[0] = (*rows[0], "Ir per call")
        rows[1:] = [(*row, int(str(row[4])) // max(1, int(str(row[3])))) for row in rows[1:]]
    report(rows)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--children", type=int, default=10_000)
    ap.add_argument("--parents", type=int, default=50)
    ap.add_argument("--deps", type=int, default=200)
    ap.add_argument("--callgrind", action="store_true", help="count server instructions")
    args = ap.parse_args()
    if args.callgrind:
        with Callgrind(module=False) as cg:
            run(args, cg.url, cg)
    else:
        with bench_server() as url:
            run(args, url, None)


if __name__ == "__main__":
    main()
