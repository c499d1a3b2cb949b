"""Worker throughput and latency, against a raw redis-py loop measured in the same run.

Measures, each consumer in a process of its own:

- no-op jobs per second processed by one ``Worker`` process at concurrency 1, 10, 50
  (the backlog enqueued on a paused queue, the clock started at ``resume``, stopped
  when ``metrics:completed`` reaches the total);
- enqueue-to-start latency p50/p99 while the worker is idle (one job at a time, the
  handler's start time minus the time taken just before ``enqueue``);
- the ceiling: a raw redis-py loop doing ``BRPOP`` plus one write (``INCR``) per job,
  for both figures.

Run: ``python bench/worker.py`` (a private server is started unless ``EMQ_URL`` is
set); ``--quick`` for a short run. Throughput is the median of ``--repeat`` runs.
"""

from __future__ import annotations

import argparse
import json
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import redis

from _common import bench_server, median, report
from echomq import JobContext, Queue, Worker

HERE = Path(__file__).resolve()


# ---- the consumer processes ------------------------------------------------------


def worker_role(args: argparse.Namespace) -> None:
    """A Worker with a no-op handler; prints ``ready``, then its latencies at exit."""
    latencies: list[float] = []

    async def noop(job: JobContext) -> None:
        if isinstance(job.data, dict):
            latencies.append(time.time() - job.data["t"])

    worker = Worker(args.queue, noop, url=args.url, concurrency=args.concurrency)
    threading.Thread(target=lambda: (worker.ready.wait(), print("ready", flush=True))).start()
    worker.run()  # until SIGTERM
    print(json.dumps(latencies), flush=True)


def raw_role(args: argparse.Namespace) -> None:
    """The ceiling: BRPOP a job, one write per job. Prints ``ready``, then latencies."""
    r = redis.Redis.from_url(args.url)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    latencies: list[float] = []
    jobs, done = f"rawbench:{args.queue}:jobs", f"rawbench:{args.queue}:done"
    print("ready", flush=True)
    while not stop.is_set():
        item = r.brpop([jobs], timeout=0.2)
        if item is None:
            continue
        if item[1] != b"0":
            latencies.append(time.time() - float(item[1]))
        r.incr(done)
    print(json.dumps(latencies), flush=True)


# ---- the driver --------------------------------------------------------------------


class Consumer:
    """A consumer process (``worker`` or ``raw``), started and awaited until ready."""

    def __init__(self, role: str, url: str, queue: str, concurrency: int = 10) -> None:
        argv = [sys.executable, str(HERE), "--role", role, "--url", url, "--queue", queue]
        argv += ["--concurrency", str(concurrency)]
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if line.strip() != "ready":
            raise RuntimeError(f"{role} consumer did not start: {line!r}")

    def finish(self) -> list[float]:
        """Stop it (SIGTERM) and return the latencies it recorded, in ms."""
        self.proc.send_signal(signal.SIGTERM)
        out, _ = self.proc.communicate(timeout=60)
        return [x * 1000 for x in json.loads(out.strip().splitlines()[-1])]


def wait_count(read: Any, target: int, timeout: float = 300) -> None:
    end = time.monotonic() + timeout
    while int(read() or 0) < target:
        if time.monotonic() > end:
            raise RuntimeError(f"stuck below {target}")
        time.sleep(0.002)


def worker_throughput(url: str, concurrency: int, n: int, run: int) -> float:
    name = f"bench-w{concurrency}-{run}-{time.time_ns()}"
    with Queue(name, url=url) as q:
        q.pause()
        q.enqueue_many([None] * n)
        consumer = Consumer("worker", url, name, concurrency)
        r = q.client
        t0 = time.perf_counter()
        q.resume()
        wait_count(lambda: r.hget(q.keys.metrics_completed, "count"), n)
        elapsed = time.perf_counter() - t0
        consumer.finish()
        q.pause()
        while not q.obliterate(budget=10_000):
            pass
    return n / elapsed


