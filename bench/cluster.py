"""Aggregate throughput on a Redis Cluster with 1 vs 3 primaries, and the rate of the
healthy queues while a primary is down, in one run.

**Throughput.** Two private clusters (``redis-server --cluster-enabled yes``, no
replicas, no native module): one primary, then three. The same load on each:
``--queues`` queues (their hash tags spread them over the primaries), a backlog of
``--jobs`` no-op jobs each enqueued on paused queues, then one worker process per
queue (``Worker(url=...)``: its own cluster client), every queue resumed at once and
the clock stopped when every ``metrics:completed`` reached its backlog. Reported: jobs
per second in all, and the CPU each side used during the run (the servers' own
``used_cpu_sys + used_cpu_user``; the worker processes' from the kernel, 100% = one
core): unless the busiest server uses most of a core, **the clients are the
bottleneck** and the table says so.

**Failover.** A cluster of 3 primaries + 3 replicas; one worker process per queue, a
large backlog; completions of the queues on the two other primaries counted every
0.1 s for ``--window`` seconds, then one primary is killed (SIGKILL) and they are
counted again until its replica has taken over. Reported: the healthy queues' rate
before and while the primary is down, and the ratio. On a machine where the worker
processes are the bottleneck, the ratio can exceed 100%: the stalled workers of the
dead primary's queues give their CPU to the others.

Run: ``python bench/cluster.py`` (``--quick`` for a short run). Needs ``redis-server``
and ``redis-cli`` on PATH.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import redis
from redis.cluster import RedisCluster

from _common import report
from echomq import JobContext, Queue, Worker

HERE = Path(__file__).resolve()
sys.path.insert(0, str(HERE.parent.parent / "tests"))
from cluster_support import LocalCluster  # noqa: E402


def worker_role(args: argparse.Namespace) -> None:
    """One Worker (no-op handler) on one queue until SIGTERM; prints ``ready``."""

    async def noop(job: JobContext) -> None:
        return None

    worker = Worker(args.queue, noop, url=args.url, concurrency=args.concurrency)
    signal.signal(signal.SIGTERM, lambda *_: worker.request_stop())
    threading.Thread(target=lambda: (worker.ready.wait(), print("ready", flush=True))).start()
    worker.run()


class Workers:
    """One worker process per queue, started and awaited until each is ready."""

    def __init__(self, url: str, queues: list[str], concurrency: int) -> None:
        self.procs = []
        for q in queues:
            argv = [sys.executable, str(HERE), "--role", "worker", "--url", url, "--queue", q,
                    "--concurrency", str(concurrency)]  # fmt: skip
            self.procs.append(subprocess.Popen(argv, stdout=subprocess.PIPE, text=True))
        for p in self.procs:
            assert p.stdout is not None
            if p.stdout.readline().strip() != "ready":
                raise RuntimeError("a worker process did not start")

    def cpu_s(self) -> float:
        """CPU seconds (user + system) the worker processes used so far."""
        total = 0.0
        for p in self.procs:
            with open(f"/proc/{p.pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        return total

    def stop(self) -> None:
        for p in self.procs:
            p.send_signal(signal.SIGTERM)
        for p in self.procs:
            p.wait(timeout=30)


def server_cpu(cluster: LocalCluster) -> list[float]:
    out = []
    for n in cluster.live():
        c = redis.Redis(port=n.port)
        info: Any = c.info("cpu")
        out.append(float(info["used_cpu_sys"]) + float(info["used_cpu_user"]))
        c.close()
    return out


def queue_names(n: int) -> list[str]:
    return [f"b{i}" for i in range(n)]


def throughput(primaries: int, queues: int, jobs: int, concurrency: int) -> list[object]:
    cluster = LocalCluster(primaries=primaries, replicas=0).start()
    try:
        rc = RedisCluster.from_url(cluster.url)
        names = queue_names(queues)
        qs = [Queue(n, client=rc) for n in names]
        for q in qs:
            q.pause()
            for start in range(0, jobs, 1000):
                q.enqueue_many([None] * min(1000, jobs - start))
        say(f"{primaries} primaries: backlog enqueued, starting the workers")
        workers = Workers(cluster.url, names, concurrency)
        cpu0, wcpu0, t0 = server_cpu(cluster), workers.cpu_s(), time.monotonic()
        for q in qs:
            q.resume()
        while any(q.counts().completed < jobs for q in qs):
            time.sleep(0.05)
        elapsed = time.monotonic() - t0
        cpu1, wcpu1 = server_cpu(cluster), workers.cpu_s()
        workers.stop()
        busiest = max(b - a for a, b in zip(cpu0, cpu1)) / elapsed
        servers = sum(b - a for a, b in zip(cpu0, cpu1)) / elapsed
        clients = (wcpu1 - wcpu0) / elapsed
        rc.close()
    finally:
        cluster.stop()
    total = jobs * queues
    # a server near a whole core is the limit; otherwise the clients (on this machine:
    # the worker processes and the servers share its few cores)
    bound = "servers" if busiest >= 0.8 else "clients"
    return [primaries, queues, total, total / elapsed, busiest * 100, servers * 100,
            clients * 100, bound]  # fmt: skip


def taken_over(cluster: LocalCluster, key: str) -> bool:
    """Whether a live primary serves ``key``'s slot again."""
    try:
        cluster.owner(key)
    except (RuntimeError, redis.RedisError):
        return False
    return True


