"""A healthy worker keeps its leases on a full server (issue 24, item 5).

Three worker processes hold six slow jobs (3 s each, three lease lengths of 1 s) while
the server is at ``maxmemory`` with ``noeviction``, filled with data to its limit: every
write the beat needs to renew a lease (the extension's ZADD and lock SET, the registry
beat) runs under the scripts' ``allow-oom`` flag, so no job ever returns to the
backlog, nothing stalls, and each job completes once.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import redis

from echomq import Queue
from echomq.embedded import EmbeddedServer

pytestmark = pytest.mark.slow  # worker processes on a full server, several lease lengths

HANDLER = """
import time

def handle(job):
    time.sleep(3)
"""


def test_slow_jobs_keep_their_leases_on_a_full_server(tmp_path: Path) -> None:
    (tmp_path / "slow_handler.py").write_text(textwrap.dedent(HANDLER))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([*sys.path, str(tmp_path)])}
    with EmbeddedServer() as srv, Queue("full-leases", url=srv.url) as q:
        r = redis.Redis.from_url(srv.url, decode_responses=True)
        q.set_retention(completed=100)  # kept rows: the completions write on a full server
        ids = [q.enqueue({"i": i, "pad": "x" * 500}) for i in range(6)]
        cmd = [sys.executable, "-m", "echomq.cli", "--url", srv.url, "worker"]
        cmd += ["slow_handler:handle", "--queue", q.name, "--concurrency", "2"]
        cmd += ["--lease-ms", "1000"]
        procs = [
            subprocess.Popen(cmd, env=env, stderr=subprocess.PIPE, text=True) for _ in range(3)
        ]
        try:
            deadline = time.monotonic() + 20
            while r.zcard(q.keys.active) < 6 and time.monotonic() < deadline:
                time.sleep(0.01)
            assert r.zcard(q.keys.active) == 6
            used = int(r.info("memory")["used_memory"])
            r.config_set("maxmemory-policy", "noeviction")
            r.config_set("maxmemory", str(used + 200_000))
            filled = 0
            try:
                while filled < 100_000:
                    r.set(f"fill:{filled}", "z" * 1000)
                    filled += 1
            except redis.ResponseError as exc:
                assert "maxmemory" in str(exc)
            assert filled < 100_000  # full indeed
            # three lease lengths and more: never back in the backlog, never stalled
            seen_pending, start = 0, time.monotonic()
            while r.zcard(q.keys.completed) < 6 and time.monotonic() - start < 15:
                seen_pending = max(seen_pending, r.zcard(q.keys.pending))
                time.sleep(0.02)
            assert seen_pending == 0
            assert sorted(r.zrange(q.keys.completed, 0, -1)) == sorted(ids)
            for jid in ids:
                row = r.hgetall(q.keys.job(jid))
                assert row["state"] == "completed" and row["attempts"] == "1", row
                assert "stalled" not in row
            assert q.metrics()["completed"]["count"] == 6
        finally:
            r.config_set("maxmemory", "0")
            for p in procs:
                p.terminate()
            for p in procs:
                _, err = p.communicate(timeout=30)
                assert "lost" not in err.lower(), err
            r.close()
