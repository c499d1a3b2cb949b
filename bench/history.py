"""What opt-in history costs: server time per job, kept against not kept, in one run.

For the job lifecycle enqueue -> claim -> complete of small jobs, one by one, each row
runs the same workload on the same server under one executor (the scripts, and the
native module when it is built), claiming as a worker does (each job's ``:lock`` set
for 60 s at its claim and deleted at its completion; ``--lock-ms 0`` claims as
``Queue.claim`` does by default, without one), in three modes:

- ``none``: a queue with no retention and jobs with no ``keep_ms`` (the default: the
  seed's writes exactly);
- ``kept``: a queue with ``set_retention(completed=1000)``: every job carries its
  timeline, stays in ``completed`` after it completes, and from the 1,001st on the
  completions trim the oldest, 32 at a time (the steady state of a queue that keeps
  history);
- ``kept+result``: the same, each completion sending a small result (``{"ok": 1}``).

Per job it prints the server's own time in the commands the client sent (``INFO
commandstats``: ``evalsha`` and the pause-gate ``hexists`` for the scripts, the
``emq.*`` commands for native), the server process's CPU time (``INFO cpu``, user +
system: the commands plus reading, parsing and answering them), the commands per job,
and ``vs none``: each figure over the ``none`` row of the same executor in the same run.
Each figure is the lowest of ``--repeat`` runs (a shared machine's noise only ever adds
time), the modes interleaved so that the machine's drift hits them alike.

``--callgrind`` counts instructions instead of time, which no neighbour can disturb: it
runs the server under valgrind's callgrind (``hz 1``, so the timer adds little), fills
each mode's queue to its steady state (969-1,000 kept, trimming 32 at a time), then
counts the server's instructions per job in each phase (enqueue, claim, complete) of
``--jobs`` more jobs. About a minute; needs ``valgrind``.

Run: ``.venv/bin/python bench/history.py`` (``EMQ_URL`` measures another server), or
``.venv/bin/python bench/history.py --callgrind``.
"""

from __future__ import annotations

import argparse
import itertools
import os
from typing import Any

import redis

from _common import Callgrind, report
from echomq import Queue, native
from echomq.embedded import EmbeddedServer

_names = itertools.count()
TOP = {
    "scripts": ("evalsha", "hexists"),
    "native": ("emq.enqueue", "emq.claim", "emq.complete"),
}
MODES = ("none", "kept", "kept+result")


def usec(r: redis.Redis, names: tuple[str, ...]) -> tuple[int, int]:
    """(calls, usec) of the named commands so far."""
    cs = r.info("commandstats")
    calls = total = 0
    for name in names:
        entry = cs.get(f"cmdstat_{name}", {})
        calls += int(entry.get("calls", 0))
        total += int(entry.get("usec", 0))
    return calls, total


def cpu_s(r: redis.Redis) -> float:
    """The server process's CPU seconds so far (user + system, its main thread)."""
    info = r.info("cpu")
    return float(info["used_cpu_user_main_thread"]) + float(info["used_cpu_sys_main_thread"])


#: the lock a worker sets on each job it claims (its default: twice a 30 s lease);
#: ``--lock-ms 0`` measures ``Queue.claim``'s default, no lock
LOCK_MS = 60_000


def lifecycle(q: Queue, n: int, result: Any) -> None:
    for _ in range(n):
        jid = q.enqueue({"n": 1})
        (got,) = q.claim_many(1, lock_ms=LOCK_MS)
        assert got.id == jid
        q.complete(got.id, got.token, result=result)


