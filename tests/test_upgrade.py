"""A rolling upgrade: the previous release's client and this one on one server, one queue.

The previous release (0.1.0, :data:`PREVIOUS`: the commit before the changes that
CHANGELOG.md lists under 0.2.0, and the main line this release's last work branched
from) is taken from git history (``git archive``
of its ``src/`` into a temporary directory) and run in a subprocess whose ``sys.path``
starts there, so it imports its own echomq, sends its own scripts (and, under the
native executor, its own ``EMQ.*`` calls to this tree's module that the server loaded).
Jobs cross both ways: enqueued by one generation, claimed, failed, reprocessed and
completed by the other, flat and in a lane. Both pass the keyspace fence
(``{emq}:version``) whichever came first. docs/upgrading.md explains the fence.

Skipped with the reason when the history is not here (a shallow clone, an sdist).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from conftest import queue_keys
from echomq import Queue
from echomq.embedded import EmbeddedServer
from echomq.keyspace import KEYSPACE_VERSION, VERSION_KEY

pytestmark = [pytest.mark.slow, pytest.mark.both_executors]

ROOT = Path(__file__).resolve().parents[1]
#: The previous release's clients, as commits: 0.1.0 (the code before the changes
#: CHANGELOG.md lists under 0.2.0), and the main line 0.2.0's last work branched from.
PREVIOUS = {"0.1.0": "84512ff", "main-9dc108d": "9dc108d"}
PREVIOUS_VERSION = "0.1.0"

#: The old client's side: one action per call, its answer as JSON on stdout.
OLD_CLIENT = r"""
import json, sys
import echomq
from echomq import Queue

url, name, executor, action, arg = sys.argv[1:6]
q = Queue(name, url=url, executor=executor)
out = {"version": echomq.__version__, "file": echomq.__file__}
if action == "enqueue":
    spec = json.loads(arg)
    out["ids"] = [
        q.enqueue({"n": n}, group=spec.get("group"), max_attempts=spec.get("max_attempts"))
        for n in range(spec["n"])
    ]
elif action == "work":  # claim everything ready and complete it
    done = []
    while (job := q.claim(lease_ms=10000)) is not None:
        q.complete(job.id, job.token)
        done.append(job.id)
    out["done"] = done
elif action == "fail":  # claim one and fail it for good
    job = q.claim(lease_ms=10000)
    out["outcome"] = q.retry(job.id, job.token, "boom")
    out["id"] = job.id
elif action == "reprocess":
    q.reprocess_job(arg)
