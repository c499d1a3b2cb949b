"""Operators on the console at scale: page refresh latency, the server's longest call,
the console process's CPU.

Fills a private server (never ``EMQ_URL``) with one queue of ``--jobs`` jobs, ``--flat``
of them flat and the rest spread over ``--lanes`` lanes, serves the console in its own
process (uvicorn, behind a token unless ``--no-auth``; streams per address raised so
every simulated operator, all from 127.0.0.1, holds a stream as fifty operators from
fifty addresses would), then runs ``--operators`` operators for ``--seconds`` in
``--procs`` processes: each logs in, holds one event stream of the queue and refreshes
the queue page every second the way the page does (``_console_ops.REFRESH``: the
summary; throughput, repeatables, workers and audit at once; the history series (1 h);
the groups table and the pending tab at once), over hand-written HTTP/1.1
(``--client raw``) or httpx (``--client httpx``, the earlier generator, to compare).

Reports the page refresh p50/p99/max (and after the first 5 s apart), each path's
p50/p99/max, what the slowest 1% waited for, the longest single server command during
the run (``SLOWLOG`` at 1 ms and above; the law is 10 ms) and the CPU of the console
(per wall second and per request; the goal is under one core), the server and the
operators. ``EMQ_BENCH_PROFILE=FILE`` runs the console under cProfile (stats written to
FILE); ``EMQ_BENCH_STALLS=1`` prints its GC passes and event-loop stalls over 20 ms.

    python bench/console_load.py                        # 50 operators, 200,000 jobs, 60 s
    python bench/console_load.py --operators 10 --seconds 15 --jobs 20000   # quicker
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import secrets
import signal
import socket
import statistics
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import redis

import _common  # noqa: F401  (puts src/ on the path)
from _console_ops import Refresh, operators
from echomq import Queue
from echomq.embedded import EmbeddedServer, free_port

ROOT = Path(__file__).resolve().parents[1]
QUEUE = "orders"
#: Seconds at the start of a run whose refreshes are also shown apart (the herd).
WARM_S = 5.0

# the console; with EMQ_BENCH_PROFILE=FILE it runs under cProfile and writes the stats
# to FILE when it stops (python -m pstats FILE)
SERVE = """
import os, sys, uvicorn
from echomq.console import create_app
app = create_app(
    sys.argv[1], streams_per_client=int(sys.argv[3]), shared_reads_s=float(sys.argv[4])
)
out = os.environ.get("EMQ_BENCH_PROFILE")
if out:
    import cProfile
    prof = cProfile.Profile()
    prof.enable()
stalls = []
if os.environ.get("EMQ_BENCH_STALLS"):
    # where the console's time goes at p99: GC passes and event-loop stalls over 20 ms
    import asyncio, gc, time
    began = {}
    def on_gc(phase, info):
        if phase == "start":
            began[0] = time.perf_counter()
        elif info["generation"] == 2 or time.perf_counter() - began[0] > 0.005:
            stalls.append(("gc%d" % info["generation"], time.perf_counter() - began[0]))
    gc.callbacks.append(on_gc)
    async def watch():
        while True:
            t = time.perf_counter()
            await asyncio.sleep(0.01)
            late = time.perf_counter() - t - 0.01
            if late > 0.02:
                stalls.append(("loop", late))
    app0 = app
    async def app(scope, receive, send):
        if scope["type"] == "lifespan" and not began.get("watch"):
            began["watch"] = asyncio.ensure_future(watch())
        await app0(scope, receive, send)
try:
    uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[2]), log_level="error")
finally:  # uvicorn raises the SIGINT it caught once it has shut down
    if out:
        prof.disable()
        prof.dump_stats(out)
    if stalls:
        kinds = sorted({k for k, _ in stalls})
        print("console stalls: " + "; ".join(
            "%s %d, longest %.0f ms, total %.1f s" % (
                k, sum(1 for s in stalls if s[0] == k),
                max(d for s, d in stalls if s == k) * 1000,
                sum(d for s, d in stalls if s == k))
            for k in kinds), file=sys.stderr)
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


def pct(values: list[float], q: float) -> float:
    """The ``q`` quantile of sorted ``values`` (nearest rank), in ms."""
    return values[min(len(values) - 1, int(len(values) * q))] * 1000 if values else float("nan")


