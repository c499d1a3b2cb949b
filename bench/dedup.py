"""Dedup: a debounced burst runs its handler once, and what each mode costs an enqueue.

Part 1 (the issue's figure): ``--clients`` producers (one connection each) send
``--burst`` enqueues in all on one dedup id in ``debounce`` mode (``--delay-ms`` quiet
time) while a worker serves the queue; it reports the burst's rate and how many times
the handler ran (1 is the goal) and with which payload (the server's last).

Part 2: one client's enqueue rate and server time per call (SLOWLOG, threshold 0) with
no dedup, a dedup id per job (every key free: the common case), and each mode on one
held id (``--rounds`` calls each).

    python bench/dedup.py
    python bench/dedup.py --burst 10000 --clients 8
"""

from __future__ import annotations

import argparse
import statistics
import threading
import time
from typing import Any

import redis

from _common import bench_server, report
from echomq import Dedup, Queue, Worker, WorkerConfig
from echomq.embedded import EmbeddedServer


def burst(url: str, args: argparse.Namespace) -> None:
    name = "dedup-burst"
    spec = Dedup("search-index", mode="debounce", delay_ms=args.delay_ms)
    clients = [Queue(name, url=url, executor=args.executor) for _ in range(args.clients)]
    seen: list[Any] = []
    done = threading.Event()

    def handle(job: Any) -> None:
        seen.append(job.data)
        done.set()

    worker = Worker(clients[0], handle, config=WorkerConfig(beat_ms=50, lease_ms=5000))
    runner = threading.Thread(target=worker.run, daemon=True)
    runner.start()
    worker.ready.wait(10)
    per = args.burst // args.clients

    def produce(k: int, q: Queue) -> None:
        for i in range(per):
            q.enqueue({"client": k, "i": i}, dedup=spec)

    threads = [threading.Thread(target=produce, args=(k, q)) for k, q in enumerate(clients)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    took = time.perf_counter() - t0
    done.wait(args.delay_ms / 1000 + 10)
    time.sleep(args.delay_ms / 1000 + 0.5)  # a second run would come by now
    worker.stop(timeout=10)
    runner.join(10)
    report(
        [
            ["enqueues", "clients", "burst s", "enqueues/s", "handler runs", "payload run"],
            [
                per * args.clients,
                args.clients,
                round(took, 2),
                round(per * args.clients / took),
                len(seen),
                str(seen[-1] if seen else None),
            ],
        ]
    )


def costs(url: str, args: argparse.Namespace) -> None:
    r = redis.Redis.from_url(url)
    rows = []
    cases: list[tuple[str, Any]] = [
        ("no dedup", None),
        ("simple, a free id each", "fresh"),
        ("simple, held", Dedup("h")),
        ("throttle, held", Dedup("h", mode="throttle", ttl_ms=600_000)),
        ("debounce, held (replace)", Dedup("h", mode="debounce", delay_ms=600_000)),
        ("keep_last, held (replace)", Dedup("h", mode="keep_last")),
    ]
    for label, spec in cases:
        q = Queue(f"dedup-cost-{len(rows)}", url=url, executor=args.executor)
        q.enqueue(0, dedup=spec if isinstance(spec, Dedup) else None)  # the holder
        r.config_set("slowlog-log-slower-than", 0)
        r.slowlog_reset()
        r.config_set("slowlog-max-len", args.rounds + 10)
        t0 = time.perf_counter()
        for i in range(args.rounds):
            if spec == "fresh":
                q.enqueue(i, dedup_id=f"id-{i}")
            else:
                q.enqueue(i, dedup=spec)
        took = time.perf_counter() - t0
        entries = [
            e
            for e in r.slowlog_get(args.rounds + 10)
            if b"EVALSHA" in e["command"] or b"EMQ.ENQUEUE" in e["command"]
        ]
        server = statistics.median(e["duration"] for e in entries) if entries else float("nan")
        rows.append([label, round(args.rounds / took), round(server, 1)])
    r.config_set("slowlog-log-slower-than", 10000)
    report([["case", "enqueues/s (1 client)", "server us/call (median)"], *rows])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--burst", type=int, default=1000)
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--delay-ms", type=int, default=500)
    ap.add_argument("--rounds", type=int, default=2000)
    ap.add_argument("--executor", default="scripts", choices=["scripts", "native"])
    args = ap.parse_args()
    if args.executor == "native":
        with EmbeddedServer(module=True) as server:
            burst(server.url, args)
            costs(server.url, args)
        return
    with bench_server() as url:
        burst(url, args)
        costs(url, args)


if __name__ == "__main__":
    main()