c = q.counts()
out["counts"] = [c.pending, c.active, c.dead, c.completed]
q.close()
print(json.dumps(out))
"""


def _history_reason(commit: str) -> str | None:
    if shutil.which("git") is None:
        return "git is not installed"
    probe = subprocess.run(
        ["git", "-C", str(ROOT), "cat-file", "-e", f"{commit}^{{commit}}"],
        capture_output=True,
    )
    if probe.returncode != 0:
        return f"the git history with the previous release (commit {commit}) is not here"
    return None


@pytest.fixture(scope="module", params=sorted(PREVIOUS), ids=sorted(PREVIOUS))
def old_src(request: pytest.FixtureRequest) -> Iterator[Path]:
    """The previous release's ``src/`` (its echomq package), from git history."""
    commit = PREVIOUS[request.param]
    why = _history_reason(commit)
    if why is not None:
        pytest.skip(why)
    tmp = Path(tempfile.mkdtemp(prefix="echomq-previous-"))
    try:
        archive = subprocess.run(
            ["git", "-C", str(ROOT), "archive", "--format=tar", commit, "src"],
            capture_output=True,
            check=True,
        )
        tar = tmp / "previous.tar"
        tar.write_bytes(archive.stdout)
        with tarfile.open(tar) as tf:
            if hasattr(tarfile, "data_filter"):  # Python 3.10.12+ (the archive is our own)
                tf.extractall(tmp, filter="data")
            else:
                tf.extractall(tmp)
        yield tmp / "src"
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def old(
    src: Path, server: EmbeddedServer, q: Queue, executor: str, action: str, arg: Any = ""
) -> Any:
    """Run one action of the previous release's client; its JSON answer."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("EMQ_")}
    env["PYTHONPATH"] = str(src)  # ahead of the editable install's path
    text = arg if isinstance(arg, str) else json.dumps(arg)
    done = subprocess.run(
        [sys.executable, "-c", OLD_CLIENT, server.url, q.name, executor, action, text],
        capture_output=True,
        text=True,
        cwd=src,
        env=env,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    assert answer["version"] == PREVIOUS_VERSION
    assert answer["file"].startswith(str(src)), answer["file"]
    return answer


def left(r: redis.Redis, q: Queue) -> set[str]:
    """The queue's keys, less the wake list (its tokens are hints idle workers take at
    any moment, so whether one is left depends on timing) and the history series' hour
    keys and the busiest lanes' names (written by this release's endings, scripts or module,
    whichever client calls them; tests/test_history_series.py and
    tests/test_lane_history.py hold them)."""
    return {k for k in queue_keys(r, q) - {q.keys.wake, q.keys.lanenames} if ":hist:" not in k}


def test_the_old_client_passes_the_fence_the_new_one_set(
    old_src: Path, server: EmbeddedServer, q: Queue, r: redis.Redis, executor: str
) -> None:
    assert q.counts().pending == 0  # the new client's first call: the fence passed
    assert r.get(VERSION_KEY) == KEYSPACE_VERSION
    answer = old(old_src, server, q, executor, "work")
    assert answer["done"] == [] and answer["counts"] == [0, 0, 0, 0]
    assert r.get(VERSION_KEY) == KEYSPACE_VERSION
    r.delete(VERSION_KEY)  # now the old client comes first and sets it
    old(old_src, server, q, executor, "work")
    assert r.get(VERSION_KEY) == KEYSPACE_VERSION
    assert q.counts().pending == 0  # and the new one passes it
    assert left(r, q) == set()  # nothing was enqueued: the queue has no key


def test_new_producer_old_worker(
    old_src: Path, server: EmbeddedServer, q: Queue, r: redis.Redis, executor: str
) -> None:
    flat = [q.enqueue({"n": n}) for n in range(3)]
    grouped = [q.enqueue({"n": n}, group="tenant-a") for n in range(2)]
    answer = old(old_src, server, q, executor, "work")
    assert sorted(answer["done"]) == sorted(flat + grouped)
    assert answer["counts"] == [0, 0, 0, 5]
    c = q.counts()
    assert (c.pending, c.active, c.dead, c.completed) == (0, 0, 0, 5)
    assert left(r, q) == {q.keys.settled, q.keys.seq, q.keys.metrics_completed}


def test_old_producer_new_worker_and_a_dead_job_crossing_both_ways(
    old_src: Path, server: EmbeddedServer, q: Queue, r: redis.Redis, executor: str
) -> None:
    made = old(old_src, server, q, executor, "enqueue", {"n": 2, "max_attempts": 1})["ids"]
    spec = {"n": 1, "group": "g", "max_attempts": 1}
    lane = old(old_src, server, q, executor, "enqueue", spec)["ids"]
    first = q.claim(lease_ms=10000)
    assert first is not None and first.id in made + lane
    assert q.retry(first.id, first.token, "boom") == "dead"
    q.reprocess_job(first.id)  # the new client takes it back from the dead
    done = []
    while (job := q.claim(lease_ms=10000)) is not None:
        q.complete(job.id, job.token)
        done.append(job.id)
    assert sorted(done) == sorted(made + lane)
    # and the other way: the new client's dead job, reprocessed by the old one
    jid = q.enqueue({"n": 9}, max_attempts=1)
    got = q.claim(lease_ms=10000)
    assert got is not None and q.retry(jid, got.token, "boom") == "dead"
    answer = old(old_src, server, q, executor, "reprocess", jid)
    assert answer["counts"] == [1, 0, 0, 3]
    assert old(old_src, server, q, executor, "work")["done"] == [jid]
    c = q.counts()
    assert (c.pending, c.active, c.dead, c.completed) == (0, 0, 0, 4)
    assert sum(q.history("1h").completed) >= 3  # this release's completions, at least
    k = q.keys
    assert left(r, q) == {k.settled, k.seq, k.metrics_completed, k.metrics_failed, k.audit}
