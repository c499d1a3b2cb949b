"""A soak run: a steady load with faults for a bounded time, then exactly-once
accounting and the bounds of every key family (issue 24, deliverable 7).

A private server (AOF, ``appendfsync always``, in a temporary directory) serves three
queues (``bench/_soak_load.py``): a flat one whose dead jobs the operator cleans, one
of lanes with limits and weights, and one keeping history (``set_retention``) with a
repeatable every second. Producers enqueue at ``--rate`` jobs/s in all (the mix:
delays, retries by design, dead jobs by design, dedup ids, handler logs and progress,
caller-chosen ids mixed with minted ones, all at priority 0). Worker processes
(``bench/_soak_worker.py``, two per queue) serve them; one of the first worker of
each queue (in turn) is SIGKILLed every ``--kill-every`` seconds and replaced, the
second ones live through the run (their RSS is the one measured); the server is
killed and restarted from its AOF once, half-way; an operator pauses and resumes a
queue, removes waiting jobs by id, cleans and reprocesses dead jobs every 10 s.

Then the load stops, the backlog drains, and (``--settle``) the run waits for the
60 s windows to pass while the queues are idle; the report follows: accounting,
every key family over time, memory, worker RSS, PING latency, waits of caller-chosen
against minted ids. The exit status is 1 when a hard check failed (see
``bench/_soak_report.py``).

Run: ``.venv/bin/python bench/soak.py`` (10 minutes at 300 jobs/s; ``--duration``,
``--rate``). ``tests/test_soak.py`` runs it for 60 s.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import redis

import _common  # noqa: F401  (puts src/ on the path)
from _soak_load import QUEUES, REPEAT, Ledger, Operator, Pinger, Producer, setup, until_answered
from _soak_report import (
    Verdict,
    account,
    check_bounds,
    pct,
    read_runs,
    series,
    show,
    starts_by_queue,
    waits,
)
from _soak_sample import Sample, Sampler
from echomq import EchoMQError, Queue
from echomq.embedded import EmbeddedServer, free_port

HERE = Path(__file__).resolve().parent


class Workers:
    """The worker processes: per queue, ``n`` of them; slot 0 of each queue is the
    one killed (in turn over the queues), the others live through the run."""

    def __init__(self, url: str, runs: Path, logs: Path, n: int) -> None:
        self.url, self.runs, self.logs, self.n = url, runs, logs, n
        self.procs: dict[tuple[str, int], subprocess.Popen[str]] = {}
        self.killed = 0
        self.spawned = 0

    def spawn(self, queue: str, slot: int) -> subprocess.Popen[str]:
        self.spawned += 1
        err = open(self.logs / f"worker-{queue}-{slot}-{self.spawned}.log", "w")  # noqa: SIM115
        proc = subprocess.Popen(
            [sys.executable, str(HERE / "_soak_worker.py"), queue, self.url, str(self.runs)],
            stdout=subprocess.PIPE,
            stderr=err,
            text=True,
            start_new_session=True,
        )
        err.close()
        self.procs[(queue, slot)] = proc
        return proc

    def start(self) -> None:
        for spec in QUEUES:
            for slot in range(self.n):
                self.spawn(spec.name, slot)
        for proc in self.procs.values():
            self.ready(proc)

    @staticmethod
    def ready(proc: subprocess.Popen[str]) -> None:
        assert proc.stdout is not None
        if proc.stdout.readline().strip() != "ready":
            raise SystemExit(f"a worker did not start (status {proc.poll()})")

    def kill_one(self) -> None:
        """SIGKILL the next queue's mortal worker and start its replacement."""
        queue = QUEUES[self.killed % len(QUEUES)].name
        self.killed += 1
        os.kill(self.procs[(queue, 0)].pid, signal.SIGKILL)
        self.procs[(queue, 0)].wait(timeout=10)
        self.ready(self.spawn(queue, 0))

    def steady(self) -> list[int]:
        return [p.pid for (_, slot), p in self.procs.items() if slot > 0]

    def stop(self) -> None:
        for p in self.procs.values():
            if p.poll() is None:
                p.terminate()
        for p in self.procs.values():
            try:
                p.wait(timeout=15)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(timeout=5)


