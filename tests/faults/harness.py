"""The fault suite's rig: a private server (loopback, optionally with AOF), the fault
proxy in front of it, producers and worker processes that talk through the proxy,
and the report every scenario ends with.

The truth is read from the server directly, never through the proxy:

- **enqueued**: the ids a producer was told landed (it retries an enqueue with the
  same id until it gets an answer; a repeat of one that landed answers duplicate);
- **completed**: the ids in the queue's settled tombstones (each completion leaves
  one), and ``metrics:completed`` (one per completion, so a job completed twice
  counts twice);
- **lost**: enqueued ids neither completed nor still in the queue at the end;
- **completed twice**: completions beyond one per id (a job brought back after it
  completed), plus handler runs that share a token (``<id>:<token>`` recorded by the
  worker processes on the server), which two holders of one lease would show.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import redis

from echomq import Queue, ServerUnavailable, new_id
from echomq.embedded import EmbeddedServer, free_port

HERE = Path(__file__).resolve().parent
#: Clients give up on a reply after this long (a black-holed call must end).
TIMEOUTS = "socket_timeout=2&socket_connect_timeout=2"


@dataclass
class Report:
    """What one scenario did."""

    scenario: str
    enqueued: int
    completed: int
    lost: int
    completed_twice: int
    same_token_twice: int
    runs: int
    seconds: float
    faults: str = ""

    def line(self) -> str:
        """One line for the suite's output."""
        return (
            f"{self.scenario}: enqueued {self.enqueued}, completed {self.completed}, "
            f"lost {self.lost}, completed twice {self.completed_twice}, same token run "
            f"twice {self.same_token_twice} ({self.runs} handler runs, {self.seconds:.1f} s"
            f"{'; ' + self.faults if self.faults else ''})"
        )

    def check(self) -> None:
        """The guarantees: nothing lost, nothing completed twice under one token."""
        assert self.lost == 0, self.line()
        assert self.completed_twice == 0, self.line()
        assert self.same_token_twice == 0, self.line()
        assert self.completed == self.enqueued, self.line()


class Rig:
    """A private server with a fault proxy in front, and the processes that use it.

    Args:
        workdir: where the server keeps its files (its AOF survives a kill).
        aof: run with ``appendonly yes`` and ``appendfsync always``.
        extra_args: more server arguments.
    """

    def __init__(self, workdir: Path, *, aof: bool = False, extra_args: tuple[str, ...] = ()):
        from faults.proxy import FaultProxy

        self.server = EmbeddedServer(
            port=free_port(), appendonly=aof, data_dir=str(workdir), extra_args=extra_args
        )
        self.server.start()
        self.proxy = FaultProxy(self.server.port).start()
        self.direct = redis.Redis.from_url(self.server.url, decode_responses=True)
        self.via = f"{self.proxy.url}?{TIMEOUTS}"
        self.workers: list[subprocess.Popen[str]] = []

    def queue(self, name: str) -> Queue:
        """A queue that talks through the proxy."""
        return Queue(name, url=self.via)

    def spawn_worker(self, queue: str) -> subprocess.Popen[str]:
        """A worker process serving ``queue`` through the proxy (ready when returned)."""
        env = {**os.environ, "PYTHONPATH": str(HERE.parents[1] / "src")}
        proc = subprocess.Popen(
            [sys.executable, str(HERE / "worker_proc.py"), queue, self.via, self.server.url],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            env=env,
            start_new_session=True,
        )
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "ready"
        self.workers.append(proc)
        return proc

    def produce(self, q: Queue, n: int, during: Callable[[int], None] | None = None) -> list[str]:
        """Enqueue ``n`` jobs, each with an id of our own, retrying each until the
        server answers; ``during(i)`` runs before the i-th (to inject faults)."""
        landed: list[str] = []
        for i in range(n):
            if during is not None:
                during(i)
            jid = new_id()
            while True:
                try:
                    assert q.enqueue({"i": i}, job_id=jid) == jid
                    break
                except ServerUnavailable:
                    time.sleep(0.01)
            landed.append(jid)
        return landed

    def settled(self, queue: str) -> set[str]:
        base = f"emq:{{{queue}}}:"
        return set(self.direct.zrange(base + "settled", 0, -1))

    def wait_settled(self, queue: str, ids: list[str], timeout: float = 60.0) -> None:
        """Until every id completed (or the time is up: the report then shows it)."""
        want = set(ids)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if want <= self.settled(queue):
                return
            time.sleep(0.1)

    def report(self, scenario: str, queue: str, ids: list[str], started: float) -> Report:
        base = f"emq:{{{queue}}}:"
        done = self.settled(queue) & set(ids)
        count = int(self.direct.hget(base + "metrics:completed", "count") or 0)
        still = set()
        for key in ("pending", "active", "schedule", "dead"):
            still |= set(self.direct.zrange(base + key, 0, -1))
        # one entry per handler call (a re-pushed record repeats its run id)
        runs = set(self.direct.lrange(f"faults:{queue}:runs", 0, -1))
        twice = sum(1 for k in Counter(r.rsplit(":", 1)[0] for r in runs).values() if k > 1)
        return Report(
            scenario=scenario,
            enqueued=len(ids),
            completed=len(done),
            lost=len(set(ids) - done - still),
            completed_twice=max(0, count - len(done)),
            same_token_twice=twice,
            runs=len(runs),
            seconds=time.monotonic() - started,
            faults=(f"{self.proxy.replies_dropped} replies dropped, {self.proxy.resets} resets"),
        )

    def close(self) -> None:
        """Stop the workers (SIGTERM, then SIGKILL), the proxy and the server."""
        for p in self.workers:
            if p.poll() is None:
                with _quiet():
                    os.kill(p.pid, signal.SIGCONT)
                    p.terminate()
        for p in self.workers:
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(timeout=5)
        self.proxy.stop()
        self.direct.close()
        self.server.stop()


class _quiet:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: Any) -> bool:
        return exc[0] is not None and issubclass(exc[0], ProcessLookupError)
