"""No option of ``emq`` given twice is silently dropped (issue 28), and ``emq worker``
serves several queues (``--queue a --queue b`` or ``--queue a,b``)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click
import pytest
import redis
from click.testing import CliRunner

from conftest import dump
from echomq import Batch, Queue, Worker
from echomq.cli import app as cli_app
from echomq.cli import exits
from echomq.cli.once import OnceCommand, OnceGroup
from echomq.cli.runtime_cmds import queue_list
from echomq.embedded import EmbeddedServer
from worker_support import FAST, running, wait_until

ROOT = Path(__file__).resolve().parents[1]


def walk(cmd: click.Command, path: str = "emq") -> Iterator[tuple[str, click.Command]]:
    yield path, cmd
    if isinstance(cmd, click.Group):
        for name, sub in cmd.commands.items():
            yield from walk(sub, f"{path} {name}")


def test_every_command_refuses_a_repeated_option() -> None:
    found = list(walk(cli_app.cli))
    assert len(found) > 30
    for path, cmd in found:
        kind = OnceGroup if isinstance(cmd, click.Group) else OnceCommand
        assert isinstance(cmd, kind), path


@pytest.mark.parametrize(
    "args",
    [
        ["--url", "redis://127.0.0.1:1/0", "--url", "redis://127.0.0.1:2/0", "queues"],
        ["worker", "json:loads", "--queue", "a", "--concurrency", "2", "--concurrency", "3"],
        ["worker", "json:loads", "--queue", "a", "--log-tracebacks", "--log-tracebacks"],
        ["--url", "redis://127.0.0.1:1/0", "jobs", "q", "pending", "--limit", "1", "--limit", "2"],
        ["--url", "redis://127.0.0.1:1/0", "jobs", "q", "dead", "-h", "--order", "run", "--order",
         "newest"],
    ],
)  # fmt: skip
def test_a_single_valued_option_given_twice_is_a_usage_error(args: list[str]) -> None:
    # refused while parsing: nothing is sent (the URLs name no server at all)
    if args[0] != "--url":
        args = ["--url", "redis://127.0.0.1:1/0", *args]
    res = CliRunner().invoke(cli_app.cli, args)
    assert res.exit_code == exits.USAGE, res.output
    assert "given more than once" in res.output


def test_options_that_collect_may_repeat(server: EmbeddedServer) -> None:
    name = "once-collect"
    with Queue(name, url=server.url) as q:
        hit = q.enqueue({"n": 1}, name="xray")
        miss = q.enqueue({"n": 2}, name="yankee")
    res = CliRunner().invoke(
        cli_app.cli,
        ["--url", server.url, "jobs", name, "pending", "--find", "xray", "--field", "name",
         "--field", "error"],
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    assert hit in res.output and miss not in res.output


def test_queue_list_reads_repeats_and_commas() -> None:
    assert queue_list(("high", "default,low")) == ["high", "default", "low"]
    assert queue_list(("a , b",)) == ["a", "b"]
    for bad in (("a,,b",), ("a", "a"), ("a,b", "b")):
        with pytest.raises(click.BadParameter):
            queue_list(bad)


def test_worker_batch_options_are_checked(server: EmbeddedServer, q: Queue, r: redis.Redis) -> None:
    q.enqueue("untouched")
    before = dump(r, q)
    runner = CliRunner()
    for extra in (["--batch-min", "5"], ["--batch", "0"], ["--batch", "5", "--batch-min", "6"]):
        res = runner.invoke(
            cli_app.cli, ["--url", server.url, "worker", "json:loads", "--queue", q.name, *extra]
        )
        assert res.exit_code in (exits.USAGE, 1), (extra, res.output)
    res = runner.invoke(
        cli_app.cli, ["--url", server.url, "worker", "json:loads", "--queue", f"{q.name},{q.name}"]
    )
    assert res.exit_code == exits.USAGE and "named twice" in res.output
    assert dump(r, q) == before


HANDLERS = """
def handle(job):
    job.log("handled by " + job.queue)
"""


def test_worker_command_serves_every_queue_given(
    server: EmbeddedServer, make_queue: Any, qname: str, tmp_path: Path
) -> None:
    (tmp_path / "emq_multi_handlers.py").write_text(HANDLERS, encoding="utf-8")
    qs = [make_queue(f"{qname}-{tag}") for tag in ("a", "b", "c")]
    for q in qs:
        q.enqueue({"q": q.name})
    env = {k: v for k, v in os.environ.items() if k != "EMQ_URL"}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), env.get("PYTHONPATH", "")])
    proc = subprocess.Popen(
        [sys.executable, "-m", "echomq.cli", "--url", server.url, "--json", "worker",
         "emq_multi_handlers:handle", "--queue", qs[0].name,
         "--queue", f"{qs[1].name},{qs[2].name}", "--order", "fair"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
        text=True, env=env, cwd=tmp_path,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 20
        while any(q.counts().completed < 1 for q in qs):
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the worker did not serve every queue"
            time.sleep(0.05)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=20)
    finally:
        proc.kill()
    assert proc.returncode == 0, err
    names = [q.name for q in qs]
    assert f"worker on {', '.join(names)}" in err and "order fair" in err
    doc = json.loads(out)
    assert doc["queues"] == names and doc["stats"]["completed"] == 3


def test_workers_shows_queues_order_and_batch(
    server: EmbeddedServer, make_queue: Any, qname: str
) -> None:
    short = qname.split("-test")[0]  # the table must not wrap the names
    a, b = make_queue(f"{short}a"), make_queue(f"{short}b")
    w = Worker([a, b], lambda jobs: None, config=FAST, order="fair", batch=Batch(size=20))
    with running(w):
        wait_until(b.workers)
        res = CliRunner().invoke(cli_app.cli, ["--url", server.url, "workers", b.name])
        doc = CliRunner().invoke(cli_app.cli, ["--url", server.url, "--json", "workers", b.name])
    assert res.exit_code == 0, res.output
    assert f"{a.name},{b.name} (fair)" in res.output
    assert "size=20,min_size=1,wait_ms=500" in res.output
    (info,) = json.loads(doc.stdout)["workers"]
    assert info["queues"] == [a.name, b.name] and info["order"] == "fair"
    assert info["batch"] == "size=20,min_size=1,wait_ms=500"
