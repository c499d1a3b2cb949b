"""Benchmark the operator plane's bounded verbs on a big queue: the longest server call.

The law (issue 13): no single server call of any verb or read holds the server more
than 10 ms, by the defaults alone, on a 1,000,000-job queue with 1,000 lanes. Every
figure of "longest call" is SLOWLOG's (microseconds, the wall time of one command: a
script call with everything it does, and any moment the server process was
descheduled while it ran).

- ``verbs`` (the table of the law): a queue of ``--verb-jobs`` jobs (default
  1,000,000: half flat, half over ``--lanes`` lanes, default 1,000) plus 20,000 dead
  and 10,000 scheduled; every read and verb is run by its defaults, one after the
  other, and its longest server call, calls over 10 ms and round trips are reported.
  ``drain()`` empties the whole queue; it is then filled again and ``obliterate()``
  (forced, default budget) destroys it.
- ``obliterate`` of a queue holding ``--jobs`` jobs (default 1,000,000: 90% flat
  pending, 10% spread over 10 lanes, 1% of them with 3 log lines), once per budget
  (``--budgets``, default 100,1000,10000; the queue is refilled for each).
- ``drain`` of ``--drain-jobs`` jobs (default 100,000, same mix) with its default budget.
- ``retry``: ``reprocess_jobs(error=...)`` over ``--retry-jobs`` dead jobs (default
  100,000, beside a fifth as many that do not match), a dry run then the run.

The machine: each part reports the load average and how many cores other processes
(neither this client nor the server) kept busy while it ran, read from ``/proc``, so
a figure taken on a loaded machine says so. Each call is also read from the kernel's
scheduler statistics of the server's main thread: its time on a CPU (what the call
cost the server) and its time waiting for one (what the machine's other work added
to SLOWLOG's wall time), with the command behind any call over 10 ms.

The queue is filled through ``enqueue_many`` (the real enqueue script, pipelined) and
log lines through a pipeline of ``RPUSH``; filling is timed separately.

Usage::

    python bench/operator_plane.py                         # every part (a few minutes)
    python bench/operator_plane.py --only verbs            # the table of the law only
    python bench/operator_plane.py --only verbs --verb-jobs 100000 --lanes 100   # smaller
    EMQ_URL=redis://host:port/0 python bench/operator_plane.py   # against another server
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import redis

from _common import bench_server, report
from echomq import Queue, admin
from echomq.ids import new_ids
from echomq.scripts import Plan, all_scripts
from echomq.transport import SyncRunner

FILL_CHUNK = 20_000
GROUPS = 10
LOG_LINES = 3
#: The law: no single server call over this.
BOUND_MS = 10.0


# ------------------------------------------------------------------ the machine
def _busy_ticks() -> int:
    """Every CPU's busy time since boot (/proc/stat), in clock ticks."""
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    idle = fields[3] + fields[4]  # idle, iowait
    return sum(fields[:8]) - idle


def _proc_ticks(pid: int) -> int:
    """A process's CPU time (user + system, its threads included), in clock ticks."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            parts = f.read().rsplit(")", 1)[1].split()
        return int(parts[11]) + int(parts[12])
    except (OSError, IndexError, ValueError):
        return 0


class Machine:
    """How loaded the machine was while a part ran: the load average, and the cores
    that processes other than this client and the server kept busy (from /proc; on a
    system without it, only the load average)."""

    def __init__(self, r: redis.Redis) -> None:
        self.cpus = os.cpu_count() or 1
        self.server_pid = int(r.info("server").get("process_id", 0))
        self.hz = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
        self.have_proc = os.path.exists("/proc/stat")

    def _snap(self) -> tuple[float, int, int, int]:
        if not self.have_proc:
            return time.monotonic(), 0, 0, 0
        own = _proc_ticks(os.getpid())
        server = _proc_ticks(self.server_pid) if self.server_pid else 0
        return time.monotonic(), _busy_ticks(), own, server

    @contextmanager
    def watch(self, part: str) -> Iterator[None]:
        """Print the machine's load around a part."""
        t0, busy0, own0, srv0 = self._snap()
        load0 = os.getloadavg()[0]
        try:
            yield
        finally:
            t1, busy1, own1, srv1 = self._snap()
            load1 = os.getloadavg()[0]
            wall = max(t1 - t0, 1e-9)
            line = (
                f"[machine during {part}: load average {load0:.2f} -> {load1:.2f} "
                f"on {self.cpus} CPUs"
            )
            if self.have_proc:
                others = max(0.0, (busy1 - busy0) - (own1 - own0) - (srv1 - srv0)) / self.hz / wall
                server = (srv1 - srv0) / self.hz / wall
                line += f"; other processes used {others:.2f} cores, the server {server:.2f}"
                if others >= 0.5:
                    line += " -- LOADED: other work competed for the CPUs"
            print(line + "]", flush=True)