def measure(
    r: redis.Redis, url: str, executor: str, mode: str, n: int
) -> tuple[float, float, float]:
    """(server us/job in the commands, server CPU us/job, cmds/job) of ``n`` jobs."""
    with Queue(f"bench-history-{next(_names)}", url=url, executor=executor) as q:
        q.counts()  # the fence and the executor's MODULE LIST, paid once
        if mode != "none":
            q.set_retention(completed=1000)
        c0, u0 = usec(r, TOP[executor])
        t0 = cpu_s(r)
        lifecycle(q, n, {"ok": 1} if mode == "kept+result" else None)
        t1 = cpu_s(r)
        c1, u1 = usec(r, TOP[executor])
        if mode != "none":
            # a deep retention trims in batches of 32: it holds 969-1000 when full
            assert min(n, 969) <= q.counts().kept <= 1000
        q.pause()
        while not q.obliterate(budget=5000):
            pass
    return (u1 - u0) / n, (t1 - t0) * 1e6 / n, (c1 - c0) / n


# ---- --callgrind: instructions per job and phase, on a server run under valgrind ----


def callgrind(n: int) -> None:
    built = native.build(quiet=True) is not None
    rows: list[list[Any]] = [
        [
            "executor",
            "mode",
            "enqueue Ir/job",
            "claim Ir/job",
            "complete Ir/job",
            "total",
            "vs none",
        ]
    ]
    for executor in ["scripts", "native"] if built else ["scripts"]:
        base = 0
        for mode in MODES:
            with Callgrind(module=executor == "native") as cg:
                name = "bench-history-cg-" + mode.replace("+", "-")
                with Queue(name, url=cg.url, executor=executor) as q:
                    result = {"ok": 1} if mode == "kept+result" else None
                    q.counts()
                    if mode != "none":
                        q.set_retention(completed=1000)
                    lifecycle(q, 1200, result)  # the steady state: the completions trim
                    cg.take()
                    ir = [0, 0, 0]
                    ids = [q.enqueue({"n": 1}) for _ in range(n)]
                    ir[0] = cg.take()
                    got = [q.claim_many(1, lock_ms=LOCK_MS)[0] for _ in range(n)]
                    ir[1] = cg.take()
                    for job in got:
                        assert job is not None
                        q.complete(job.id, job.token, result=result)
                    ir[2] = cg.take()
                    assert sorted(j.id for j in got if j) == sorted(ids)
            per = [x / n for x in ir]
            total = sum(per)
            if mode == "none":
                base = int(total)
            rows.append([executor, mode, *per, total, f"{total / base:.3f}"])
    report(rows)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=3000, help="jobs per run")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--callgrind", action="store_true", help="count instructions (valgrind)")
    ap.add_argument(
        "--lock-ms",
        type=int,
        default=LOCK_MS,
        help="the lock each claim sets (default: a worker's, 60000; 0: none)",
    )
    args = ap.parse_args()
    globals()["LOCK_MS"] = args.lock_ms
    if args.callgrind:
        callgrind(min(args.jobs, 400))
        return
    url = os.environ.get("EMQ_URL")
    srv: EmbeddedServer | None = None
    executors = ["scripts"]
    if url is None:
        built = native.build(quiet=True) is not None
        srv = EmbeddedServer(module=built).start()
        url = srv.url
        if built:
            executors.append("native")
    try:
        r = redis.Redis.from_url(url)
        rows: list[list[Any]] = [
            [
                "executor",
                "mode",
                "server us/job",
                "cpu us/job",
                "cmds/job",
                "vs none",
                "cpu vs none",
            ]
        ]
        for executor in executors:
            got: dict[str, list[tuple[float, float, float]]] = {m: [] for m in MODES}
            for _ in range(args.repeat):
                for mode in MODES:
                    got[mode].append(measure(r, url, executor, mode, args.jobs))
            base = min(x[0] for x in got["none"])
            cbase = min(x[1] for x in got["none"])
            for mode in MODES:
                us = min(x[0] for x in got[mode])
                cpu = min(x[1] for x in got[mode])
                cmds = min(x[2] for x in got[mode])
                rows.append(
                    [executor, mode, us, cpu, cmds, f"{us / base:.3f}", f"{cpu / cbase:.3f}"]
                )
        report(rows)
        r.close()
    finally:
        if srv is not None:
            srv.stop()


if __name__ == "__main__":
    main()