def parse(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--duration", type=float, default=600, help="seconds of load")
    ap.add_argument("--rate", type=float, default=300, help="jobs/s over the three queues")
    ap.add_argument("--kill-every", type=float, default=45, help="SIGKILL a worker this often")
    ap.add_argument("--workers", type=int, default=2, help="worker processes per queue")
    ap.add_argument("--sample-every", type=float, default=5)
    ap.add_argument("--operator-every", type=float, default=10)
    ap.add_argument("--warmup", type=float, default=None, help="default: duration / 5")
    ap.add_argument("--drain", type=float, default=120, help="at most this long to drain")
    ap.add_argument("--settle", type=float, default=75, help="idle time before memory")
    return ap.parse_args(argv)


def run(args: argparse.Namespace) -> Verdict:
    """The whole run; prints the report and answers the verdict."""
    warmup = args.warmup if args.warmup is not None else args.duration / 5
    v = Verdict()
    with tempfile.TemporaryDirectory(prefix="echomq-soak-") as tmp:
        base = Path(tmp)
        (base / "server").mkdir()
        srv = EmbeddedServer(port=free_port(), appendonly=True, data_dir=str(base / "server"))
        srv.start()
        url = srv.url
        setup(url)
        workers = Workers(url, base / "runs", base, args.workers)
        sampler = Sampler(url, [s.name for s in QUEUES], kept=QUEUES[2].name)
        ledger, stop, stop_ops, stop_ping = Ledger(), *(threading.Event() for _ in range(3))
        samples: list[Sample] = []
        try:
            workers.start()
            time.sleep(1)  # the first beats
            before = sampler.sample(0.0, [])
            pinger = Pinger(url, stop_ping)
            producers = [Producer(s, url, args.rate * s.share, ledger, stop) for s in QUEUES]
            operator = Operator(url, url, ledger, stop_ops, args.operator_every)
            for t in (pinger, *producers, operator):
                t.start()
            t0, wall0_ms = time.monotonic(), time.time() * 1000
            restarted, next_kill, next_sample = False, args.kill_every, 0.0
            rss_warm: dict[int, int] = {}
            memory_warm = 0
            while (now := time.monotonic() - t0) < args.duration:
                if not restarted and now >= args.duration / 2:
                    restarted = True
                    srv.kill()
                    time.sleep(1.0)
                    srv.start(timeout=60)
                    print(f"[{now:.0f}s] server killed and restarted from its AOF", flush=True)
                if now >= next_kill:
                    next_kill += args.kill_every
                    workers.kill_one()
                if now >= next_sample:
                    next_sample += args.sample_every
                    s = _sample(sampler, now, workers.steady())
                    if s is not None:
                        samples.append(s)
                        if not rss_warm and now >= warmup:
                            rss_warm, memory_warm = dict(s.rss_kb), s.used_memory
                time.sleep(0.2)
            stop.set()
            for t in producers:
                t.join(timeout=90)
            stop_ops.set()
            operator.join(timeout=90)
            rss_end = samples[-1].rss_kb if samples else {}
            memory_end = samples[-1].used_memory if samples else 0
            drained = _drain(url, sampler, samples, t0, args.drain, ledger)
            print(f"[{time.monotonic() - t0:.0f}s] drained in {drained:.0f} s", flush=True)
            settle_end = time.monotonic() + args.settle
            while time.monotonic() < settle_end:
                time.sleep(min(args.sample_every, max(0.0, settle_end - time.monotonic())))
                s = _sample(sampler, time.monotonic() - t0, [])
                if s is not None:
                    samples.append(s)
            sampler.collect()
            after = sampler.sample(time.monotonic() - t0, [])
            samples.append(after)
            states, counted = sampler.states(), sampler.metrics_completed()
            stop_ping.set()
            pinger.join(timeout=10)
        finally:
            stop.set()
            stop_ops.set()
            stop_ping.set()
            workers.stop()
            sampler.close()
            srv.stop()
        first, v.same_token_twice, runs = read_runs(base / "runs")
        rows = account(v, ledger, sampler.settled, sampler.kept_done, states, counted)
        starts = starts_by_queue(base / "runs")
        check_bounds(v, samples, args.rate, args.workers, args.duration, starts, wall0_ms)
        show(
            f"Accounting ({runs:,} handler runs; {ledger.deduplicated:,} enqueues "
            f"deduplicated, {ledger.retries:,} calls sent again)",
            rows,
        )
        every = max(1, len(samples) // 20)
        show("Key families over time (all three queues)", series(samples, every))
        _figures(v, args, before, memory_warm, memory_end, after, rss_warm, rss_end, pinger)
        wait_rows, p99 = waits(ledger, first)
        show("Wait from enqueue to first start, jobs without a delay, priority 0", wait_rows)
        for q, by in p99.items():
            if by[False] and by[True] > 1.1 * by[False]:
                v.notes.append(f"{q}: chosen ids wait {by[True] / by[False]:.1f}x minted (p99)")
        print(f"\noperator: {ledger.ops}; workers killed {workers.killed}, server restarts 1")
    for note in v.notes:
        print("note:", note)
    for failure in v.failures:
        print("FAILED:", failure)
    print("hard checks:", "met" if v.ok else "MISSED")
    return v


def _sample(sampler: Sampler, t: float, pids: list[int]) -> Sample | None:
    """A sample and the evidence since the last one (None while the server restarts)."""
    try:
        sampler.collect()
        return sampler.sample(t, pids)
    except redis.RedisError:
        return None


def _drain(
    url: str, sampler: Sampler, samples: list[Sample], t0: float, limit: float, ledger: Ledger
) -> float:
    """Stop the repeatable, resume every queue, and wait (at most ``limit`` s) until no
    job waits; answers how long it took."""
    start = time.monotonic()
    for spec in QUEUES:
        with Queue(spec.name, url=url) as q:
            if spec.kept:
                until_answered(lambda q=q: q.cancel_repeat(REPEAT), ledger)
            if q.is_paused():
                until_answered(q.resume, ledger)
    while time.monotonic() - start < limit:
        s = _sample(sampler, time.monotonic() - t0, [])
        if s is not None:
            samples.append(s)
            if all(s.total(f) == 0 for f in ("pending", "active", "schedule")):
                break
        time.sleep(1)
    return time.monotonic() - start


def _figures(
    v: Verdict,
    args: argparse.Namespace,
    before: Sample,
    warm: int,
    end: int,
    after: Sample,
    rss_warm: dict[int, int],
    rss_end: dict[int, int],
    pinger: Pinger,
) -> None:
    mb = 2**20
    growth = [
        (rss_end[pid] - kb) / kb * 100 for pid, kb in rss_warm.items() if pid in rss_end and kb
    ]
    rows: list[list[object]] = [
        ["figure", "value", "target"],
        ["used_memory before load, MB", before.used_memory / mb, ""],
        ["used_memory warm (end of warm-up), MB", warm / mb, ""],
        ["used_memory end of load, MB", end / mb, ""],
        ["used_memory after drain and settle, MB", after.used_memory / mb, ""],
        ["  after drain vs warm, %", (after.used_memory - warm) / max(1, warm) * 100, "<= +10"],
        ["worker RSS growth after warm-up, max %", max(growth, default=0.0), "< 5"],
        ["PING p50 ms", pct(pinger.ms, 50), ""],
        ["PING p99 ms", pct(pinger.ms, 99), ""],
        ["PING max ms", max(pinger.ms, default=0.0), ""],
        ["PINGs refused (restart)", pinger.failed, ""],
    ]
    show(f"Figures ({args.duration:.0f} s at {args.rate:.0f} jobs/s)", rows)
    if warm and after.used_memory > warm * 1.1:
        v.notes.append("used_memory after drain more than 10% above the warm baseline")
    if max(growth, default=0.0) >= 5:
        v.notes.append("worker RSS grew 5% or more after warm-up")


def main(argv: list[str] | None = None) -> int:
    """Run the soak; 0 when every hard check held."""
    try:
        return 0 if run(parse(argv)).ok else 1
    except EchoMQError as exc:
        print("FAILED: the run stopped on", repr(exc))
        return 1


if __name__ == "__main__":
    sys.exit(main())
