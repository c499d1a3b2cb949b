"""Flow control's figures (issue 26): accuracy, cost, lane isolation, idle waiting.

Four measurements on one private server (an ``EmbeddedServer``, the module loaded when
``--executor native``):

1. ``accuracy``: a backlog, a rate limit of ``--max`` per 1,000 ms, workers serving it
   for ``--seconds`` (the default burst: max / 20 at once). Every start's server time is
   read back from the kept rows (``started_at``); every 1 s window of the steady run
   (the first and last second left out), opened at each ms, must hold between
   0.95 * max and max starts. Also the worker's wait: each start's lag behind the
   moment the window allowed it.
2. ``cost``: the server's CPU per job (``INFO cpu``, user + sys; the lowest of
   ``--repeat`` interleaved runs) for enqueue, claim and complete in batches of 50,
   with no limit and with a rate limit far above the load (and a concurrency cap far
   above it): the difference must stay under 5%.
3. ``lanes``: claim + complete throughput over 1,000 lanes when one of them is
   limited to 1 start per second, against all lanes unlimited: within 5%.
4. ``idle``: the server's CPU (a share of one core) while 10 workers wait on a queue
   limited to 1 start per second with a backlog, for ``--idle-seconds``: under 1%.

``--callgrind`` counts the server's instructions (valgrind) for ``cost`` and ``lanes``
instead of its CPU time: on a machine shared with other work the CPU figures move by
10-20% from run to run, the instruction counts by well under 1%.

Run: ``.venv/bin/python bench/ratelimit.py`` (about ``--seconds`` + 40 s); parts with
``--only accuracy,cost,lanes,idle``; ``--callgrind --only cost,lanes --jobs 3000
--per-lane 3 --repeat 1`` (a few minutes; needs valgrind).
"""

from __future__ import annotations

import argparse
import bisect
import threading
import time
from collections.abc import Callable
from typing import Any

import redis

from _common import Callgrind, report
from echomq import JobContext, Queue, Worker, WorkerConfig
from echomq.embedded import EmbeddedServer


def cpu_s(r: redis.Redis) -> float:
    info = r.info("cpu")
    return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])


def run_workers(
    q: Queue, n: int, handler: Callable[[JobContext], Any], cfg: WorkerConfig
) -> tuple[list[Worker], list[threading.Thread]]:
    workers = [
        Worker(Queue(q.name, url=URL[0], executor=EXECUTOR[0]), handler, config=cfg)
        for _ in range(n)
    ]
    threads = [threading.Thread(target=w.run, daemon=True) for w in workers]
    for t in threads:
        t.start()
    for w in workers:
        w.ready.wait(10)
    return workers, threads


def stop(workers: list[Worker], threads: list[threading.Thread]) -> None:
    for w in workers:
        w.stop(timeout=15, force=True)
    for t in threads:
        t.join(15)


URL: list[str] = [""]
EXECUTOR: list[str] = ["scripts"]


async def noop(job: JobContext) -> None:
    return None


# ---- 1. accuracy ---------------------------------------------------------------------


