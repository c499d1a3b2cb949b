"""What opt-in history costs: server time per job, kept against not kept, in one run.

For the job lifecycle enqueue -> claim -> complete of small jobs, one by one, each row
runs the same workload on the same server under one executor (the scripts, and the
native module when it is built), in three modes:

- ``none``: a queue with no retention and jobs with no ``keep_ms`` (the default: the
  seed's writes exactly);
- ``kept``: a queue with ``set_retention(completed=1000)``: every job carries its
  timeline, stays in ``completed`` after it completes, and from the 1,001st on each
  completion trims the oldest (the steady state of a queue that keeps history);
- ``kept+result``: the same, each completion sending a small result (``{"ok": 1}``).

Per job it prints the server's own time in the commands the client sent (``INFO
commandstats``: ``evalsha`` and the pause-gate ``hexists`` for the scripts, the
``emq.*`` commands for native), the commands per job, and ``vs none``: that figure over
the ``none`` row of the same executor in the same run. Each figure is the median of
``--repeat`` runs, the modes interleaved so that the machine's drift hits them alike.

Run: ``.venv/bin/python bench/history.py`` (``EMQ_URL`` measures another server).
"""

from __future__ import annotations

import sys

# bench/ holds an ``operator.py``, which would shadow the stdlib module of that name
# for every later import while this directory leads sys.path; move it to the end.
if __name__ == "__main__" and sys.path and sys.path[0].rstrip("/").endswith("bench"):
    sys.path.append(sys.path.pop(0))

import argparse
import itertools
import os
from typing import Any

import redis

from _common import median, report
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


def lifecycle(q: Queue, n: int, result: Any) -> None:
    for _ in range(n):
        jid = q.enqueue({"n": 1})
        got = q.claim()
        assert got is not None and got.id == jid
        q.complete(got.id, got.token, result=result)


def measure(r: redis.Redis, url: str, executor: str, mode: str, n: int) -> tuple[float, float]:
    """(server us/job, cmds/job) of one run of ``n`` jobs."""
    with Queue(f"bench-history-{next(_names)}", url=url, executor=executor) as q:
        q.counts()  # the fence and the executor's MODULE LIST, paid once
        if mode != "none":
            q.set_retention(completed=1000)
        c0, u0 = usec(r, TOP[executor])
        lifecycle(q, n, {"ok": 1} if mode == "kept+result" else None)
        c1, u1 = usec(r, TOP[executor])
        if mode != "none":
            assert q.counts().kept == min(n, 1000)
        q.pause()
        while not q.obliterate(budget=5000):
            pass
    return (u1 - u0) / n, (c1 - c0) / n


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=3000, help="jobs per run")
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
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
        rows: list[list[Any]] = [["executor", "mode", "server us/job", "cmds/job", "vs none"]]
        for executor in executors:
            got: dict[str, list[tuple[float, float]]] = {m: [] for m in MODES}
            for _ in range(args.repeat):
                for mode in MODES:
                    got[mode].append(measure(r, url, executor, mode, args.jobs))
            base = median(x[0] for x in got["none"])
            for mode in MODES:
                us = median(x[0] for x in got[mode])
                cmds = median(x[1] for x in got[mode])
                rows.append([executor, mode, us, cmds, f"{us / base:.3f}"])
        report(rows)
        r.close()
    finally:
        if srv is not None:
            srv.stop()


if __name__ == "__main__":
    main()