# ------------------------------------------------------------------ filling
def fill(q: Queue, r: redis.Redis, n: int, *, grouped_share: float, log_share: float) -> float:
    """Enqueue ``n`` jobs (a share of them into lanes) and logs on a share; seconds taken."""
    t0 = time.perf_counter()
    grouped = int(n * grouped_share)
    made = 0
    ids: list[str] = []
    while made < n:
        k = min(FILL_CHUNK, n - made)
        if made < grouped:
            k = min(k, grouped - made)
            group: str | None = f"g{(made // FILL_CHUNK) % GROUPS}"
        else:
            group = None
        ids = q.enqueue_many(({"i": made + i, "pad": "x" * 32} for i in range(k)), group=group)
        every = int(1 / log_share) if log_share > 0 else 0
        if every:
            pipe = r.pipeline(transaction=False)
            for jid in ids[::every]:
                pipe.rpush(q.keys.logs(jid), *(f"log line {j} of {jid}" for j in range(LOG_LINES)))
            pipe.execute()
        made += k
    return time.perf_counter() - t0


def fill_lanes(q: Queue, n: int, lanes: int) -> float:
    """``n`` jobs: half flat, half spread evenly over ``lanes`` lanes; seconds taken."""
    t0 = time.perf_counter()
    flat = n // 2
    made = 0
    while made < flat:
        k = min(FILL_CHUNK, flat - made)
        q.enqueue_many({"i": made + i} for i in range(k))
        made += k
    per = max(1, (n - flat) // lanes)
    for g in range(lanes):
        q.enqueue_many(({"i": i} for i in range(per)), group=f"lane{g}")
    return time.perf_counter() - t0


def make_dead(q: Queue, r: redis.Redis, n: int, error: str, name: str | None = None) -> float:
    """Put ``n`` dead jobs in the queue by hand (rows as retry leaves them); seconds taken."""
    t0 = time.perf_counter()
    now = int(time.time() * 1000)
    ids = new_ids(n)
    for i in range(0, n, FILL_CHUNK):
        pipe = r.pipeline(transaction=False)
        chunk = ids[i : i + FILL_CHUNK]
        for jid in chunk:
            row = {
                "state": "dead",
                "attempts": "1",
                "failures": "1",
                "max_attempts": "1",
                "payload": '{"pad":"xxxxxxxxxxxxxxxx"}',
                "last_error": error,
            }
            if name:
                row["name"] = name
            pipe.hset(q.keys.job(jid), mapping=row)
        pipe.zadd(q.keys.dead, {jid: now for jid in chunk})
        pipe.execute()
    return time.perf_counter() - t0


# ------------------------------------------------------------------ measuring
def percentile(xs: list[float], p: float) -> float:
    """The ``p`` quantile of ``xs`` (nearest rank): a high one that one stall does not set."""
    ordered = sorted(xs)
    return ordered[min(len(ordered) - 1, int(p * len(ordered)))]


class Probe:
    """The server's main thread, read around each call from the kernel's scheduler
    statistics (``/proc/<pid>/task/<pid>/schedstat``: time on a CPU, time runnable but
    waiting for one). A call's on-CPU time is what the call cost the server; its wait
    is the time the machine's other work held the server off a CPU while the call was
    in flight, which SLOWLOG's wall time counts too. Without the file (another host,
    another system) every reading is ``None``."""

    def __init__(self, pid: int) -> None:
        path = f"/proc/{pid}/task/{pid}/schedstat"
        self.path = path if pid and os.path.exists(path) else None

    def read(self) -> tuple[int, int] | None:
        """``(ns on a CPU, ns waiting for one)`` since the thread started."""
        if self.path is None:
            return None
        with open(self.path) as f:
            run, wait = f.read().split()[:2]
        return int(run), int(wait)


PROBE = Probe(0)


@dataclass
class Call:
    """One server call: the client's round trip, and the server thread's time on a CPU
    and waiting for one during it (ms; ``None`` without the scheduler statistics)."""

    rtt_ms: float
    cpu_ms: float | None
    wait_ms: float | None


def drive_timed(runner: SyncRunner, plan: Plan[Any]) -> tuple[Any, list[Call]]:
    """Run a plan step by step; returns its result and each server call (:class:`Call`)."""
    calls: list[Call] = []
    try:
        op = next(plan)
    except StopIteration as stop:  # a plan that sends nothing
        return stop.value, calls
    try:
        while True:
            s0 = PROBE.read()
            t0 = time.perf_counter()
            reply = runner.execute(op)
            rtt = (time.perf_counter() - t0) * 1000
            s1 = PROBE.read()
            if s0 is None or s1 is None:
                calls.append(Call(rtt, None, None))
            else:
                calls.append(Call(rtt, (s1[0] - s0[0]) / 1e6, (s1[1] - s0[1]) / 1e6))
            op = plan.send(reply)
    except StopIteration as stop:
        return stop.value, calls


def cpu_max(calls: list[Call]) -> float | str:
    """The longest on-CPU time of one call (ms), or ``-`` without the statistics."""
    cpu = [c.cpu_ms for c in calls if c.cpu_ms is not None]
    return max(cpu) if cpu else "-"


def wait_max(calls: list[Call]) -> float | str:
    """The longest wait for a CPU within one call (ms), or ``-``."""
    wait = [c.wait_ms for c in calls if c.wait_ms is not None]
    return max(wait) if wait else "-"


@contextmanager
def slowlog(r: redis.Redis) -> Iterator[Callable[[], tuple[float, int, float]]]:
    """The longest single server call (SLOWLOG, microsecond resolution) since the block began.

    Every call of 0.2 ms or more is logged (the log is made long enough for a run; the
    commands a script sends are logged too, and never outlast their script), the log
    and the command statistics are reset first, and the settings are restored after.

    Yields:
        ``stats()`` -> ``(the longest call in ms (0.0 when none reached 0.2 ms), how
        many calls took over 10 ms, the mean script call in ms (INFO commandstats))``.
    """
    cfg = r.config_get("slowlog-*")
    r.config_set("slowlog-log-slower-than", 200)
    r.config_set("slowlog-max-len", 100_000)
    r.slowlog_reset()
    r.config_resetstat()

    def stats() -> tuple[float, int, float]:
        entries = [e for e in r.slowlog_get(100_000) if not _is_ours(e["command"])]
        entries.sort(key=lambda e: int(e["id"]))
        us = [float(e["duration"]) for e in entries]
        evalsha = r.info("commandstats").get("cmdstat_evalsha", {})
        for i, e in enumerate(entries):
            if e["duration"] > BOUND_MS * 1000:
                print(
                    f"    over {BOUND_MS:.0f} ms: {e['duration'] / 1000:.1f} ms",
                    f"(logged call {i + 1:,} of {len(entries):,})",
                    _name(e["command"]),
                )
        return (
            max(us, default=0.0) / 1000,
            sum(1 for d in us if d > BOUND_MS * 1000),
            float(evalsha.get("usec_per_call", 0.0)) / 1000,
        )

    try:
        yield stats
    finally:
        r.config_set("slowlog-log-slower-than", str(cfg["slowlog-log-slower-than"]))
        r.config_set("slowlog-max-len", str(cfg["slowlog-max-len"]))


_SCRIPTS = {s.sha: s.name for s in all_scripts()}


def _name(command: Any) -> str:
    """A logged command, its script named when it is one."""
    text = command.decode("utf-8", "replace") if isinstance(command, bytes) else str(command)
    words = text.split(" ")
    if words[0].upper() == "EVALSHA" and len(words) > 1:
        return f"script {_SCRIPTS.get(words[1], words[1])} {' '.join(words[2:])[:60]}"
    return text[:80]


def _is_ours(command: Any) -> bool:
    """The bench's own bookkeeping commands (SLOWLOG, CONFIG, INFO) are not measured."""
    text = command.decode("utf-8", "replace") if isinstance(command, bytes) else str(command)
    return text.split(" ", 1)[0].upper() in ("SLOWLOG", "CONFIG", "INFO")


def _ms(v: float) -> float | str:
    """SLOWLOG logs calls of 0.2 ms or more: 0 means "under 0.2 ms"."""
    return v if v > 0 else "<0.2"


def used_mb(r: redis.Redis) -> float:
    """The server's used memory in MiB."""
    return float(r.info("memory")["used_memory"]) / 2**20


def _obliterate_all(q: Queue, budget: int | None = None) -> tuple[int, list[Call]]:
    """Obliterate a paused queue to the end; (calls, each call)."""
    calls: list[Call] = []
    while True:
        plan = (
            admin.obliterate(q.ctx, True)
            if budget is None
            else admin.obliterate(q.ctx, True, budget)
        )
        gone, times = drive_timed(q.runner, plan)
        calls += times
        if gone:
            return len(calls), calls


# ------------------------------------------------------------------ the parts
def bench_obliterate(
    url: str, jobs: int, budgets: list[int], args: argparse.Namespace, m: Machine
) -> None:
    r = redis.Redis.from_url(url)
    rows: list[list[object]] = [
        [
            "budget",
            "jobs",
            "calls",
            "longest call ms",
            "calls > 10 ms",
            "longest on-CPU ms",
            "longest wait ms",
            "mean call ms",
            "p99 round trip ms",
            "total s",
            "fill s",
            "memory MiB",
        ]
    ]
    for budget in budgets:
        with Queue(f"bench-obliterate-{budget}", url=url) as q:
            fill_s = fill(q, r, jobs, grouped_share=args.grouped_share, log_share=args.log_share)
            mem = used_mb(r)
            q.pause()
            with m.watch(f"obliterate budget={budget}"), slowlog(r) as stats:
                t0 = time.perf_counter()
                n, calls = _obliterate_all(q, budget)
                total = time.perf_counter() - t0
                longest, over, mean = stats()
            left = sum(1 for _ in r.scan_iter(match=q.keys.pattern(), count=10_000))
            assert left == 0, f"{left} keys left after obliterate"
            rows.append(
                [
                    budget,
                    jobs,
                    n,
                    _ms(longest),
                    over,
                    cpu_max(calls),
                    wait_max(calls),
                    mean,
                    percentile([c.rtt_ms for c in calls], 0.99),
                    total,
                    fill_s,
                    mem,
                ]
            )
    print()
    print(f"obliterate of a queue holding {jobs:,} jobs (90% flat, 10% in {GROUPS} lanes)")
    report(rows)
    r.close()


def bench_drain(url: str, jobs: int, args: argparse.Namespace, m: Machine) -> None:
    r = redis.Redis.from_url(url)
    with Queue("bench-drain", url=url) as q:
        fill(q, r, jobs, grouped_share=args.grouped_share, log_share=args.log_share)
        with m.watch("drain"), slowlog(r) as stats:
            t0 = time.perf_counter()
            drained, times = drive_timed(q.runner, admin.drain(q.ctx))
            total = time.perf_counter() - t0
            longest, over, mean = stats()
        assert drained == jobs, (drained, jobs)
        print()
        print(f"drain of {jobs:,} jobs (default budget {admin.DEFAULT_DRAIN_BUDGET:,} per call)")
        report(
            [
                [
                    "jobs",
                    "calls",
                    "longest call ms",
                    "calls > 10 ms",
                    "longest on-CPU ms",
                    "longest wait ms",
                    "mean call ms",
                    "total s",
                ],
                [
                    jobs,
                    len(times),
                    _ms(longest),
                    over,
                    cpu_max(times),
                    wait_max(times),
                    mean,
                    total,
                ],
            ]
        )
    r.close()


def bench_retry(url: str, n: int, m: Machine) -> None:
    """Retry (reprocess) ``n`` dead jobs by an error filter (beside ``n // 5`` that do not
    match): total time and the longest call."""
    r = redis.Redis.from_url(url)
    with Queue("bench-retry", url=url) as q:
        fill_s = make_dead(q, r, n, "db timeout after 5 s")
        fill_s += make_dead(q, r, n // 5, "bad input")
        plan = Queue.reprocess_jobs.plan
        with m.watch("retry"):
            with slowlog(r) as stats:
                t0 = time.perf_counter()
                dry, dry_calls = drive_timed(q.runner, plan(q.ctx, error="timeout", dry_run=True))
                dry_s = time.perf_counter() - t0
                dry_ms = stats()[:2]
            with slowlog(r) as stats:
                t0 = time.perf_counter()
                res, calls = drive_timed(q.runner, plan(q.ctx, error="timeout"))
                total = time.perf_counter() - t0
                run_ms = stats()[:2]
        assert res.matched == dry.matched == n, (res, dry)
        print()
        print(f"reprocess_jobs(error=...) of {n:,} dead jobs (beside {n // 5:,} that do not match)")
        report(
            [
                [
                    "run",
                    "matched",
                    "calls",
                    "longest call ms",
                    "calls > 10 ms",
                    "longest on-CPU ms",
                    "longest wait ms",
                    "total s",
                    "fill s",
                ],
                [
                    "dry run",
                    dry.matched,
                    dry.calls,
                    _ms(dry_ms[0]),
                    dry_ms[1],
                    cpu_max(dry_calls),
                    wait_max(dry_calls),
                    dry_s,
                    fill_s,
                ],
                [
                    "retry",
                    res.matched,
                    res.calls,
                    _ms(run_ms[0]),
                    run_ms[1],
                    cpu_max(calls),
                    wait_max(calls),
                    total,
                    "",
                ],
            ]
        )
        q.pause()
        _obliterate_all(q)
    r.close()


def bench_verbs(url: str, n: int, lanes: int, m: Machine) -> None:
    """The longest server call of every read and verb on a queue of ``n`` jobs in
    ``lanes`` lanes, each run by its defaults (the plan is driven call by call)."""
    r = redis.Redis.from_url(url)
    rows: list[list[object]] = [
        [
            "verb",
            "longest call ms",
            "calls > 10 ms",
            "longest on-CPU ms",
            "longest wait ms",
            "calls",
            "client s",
        ]
    ]
    q = Queue("bench-verbs", url=url)

    def row(label: str, longest: float, over: int, calls: list[Call], took: float) -> None:
        rows.append([label, _ms(longest), over, cpu_max(calls), wait_max(calls), len(calls), took])
        flag = "  OVER" if longest > BOUND_MS else ""
        print(
            f"  {label}: {longest:.2f} ms in {len(calls)} calls "
            f"(on-CPU {cpu_max(calls)}, wait {wait_max(calls)}){flag}",
            flush=True,
        )

    def measure(label: str, verb: str, *a: Any, **kw: Any) -> Any:
        plan = getattr(Queue, verb).plan(q.ctx, *a, **kw)
        with slowlog(r) as stats:
            t0 = time.perf_counter()
            out, calls = drive_timed(q.runner, plan)
            took = time.perf_counter() - t0
            longest, over, _ = stats()
        row(label, longest, over, calls, took)
        return out

    with m.watch("the fill of the verbs' queue"):
        fill_s = fill_lanes(q, n, lanes)
        fill_s += make_dead(q, r, 10_000, "boom: db timeout", name="resize")
        fill_s += make_dead(q, r, 10_000, "bad input", name="send")
        sched = q.enqueue_many(({"s": i} for i in range(10_000)), delay_ms=3_600_000)
    print(f"filled {q.counts()} in {fill_s:.1f} s", flush=True)
    lane_job = q.browse("pending", 1, n // 2 + 7)[0]
    flat_job = q.browse("pending", 1, 10)[0]
    dead_job = q.browse("dead", 1, 0)[0]
    deep = n // 3
    with m.watch("the reads and verbs"):
        # reads
        measure("counts", "counts")
        measure("get_job", "get_job", lane_job)
        measure("job_state", "job_state", lane_job)
        measure("is_paused", "is_paused")
        measure("metrics", "metrics")
        for off in (0, 10_000, deep):
            measure(f"browse pending, offset {off:,}", "browse", "pending", 20, off)
        measure(f"browse pending order=run, offset {deep:,}", "browse", "pending", 20, deep, "run")
        measure("browse dead, offset 5,000", "browse", "dead", 20, 5000)
        measure("browse scheduled order=run", "browse", "scheduled", 20, 0, "run")
        measure("get_job_logs", "get_job_logs", lane_job)
        measure("audit(50)", "audit", 50)
        measure("groups (every page)", "groups")
        measure("group_depth", "group_depth", "lane7")
        measure("repeats", "repeats")
        measure("server_time", "server_time")
        measure("queue_exists", "queue_exists")
        measure("job_page pending, deep offset", "job_page", "pending", 20, deep // 2)
        measure("job_page pending of one lane", "job_page", "pending", 20, 0, "lane500")
        measure("job_page dead", "job_page", "dead", 200)
        measure("find_jobs pending (default budget)", "find_jobs", "pending", "no-such-text")
        measure("find_jobs dead by error", "find_jobs", "dead", "timeout", fields=["error"])
        measure("job_view", "job_view", lane_job)
        measure("groups_page(100)", "groups_page", "0", 100)
        measure("throughput(1440)", "throughput", 1440)
        # the lifecycle
        measure("enqueue", "enqueue", {"x": 1})
        measure("enqueue_many (1,000)", "enqueue_many", [{"x": i} for i in range(1000)])
        measure("claim", "claim")
        got = measure("claim_many(100)", "claim_many", 100)
        measure("complete", "complete", got[0].id, got[0].token)
        measure("complete_many(50)", "complete_many", [(c.id, c.token) for c in got[1:51]])
        measure("retry", "retry", got[51].id, got[51].token, "boom")
        measure("delay", "delay", got[52].id, got[52].token, 60_000)
        measure("extend_lock", "extend_lock", got[53].id, got[53].token, 60_000)
        measure("release", "release", got[54].id, got[54].token)
        measure("promote", "promote")
        measure("reap", "reap")
        measure("check_stalled", "check_stalled")
        # operator verbs, one job or one setting
        measure("pause", "pause")
        measure("resume", "resume")
        measure("update_data", "update_data", sched[0], {"x": 1})
        measure("update_progress", "update_progress", lane_job, 50)
        measure("add_log", "add_log", lane_job, "a line", keep=100)
        measure("remove_job", "remove_job", flat_job)
        measure("reprocess_job", "reprocess_job", dead_job)
        measure("promote_job", "promote_job", sched[0])
        measure("reassign", "reassign", lane_job, "lane3")
        measure("pause_group", "pause_group", "lane1")
        measure("resume_group", "resume_group", "lane1")
        measure("set_group_limit", "set_group_limit", "lane1", 5)
        measure("clear_group_limit", "clear_group_limit", "lane1")
        measure("set_group_weight", "set_group_weight", "lane1", 2)
        measure("repeat", "repeat", "nightly", cron="0 3 * * *", payload={"r": 1})
        measure("cancel_repeat", "cancel_repeat", "nightly")
        # bulk verbs by filter, and the index rebuild
        measure("reprocess_jobs dry run (20,000 dead)", "reprocess_jobs", dry_run=True)
        measure("remove_jobs dead dry run", "remove_jobs", "dead", dry_run=True)
        measure("clean dry run", "clean", 0, dry_run=True)
        measure("reprocess_jobs(error=...) (10,000)", "reprocess_jobs", error="timeout")
        measure("remove_jobs dead name=send (10,000)", "remove_jobs", "dead", name="send")
        measure("promote_jobs (10,000 scheduled)", "promote_jobs")
        make_dead(q, r, 10_000, "boom")
        measure("clean (10,000 dead)", "clean", 0)
        measure("remove_jobs pending of one lane", "remove_jobs", "pending", group="lane9")
        measure(f"reindex (an indexed queue of {n:,})", "reindex")
        measure("drain_group (one lane)", "drain_group", "lane2")
        measure("drain_step", "drain_step")
        measure(f"drain (the whole queue, {q.counts().pending:,} pending)", "drain")
    with m.watch("the refill"):
        fill_s = fill_lanes(q, n, lanes)
    print(f"filled {q.counts()} again in {fill_s:.1f} s", flush=True)
    with m.watch("obliterate"):
        q.pause()
        with slowlog(r) as stats:
            t0 = time.perf_counter()
            _, calls = _obliterate_all(q)
            took = time.perf_counter() - t0
            longest, over, _ = stats()
        row(f"obliterate (forced; {n:,} jobs, {lanes:,} lanes)", longest, over, calls, took)
    assert not any(True for _ in r.scan_iter(match=q.keys.pattern(), count=10_000))
    print()
    print(
        f"longest server call per verb on a queue of {n:,} jobs in {lanes:,} lanes (SLOWLOG; "
        f"<0.2 = no call reached 0.2 ms)"
    )
    report(rows)
    worst = max((x[1] for x in rows[1:] if isinstance(x[1], float)), default=0.0)
    cpu = max((x[3] for x in rows[1:] if isinstance(x[3], float)), default=0.0)
    print(
        f"the longest call of all: {worst:.2f} ms of wall time, {cpu:.2f} ms on a CPU "
        f"(the bound: {BOUND_MS:.0f} ms)"
    )
    q.close()
    r.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=1_000_000, help="jobs to obliterate")
    parser.add_argument("--drain-jobs", type=int, default=100_000, help="jobs to drain")
    parser.add_argument("--budgets", default="100,1000,10000", help="obliterate budgets")
    parser.add_argument("--grouped-share", type=float, default=0.1, help="share in lanes")
    parser.add_argument("--log-share", type=float, default=0.01, help="share with logs")
    parser.add_argument("--retry-jobs", type=int, default=100_000, help="dead jobs to filter")
    parser.add_argument("--verb-jobs", type=int, default=1_000_000, help="jobs for the verbs")
    parser.add_argument("--lanes", type=int, default=1000, help="lanes for the verbs")
    parser.add_argument(
        "--only",
        default="verbs,retry,drain,obliterate",
        help="which parts to run (comma separated: verbs, retry, drain, obliterate)",
    )
    args = parser.parse_args()
    parts = set(args.only.split(","))
    budgets = [int(b) for b in args.budgets.split(",") if b]
    with bench_server() as url:
        with redis.Redis.from_url(url) as r:
            # load every script up front, so no NOSCRIPT round lands inside a measurement
            for s in all_scripts():
                r.script_load(s.body)
            m = Machine(r)
            global PROBE
            PROBE = Probe(m.server_pid)
            info = r.info("server")
        print(
            f"server {info.get('redis_version')} (pid {m.server_pid}), {m.cpus} CPUs, "
            f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}",
            flush=True,
        )
        t0 = time.perf_counter()
        with m.watch("the whole run"):
            if "verbs" in parts:
                bench_verbs(url, args.verb_jobs, args.lanes, m)
            if "retry" in parts:
                bench_retry(url, args.retry_jobs, m)
            if "drain" in parts:
                bench_drain(url, args.drain_jobs, args, m)
            if "obliterate" in parts:
                bench_obliterate(url, args.jobs, budgets, args, m)
        print(f"\nwhole run: {time.perf_counter() - t0:.1f} s")


if __name__ == "__main__":
    main()
