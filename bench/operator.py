"""Benchmark the operator plane's bounded verbs on a big queue.

- ``obliterate`` of a queue holding ``--jobs`` jobs (default 1,000,000: 90% flat
  pending, 10% spread over 10 lanes, 1% of them with 3 log lines), once per budget
  (default 100, 1000, 10000; the queue is refilled for each): the longest single call
  (server time from the latency monitor: the time the server is blocked; the mean from
  ``INFO commandstats``; and the client's round trip) and the total time until the queue is gone.
- ``drain`` of ``--drain-jobs`` jobs (default 100,000, same mix) with its default
  budget (10,000 per call): longest call and total.

The queue is filled through ``enqueue_many`` (the real enqueue script, pipelined) and
log lines through a pipeline of ``RPUSH``; filling is timed separately.

Usage::

    python bench/operator.py                    # the full run (about a minute)
    python bench/operator.py --jobs 100000      # smaller
    EMQ_URL=redis://host:port/0 python bench/operator.py   # against another server
"""

from __future__ import annotations

import sys

# This file shares its name with the stdlib's ``operator``: run as a script, its own
# directory comes first on sys.path and would shadow it for every later import. Move
# the directory to the end, where ``_common`` is still found.
if __name__ == "__main__" and sys.path and sys.path[0].rstrip("/").endswith("bench"):
    sys.path.append(sys.path.pop(0))

import argparse
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import redis

from _common import bench_server, median, report
from echomq import Queue, admin
from echomq.scripts import Plan, all_scripts
from echomq.transport import SyncRunner

FILL_CHUNK = 20_000
GROUPS = 10
LOG_LINES = 3


def fill(q: Queue, r: redis.Redis, n: int, *, grouped_share: float, log_share: float) -> float:
    """Enqueue ``n`` jobs (a share of them into lanes) and logs on a share; seconds taken."""
    t0 = time.perf_counter()
    grouped = int(n * grouped_share)
    made = 0
    ids: list[str] = []
    while made < n:
        k = min(FILL_CHUNK, n - made)
        if made < grouped:
            k = min(k, grouped - made)
            group: str | None = f"g{(made // FILL_CHUNK) % GROUPS}"
        else:
            group = None
        ids = q.enqueue_many(({"i": made + i, "pad": "x" * 32} for i in range(k)), group=group)
        every = int(1 / log_share) if log_share > 0 else 0
        if every:
            pipe = r.pipeline(transaction=False)
            for jid in ids[::every]:
                pipe.rpush(q.keys.logs(jid), *(f"log line {j} of {jid}" for j in range(LOG_LINES)))
            pipe.execute()
        made += k
    return time.perf_counter() - t0


def percentile(xs: list[float], p: float) -> float:
    """The ``p`` quantile of ``xs`` (nearest rank): a high one that one stall does not set."""
    ordered = sorted(xs)
    return ordered[min(len(ordered) - 1, int(p * len(ordered)))]


def drive_timed(runner: SyncRunner, plan: Plan[Any]) -> tuple[Any, list[float]]:
    """Run a plan step by step; returns its result and each server call's round trip (s)."""
    times: list[float] = []
    op = next(plan)
    try:
        while True:
            t0 = time.perf_counter()
            reply = runner.execute(op)
            times.append(time.perf_counter() - t0)
            op = plan.send(reply)
    except StopIteration as stop:
        return stop.value, times


@contextmanager
def server_clock(r: redis.Redis) -> Iterator[Callable[[], tuple[float, float]]]:
    """Measure the server's own time per script call, from inside the server.

    The latency monitor (threshold 1 ms) keeps the longest command, a script call with
    everything it does (1 ms resolution); ``INFO commandstats`` gives the mean per
    ``EVALSHA``. Both are reset first (this resets the server's command statistics),
    and the threshold is restored afterwards.

    Yields:
        ``stats()`` -> ``(longest call ms, mean call ms)`` since the block began.
    """
    old = r.config_get("latency-monitor-threshold")["latency-monitor-threshold"]
    r.config_set("latency-monitor-threshold", 1)
    r.execute_command("LATENCY", "RESET")
    r.config_resetstat()

    def stats() -> tuple[float, float]:
        events = r.execute_command("LATENCY", "LATEST") or []
        longest = max(
            (float(e[3]) for e in events if _text(e[0]) in ("command", "fast-command")),
            default=0.0,
        )
        evalsha = r.info("commandstats").get("cmdstat_evalsha", {})
        return longest, float(evalsha.get("usec_per_call", 0.0)) / 1000

    try:
        yield stats
    finally:
        r.config_set("latency-monitor-threshold", old)


