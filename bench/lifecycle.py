"""Throughput of the job lifecycle beside ceilings measured in the same run.

Rows (jobs/s, median of ``--repeat`` runs):

- ``enqueue`` one by one, against the one-by-one ceiling: ``EVALSHA`` of a trivial
  script, one round trip each, on the same client library (redis-py's ``evalsha``) and
  server. Beside it, the stricter floor: the same trivial ``EVALSHA`` sent on the
  transport's kept connection (``echomq.transport``, the fast path), which skips
  redis-py's per-call bookkeeping as echomq's verbs do; the gap to it is the server's
  work and the verb's own Python. And the same enqueue with the fast path off (a pooled
  connection per call, as with ``EMQ_FAST_PATH=0``): the gap is what the kept
  connection pays. The rows run interleaved, in slices of ``--chunk`` calls each, so
  that the machine's drift (seconds long here) hits them alike.
- ``enqueue_many`` in one call, against the pipelined ceiling: the same trivial
  ``EVALSHA`` once per job, all in one pipeline.
- ``claim + complete`` one job at a time (three round trips: the pause read, the claim
  script, the complete script), against the one-by-one ceiling divided by three.
- ``claim_many + complete_many`` in batches of 100, against the pipelined ceiling.

Targets (issue 2): one-by-one enqueue >= 85% of its ceiling; enqueue_many >= 100,000
jobs/s. Run: ``.venv/bin/python bench/lifecycle.py`` (``EMQ_URL`` measures another server).
"""

from __future__ import annotations

import argparse
import itertools
import os
import time
from collections.abc import Callable

import redis

from _common import bench_server, median, report
from echomq import Queue
from echomq.transport import Request, SyncRunner, SyncTransport

TRIVIAL = "return 1"
_names = itertools.count()


def fresh_queue(url: str, *, fast: bool = True) -> Queue:
    q = Queue(f"bench-spine-{os.getpid()}-{next(_names)}", url=url)
    q.runner = SyncRunner(q.client, fast=fast)  # before any verb binds the runner
    return q


def cleanup(client: redis.Redis) -> None:
    keys = list(client.scan_iter(match=f"emq:{{bench-spine-{os.getpid()}-*", count=5000))
    for i in range(0, len(keys), 5000):
        client.unlink(*keys[i : i + 5000])


Measured = tuple[float, float]  # jobs/s, server microseconds of EVALSHA per job


def evalsha_usec(stats: redis.Redis) -> int:
    return int(stats.info("commandstats").get("cmdstat_evalsha", {}).get("usec", 0))


def rate(stats: redis.Redis, jobs: int, run: Callable[[], object]) -> Measured:
    """Time ``run``; also read how long the server spent in EVALSHA meanwhile."""
    usec = evalsha_usec(stats)
    start = time.perf_counter()
    run()
    elapsed = time.perf_counter() - start
    return jobs / elapsed, (evalsha_usec(stats) - usec) / jobs


def one_by_one(client: redis.Redis, url: str, sha: str, n: int, chunk: int) -> dict[str, Measured]:
    """The one-by-one rows, interleaved in chunks of ``chunk`` calls: ceiling, enqueue,
    enqueue with the fast path off, floor, again and again. The machine's speed drifts
    within seconds here, so each row sees the same stretches of it and the ratios hold
    still."""
    line = SyncTransport(client, fast=True)
    trivial = Request([("EVALSHA", sha, 1, "emq:{bench-ceiling}:x")], True)
    line.send(trivial)  # connect outside the timing
    q = fresh_queue(url)
    q.counts()  # connect and fence outside the timing
    slow = fresh_queue(url, fast=False)
    slow.counts()
    jobs = iter(range(n))
    slow_jobs = iter(range(n))

    def ceiling(k: int) -> None:
        for _ in range(k):
            client.evalsha(sha, 1, "emq:{bench-ceiling}:x")

    def enqueue(k: int) -> None:
        for i in itertools.islice(jobs, k):
            q.enqueue({"i": i})

    def enqueue_pooled(k: int) -> None:
        for i in itertools.islice(slow_jobs, k):
            slow.enqueue({"i": i})

    def floor(k: int) -> None:
        for _ in range(k):
            line.send(trivial)

    rows = {"ceil1": ceiling, "enq1": enqueue, "enq1p": enqueue_pooled, "floor1": floor}
    spent = {label: [0.0, 0] for label in rows}  # seconds, server usec
    try:
        for done in range(0, n, chunk):
            k = min(chunk, n - done)
            for label, run in rows.items():
                usec = evalsha_usec(client)
                start = time.perf_counter()
                run(k)
                spent[label][0] += time.perf_counter() - start
                spent[label][1] += evalsha_usec(client) - usec
    finally:
        line.close()
        q.close()
        slow.close()
    return {label: (n / secs, usec / n) for label, (secs, usec) in spent.items()}


