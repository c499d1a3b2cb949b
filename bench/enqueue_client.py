"""Enqueue one by one, as the client sees it: scripts, native and a raw ``LPUSH``.

One private server with echomq's module loaded; one sync ``Queue`` per executor
(``scripts``, ``native``) and a plain redis-py client for the raw row; ``--rounds``
rounds of ``--jobs`` enqueues each, the three kinds interleaved in every round so the
machine's drift hits them alike. Per kind: the best rate (jobs/s), the client's CPU per
call (this process, user + sys; lowest and median), and the call's wall time p50/p99
(lowest and median over the rounds). On a shared machine other work only ever adds,
so the lowest is the closest to the cost.

What it shows (``docs/performance.md``): the client path of a native enqueue is the
scripts' one, byte for byte but the command's name (``EMQ.ENQUEUE 1 base ...`` in
place of ``EVALSHA sha 1 base ...``), with the same reply (a count), on the same kept
connection; the server's share is smaller (``bench/server_cost.py --callgrind``).

Run: ``make -C native && .venv/bin/python bench/enqueue_client.py``.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from typing import Any

import redis

from _common import report
from echomq import Queue, native
from echomq.embedded import EmbeddedServer

KINDS = ("raw", "scripts", "native")


def one_round(call: Callable[[], Any], n: int) -> tuple[float, float, float, float]:
    """(jobs/s, client CPU us/call, p50 ms, p99 ms) of ``n`` calls."""
    lat = []
    c0, t0 = time.process_time(), time.perf_counter()
    for _ in range(n):
        a = time.perf_counter()
        call()
        lat.append(time.perf_counter() - a)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    lat.sort()
    return n / wall, cpu / n * 1e6, lat[n // 2] * 1e3, lat[int(n * 0.99)] * 1e3


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=2000, help="enqueues per round and kind")
    ap.add_argument("--rounds", type=int, default=7)
    args = ap.parse_args()
    if native.build(quiet=True) is None:
        raise SystemExit("the native module did not build (make -C native)")
    got: dict[str, list[tuple[float, float, float, float]]] = {k: [] for k in KINDS}
    with EmbeddedServer(module=True) as srv:
        raw = redis.Redis.from_url(srv.url)
        queues = {
            k: Queue(f"bench-enq-{k}-{time.time_ns()}", url=srv.url, executor=k) for k in KINDS[1:]
        }
        calls: dict[str, Callable[[], Any]] = {"raw": lambda: raw.lpush("bench-enq-raw", "{}")}
        for kind, q in queues.items():
            q.enqueue({})  # the fence and the executor's MODULE LIST, out of the figures
            assert q.ctx.executor.native is (kind == "native")
            calls[kind] = lambda q=q: q.enqueue({})  # type: ignore[misc]
        for _ in range(args.rounds):
            for kind in KINDS:
                got[kind].append(one_round(calls[kind], args.jobs))
        for q in queues.values():
            q.close()
        raw.close()
    head = ["kind", "best /s", "cpu us (min)", "cpu us (med)", "p50 ms (min)", "p99 ms (min)"]
    rows: list[list[Any]] = [[*head, "p99 ms (med)"]]
    for kind, runs in got.items():
        rate, cpu, p50, p99 = zip(*runs, strict=True)
        med_cpu, med_p99 = statistics.median(cpu), statistics.median(p99)
        rows.append([kind, max(rate), min(cpu), med_cpu, min(p50), min(p99), med_p99])
    report(rows)


if __name__ == "__main__":
    main()
