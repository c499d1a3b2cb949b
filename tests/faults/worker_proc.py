"""A worker process for the fault suite: ``python worker_proc.py QUEUE VIA_URL DIRECT_URL``.

It serves ``QUEUE`` through ``VIA_URL`` (the fault proxy) and records every run of its
handler, ``<job id>:<token>:<run id>``, on the list ``faults:<QUEUE>:runs`` through
``DIRECT_URL`` (the server itself, so the record is never what a fault loses). The run
id is fresh per handler call: when the server dies after an RPUSH but before its reply,
the record is pushed again, and the copy carries the same run id, so it is not counted as
a second run. It
prints ``ready`` once serving, and stops on SIGTERM.
"""

from __future__ import annotations

import logging
import signal
import sys
import threading
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))

import redis

from echomq import JobContext, Worker, WorkerConfig

#: Short leases so a killed or stopped worker's jobs come back within a second or two.
CONFIG = WorkerConfig(
    concurrency=8, lease_ms=1500, beat_ms=150, grace_ms=1000, max_stalled=1000, claim_batch=8
)


def main() -> None:
    queue, via, direct = sys.argv[1:4]
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    recorder = redis.Redis.from_url(direct, socket_timeout=2)
    runs = f"faults:{queue}:runs"

    def handle(job: JobContext) -> None:
        # record the run; the server may be restarting: keep trying
        record = f"{job.id}:{job.attempt}:{uuid.uuid4().hex}"
        while True:
            try:
                recorder.rpush(runs, record)
                return
            except (redis.ConnectionError, redis.TimeoutError):
                time.sleep(0.05)

    worker = Worker(queue, handle, url=via, config=CONFIG)
    signal.signal(signal.SIGTERM, lambda *_: worker.request_stop())

    # "ready" once the worker serves (its fence passed): a fault a test starts after
    # spawning it then meets a serving worker, never its start-up (which is fatal)
    def announce() -> None:
        worker.ready.wait()
        print("ready", flush=True)

    threading.Thread(target=announce, daemon=True).start()
    worker.run()


if __name__ == "__main__":
    main()
