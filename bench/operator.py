"""Benchmark the operator plane's bounded verbs on a big queue.

- ``obliterate`` of a queue holding ``--jobs`` jobs (default 1,000,000: 90% flat
  pending, 10% spread over 10 lanes, 1% of them with 3 log lines), once per budget
  (default 100, 1000, 10000; the queue is refilled for each): the longest single call
  (server time from the latency monitor: the time the server is blocked; the mean from
  ``INFO commandstats``; and the client's round trip) and the total time until the queue is gone.
- ``drain`` of ``--drain-jobs`` jobs (default 100,000, same mix) with its default
  budget: longest call and total.
- ``retry``: ``reprocess_jobs(error=...)`` over ``--retry-jobs`` dead jobs (default
  100,000, half of them matching), a dry run then the run: total time and the longest
  single server call (SLOWLOG, microseconds).
- ``verbs``: a queue of ``--verb-jobs`` jobs (default 1,000,000: half flat, half over
  ``--lanes`` lanes, default 1,000) plus 10,000 dead and 10,000 scheduled; the longest
  single server call (SLOWLOG) of every read and operator verb, run by its defaults
  (``--only verbs`` runs just this part).

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
from echomq.ids import new_ids
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


@contextmanager
def slowlog(r: redis.Redis) -> Iterator[Callable[[], tuple[float, int]]]:
    """The longest single server call (SLOWLOG, microsecond resolution) since the block began.

    Every call of 0.2 ms or more is logged (the log is made long enough for a run), the
    log is reset first, and both settings are restored afterwards.

    Yields:
        ``longest()`` -> ``(the longest call in ms (0.0 when none reached 0.2 ms), how
        many calls took over 10 ms)``.
    """
    cfg = r.config_get("slowlog-*")
    r.config_set("slowlog-log-slower-than", 200)
    r.config_set("slowlog-max-len", 100_000)
    r.slowlog_reset()

    def longest() -> tuple[float, int]:
        entries = r.slowlog_get(100_000)
        us = [float(e["duration"]) for e in entries]
        return max(us, default=0.0) / 1000, sum(1 for d in us if d > 10_000)

    try:
        yield longest
    finally:
        r.config_set("slowlog-log-slower-than", cfg["slowlog-log-slower-than"])
        r.config_set("slowlog-max-len", cfg["slowlog-max-len"])


def make_dead(q: Queue, r: redis.Redis, n: int, error: str) -> float:
    """Put ``n`` dead jobs in the queue by hand (rows as retry leaves them); seconds taken."""
    t0 = time.perf_counter()
    now = int(time.time() * 1000)
    ids = new_ids(n)
    for i in range(0, n, FILL_CHUNK):
        pipe = r.pipeline(transaction=False)
        chunk = ids[i : i + FILL_CHUNK]
        for jid in chunk:
            pipe.hset(
                q.keys.job(jid),
                mapping={
                    "state": "dead",
                    "attempts": "1",
                    "failures": "1",
                    "max_attempts": "1",
                    "payload": '{"pad":"xxxxxxxxxxxxxxxx"}',
                    "last_error": error,
                },
            )
        pipe.zadd(q.keys.dead, {jid: now for jid in chunk})
        pipe.execute()
    return time.perf_counter() - t0


def bench_retry(url: str, n: int) -> None:
    """Retry (reprocess) ``n`` dead jobs by an error filter (beside ``n // 5`` that do not
    match): total time and the longest call."""
    r = redis.Redis.from_url(url)
    with Queue("bench-retry", url=url) as q:
        fill_s = make_dead(q, r, n, "db timeout after 5 s")
        fill_s += make_dead(q, r, n // 5, "bad input")
        with slowlog(r) as longest:
            t0 = time.perf_counter()
            dry = q.reprocess_jobs(error="timeout", dry_run=True)
            dry_s = time.perf_counter() - t0
            dry_ms = longest()
        with slowlog(r) as longest:
            t0 = time.perf_counter()
            res = q.reprocess_jobs(error="timeout")
            total = time.perf_counter() - t0
            run_ms = longest()
        assert res.matched == dry.matched == n, (res, dry)
        print()
        print(f"reprocess_jobs(error=...) of {n:,} dead jobs (beside {n // 5:,} that do not match)")
        report(
            [
                [
                    "run",
                    "matched",
                    "calls",
                    "longest call ms",
                    "calls > 10 ms",
                    "total s",
                    "fill s",
                ],
                ["dry run", dry.matched, dry.calls, *dry_ms, dry_s, fill_s],
                ["retry", res.matched, res.calls, *run_ms, total, ""],
            ]
        )
        q.pause()
        while not q.obliterate(force=True, budget=5000):
            pass
    r.close()


def fill_lanes(q: Queue, n: int, lanes: int) -> float:
    """``n`` jobs: half flat, half spread evenly over ``lanes`` lanes; seconds taken."""
    t0 = time.perf_counter()
    flat = n // 2
    made = 0
    while made < flat:
        k = min(FILL_CHUNK, flat - made)
        q.enqueue_many({"i": made + i} for i in range(k))
        made += k
    per = max(1, (n - flat) // lanes)
    for g in range(lanes):
        q.enqueue_many(({"i": i} for i in range(per)), group=f"lane{g}")
    return time.perf_counter() - t0


def bench_verbs(url: str, n: int, lanes: int) -> None:
    """The longest server call of each read and verb on a queue of ``n`` jobs in ``lanes`` lanes."""
    r = redis.Redis.from_url(url)
    rows: list[list[object]] = [
        ["verb", "longest call server ms", "calls > 10 ms", "calls", "client s"]
    ]
    with Queue("bench-verbs", url=url) as q:
        fill_s = fill_lanes(q, n, lanes)
        fill_s += make_dead(q, r, 10_000, "boom")
        sched = q.enqueue_many(({"s": i} for i in range(10_000)), delay_ms=3_600_000)
        print(f"filled {q.counts()} in {fill_s:.1f} s", flush=True)

        def measure(
            label: str, call: Callable[[], Any], calls: Callable[[Any], int] = lambda _: 1
        ) -> Any:
            with slowlog(r) as longest:
                t0 = time.perf_counter()
                out = call()
                took = time.perf_counter() - t0
                rows.append([label, *longest(), calls(out), took])
            print(f"  {label}: {rows[-1][1]:.2f} ms", flush=True)
            return out

        measure("counts", q.counts)
        for off in (0, 10_000, n // 3):
            measure(f"browse pending offset {off:,}", lambda o=off: q.browse("pending", 20, o))
        measure("browse dead offset 5,000", lambda: q.browse("dead", 20, 5000))
        measure("browse scheduled", lambda: q.browse("scheduled", 20, 0))
        measure("groups (every page)", q.groups)
        measure("get_job", lambda: q.get_job(sched[0]))
        measure("pause", q.pause)
        measure("resume", q.resume)
        measure("update_data", lambda: q.update_data(sched[0], {"x": 1}))
        measure("promote_job", lambda: q.promote_job(sched[0]))
        measure("pause_group", lambda: q.pause_group("lane1"))
        measure("resume_group", lambda: q.resume_group("lane1"))
        measure("set_group_limit", lambda: q.set_group_limit("lane1", 5))
        measure("reprocess_jobs dry run", lambda: q.reprocess_jobs(dry_run=True), lambda x: x.calls)
        measure(
            "remove_jobs dead dry run",
            lambda: q.remove_jobs("dead", dry_run=True),
            lambda x: x.calls,
        )
        measure("promote_jobs", lambda: q.promote_jobs(), lambda x: x.calls)
        measure("reprocess_jobs", lambda: q.reprocess_jobs(), lambda x: x.calls)
        measure("clean dead (dry run)", lambda: q.clean(0, dry_run=True), lambda x: x.calls)
        measure("audit", lambda: q.audit(50))
        measure("drain_group", lambda: q.drain_group("lane2"))
        measure(
            "drain (default budget)",
            lambda: drive_timed(q.runner, admin.drain(q.ctx))[1],
            len,
        )
        measure("obliterate (forced, default budget)", lambda: _obliterate(q), lambda c: c)
    print()
    print(f"longest server call per verb on a queue of {n:,} jobs in {lanes:,} lanes (SLOWLOG)")
    report(rows)
    r.close()


def _obliterate(q: Queue) -> int:
    q.pause()
    calls = 1
    while not q.obliterate(force=True):
        calls += 1
    return calls


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=1_000_000, help="jobs to obliterate")
    parser.add_argument("--drain-jobs", type=int, default=100_000, help="jobs to drain")
    parser.add_argument("--budgets", default="100,1000,10000", help="obliterate budgets")
    parser.add_argument("--grouped-share", type=float, default=0.1, help="share in lanes")
    parser.add_argument("--log-share", type=float, default=0.01, help="share with logs")
    parser.add_argument("--retry-jobs", type=int, default=100_000, help="dead jobs to filter")
    parser.add_argument("--verb-jobs", type=int, default=1_000_000, help="jobs for the verbs")
    parser.add_argument("--lanes", type=int, default=1000, help="lanes for the verbs")
    parser.add_argument(
        "--only",
        default="obliterate,drain,retry,verbs",
        help="which parts to run (comma separated: obliterate, drain, retry, verbs)",
    )
    args = parser.parse_args()
    parts = set(args.only.split(","))
    budgets = [int(b) for b in args.budgets.split(",") if b]
    with bench_server() as url:
        # load every script up front, so no NOSCRIPT round lands inside a measurement
        with redis.Redis.from_url(url) as r:
            for s in all_scripts():
                r.script_load(s.body)
        t0 = time.perf_counter()
        if "obliterate" in parts:
            bench_obliterate(url, args.jobs, budgets, args)
        if "drain" in parts:
            bench_drain(url, args.drain_jobs, args)
        if "retry" in parts:
            bench_retry(url, args.retry_jobs)
        if "verbs" in parts:
            bench_verbs(url, args.verb_jobs, args.lanes)
        print(f"\nwhole run: {time.perf_counter() - t0:.1f} s")


if __name__ == "__main__":
    main()