def ceiling_pipelined(client: redis.Redis, sha: str, n: int) -> Measured:
    def run() -> None:
        pipe = client.pipeline(transaction=False)
        for _ in range(n):
            pipe.evalsha(sha, 1, "emq:{bench-ceiling}:x")
        pipe.execute()

    return rate(client, n, run)


def enqueue_many(stats: redis.Redis, url: str, n: int) -> Measured:
    payloads = [{"i": i} for i in range(n)]
    with fresh_queue(url) as q:
        q.counts()
        return rate(stats, n, lambda: q.enqueue_many(payloads))


def claim_complete(stats: redis.Redis, url: str, n: int) -> Measured:
    with fresh_queue(url) as q:
        q.enqueue_many({"i": i} for i in range(n))

        def run() -> None:
            while (c := q.claim()) is not None:
                q.complete(c.id, c.token)

        got = rate(stats, n, run)
        assert q.counts().completed == n
        return got


def claim_complete_batched(stats: redis.Redis, url: str, n: int, batch: int = 100) -> Measured:
    with fresh_queue(url) as q:
        q.enqueue_many({"i": i} for i in range(n))

        def run() -> None:
            while cs := q.claim_many(batch):
                missed = q.complete_many([(c.id, c.token) for c in cs])
                assert not missed

        got = rate(stats, n, run)
        assert q.counts().completed == n
        return got


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5, help="runs per measurement (median)")
    ap.add_argument("--one", type=int, default=4000, help="jobs per one-by-one run")
    ap.add_argument("--chunk", type=int, default=100, help="calls per one-by-one slice")
    ap.add_argument("--many", type=int, default=50000, help="jobs per enqueue_many run")
    args = ap.parse_args()

    with bench_server() as url:
        client = redis.Redis.from_url(url)
        sha = client.script_load(TRIVIAL)
        try:
            runs: dict[str, list[Measured]] = {}

            def measure(label: str, fn: Callable[[], Measured]) -> None:
                runs.setdefault(label, []).append(fn())

            def measure_one_by_one() -> None:
                for label, got in one_by_one(client, url, sha, args.one, args.chunk).items():
                    runs.setdefault(label, []).append(got)

            # interleave the repetitions so drift hits ceilings and verbs alike
            for _ in range(args.repeat):
                measure_one_by_one()
                measure("ceilp", lambda: ceiling_pipelined(client, sha, args.many))
                measure("many", lambda: enqueue_many(client, url, args.many))
                measure("cc", lambda: claim_complete(client, url, args.one))
                measure("ccb", lambda: claim_complete_batched(client, url, args.many // 5))
                cleanup(client)
            m = {k: median(r for r, _ in v) for k, v in runs.items()}
            us = {k: median(u for _, u in v) for k, v in runs.items()}
            server = client.info("server")
            name = "valkey" if "valkey_version" in server else "redis"
            version = server.get("valkey_version") or server.get("redis_version")
        finally:
            cleanup(client)
            client.close()

    print(f"server: {name} {version} at {url}; median of {args.repeat} runs")
    report(
        [
            ("measurement", "jobs/s", "ceiling", "ceiling jobs/s", "ratio", "target",
             "server us/job", "ceiling us/call"),
            ("enqueue (one by one)", m["enq1"], "EVALSHA 1-by-1", m["ceil1"],
             m["enq1"] / m["ceil1"], ">= 0.85", us["enq1"], us["ceil1"]),
            ("  the same, beside the floor", m["enq1"], "EVALSHA 1-by-1, raw", m["floor1"],
             m["enq1"] / m["floor1"], "", us["enq1"], us["floor1"]),
            ("  the same, fast path off", m["enq1p"], "enqueue, fast path on", m["enq1"],
             m["enq1p"] / m["enq1"], "", us["enq1p"], us["enq1"]),
            ("enqueue_many", m["many"], "EVALSHA pipelined", m["ceilp"],
             m["many"] / m["ceilp"], ">= 100,000/s", us["many"], us["ceilp"]),
            ("claim + complete", m["cc"], "EVALSHA 1-by-1 / 3", m["ceil1"] / 3,
             m["cc"] / (m["ceil1"] / 3), "", us["cc"], 3 * us["ceil1"]),
            ("claim_many + complete_many", m["ccb"], "EVALSHA pipelined", m["ceilp"],
             m["ccb"] / m["ceilp"], "", us["ccb"], us["ceilp"]),
        ]
    )  # fmt: skip
    print(
        "server us/job: time the server spent in EVALSHA per job (INFO commandstats); "
        "the ceilings run a script that only returns 1. The raw floor sends it on the "
        "transport's kept connection (the fast path), without redis-py's per-call "
        "bookkeeping. 'fast path off' is the same enqueue on a pooled connection per call."
    )
    ok1 = m["enq1"] / m["ceil1"] >= 0.85
    ok2 = m["many"] >= 100_000
    print(f"one-by-one enqueue target: {'met' if ok1 else 'MISSED'}; "
          f"enqueue_many target: {'met' if ok2 else 'MISSED'}")  # fmt: skip


if __name__ == "__main__":
    main()
