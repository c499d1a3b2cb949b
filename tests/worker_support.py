"""Helpers for the worker tests: run a Worker on a thread, wait for a condition."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import redis

from echomq import Queue, Worker, WorkerConfig

#: Short leases so a lost one expires fast; the beat must be under half of it.
FAST = WorkerConfig(lease_ms=400, beat_ms=20, grace_ms=2000)


def wait_until(pred: Callable[[], Any], timeout: float = 10.0, step: float = 0.005) -> Any:
    """Poll ``pred`` until it is truthy; fail the test when ``timeout`` passes."""
    end = time.monotonic() + timeout
    while True:
        got = pred()
        if got:
            return got
        if time.monotonic() > end:
            raise AssertionError(f"condition not met within {timeout}s")
        time.sleep(step)


@contextmanager
def running(worker: Worker) -> Iterator[Worker]:
    """Run ``worker`` on a thread for the block; stop it (graceful) and join after."""
    errors: list[BaseException] = []

    def main() -> None:
        try:
            worker.run()
        except BaseException as exc:  # surfaced in the test below
            errors.append(exc)

    thread = threading.Thread(target=main, daemon=True)
    thread.start()
    wait_until(lambda: worker.ready.is_set() or errors or not thread.is_alive())
    try:
        yield worker
    finally:
        assert worker.stop(timeout=15), "worker did not stop"
        thread.join(15)
    if errors:
        raise errors[0]


def server_ms(r: redis.Redis) -> int:
    """The server's clock in ms."""
    sec, usec = r.time()
    return int(sec) * 1000 + int(usec) // 1000


def job_keys(r: redis.Redis, q: Queue) -> set[str]:
    """The row-related keys (rows, logs, locks) the queue still has."""
    return set(r.scan_iter(match=q.keys.base + "job:*", count=1000))
