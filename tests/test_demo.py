"""``emq demo``: the runbook walks end to end, checks itself and leaves nothing behind."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import redis
from click.testing import CliRunner

from conftest import dump, queue_keys
from echomq import Queue, demo
from echomq.cli import app as cli_app
from echomq.cli import exits
from echomq.embedded import EmbeddedServer

pytestmark = pytest.mark.slow  # the whole runbook, in processes of its own

ROOT = Path(__file__).resolve().parents[1]
STEPS = (
    "1/9 enqueue a backlog",
    "2/9 start a worker",
    "3/9 pause",
    "4/9 resume",
    "5/9 update progress",
    "6/9 append and read logs",
    "7/9 fail a job into dead, reprocess it",
    "8/9 drain",
    "9/9 pause and obliterate",
)


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "EMQ_URL"}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), env.get("PYTHONPATH", "")])
    return subprocess.run(
        [sys.executable, "-m", "echomq.cli", *args],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        env=env,
        timeout=120,
    )


def test_demo_on_a_given_server_leaves_it_as_it_was(
    server: EmbeddedServer, q: Queue, make_queue: Any, qname: str, r: redis.Redis
) -> None:
    bystander = make_queue(qname + "-bystander")
    bystander.enqueue({"keep": "me"})
    bystander.pause()
    before = dump(r, bystander)
    p = _run("--url", server.url, "demo", "--queue", q.name)
    assert p.returncode == 0, p.stdout + p.stderr
    lines = p.stdout.splitlines()
    for step in STEPS:
        assert any(line.startswith(step) for line in lines), step
    assert "✗" not in p.stdout
    assert p.stdout.count("✓") >= 30
    assert "runbook complete" in lines[-1]
    assert f"queue {q.name} at {server.url} (the server you gave)" in lines[0]
    assert queue_keys(r, q) == set()
    assert dump(r, bystander) == before


def test_demo_without_a_url_starts_its_own_server() -> None:
    p = _run("demo")
    assert p.returncode == 0, p.stdout + p.stderr
    first = p.stdout.splitlines()[0]
    m = re.search(r"at (redis://127\.0\.0\.1:(\d+)/0) \(a private embedded server\)", first)
    assert m is not None, first
    assert m.group(2) != "6379"
    assert "runbook complete" in p.stdout


def test_demo_refuses_a_queue_that_has_keys(
    server: EmbeddedServer, q: Queue, r: redis.Redis
) -> None:
    q.enqueue({"someone": "else's"})
    before = dump(r, q)
    result = CliRunner().invoke(cli_app.cli, ["--url", server.url, "demo", "--queue", q.name])
    assert result.exit_code == exits.DEMO_FAILED
    assert "demo step 'setup' failed" in result.stderr
    assert dump(r, q) == before


def test_a_misbehaving_step_is_named_and_the_queue_cleaned_up(
    server: EmbeddedServer, q: Queue, r: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(job: Any) -> None:
        raise RuntimeError("this handler fails every job")

    monkeypatch.setattr(demo, "handle", broken)
    monkeypatch.setattr(demo, "WAIT_S", 0.5)
    result = CliRunner().invoke(cli_app.cli, ["--url", server.url, "demo", "--queue", q.name])
    assert result.exit_code == exits.DEMO_FAILED, result.output
    assert "✗ the worker completes jobs" in result.stdout
    assert "demo step 'start a worker' failed" in result.stderr
    assert queue_keys(r, q) == set()
