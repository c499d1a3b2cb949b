"""A plain (``def``) handler against an ``async def`` one, at equal concurrency.

For each kind, a backlog of ``--jobs`` jobs is enqueued (each job's body one 16-byte
``write(2)`` to ``/dev/null``, like the peers harness's jobs: a system call releases
the GIL, as real handlers do; ``--body noop`` for none), then one ``Worker``
(in this process, on its main thread) serves it until every job completed; the kinds
are interleaved ``--repeat`` times so the machine's drift hits them alike. Per run:

- ``jobs/s``: jobs over the wall time from the worker's start to its last completion;
- ``cpu us/job``: this process's CPU (user + sys, every thread: the loop, the handler
  threads, redis-py) over the same span, per job.

Then the plain/async ratios of the medians. The goal (issue 25): a plain handler at
80% or more of the async one's rate, and at most 1/0.8 of its CPU.

``--pin same`` or ``--pin other`` (2 CPUs or more) runs the loop on CPU 0 and the
handler threads on CPU 0 or on CPU 1 (the server stays free): what the hand-over
costs when the loop and its thread wake each other on one CPU or across two.

Run: ``.venv/bin/python bench/plain_handlers.py`` (a private server unless ``EMQ_URL``
is set); ``--concurrency``, ``--jobs``, ``--repeat``, ``--pin``.
"""

from __future__ import annotations

import argparse
import os
import resource
import threading
import time
from typing import Any

import echomq.worker
from _common import bench_server, median, report
from echomq import JobContext, Queue, Worker
from echomq.worker.threads import HandlerThreads

_SINK = os.open(os.devnull, os.O_WRONLY)
_WRITE = True  # --body write: each job makes one small write(2), as the peers' jobs do


def plain(job: JobContext) -> None:
    if _WRITE:
        os.write(_SINK, b"0123456789abcdef")


async def async_handler(job: JobContext) -> None:
    if _WRITE:
        os.write(_SINK, b"0123456789abcdef")


def pinned(cpu: int) -> type[HandlerThreads]:
    """Handler threads that run on ``cpu`` only (``--pin``)."""

    class Pinned(HandlerThreads):
        def _work(self) -> None:
            os.sched_setaffinity(0, {cpu})
            super()._work()

    return Pinned


def cpu_s() -> float:
    use = resource.getrusage(resource.RUSAGE_SELF)
    return use.ru_utime + use.ru_stime


def one_run(url: str, kind: str, jobs: int, concurrency: int, run: int) -> tuple[float, float]:
    """(jobs/s, CPU us/job) of one worker serving ``jobs`` no-op jobs."""
    with Queue(f"bench-plain-{kind}-{run}-{time.time_ns()}", url=url) as q:
        for i in range(0, jobs, 1000):
            q.enqueue_many([None] * min(1000, jobs - i))
        handler: Any = plain if kind == "plain" else async_handler
        worker = Worker(q, handler, concurrency=concurrency)

        def stop_when_done() -> None:
            while worker.stats.completed < jobs:
                time.sleep(0.005)
            worker.request_stop()

        threading.Thread(target=stop_when_done, daemon=True).start()
        t0, c0 = time.perf_counter(), cpu_s()
        worker.run()
        wall, cpu = time.perf_counter() - t0, cpu_s() - c0
        assert worker.stats.completed == jobs
        q.pause()
        while not q.obliterate(budget=10_000):
            pass
    return jobs / wall, cpu * 1e6 / jobs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--concurrency", type=int, default=10)
    ap.add_argument("--jobs", type=int, default=20_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--body", choices=("write", "noop"), default="write")
    ap.add_argument("--pin", choices=("none", "same", "other"), default="none")
    args = ap.parse_args()
    global _WRITE
    _WRITE = args.body == "write"
    got: dict[str, list[tuple[float, float]]] = {"async": [], "plain": []}
    with bench_server() as url:
        if args.pin != "none":  # after the server started: it keeps every CPU
            os.sched_setaffinity(0, {0})  # this thread runs the worker's loop
            # the Worker makes its threads from its module's name
            vars(echomq.worker)["HandlerThreads"] = pinned(0 if args.pin == "same" else 1)
        for run in range(args.repeat):
            for kind in got:
                got[kind].append(one_run(url, kind, args.jobs, args.concurrency, run))
    rows: list[list[Any]] = [["handler", "jobs/s (median)", "cpu us/job (median)", "runs"]]
    med = {}
    for kind, runs in got.items():
        med[kind] = (median(r for r, _ in runs), median(c for _, c in runs))
        detail = ", ".join(f"{r:,.0f}/s {c:.0f}us" for r, c in runs)
        rows.append([kind, med[kind][0], med[kind][1], detail])
    rate = med["plain"][0] / med["async"][0]
    cpu = med["plain"][1] / med["async"][1]
    rows.append(
        [
            "plain/async",
            rate,
            cpu,
            f"concurrency {args.concurrency}, body {args.body}, pin {args.pin}",
        ]
    )
    report(rows)


if __name__ == "__main__":
    main()
