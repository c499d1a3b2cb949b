"""``emq jobs QUEUE STATE --order run|newest``: each state's default order, and either
order on demand (as ``browse(order=...)`` takes it), for pages and for ``--find``."""

from __future__ import annotations

import json
from typing import Any

import pytest
import redis
from click.testing import CliRunner

from conftest import dump
from echomq import InvalidArgument, Queue
from echomq.cli import cli
from echomq.embedded import EmbeddedServer
from operator_support import put_job


def page(server: EmbeddedServer, *args: str) -> dict[str, Any]:
    out = CliRunner().invoke(cli, ["--url", server.url, "--json", "jobs", *args])
    assert out.exit_code == 0, out.output
    doc: dict[str, Any] = json.loads(out.stdout)
    return doc


def ids(doc: dict[str, Any]) -> list[str]:
    return [j["id"] for j in doc["jobs"]]


def test_each_state_in_its_order_and_either_order_on_demand(
    server: EmbeddedServer, q: Queue
) -> None:
    dead = [put_job(q, "dead")[0] for _ in range(3)]  # died in this order
    pending = [q.enqueue(i) for i in range(3)]  # same priority: mint order
    urgent = q.enqueue("urgent", priority=-1)
    soon = q.enqueue("soon", delay_ms=60_000)
    later = q.enqueue("later", delay_ms=120_000)

    run = [urgent, *pending]
    doc = page(server, q.name, "pending")
    assert ids(doc) == run and doc["order"] == "run"  # the default: the next claim first
    assert ids(page(server, q.name, "pending", "--order", "run")) == run
    doc = page(server, q.name, "pending", "--order", "newest")
    assert ids(doc) == run[::-1] and doc["order"] == "newest"

    doc = page(server, q.name, "scheduled")
    assert ids(doc) == [soon, later] and doc["order"] == "soonest"
    assert ids(page(server, q.name, "scheduled", "--order", "newest")) == [later, soon]
    assert page(server, q.name, "scheduled", "--order", "run")["order"] == "soonest"

    assert ids(page(server, q.name, "dead")) == dead[::-1]  # newest death first
    doc = page(server, q.name, "dead", "--order", "run")
    assert ids(doc) == dead and doc["order"] == "run"

    # --find walks the asked order too
    found = page(server, q.name, "pending", "--find", "JOB", "--field", "id", "--limit", "2")
    assert ids(found) == run[:2]
    newest = ["--order", "newest", "--find", "JOB", "--field", "id", "--limit", "2"]
    assert ids(page(server, q.name, "pending", *newest)) == run[::-1][:2]


def test_a_bad_order_is_a_usage_error_and_refused_before_io(
    server: EmbeddedServer, q: Queue, r: redis.Redis
) -> None:
    q.enqueue(1)
    before = dump(r, q)
    out = CliRunner().invoke(cli, ["--url", server.url, "jobs", q.name, "dead", "--order", "old"])
    assert out.exit_code == 2
    for bad in ("oldest", "", 1):
        with pytest.raises(InvalidArgument):
            q.job_page("pending", order=bad)  # type: ignore[arg-type]
        with pytest.raises(InvalidArgument):
            q.find_jobs("pending", "x", order=bad)  # type: ignore[arg-type]
    assert dump(r, q) == before