def raw_throughput(url: str, n: int, run: int) -> float:
    name = f"raw-{run}-{time.time_ns()}"
    r = redis.Redis.from_url(url)
    jobs, done = f"rawbench:{name}:jobs", f"rawbench:{name}:done"
    staged = jobs + ":staged"
    pipe = r.pipeline(transaction=False)
    for i in range(0, n, 1000):
        pipe.lpush(staged, *(["0"] * min(1000, n - i)))
    pipe.execute()
    consumer = Consumer("raw", url, name)
    t0 = time.perf_counter()
    r.rename(staged, jobs)
    r.lpush(jobs, "0")  # one more: a push is what wakes a blocked BRPOP
    wait_count(lambda: r.get(done), n + 1)
    elapsed = time.perf_counter() - t0
    consumer.finish()
    r.delete(jobs, done)
    r.close()
    return (n + 1) / elapsed


def worker_latency(url: str, samples: int, gap_s: float) -> list[float]:
    name = f"bench-lat-{time.time_ns()}"
    with Queue(name, url=url) as q:
        consumer = Consumer("worker", url, name, 10)
        for _ in range(samples):
            time.sleep(gap_s)  # idle again: blocked on the wake list
            q.enqueue({"t": time.time()})
        wait_count(lambda: q.client.hget(q.keys.metrics_completed, "count"), samples)
        lat = consumer.finish()
        q.pause()
        while not q.obliterate(budget=10_000):
            pass
    return lat


def raw_latency(url: str, samples: int, gap_s: float) -> list[float]:
    name = f"raw-lat-{time.time_ns()}"
    r = redis.Redis.from_url(url)
    jobs, done = f"rawbench:{name}:jobs", f"rawbench:{name}:done"
    consumer = Consumer("raw", url, name)
    for _ in range(samples):
        time.sleep(gap_s)
        r.lpush(jobs, repr(time.time()))
    wait_count(lambda: r.get(done), samples)
    lat = consumer.finish()
    r.delete(jobs, done)
    r.close()
    return lat


def pct(xs: list[float], p: float) -> float:
    ordered = sorted(xs)
    return ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--role", choices=("driver", "worker", "raw"), default="driver")
    ap.add_argument("--url")
    ap.add_argument("--queue", default="bench")
    ap.add_argument("--concurrency", type=int, default=10)
    ap.add_argument("--jobs", type=int, default=10_000, help="jobs per throughput run")
    ap.add_argument("--repeat", type=int, default=3, help="throughput runs (median)")
    ap.add_argument("--samples", type=int, default=400, help="latency samples")
    ap.add_argument("--quick", action="store_true", help="a short run")
    args = ap.parse_args()
    if args.role == "worker":
        return worker_role(args)
    if args.role == "raw":
        return raw_role(args)
    if args.quick:
        args.jobs, args.repeat, args.samples = 2000, 1, 100
    with bench_server() as url:
        n1 = max(500, args.jobs // 3)  # concurrency 1 is slow: fewer jobs, same statistics
        raw_tp = median(raw_throughput(url, args.jobs, i) for i in range(args.repeat))
        tps = {
            c: median(
                worker_throughput(url, c, n1 if c == 1 else args.jobs, i)
                for i in range(args.repeat)
            )
            for c in (1, 10, 50)
        }
        raw_lat = raw_latency(url, args.samples, 0.008)
        lat = worker_latency(url, args.samples, 0.008)
    rows: list[list[object]] = [["run", "jobs/s", "vs raw", "p50 ms", "p99 ms"]]
    rows.append(
        ["raw redis-py loop (BRPOP + INCR)", raw_tp, "1.00", pct(raw_lat, 50), pct(raw_lat, 99)]
    )
    for c, tp in tps.items():
        rows.append([f"echomq Worker, concurrency {c}", tp, f"{tp / raw_tp:.2f}", "", ""])
    rows.append(["echomq Worker, idle enqueue-to-start", "", "", pct(lat, 50), pct(lat, 99)])
    report(rows)
    print(
        f"\ntargets: >= 5,000 jobs/s at concurrency 10 (got {tps[10]:,.0f}); "
        f"p50 <= 1 ms (got {pct(lat, 50):.3f}), p99 <= 2 ms (got {pct(lat, 99):.3f})"
    )


if __name__ == "__main__":
    main()
