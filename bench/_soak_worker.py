"""A worker process of the soak run: ``python _soak_worker.py QUEUE URL RUNS_FILE``.

It serves ``QUEUE`` with the soak's handler and appends one line per handler call to
``RUNS_FILE`` (opened ``O_APPEND``, one ``write`` per line, so the lines of every
worker process interleave whole): ``<queue> <job id> <token> <start ms>``. A pair
(id, token) seen twice is a job run twice under one lease. It prints ``ready`` once
serving and stops on SIGTERM (SIGKILL is the soak's fault).

The handler does what the job's payload asks: ``ms`` of work, a log line (``log``),
a progress write (``prog``), and a failure by design while ``attempt <= fail``.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
import time
from pathlib import Path

_SRC = Path(__file__).resolve().parent.parent / "src"
if _SRC.is_dir() and str(_SRC) not in sys.path:
    sys.path.insert(0, str(_SRC))

from echomq import JobContext, Worker, WorkerConfig  # noqa: E402

#: Short leases so a killed worker's jobs come back within seconds; failures by design
#: log at DEBUG (issue 24, item 6), so stderr keeps only the runtime's own warnings.
CONFIG = WorkerConfig(
    concurrency=8,
    lease_ms=3000,
    beat_ms=500,
    grace_ms=2000,
    claim_batch=8,
    failure_log_level=logging.DEBUG,
)


class Failed(Exception):
    """A failure by design (the payload asked for it)."""


def main() -> None:
    queue, url, runs = sys.argv[1:4]
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    fd = os.open(runs, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def handle(job: JobContext) -> str:
        start = int(time.time() * 1000)
        os.write(fd, f"{queue} {job.id} {job.attempt} {start}\n".encode())
        data = job.data if isinstance(job.data, dict) else {}
        if data.get("log"):
            job.log(f"attempt {job.attempt} on {os.getpid()}", keep=5)
        if data.get("prog"):
            job.progress(50)
        time.sleep(data.get("ms", 0) / 1000)
        if job.attempt <= data.get("fail", 0):
            raise Failed(f"by design, attempt {job.attempt}")
        return "ok"

    worker = Worker(queue, handle, url=url, config=CONFIG)
    signal.signal(signal.SIGTERM, lambda *_: worker.request_stop())

    def announce() -> None:
        worker.ready.wait()
        print("ready", flush=True)

    threading.Thread(target=announce, daemon=True).start()
    worker.run()


if __name__ == "__main__":
    main()
