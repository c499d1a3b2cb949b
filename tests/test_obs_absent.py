"""Without the extras: echomq imports neither prometheus_client nor opentelemetry, and
enqueue, a worker (with its job records) and the operator verbs work with both blocked."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

from echomq.embedded import EmbeddedServer

SCRIPT = """
import sys, importlib.abc

class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("prometheus_client", "opentelemetry"):
            raise ModuleNotFoundError(f"No module named {name!r} (blocked)")
        return None

sys.meta_path.insert(0, Block())
import echomq, echomq.cli, echomq.console
from echomq import Queue, Worker, WorkerConfig
from echomq.observability import hooks, scrape

q = Queue(sys.argv[2], url=sys.argv[1])
jid = q.enqueue({"a": 1})
assert q.client.hget(q.keys.job(jid), "trace") is None
done = []
w = Worker(q, lambda job: done.append(job.id), config=WorkerConfig(lease_ms=400, beat_ms=20))
import threading, time
t = threading.Thread(target=w.run, daemon=True); t.start()
end = time.time() + 20
while not done and time.time() < end:
    time.sleep(0.01)
w.stop(15)
q.pause(); q.resume()
(snap,) = q.runner.drive(scrape.snapshots([q.ctx]))
assert done == [jid] and snap.completed == 1, (done, snap)
try:
    Worker(q, lambda job: None, metrics=True)
except ImportError:
    pass
else:
    raise AssertionError("metrics without the extra should fail loudly")
bad = [m for m in sys.modules if m.split(".")[0] in ("prometheus_client", "opentelemetry")]
assert not bad, bad
print("ok")
"""


def test_the_core_runs_without_either_extra(server: EmbeddedServer, qname: str) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    out = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(SCRIPT), server.url, qname],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"