def accuracy(r: redis.Redis, max_jobs: int, seconds: float) -> list[list[object]]:
    q = Queue(f"acc{time.monotonic_ns()}", url=URL[0], executor=EXECUTOR[0])
    q.set_retention(completed=10_000_000)  # the kept rows carry started_at (server ms)
    q.set_rate_limit(max_jobs, 1000)
    total = int(max_jobs * (seconds + 2))
    for i in range(0, total, 1000):
        q.enqueue_many([{"n": k} for k in range(i, min(total, i + 1000))])
    cfg = WorkerConfig(concurrency=100, claim_batch=100, lease_ms=30_000, beat_ms=1000)
    workers, threads = run_workers(q, 4, noop, cfg)
    time.sleep(seconds)
    stop(workers, threads)
    starts: list[int] = []
    cursor = 0
    while True:
        page = r.zrange(q.keys.completed, cursor, cursor + 4999)
        if not page:
            break
        pipe = r.pipeline(transaction=False)
        for jid in page:
            pipe.hget(
                q.keys.job(jid.decode() if isinstance(jid, bytes) else str(jid)), "started_at"
            )
        starts += [int(x) for x in pipe.execute() if x]
        cursor += len(page)
    starts.sort()
    # windows opened at every ms of the steady run: the first and last second left out
    lo, hi = starts[0] + 1000, starts[-1] - 2000
    counts = [
        bisect.bisect_left(starts, t + 1000) - bisect.bisect_left(starts, t) for t in range(lo, hi)
    ]
    # each start's lag behind the moment the window allowed it (the start `max` before
    # it left the window): the worker's wake-up, plus the claim's round trip
    lags = sorted(starts[i] - (starts[i - max_jobs] + 1000) for i in range(max_jobs, len(starts)))
    lags = [x for x in lags if x >= 0]
    return [
        ["accuracy", "value"],
        ["starts", len(starts)],
        ["windows (1 s, every ms)", len(counts)],
        ["fewest starts in a window", min(counts) if counts else 0],
        ["most starts in a window", max(counts) if counts else 0],
        ["limit", max_jobs],
        ["starts per second (mean)", len(starts) / ((starts[-1] - starts[0]) / 1000)],
        ["lag behind the window, ms (median)", lags[len(lags) // 2] if lags else -1],
        ["lag behind the window, ms (p99)", lags[len(lags) * 99 // 100] if lags else -1],
    ]


# ---- 2. cost -------------------------------------------------------------------------

#: What the server spent: CPU us (INFO cpu), or instructions under --callgrind.
Meter = Callable[[], float]


def one_run(r: redis.Redis, meter: Meter, mode: str, jobs: int, batch: int) -> float:
    q = Queue(f"cost{time.monotonic_ns()}", url=URL[0], executor=EXECUTOR[0])
    if mode in ("rate", "both"):
        q.set_rate_limit(100_000, 1000)  # far above this loop's rate
    if mode in ("cap", "both"):
        q.set_concurrency(1_000_000)
    before = meter()
    for _ in range(0, jobs, batch):
        q.enqueue_many([{"n": 1}] * batch)
        got = q.claim_many(batch)
        q.complete_many([(c.id, c.token) for c in got])
    used = meter() - before
    for key in r.scan_iter(match=q.keys.pattern(), count=1000):
        r.delete(key)
    return used / jobs


def cost(r: redis.Redis, meter: Meter, unit: str, jobs: int, repeat: int) -> list[list[object]]:
    modes = ("none", "rate", "cap", "both")
    runs: dict[str, list[float]] = {m: [] for m in modes}
    for _ in range(repeat):
        for m in modes:  # interleaved: the machine's drift hits them alike
            runs[m].append(one_run(r, meter, m, jobs, 50))
    low = {m: min(v) for m, v in runs.items()}
    base = low["none"]
    label = {
        "none": "no limit",
        "rate": "a rate limit far above the load",
        "cap": "a concurrency cap far above the load",
        "both": "both",
    }
    rows: list[list[object]] = [["cost (server per job)", unit, "vs none, %"]]
    rows += [[label[m], low[m], (low[m] - base) / base * 100] for m in modes]
    return rows


# ---- 3. one limited lane among 1,000 ---------------------------------------------------


def lanes_run(meter: Meter, one_limited: bool, per_lane: int) -> tuple[float, float]:
    q = Queue(f"lanes{time.monotonic_ns()}", url=URL[0], executor=EXECUTOR[0])
    for g in range(1000):
        q.enqueue_many([{"n": k} for k in range(per_lane)], group=f"t{g}")
    if one_limited:
        q.set_group_rate_limit("t0", 1, 1000)
    done = 0
    before, t0 = meter(), time.perf_counter()
    want = 999 * per_lane
    while done < want:
        got = q.claim_many(100)
        q.complete_many([(c.id, c.token) for c in got])
        done += sum(1 for c in got if c.group != "t0")
        if not got:
            break
    took, used = time.perf_counter() - t0, meter() - before
    return done / took, used / done


def lanes(meter: Meter, unit: str, repeat: int, per_lane: int) -> list[list[object]]:
    plain, limited = [], []
    for _ in range(repeat):
        plain.append(lanes_run(meter, False, per_lane))
        limited.append(lanes_run(meter, True, per_lane))
    a, b = max(x[0] for x in plain), max(x[0] for x in limited)
    ca, cb = min(x[1] for x in plain), min(x[1] for x in limited)
    return [
        ["the 999 other lanes", "jobs/s", f"server {unit}/job"],
        ["all 1,000 lanes unlimited", a, ca],
        ["lane t0 limited to 1/s", b, cb],
        ["difference, %", (b - a) / a * 100, (cb - ca) / ca * 100],
    ]


# ---- 4. 10 idle workers on a queue limited to 1/s --------------------------------------


def idle(r: redis.Redis, seconds: float) -> list[list[object]]:
    q = Queue(f"idle{time.monotonic_ns()}", url=URL[0], executor=EXECUTOR[0])
    q.set_rate_limit(1, 1000)
    q.enqueue_many([{"n": k} for k in range(int(seconds) + 100)])
    cfg = WorkerConfig(concurrency=10, lease_ms=30_000)
    workers, threads = run_workers(q, 10, noop, cfg)
    time.sleep(2)  # settled
    calls0 = sum(v["calls"] for v in r.info("commandstats").values())
    before, wall = cpu_s(r), time.monotonic()
    time.sleep(seconds)
    used, wall = cpu_s(r) - before, time.monotonic() - wall
    calls = sum(v["calls"] for v in r.info("commandstats").values()) - calls0
    done = sum(w.stats.completed for w in workers)
    stop(workers, threads)
    return [
        ["10 workers on a queue limited to 1/s", "value"],
        ["server CPU, % of one core", used / wall * 100],
        ["server commands per second (every worker's beat too)", calls / wall],
        ["jobs completed (1 per second)", done],
    ]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=60.0, help="the accuracy run")
    ap.add_argument("--max", type=int, default=200, help="the accuracy run's max per 1 s")
    ap.add_argument("--jobs", type=int, default=20_000, help="jobs per cost run")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--per-lane", type=int, default=10, help="jobs per lane (lanes run)")
    ap.add_argument("--idle-seconds", type=float, default=10.0)
    ap.add_argument("--executor", choices=("scripts", "native"), default="scripts")
    ap.add_argument("--only", default="accuracy,cost,lanes,idle")
    ap.add_argument(
        "--callgrind",
        action="store_true",
        help="cost and lanes: count the server's instructions (valgrind), not its CPU",
    )
    args = ap.parse_args()
    parts = set(args.only.split(","))
    EXECUTOR[0] = args.executor
    print(f"executor: {args.executor}")
    if args.callgrind:
        # instructions: what no neighbour on a shared machine disturbs (cost, lanes only)
        with Callgrind(module=args.executor == "native") as cg:
            URL[0] = cg.url
            r = redis.Redis.from_url(cg.url)
            total = [0.0]

            def counted() -> float:
                total[0] += cg.take()
                return total[0]

            if "cost" in parts:
                report(cost(r, counted, "instr", args.jobs, args.repeat))
                print()
            if "lanes" in parts:
                report(lanes(counted, "instr", args.repeat, args.per_lane))
        return
    with EmbeddedServer(module=args.executor == "native") as srv:
        URL[0] = srv.url
        r = redis.Redis.from_url(srv.url)

        def cpu_us() -> float:
            return cpu_s(r) * 1e6

        if "accuracy" in parts:
            report(accuracy(r, args.max, args.seconds))
            print()
        if "cost" in parts:
            report(cost(r, cpu_us, "cpu us", args.jobs, args.repeat))
            print()
        if "lanes" in parts:
            report(lanes(cpu_us, "cpu us", args.repeat, args.per_lane))
            print()
        if "idle" in parts:
            report(idle(r, args.idle_seconds))


if __name__ == "__main__":
    main()