def say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def failover(queues: int, concurrency: int, window: float) -> list[object]:
    cluster = LocalCluster(primaries=3, replicas=1).start()
    try:
        rc = RedisCluster.from_url(cluster.url)
        names = queue_names(queues)
        qs = {n: Queue(n, client=rc) for n in names}
        victim = cluster.owner(qs[names[0]].keys.pending)
        healthy = [q for q in qs.values() if cluster.owner(q.keys.pending) is not victim]
        backlog = 20_000
        for q in qs.values():
            for _ in range(0, backlog, 1000):
                q.enqueue_many([None] * 1000)
        say("failover: backlog enqueued, starting the workers")
        workers = Workers(cluster.url, names, concurrency)

        def done() -> int:
            return sum(q.counts().completed for q in healthy)

        time.sleep(1.0)  # past the workers' start
        n0, t0 = done(), time.monotonic()
        time.sleep(window)
        n1, t1 = done(), time.monotonic()
        before = (n1 - n0) / (t1 - t0)
        say(f"failover: {before:.0f} jobs/s on the healthy queues; killing a primary")
        victim.kill()
        killed = time.monotonic()
        n2 = done()
        while not taken_over(cluster, qs[names[0]].keys.pending):
            time.sleep(0.1)
        n3, t3 = done(), time.monotonic()
        during = (n3 - n2) / (t3 - killed)
        workers.stop()
        rc.close()
    finally:
        cluster.stop()
    return [len(healthy), before, during, t3 - killed, 100 * during / before]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--role", default="bench")
    ap.add_argument("--url")
    ap.add_argument("--queue")
    ap.add_argument("--queues", type=int, default=6)
    ap.add_argument("--jobs", type=int, default=20_000, help="backlog per queue")
    ap.add_argument("--concurrency", type=int, default=50)
    ap.add_argument("--window", type=float, default=5.0)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--no-failover", action="store_true")
    args = ap.parse_args()
    if args.role == "worker":
        worker_role(args)
        return
    if args.quick:
        args.jobs, args.window = 3000, 2.0
    cores = os.cpu_count()
    print(f"machine: {cores} cores; {args.queues} queues x {args.jobs:,} no-op jobs, one "
          f"worker process per queue (concurrency {args.concurrency})")  # fmt: skip
    rows: list[list[object]] = [
        ["primaries", "queues", "jobs", "jobs/s", "busiest server %cpu", "servers %cpu",
         "workers %cpu", "bottleneck"],
    ]  # fmt: skip
    for primaries in (1, 3):
        rows.append(throughput(primaries, args.queues, args.jobs, args.concurrency))
    report(rows)
    if not args.no_failover:
        print()
        report(
            [
                ["healthy queues", "jobs/s before", "jobs/s while down", "down s", "% kept"],
                failover(args.queues, args.concurrency, args.window),
            ]
        )


if __name__ == "__main__":
    main()
