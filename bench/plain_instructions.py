"""The worker's own instructions per job, plain (``def``) handler against ``async def``.

CPU time on a shared machine moves by 20-50% from run to run (``bench/plain_handlers.py``
measures it); the instructions a worker process runs do not. For each kind this fills a
queue with ``--jobs`` jobs (each body one 16-byte ``write(2)``), then runs one worker
process (``Worker``, concurrency 10) under valgrind's callgrind until it completed them
(it watches its own count: no server call), and once more with no jobs; the difference
over the jobs is the worker's instructions per job (startup and imports left out).
Under valgrind the threads run one at a time, so this counts the Python work per job
(the hand-overs, the futures, the batches' sizes), not the waits: the GIL's and the
scheduler's costs are not in it.

Run: ``.venv/bin/python bench/plain_instructions.py`` (about 2 minutes; needs valgrind);
``--src ../main/src`` counts another checkout's worker (before/after a change).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from pathlib import Path

from _common import counted, report
from echomq import Queue
from echomq.embedded import EmbeddedServer

SRC = str(Path(__file__).resolve().parent.parent / "src")

#: the worker process: serve the queue until it is empty, then stop
WORKER = """
import os, sys, threading, time
sys.path.insert(0, sys.argv[1])
from echomq import Queue, Worker
url, name, kind, jobs = sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])
SINK = os.open(os.devnull, os.O_WRONLY)
def plain(job):
    os.write(SINK, b"0123456789abcdef")
async def aio(job):
    os.write(SINK, b"0123456789abcdef")
q = Queue(name, url=url)
w = Worker(q, plain if kind == "plain" else aio, concurrency=10)
def watch():
    # the worker's own count, not a server call: under callgrind a poll's instructions
    # would be counted, and their number depends on the run's wall time
    w.ready.wait()
    while w.stats.completed < jobs:
        time.sleep(0.05)
    w.request_stop()
threading.Thread(target=watch, daemon=True).start()
w.run()
"""


def instructions(url: str, name: str, kind: str, jobs: int, src: str = SRC) -> int:
    """The instructions of one worker process serving the ``jobs`` jobs of queue
    ``name`` (from its start to its stop)."""
    return counted([sys.executable, "-c", WORKER, src, url, name, kind, str(jobs)])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=3000)
    ap.add_argument("--src", default=SRC, help="the worker's echomq (another checkout's src)")
    args = ap.parse_args()
    if not shutil.which("valgrind"):
        raise SystemExit("needs valgrind (apt-get install valgrind)")
    rows: list[list[object]] = [["kind", "Ir/job", "vs async"]]
    with EmbeddedServer() as srv:
        per: dict[str, float] = {}
        for kind in ("async", "plain"):
            base = instructions(srv.url, f"pi-{kind}-empty-{os.getpid()}", kind, 0, args.src)
            name = f"pi-{kind}-{os.getpid()}"
            with Queue(name, url=srv.url) as q:
                for i in range(args.jobs):
                    q.enqueue({"n": i})
            per[kind] = (instructions(srv.url, name, kind, args.jobs, args.src) - base) / args.jobs
        for kind, ir in per.items():
            rows.append([kind, int(ir), ir / per["async"]])
    report(rows)


if __name__ == "__main__":
    main()
