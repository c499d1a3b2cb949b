"""What a wake-up between two Python threads costs: on one CPU, across two, unpinned.

Two threads hand a token back and forth through two locks (each hand-over: a futex
wake-up of the other thread and the GIL passed to it), ``--rounds`` times, pinned to
one CPU, to two, or left to the scheduler. Per round trip (two wake-ups): wall time and
the process's CPU (user + sys). A plain handler's batch costs one such round trip
between the worker's loop and its handler thread (``docs/performance.md``); an
``async def`` handler's, none.

Run: ``.venv/bin/python bench/thread_wakeups.py`` (needs 2 CPUs); ``--rounds``, ``--repeat``.
"""

from __future__ import annotations

import argparse
import os
import resource
import threading
import time

from _common import median, report


def round_trips(rounds: int, mine: int | None, other: int | None) -> tuple[float, float]:
    """(wall µs, CPU µs) per round trip, this thread on CPU ``mine``, the other on
    ``other`` (``None``: any CPU)."""
    ping, pong = threading.Lock(), threading.Lock()
    ping.acquire()
    pong.acquire()
    every = os.sched_getaffinity(0)

    def echo() -> None:
        if other is not None:
            os.sched_setaffinity(0, {other})
        for _ in range(rounds):
            ping.acquire()
            pong.release()

    if mine is not None:
        os.sched_setaffinity(0, {mine})
    thread = threading.Thread(target=echo)
    thread.start()
    use0, t0 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
    for _ in range(rounds):
        ping.release()
        pong.acquire()
    wall, use1 = time.perf_counter() - t0, resource.getrusage(resource.RUSAGE_SELF)
    thread.join()
    os.sched_setaffinity(0, every)
    cpu = use1.ru_utime - use0.ru_utime + use1.ru_stime - use0.ru_stime
    return wall / rounds * 1e6, cpu / rounds * 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=20_000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    if len(os.sched_getaffinity(0)) < 2:
        raise SystemExit("needs 2 CPUs")
    cpus = sorted(os.sched_getaffinity(0))[:2]
    cases = {
        "one CPU": (cpus[0], cpus[0]),
        "two CPUs": (cpus[0], cpus[1]),
        "unpinned": (None, None),
    }
    got: dict[str, list[tuple[float, float]]] = {name: [] for name in cases}
    for _ in range(args.repeat):
        for name, (mine, other) in cases.items():
            got[name].append(round_trips(args.rounds, mine, other))
    rows: list[list[object]] = [["threads", "wall us/round trip", "cpu us/round trip"]]
    for name, runs in got.items():
        rows.append([name, median(w for w, _ in runs), median(c for _, c in runs)])
    report(rows)


if __name__ == "__main__":
    main()
