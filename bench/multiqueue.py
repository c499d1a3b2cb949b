"""One worker over several queues, and batch handlers (issue 28): the figures.

Measures, each worker in a process of its own, a no-op handler:

- jobs per second of one worker over ONE queue against one worker over TEN queues at
  the same concurrency: the same backlog either in the one queue, spread evenly over
  the ten, or all in the last of the ten (the nine before it empty: priority order
  claims past them); the backlog enqueued on paused queues, the clock started at the
  resume, stopped when the queues' ``metrics:completed`` counts reach the total;
  ``order="fair"`` over the ten at the same concurrency (one slot a queue: every claim
  and completion carries one job) and at ten times it;
- the CPU (from ``/proc/<pid>/task/*/schedstat``, in ns) an idle worker over ten empty
  queues uses over ``--idle-s`` seconds, against an idle worker over one;
- jobs per second of a batch handler (``Batch(size=100)``) against one-by-one.

The worker process's CPU per job (``schedstat``) is shown beside each rate: on a shared
machine it is steadier than the rate, which a neighbour's load moves.

Runs are interleaved (one of each kind per round) so a noisy neighbour hits all
kinds alike; each figure is the median over ``--repeat`` rounds.

Run: ``python bench/multiqueue.py`` (a private server unless ``EMQ_URL`` is set);
``--quick`` for a short run; ``--only idle|queues|batch`` for one part (the one-queue
run is the reference of the rates). Each rate's per-round ratio to the one-queue run
of the same round is printed too (the same neighbours).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import faulthandler
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from _common import bench_server, median, report
from echomq import Batch, JobContext, Queue, Worker, WorkerConfig

HERE = Path(__file__).resolve()


def worker_role(args: argparse.Namespace) -> None:
    """A worker with a no-op handler over ``--queues``; prints ``ready``."""
    names = args.queues.split(",")
    batch = Batch(size=args.batch) if args.batch else None

    async def noop(job: JobContext) -> None:
        return None

    async def noop_batch(jobs: list[JobContext]) -> None:
        return None

    handler = noop_batch if batch else noop
    queues = names if len(names) > 1 else names[0]
    config = WorkerConfig(beat_ms=args.beat_ms) if args.beat_ms else None
    worker = Worker(
        queues,
        handler,
        url=args.url,
        concurrency=args.concurrency,
        batch=batch,
        order=args.order,
        config=config,
    )
    signal.signal(signal.SIGTERM, lambda *_: worker.request_stop(force=True))
    signal.signal(signal.SIGUSR1, lambda *_: _dump(worker))  # where a stuck worker is
    threading.Thread(target=lambda: (worker.ready.wait(), print("ready", flush=True))).start()
    worker.run()


def _dump(worker: Worker) -> None:
    """Every thread's stack and every task of the worker's loop, on stderr."""
    faulthandler.dump_traceback(all_threads=True)
    loop = worker._loop
    if loop is not None:
        for task in asyncio.all_tasks(loop):
            print("task", task.get_name(), task.get_coro(), file=sys.stderr)
            task.print_stack(limit=20, file=sys.stderr)
    for e in worker._engines:
        print(e.name, e.stop_requested, e.more, len(e._running), e.claiming, file=sys.stderr)


class Consumer:
    def __init__(
        self,
        url: str,
        names: list[str],
        concurrency: int,
        batch: int = 0,
        order: str = "priority",
        callgrind_out: str | None = None,
    ) -> None:
        argv = [sys.executable, str(HERE), "--role", "worker", "--url", url]
        if callgrind_out is not None:  # the worker's instructions, counted by valgrind
            argv[:0] = ["valgrind", "--tool=callgrind", "--quiet"]
            argv.insert(3, f"--callgrind-out-file={callgrind_out}")
            # a beat of 10 s (the lease 30 s): what runs once a beat, whatever the jobs,
            # must not weigh on a run that valgrind slows fifty times
            argv += ["--beat-ms", "10000"]
        argv += ["--queues", ",".join(names), "--concurrency", str(concurrency)]
        argv += ["--batch", str(batch), "--order", order]
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None
        if self.proc.stdout.readline().strip() != "ready":
            raise RuntimeError("the worker did not start")

    def cpu_ns(self) -> int:
        """The CPU time of the worker's live threads in ns (``schedstat``: exact, where
        ``stat`` counts in ticks of 10 ms, too coarse for an idle worker)."""
        total = 0
        for task in Path(f"/proc/{self.proc.pid}/task").iterdir():
            with contextlib.suppress(OSError):  # a thread that just ended
                total += int((task / "schedstat").read_text().split()[0])
        return total

    def finish(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.send_signal(signal.SIGUSR1)  # its threads' stacks, on stderr
            time.sleep(1.0)
            self.proc.kill()
            raise


def _backlog(url: str, n_queues: int, spread: str, n: int) -> list[Queue]:
    """``n_queues`` paused queues holding ``n`` jobs, spread evenly or all in the last."""
    tag = time.time_ns()
    qs = [Queue(f"bench-mq-{tag}-{i}", url=url) for i in range(n_queues)]
    for q in qs:
        q.pause()
    if spread == "even":
        for i, q in enumerate(qs):
            q.enqueue_many([None] * (n // n_queues + (i < n % n_queues)))
    else:  # all in the last queue
        qs[-1].enqueue_many([None] * n)
    return qs


def _resume_and_wait(qs: list[Queue], n: int) -> None:
    """Resume every queue; return once their completions reach ``n``."""
    r = qs[0].client
    for q in qs:
        q.resume()
    end = time.monotonic() + 900
    while True:
        pipe = r.pipeline(transaction=False)
        for q in qs:
            pipe.hget(q.keys.metrics_completed, "count")
        if sum(int(x or 0) for x in pipe.execute()) >= n:
            return
        if time.monotonic() > end:
            raise RuntimeError("stuck")
        time.sleep(0.01)


def _drop(qs: list[Queue]) -> None:
    for q in qs:
        q.pause()
        while not q.obliterate(budget=10_000):
            pass
        q.close()


def instructions_per_job(
    url: str, kind: tuple[int, str, int, int, str], jobs: tuple[int, int]
) -> float:
    """The worker's instructions per job (valgrind's callgrind over the whole worker
    process): the difference between a run of ``jobs[1]`` and one of ``jobs[0]``, over
    their difference, so the start and the stop cancel out. No neighbour moves it."""
    n_queues, spread, concurrency, batch, order = kind
    totals = []
    for n in jobs:
        qs = _backlog(url, n_queues, spread, n)
        out = f"{tempfile.gettempdir()}/emq-mq-cg-{os.getpid()}-{time.time_ns()}.out"
        consumer = Consumer(url, [q.name for q in qs], concurrency, batch, order, out)
        _resume_and_wait(qs, n)
        consumer.finish()
        text = Path(out).read_text()
        Path(out).unlink()
        totals.append(int(re.findall(r"^(?:summary|totals): (\d+)", text, re.M)[-1]))
        _drop(qs)
    return (totals[1] - totals[0]) / (jobs[1] - jobs[0])


def throughput(
    url: str,
    n_queues: int,
    spread: str,
    n: int,
    concurrency: int,
    batch: int = 0,
    order: str = "priority",
) -> tuple[float, float]:
    """Jobs per second, and the worker process's CPU per job (us)."""
    qs = _backlog(url, n_queues, spread, n)
    consumer = Consumer(url, [q.name for q in qs], concurrency, batch, order)
    r = qs[0].client
    c0 = consumer.cpu_ns()
    t0 = time.perf_counter()
    for q in qs:
        # through the verb, as an operator resumes: it pushes the wake tokens of the
        # work it opens (a bare HDEL of the flag would push none, and the worker would
        # find the work only at its next beat: a second lost per run)
        q.resume()
    end = time.monotonic() + 300
    while True:
        pipe = r.pipeline(transaction=False)
        for q in qs:
            pipe.hget(q.keys.metrics_completed, "count")
        if sum(int(x or 0) for x in pipe.execute()) >= n:
            break
        if time.monotonic() > end:
            raise RuntimeError("stuck")
        time.sleep(0.002)
    elapsed = time.perf_counter() - t0
    cpu_us = (consumer.cpu_ns() - c0) / n / 1e3
    consumer.finish()
    _drop(qs)
    return n / elapsed, cpu_us


