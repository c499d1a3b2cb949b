"""Operators on the console at scale: page refresh latency, the server's longest call,
the console process's CPU.

Fills a private server (never ``EMQ_URL``) with one queue of ``--jobs`` jobs, ``--flat``
of them flat and the rest spread over ``--lanes`` lanes, serves the console in its own
process (uvicorn, streams per address raised so every simulated operator, all from
127.0.0.1, holds a stream as fifty operators from fifty addresses would), then runs
``--operators`` operators for ``--seconds``: each holds one event stream of the queue
and refreshes the queue page every second the way the page does (the summary, then the
throughput, the history series (1 h), repeatables, workers, audit, the groups table
and the jobs tab at once).

Reports the page refresh p50/p99/max, the longest single server command during the
run (``SLOWLOG`` at 1 ms and above; the law is 10 ms) and the console process's CPU
(user + system seconds per wall second; the goal is under one core).

    python bench/console_load.py                        # 50 operators, 200,000 jobs, 60 s
    python bench/console_load.py --operators 10 --seconds 15 --jobs 20000   # quicker
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import multiprocessing
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

import httpx
import redis

import _common  # noqa: F401  (puts src/ on the path)
from echomq import Queue
from echomq.embedded import EmbeddedServer, free_port

ROOT = Path(__file__).resolve().parents[1]
QUEUE = "orders"

SERVE = """
import sys, uvicorn
from echomq.console import create_app
app = create_app(
    sys.argv[1], streams_per_client=int(sys.argv[3]), shared_reads_s=float(sys.argv[4])
)
uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[2]), log_level="error")
"""


def fill(q: Queue, jobs: int, flat: int, lanes: int, chunk: int = 5000) -> None:
    for start in range(0, flat, chunk):
        q.enqueue_many([{"n": i} for i in range(start, min(flat, start + chunk))], name="send")
    per_lane = max(1, (jobs - flat) // lanes)
    for g in range(lanes):
        # lanes of different depths (1/3 to 5/3 of the mean), so the table has an order
        depth = max(1, per_lane * (1 + g % 5) // 3)
        for start in range(0, depth, chunk):
            q.enqueue_many(
                [{"g": g, "i": i} for i in range(start, min(depth, start + chunk))],
                name="digest",
                group=f"tenant-{g:04d}",
            )


def cpu_s(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def operator(base: str, stop: float, times: list[float], errors: list[str]) -> None:
    q = f"{base}/api/queues/{QUEUE}"
    async with httpx.AsyncClient(timeout=30) as client:

        async def hold_stream() -> None:
            try:
                async with client.stream("GET", q + "/events") as resp:
                    if resp.status_code != 200:
                        errors.append(f"stream {resp.status_code}")
                        return
                    async for _ in resp.aiter_bytes():
                        if time.monotonic() > stop:
                            return
            except (httpx.HTTPError, asyncio.CancelledError):
                return

        stream = asyncio.create_task(hold_stream())
        try:
            while time.monotonic() < stop:
                began = time.monotonic()
                try:
                    (await client.get(q)).raise_for_status()
                    replies = await asyncio.gather(
                        client.get(q + "/metrics?minutes=60"),
                        client.get(q + "/history?range=1h"),
                        client.get(q + "/repeats"),
                        client.get(q + "/workers"),
                        client.get(q + "/audit?n=50"),
                        client.get(q + "/groups?sort=depth&desc=1&offset=0&n=50"),
                        client.get(q + "/jobs?state=pending&n=20&offset=0"),
                    )
                    for reply in replies:
                        reply.raise_for_status()
                    times.append(time.monotonic() - began)
                except httpx.HTTPError as exc:
                    errors.append(type(exc).__name__)
                await asyncio.sleep(max(0.0, 1.0 - (time.monotonic() - began)))
        finally:
            stream.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await stream


def operators(base: str, n: int, seconds: float) -> tuple[list[float], list[str]]:
    """Run ``n`` operators for ``seconds`` in this process; their refresh times, errors."""
    times: list[float] = []
    errors: list[str] = []
    stop = time.monotonic() + seconds

    async def run() -> None:
        await asyncio.gather(*(operator(base, stop, times, errors) for _ in range(n)))

    asyncio.run(run())
    return times, errors


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--operators", type=int, default=50)
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--jobs", type=int, default=200_000)
    ap.add_argument("--flat", type=int, default=5000)
    ap.add_argument("--lanes", type=int, default=1000)
    ap.add_argument("--procs", type=int, default=4, help="processes the operators run in")
    ap.add_argument(
        "--shared-reads",
        type=float,
        default=1.0,
        help="seconds identical reads share one server read (emq console's default; 0: off)",
    )
    args = ap.parse_args()
    with EmbeddedServer() as srv:
        q = Queue(QUEUE, url=srv.url)
        r = redis.Redis.from_url(srv.url)
        began = time.monotonic()
        fill(q, args.jobs, args.flat, args.lanes)
        counts = q.counts()
        print(
            f"filled {counts.pending} pending ({args.flat} flat, {args.lanes} lanes) "
            f"in {time.monotonic() - began:.0f} s"
        )
        port = free_port()
        env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
        env.pop("EMQ_CONSOLE_TOKEN", None)
        console = subprocess.Popen(
            [
                sys.executable,
                "-c",
                SERVE,
                srv.url,
                str(port),
                str(args.operators + 8),
                str(args.shared_reads),
            ],
            env=env,
        )
        try:
            base = f"http://127.0.0.1:{port}"
            deadline = time.monotonic() + 20
            while True:
                try:
                    httpx.get(base + "/api/config", timeout=1).raise_for_status()
                    break
                except httpx.HTTPError:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.1)
            r.config_set("slowlog-log-slower-than", 1000)  # every call of 1 ms and more
            r.config_set("slowlog-max-len", 100_000)
            r.slowlog_reset()
            assert srv.proc is not None
            cpu0, wall0 = cpu_s(console.pid), time.monotonic()
            server0 = cpu_s(srv.proc.pid)
            own0 = resource.getrusage(resource.RUSAGE_CHILDREN)
            # the operators run in --procs processes, so the load they make is not
            # limited by one Python process's CPU
            shares = [args.operators // args.procs] * args.procs
            for i in range(args.operators % args.procs):
                shares[i] += 1
            with multiprocessing.get_context("spawn").Pool(args.procs) as pool:
                parts = pool.starmap(operators, [(base, n, args.seconds) for n in shares if n])
            times = [t for part in parts for t in part[0]]
            errors = [e for part in parts for e in part[1]]
            wall = time.monotonic() - wall0
            cpu = (cpu_s(console.pid) - cpu0) / wall
            server_cpu = (cpu_s(srv.proc.pid) - server0) / wall
            own1 = resource.getrusage(resource.RUSAGE_CHILDREN)
            own_cpu = (own1.ru_utime + own1.ru_stime - own0.ru_utime - own0.ru_stime) / wall
            slow = [
                e for e in r.slowlog_get(100_000) if not str(e["command"]).startswith("b'SLOWLOG")
            ]
            worst = max(slow, key=lambda e: e["duration"], default=None)
        finally:
            console.terminate()
            console.wait(10)
    times.sort()
    p99 = times[min(len(times) - 1, int(len(times) * 0.99))] if times else float("nan")
    print(
        f"{args.operators} operators x {args.seconds:.0f} s (shared reads "
        f"{args.shared_reads:g} s): {len(times)} page refreshes, "
        f"p50 {statistics.median(times) * 1000:.0f} ms, p99 {p99 * 1000:.0f} ms, "
        f"max {times[-1] * 1000:.0f} ms; errors {len(errors)} {sorted(set(errors))[:5]}"
    )
    print(
        f"CPU seconds per second (one core = 1.00): console {cpu:.2f}, server "
        f"{server_cpu:.2f}, the simulated operators ({args.procs} processes) {own_cpu:.2f}; "
        f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores"
    )
    over = [e for e in slow if e["duration"] > 10_000]
    if worst is None:
        print("server: no call of 1 ms or more")
    else:
        print(
            f"server: {len(slow)} calls of 1 ms or more, {len(over)} over 10 ms; the longest "
            f"{worst['duration'] / 1000:.2f} ms: {str(worst['command'])[:80]}"
        )


if __name__ == "__main__":
    main()
