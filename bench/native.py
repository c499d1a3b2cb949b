"""Scripts vs the native module, in one run: server time and throughput per job.

For the job lifecycle enqueue -> claim -> complete of no-op jobs, one by one and in
batches of ``--batch``, each row runs the same workload on the same server (which has
loaded echomq's module) under ``executor="scripts"`` and ``executor="native"``, and a
raw ``LPUSH``/``RPOP`` loop as the floor. Per job it prints:

- ``server us/job (cmdstats)``: the server's own time in the commands the client sent
  (``INFO commandstats``: ``evalsha`` plus the pause-gate ``hexists`` for scripts, the
  ``emq.*`` commands for native, ``lpush``/``rpop`` for the raw loop); the time of the
  commands a script or a module command runs inside it is part of its own figure;
- ``server cpu us/job``: the server process's CPU (``INFO cpu``, user + sys), which
  also counts reading and writing the sockets;
- ``cmds/job``: the commands the client sent per job;
- ``jobs/s``: wall clock, client included (one client, one thread).

Each figure is the median of ``--repeat`` runs, the executors interleaved so that the
machine's drift hits them alike. Run: ``.venv/bin/python bench/native.py``
(``EMQ_URL`` measures another server: it must have loaded the module).
"""

from __future__ import annotations

import argparse
import itertools
import os
import sys
import time
from collections.abc import Callable
from typing import Any

import redis

from _common import median, report
from echomq import Queue, native
from echomq.embedded import EmbeddedServer

_names = itertools.count()
TOP = {
    "scripts": ("evalsha", "hexists"),
    "native": ("emq.enqueue", "emq.claim", "emq.complete"),
    "raw": ("lpush", "rpop"),
}


def stats(r: redis.Redis) -> tuple[dict[str, tuple[int, int]], float]:
    """Per command (calls, usec), and the server's CPU seconds so far."""
    cs = r.info("commandstats")
    per = {k.removeprefix("cmdstat_"): (int(v["calls"]), int(v["usec"])) for k, v in cs.items()}
    cpu = r.info("cpu")
    return per, float(cpu["used_cpu_user"]) + float(cpu["used_cpu_sys"])


def one_by_one(q: Queue, n: int) -> None:
    for _ in range(n):
        jid = q.enqueue(None)
        got = q.claim()
        assert got is not None and got.id == jid
        q.complete(got.id, got.token)


def batched(q: Queue, n: int, batch: int) -> None:
    for _ in range(n // batch):
        q.enqueue_many([None] * batch)
        got = q.claim_many(batch)
        assert len(got) == batch
        assert q.complete_many([(c.id, c.token) for c in got]) == []


def raw(r: redis.Redis, n: int, batch: int) -> None:
    key = f"bench-raw-{next(_names)}"
    if batch == 1:
        for _ in range(n):
            r.lpush(key, "x")
            r.rpop(key)
        return
    pipe = r.pipeline(transaction=False)
    for _ in range(n // batch):
        pipe.lpush(key, *(["x"] * batch))
        pipe.rpop(key, batch)
        pipe.execute()


def measure(
    r: redis.Redis, kind: str, run: Callable[[], None], n: int
) -> tuple[float, float, float, float]:
    """(server us/job by commandstats, server cpu us/job, cmds/job, jobs/s)."""
    before, cpu0 = stats(r)
    t0 = time.perf_counter()
    run()
    wall = time.perf_counter() - t0
    after, cpu1 = stats(r)
    calls = usec = 0
    for name in TOP[kind]:
        c0, u0 = before.get(name, (0, 0))
        c1, u1 = after.get(name, (0, 0))
        calls, usec = calls + c1 - c0, usec + u1 - u0
    return usec / n, (cpu1 - cpu0) * 1e6 / n, calls / n, n / wall


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=3000, help="jobs per one-by-one run")
    ap.add_argument("--batch", type=int, default=100)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    url = os.environ.get("EMQ_URL")
    srv: EmbeddedServer | None = None
    if url is None:
        if native.build(quiet=True) is None:
            sys.exit("bench/native.py: the native module did not build (make -C native)")
        srv = EmbeddedServer(module=True).start()
        url = srv.url
    try:
        r = redis.Redis.from_url(url)
        rows: list[list[Any]] = [
            [
                "workload",
                "executor",
                "server us/job (cmdstats)",
                "server cpu us/job",
                "cmds/job",
                "jobs/s",
            ]
        ]
        for label, n, batch in (
            ("one by one", args.jobs, 1),
            (f"batches of {args.batch}", args.jobs * 10, args.batch),
        ):
            got: dict[str, list[tuple[float, float, float, float]]] = {
                "scripts": [], "native": [], "raw": []
            }  # fmt: skip
            for _ in range(args.repeat):
                for kind in ("scripts", "native", "raw"):
                    if kind == "raw":
                        got[kind].append(measure(r, kind, lambda n=n, b=batch: raw(r, n, b), n))
                        continue
                    with Queue(f"bench-native-{next(_names)}", url=url, executor=kind) as q:
                        q.counts()  # the fence and the executor's MODULE LIST, paid once
                        assert q.ctx.executor.native is (kind == "native")
                        work: Callable[[], None] = (
                            (lambda q=q, n=n: one_by_one(q, n))
                            if batch == 1
                            else (lambda q=q, n=n, b=batch: batched(q, n, b))
                        )
                        got[kind].append(measure(r, kind, work, n))
            for kind in ("scripts", "native", "raw"):
                cols = list(zip(*got[kind]))
                rows.append([label, kind, *(median(c) for c in cols)])
            s = median(x[0] for x in got["scripts"])
            nv = median(x[0] for x in got["native"])
            sc = median(x[1] for x in got["scripts"])
            nc = median(x[1] for x in got["native"])
            rows.append([label, "native/scripts", nv / s, nc / sc, "", ""])
        report(rows)
        r.close()
    finally:
        if srv is not None:
            srv.stop()


if __name__ == "__main__":
    main()