def idle_cpu(url: str, n_queues: int, seconds: float) -> float:
    tag = time.time_ns()
    names = [f"bench-idle-{tag}-{i}" for i in range(n_queues)]
    consumer = Consumer(url, names, 10)
    time.sleep(1.0)  # past the start-up
    c0 = consumer.cpu_ns()
    time.sleep(seconds)
    used = (consumer.cpu_ns() - c0) / 1e9
    consumer.finish()
    return used / seconds * 100  # percent of one core


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--role", choices=("driver", "worker"), default="driver")
    ap.add_argument("--url")
    ap.add_argument("--queues", default="bench")
    ap.add_argument("--concurrency", type=int, default=10)
    ap.add_argument("--batch", type=int, default=0)
    ap.add_argument("--order", default="priority")
    ap.add_argument("--beat-ms", type=int, default=0)
    ap.add_argument("--jobs", type=int, default=10_000, help="jobs per throughput run")
    ap.add_argument("--repeat", type=int, default=3, help="rounds (median)")
    ap.add_argument("--idle-s", type=float, default=5.0, help="idle CPU window")
    ap.add_argument("--quick", action="store_true", help="a short run")
    ap.add_argument(
        "--callgrind",
        metavar="N1,N2",
        help="instead: the worker's instructions per job under callgrind (runs of N1 and "
        "N2 jobs; slow: a minute or more a run)",
    )
    ap.add_argument(
        "--only",
        choices=("all", "idle", "queues", "batch"),
        default="all",
        help="only the idle CPU, the queues' rates, or the batch rates",
    )
    args = ap.parse_args()
    if args.role == "worker":
        return worker_role(args)
    if args.quick:
        args.jobs, args.repeat, args.idle_s = 3000, 1, 3.0
    n, c = args.jobs, args.concurrency
    one_key = f"1 queue, concurrency {c}"
    kinds = {
        one_key: (1, "even", c, 0, "priority"),
        f"10 queues, work spread evenly, concurrency {c}": (10, "even", c, 0, "priority"),
        f"10 queues, work in the last only (priority), concurrency {c}": (
            10,
            "last",
            c,
            0,
            "priority",
        ),
        f"10 queues, work spread evenly, fair, concurrency {c}": (10, "even", c, 0, "fair"),
        f"10 queues, work spread evenly, fair, concurrency {10 * c}": (
            10,
            "even",
            10 * c,
            0,
            "fair",
        ),
        "one-by-one, concurrency 100": (1, "even", 100, 0, "priority"),
        "batch handler, Batch(size=100), concurrency 1": (1, "even", 1, 100, "priority"),
        "batch handler, Batch(size=100), concurrency 2": (1, "even", 2, 100, "priority"),
        # the worker's default concurrency (10): as one-by-one's reference row runs
        f"batch handler, Batch(size=100), concurrency {c}": (1, "even", c, 100, "priority"),
    }
    if args.callgrind:
        jobs = tuple(int(x) for x in args.callgrind.split(","))
        # one queue, the ten (priority), a batch of 100 at concurrency 1 and at c
        picked = [k for k in kinds if kinds[k][4] == "priority" and kinds[k][2] in (1, c)]
        with bench_server() as url:
            ipj = {k: instructions_per_job(url, kinds[k], (jobs[0], jobs[1])) for k in picked}
        one = ipj[one_key]
        report(
            [["run", "worker instructions/job", "vs 1 queue"]]
            + [[k, f"{v:,.0f}", f"{v / one:.2f}"] for k, v in ipj.items()]
        )
        return None
    if args.only == "idle":
        kinds = {}
    elif args.only == "queues":  # the one-queue run is the reference of both
        kinds = {k: v for k, v in kinds.items() if k == one_key or v[0] > 1}
    elif args.only == "batch":
        kinds = {k: v for k, v in kinds.items() if v[0] == 1}
    runs: dict[str, list[float]] = {k: [] for k in kinds}
    cpus: dict[str, list[float]] = {k: [] for k in kinds}
    idle: dict[int, list[float]] = {1: [], 10: []} if args.only in ("all", "idle") else {}
    print(f"load average at the start: {os.getloadavg()}")
    with bench_server() as url:
        for _ in range(args.repeat):
            for kind, (nq, spread, conc, batch, order) in kinds.items():
                rate, cpu_us = throughput(url, nq, spread, n, conc, batch, order)
                runs[kind].append(rate)
                cpus[kind].append(cpu_us)
            for nq in idle:
                idle[nq].append(idle_cpu(url, nq, args.idle_s))
    print(f"load average at the end: {os.getloadavg()}")
    if kinds:
        tp = {k: median(v) for k, v in runs.items()}
        one = tp[one_key]
        cpu = {k: median(v) for k, v in cpus.items()}
        rows: list[list[object]] = [["run", "jobs/s", "vs 1 queue", "worker CPU us/job"]]
        rows += [[k, v, f"{v / one:.2f}", f"{cpu[k]:.1f}"] for k, v in tp.items()]
        report(rows)
        # each round's ratio (the same round's runs, so the same neighbours)
        for k in kinds:
            if k != one_key:
                ratios = [a / b for a, b in zip(runs[k], runs[one_key])]
                print(f"  {k}: per-round ratios {', '.join(f'{r:.2f}' for r in ratios)}")
    if idle:
        print()
        report(
            [
                ["idle worker", f"CPU % of a core over {args.idle_s:.0f} s (median)", "rounds"],
                ["1 empty queue", f"{median(idle[1]):.3f}", " ".join(f"{x:.3f}" for x in idle[1])],
                [
                    "10 empty queues",
                    f"{median(idle[10]):.3f}",
                    " ".join(f"{x:.3f}" for x in idle[10]),
                ],
            ]
        )
    if kinds:
        print("\ntargets:")
        spread_key = f"10 queues, work spread evenly, concurrency {c}"
        if spread_key in tp:
            print(f"  10 queues within 10% of one: got {tp[spread_key] / one:.2f}x")
        # at the same concurrency as the one-by-one reference (the default, 10), then
        # with one and two batches in hand (one cannot overlap the server's work)
        for size in (c, 1, 2):
            batch_key = f"batch handler, Batch(size=100), concurrency {size}"
            if batch_key in tp:
                print(
                    f"  a batch of 100 >= 3x one-by-one (batches in hand: {size}): "
                    f"got {tp[batch_key] / one:.2f}x"
                )


if __name__ == "__main__":
    main()