def breakdown(refreshes: list[Refresh]) -> None:
    """Each path's p50/p99/max; which request was the slowest in the refreshes at or
    over the p99 (what the slow 1% wait for), and in how many distinct seconds of the
    run they began (few: a stall everyone waited for; many: queueing spread out)."""
    by_path: dict[str, list[float]] = {}
    for _, times, _ in refreshes:
        for label, spent in times.items():
            by_path.setdefault(label, []).extend(spent)
    rows = []
    for label, v in by_path.items():
        v.sort()
        rows.append(f"{label} {pct(v, 0.5):.0f}/{pct(v, 0.99):.0f}/{v[-1] * 1000:.0f}")
    print("per path, ms p50/p99/max: " + "; ".join(rows))
    total = sorted(t for t, _, _ in refreshes)
    if not total:
        return
    cut = total[min(len(total) - 1, int(len(total) * 0.99))]
    slow = [(t, times, at) for t, times, at in refreshes if t >= cut]
    worst = Counter(max(times, key=lambda k: max(times[k])) for _, times, _ in slow)
    share = {
        label: statistics.mean(sum(times.get(label, [0.0])) / t for t, times, _ in slow)
        for label in by_path
    }
    start = min(at for _, _, at in refreshes)
    seconds = sorted({int(at - start) for _, _, at in slow})
    print(
        f"the {len(slow)} refreshes at or over the p99: slowest request "
        + ", ".join(f"{k} x{n}" for k, n in worst.most_common())
        + "; mean share of the refresh: "
        + ", ".join(f"{k} {v:.0%}" for k, v in sorted(share.items(), key=lambda kv: -kv[1]))
        + f"; they began in {len(seconds)} distinct seconds of the run {seconds[:12]}"
    )


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
    ap.add_argument(
        "--client",
        choices=("raw", "httpx"),
        default="raw",
        help="the operators' HTTP: hand-written over asyncio (default) or httpx",
    )
    ap.add_argument(
        "--no-auth",
        action="store_true",
        help="serve without a token (default: a token, each operator logs in and sends "
        "its session cookie, as a console reachable by fifty operators must)",
    )
    args = ap.parse_args()
    token = None if args.no_auth else secrets.token_urlsafe(24)
    with EmbeddedServer() as srv:
        q = Queue(QUEUE, url=srv.url)
        r = redis.Redis.from_url(srv.url)
        began = time.monotonic()
        fill(q, args.jobs, args.flat, args.lanes)
        counts = q.counts()
        print(
            f"filled {counts.pending} pending ({args.flat} flat, {args.lanes} lanes) "
            f"in {time.monotonic() - began:.0f} s; load average before the run "
            f"{os.getloadavg()[0]:.1f}"
        )
        port = free_port()
        env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
        env.pop("EMQ_CONSOLE_TOKEN_FILE", None)
        if token:
            env["EMQ_CONSOLE_TOKEN"] = token
        else:
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
            deadline = time.monotonic() + 20
            while True:
                try:
                    with socket.create_connection(("127.0.0.1", port), timeout=1):
                        break
                except OSError:
                    if time.monotonic() > deadline or console.poll() is not None:
                        raise
                    time.sleep(0.1)
            r.config_set("slowlog-log-slower-than", 1000)  # every call of 1 ms and more
            r.config_set("slowlog-max-len", 100_000)
            r.slowlog_reset()
            assert srv.proc is not None
            cpu0, wall0 = cpu_s(console.pid), time.monotonic()
            server0 = cpu_s(srv.proc.pid)
            # the operators run in --procs processes, so the load they make is not
            # limited by one Python process's CPU
            shares = [args.operators // args.procs] * args.procs
            for i in range(args.operators % args.procs):
                shares[i] += 1
            work = [
                (args.client, "127.0.0.1", port, QUEUE, token, n, args.seconds) for n in shares if n
            ]
            with multiprocessing.get_context("spawn").Pool(args.procs) as pool:
                parts = pool.starmap(operators, work)
            wall = time.monotonic() - wall0
            cpu = (cpu_s(console.pid) - cpu0) / wall
            server_cpu = (cpu_s(srv.proc.pid) - server0) / wall
            load = os.getloadavg()[0]
            refreshes = [one for part in parts for one in part[0]]
            errors = [e for part in parts for e in part[1]]
            own_cpu = sum(part[2] for part in parts) / args.seconds
            slow = [
                e for e in r.slowlog_get(100_000) if not str(e["command"]).startswith("b'SLOWLOG")
            ]
            worst = max(slow, key=lambda e: e["duration"], default=None)
        finally:
            console.send_signal(signal.SIGINT)  # the profile (if any) is written on it
            try:
                console.wait(30)
            except subprocess.TimeoutExpired:
                console.kill()
                console.wait()
    times = sorted(t for t, _, _ in refreshes)
    requests = sum(len(v) for _, spent, _ in refreshes for v in spent.values())
    print(
        f"{args.operators} operators x {args.seconds:.0f} s (client {args.client}, auth "
        f"{'off' if args.no_auth else 'on'}, shared reads {args.shared_reads:g} s): "
        f"{len(times)} page refreshes, p50 {pct(times, 0.5):.0f} ms, "
        f"p99 {pct(times, 0.99):.0f} ms, max {times[-1] * 1000 if times else 0:.0f} ms; "
        f"errors {len(errors)} {sorted(set(errors))[:5]}"
    )
    if refreshes:
        # the first seconds: every operator opens the page in the same instant (logins,
        # connections, the first reads and walk); shown apart, never left out above
        start = min(at for _, _, at in refreshes)
        warm = sorted(t for t, _, at in refreshes if at - start >= WARM_S)
        print(
            f"after the first {WARM_S:.0f} s: {len(warm)} refreshes, p50 {pct(warm, 0.5):.0f} "
            f"ms, p99 {pct(warm, 0.99):.0f} ms, max {warm[-1] * 1000 if warm else 0:.0f} ms"
        )
    breakdown(refreshes)
    print(
        f"CPU seconds per second (one core = 1.00): console {cpu:.2f}, server "
        f"{server_cpu:.2f}, the simulated operators ({args.procs} processes) {own_cpu:.2f}; "
        f"console CPU per request {cpu * wall * 1000 / max(1, requests):.3f} ms; "
        f"load average {load:.1f} on {os.cpu_count()} cores at the end"
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
