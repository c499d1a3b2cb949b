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

``--callgrind`` counts instructions instead, which the machine's noise does not move:
the *client process's* own per call (the server is another process), for each kind and
its asyncio twin (``redis.asyncio`` ``lpush``, ``AsyncQueue.enqueue``). Each kind's loop
runs in a subprocess under valgrind's callgrind twice, with ``--jobs`` calls and with
none, after the same warm-up (the fence, the kept connection, the interpreter's
specialisation); the difference over the calls is the client's instructions per call.
``--src`` counts another checkout's client (before/after a change); ``--keep DIR``
keeps the callgrind files for ``callgrind_annotate``.

Run: ``make -C native && .venv/bin/python bench/enqueue_client.py``;
``.venv/bin/python bench/enqueue_client.py --callgrind`` (about 2 minutes; valgrind).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import redis

from _common import counted, report
from echomq import Queue, native
from echomq.embedded import EmbeddedServer

KINDS = ("raw", "scripts", "native")
SRC = str(Path(__file__).resolve().parent.parent / "src")
#: calls before the counted ones, in both runs of a kind (so they cancel out)
WARM = 300

#: the client process: ``WARM + n`` calls of one kind (``async-<kind>``: its asyncio twin)
CLIENT = """
import asyncio, sys
sys.path.insert(0, sys.argv[1])
import redis, redis.asyncio
from echomq import AsyncQueue, Queue
url, kind, n, name, warm = sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5], int(sys.argv[6])
base = kind.removeprefix("async-")
if kind.startswith("async-"):
    async def main():
        if base == "raw":
            r = redis.asyncio.Redis.from_url(url)
            call = lambda payload: r.lpush(name, "{}")
        else:
            call = AsyncQueue(name, url=url, executor=base).enqueue
        for _ in range(warm + n):
            await call({})
    asyncio.run(main())
else:
    if base == "raw":
        r = redis.Redis.from_url(url)
        call = lambda payload: r.lpush(name, "{}")
    else:
        call = Queue(name, url=url, executor=base).enqueue
    for _ in range(warm + n):
        call({})
"""


def instructions(url: str, kind: str, n: int, src: str, keep: str | None) -> int:
    """The instructions of one client process making ``WARM + n`` calls of ``kind``."""
    out_file = "/dev/null" if keep is None else os.path.join(keep, f"cg.{kind}.{n}")
    name = f"bench-cg-{kind}-{n}-{os.getpid()}"
    argv = [sys.executable, "-c", CLIENT, src, url, kind, str(n), name, str(WARM)]
    return counted(argv, out_file)


def callgrind(args: argparse.Namespace) -> None:
    """Print the client's instructions per call, each kind sync and asyncio."""
    if not shutil.which("valgrind"):
        raise SystemExit("--callgrind needs valgrind (apt-get install valgrind)")
    if args.keep:
        os.makedirs(args.keep, exist_ok=True)
    kinds = [*KINDS, *(f"async-{k}" for k in KINDS)]
    per: dict[str, float] = {}
    with EmbeddedServer(module=True) as srv:
        for kind in kinds:
            base = instructions(srv.url, kind, 0, args.src, args.keep)
            full = instructions(srv.url, kind, args.jobs, args.src, args.keep)
            per[kind] = (full - base) / args.jobs
    rows: list[list[Any]] = [["kind", "client Ir/call", "vs raw"]]
    for kind, ir in per.items():
        raw = per["async-raw" if kind.startswith("async-") else "raw"]
        rows.append([kind, int(ir), ir / raw])
    report(rows)


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
    ap.add_argument("--callgrind", action="store_true", help="count client instructions")
    ap.add_argument("--src", default=SRC, help="the client's echomq (--callgrind)")
    ap.add_argument("--keep", help="keep the callgrind files in this directory")
    args = ap.parse_args()
    if native.build(quiet=True) is None:
        raise SystemExit("the native module did not build (make -C native)")
    if args.callgrind:
        callgrind(args)
        return
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