def at_least_1ms(ms: float) -> float | str:
    """The latency monitor keeps only events of 1 ms or more: 0 means "under 1 ms"."""
    return ms if ms > 0 else "<1"


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def used_mb(r: redis.Redis) -> float:
    """The server's used memory in MiB."""
    return float(r.info("memory")["used_memory"]) / 2**20


def bench_obliterate(url: str, jobs: int, budgets: list[int], args: argparse.Namespace) -> None:
    r = redis.Redis.from_url(url)
    rows: list[list[object]] = [
        [
            "budget",
            "jobs",
            "calls",
            "max call server ms",
            "mean call server ms",
            "max call client ms",
            "median call client ms",
            "p99 call client ms",
            "total s",
            "fill s",
            "memory MiB",
        ]
    ]
    for budget in budgets:
        with Queue(f"bench-obliterate-{budget}", url=url) as q:
            fill_s = fill(q, r, jobs, grouped_share=args.grouped_share, log_share=args.log_share)
            mem = used_mb(r)
            q.pause()
            with server_clock(r) as server:
                calls: list[float] = []
                t0 = time.perf_counter()
                while True:
                    gone, times = drive_timed(q.runner, admin.obliterate(q.ctx, True, budget))
                    calls += times
                    if gone:
                        break
                total = time.perf_counter() - t0
                server_max, server_mean = server()
            left = sum(1 for _ in r.scan_iter(match=q.keys.pattern(), count=10_000))
            assert left == 0, f"{left} keys left after obliterate"
            rows.append(
                [
                    budget,
                    jobs,
                    len(calls),
                    at_least_1ms(server_max),
                    server_mean,
                    max(calls) * 1000,
                    median(calls) * 1000,
                    percentile(calls, 0.99) * 1000,
                    total,
                    fill_s,
                    mem,
                ]
            )
            print(f"obliterate budget={budget}: {len(calls)} calls, {total:.2f} s", flush=True)
    print()
    print(f"obliterate of a queue holding {jobs:,} jobs")
    report(rows)
    r.close()


def bench_drain(url: str, jobs: int, args: argparse.Namespace) -> None:
    r = redis.Redis.from_url(url)
    with Queue("bench-drain", url=url) as q:
        fill_s = fill(q, r, jobs, grouped_share=args.grouped_share, log_share=args.log_share)
        with server_clock(r) as server:
            t0 = time.perf_counter()
            drained, times = drive_timed(q.runner, admin.drain(q.ctx))
            total = time.perf_counter() - t0
            server_max, server_mean = server()
        assert drained == jobs, (drained, jobs)
        print()
        print(f"drain of {jobs:,} jobs (budget {admin.DEFAULT_DRAIN_BUDGET:,} per call)")
        report(
            [
                [
                    "jobs",
                    "calls",
                    "max call server ms",
                    "mean call server ms",
                    "max call client ms",
                    "total s",
                    "fill s",
                ],
                [
                    jobs,
                    len(times),
                    at_least_1ms(server_max),
                    server_mean,
                    max(times) * 1000,
                    total,
                    fill_s,
                ],
            ]
        )
    r.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=1_000_000, help="jobs to obliterate")
    parser.add_argument("--drain-jobs", type=int, default=100_000, help="jobs to drain")
    parser.add_argument("--budgets", default="100,1000,10000", help="obliterate budgets")
    parser.add_argument("--grouped-share", type=float, default=0.1, help="share in lanes")
    parser.add_argument("--log-share", type=float, default=0.01, help="share with logs")
    args = parser.parse_args()
    budgets = [int(b) for b in args.budgets.split(",") if b]
    with bench_server() as url:
        # load every script up front, so no NOSCRIPT round lands inside a measurement
        with redis.Redis.from_url(url) as r:
            for s in all_scripts():
                r.script_load(s.body)
        t0 = time.perf_counter()
        bench_obliterate(url, args.jobs, budgets, args)
        bench_drain(url, args.drain_jobs, args)
        print(f"\nwhole run: {time.perf_counter() - t0:.1f} s")


if __name__ == "__main__":
    main()
