"""``emq flow show|release|fail|cancel|sweep``: replies, keys left, refusals that change
nothing, confirmations, and job text escaped."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
import redis
from click.testing import CliRunner

from conftest import dump
from echomq import Queue
from echomq.cli import app as cli_app
from echomq.cli import exits
from echomq.embedded import EmbeddedServer
from echomq.flows import Flow
from test_cli import fast  # noqa: F401 (the fixture)

HOSTILE = "\x1b]0;pwned\x07\u202e"


def as_json(ran: Any) -> Any:
    return json.loads(ran.stdout)


def test_flow_show_prints_the_tree_escaped_and_as_json(fast: Any, q: Queue) -> None:  # noqa: F811
    ids = q.enqueue_flow(Flow(payload=0, name=HOSTILE, children=[Flow(payload=1)]))
    got = q.claim()
    assert got is not None
    q.complete(got.id, got.token, result=HOSTILE)
    shown = fast("flow", "show", q.name, ids.id)
    assert shown.returncode == 0
    assert "\x1b" not in shown.stdout and "\u202e" not in shown.stdout
    assert "\\x1b]0;pwned\\x07\\u202e" in shown.stdout
    assert f"* {ids.ref}  pending" in shown.stdout  # its last child completed: ready
    assert f"{ids.children[0].ref}  gone" in shown.stdout and "-> completed" in shown.stdout
    doc = as_json(fast("--json", "flow", "show", q.name, ids.id))
    assert doc["root"]["ref"] == ids.ref and doc["root"]["name"] == HOSTILE
    assert doc["root"]["kids"][0]["outcome"] == "completed"


def test_flow_release_asks_first_then_releases(fast: Any, q: Queue, r: redis.Redis) -> None:  # noqa: F811
    ids = q.enqueue_flow(Flow(payload=0, children=[Flow(payload=1), Flow(payload=2)]))
    before = dump(r, q)
    assert fast("flow", "release", q.name, ids.id).returncode == exits.NOT_CONFIRMED
    assert dump(r, q) == before
    ran = fast("--json", "flow", "release", q.name, ids.id, "--yes")
    assert ran.returncode == 0
    assert as_json(ran) == {"id": ids.id, "released": True, "unresolved": 2}
    assert q.job_state(ids.id) == "pending"
    assert q.audit()[0].verb == "release_parent"


def test_flow_fail_escapes_the_prompt_and_stores_the_error_as_data(
    fast: Any,  # noqa: F811
    q: Queue,
    r: redis.Redis,
) -> None:
    ids = q.enqueue_flow(Flow(payload=0, children=[Flow(payload=1)]))
    before = dump(r, q)
    asked = fast("flow", "fail", q.name, ids.id, "--error", HOSTILE)
    assert asked.returncode == exits.NOT_CONFIRMED and "\x1b" not in asked.stdout + asked.stderr
    assert dump(r, q) == before
    ran = fast("flow", "fail", q.name, ids.id, "--error", HOSTILE, "--yes")
    assert ran.returncode == 0
    row = q.get_job(ids.id)
    assert row is not None and row.state == "dead" and row.last_error == HOSTILE


def test_flow_verbs_refuse_a_job_that_is_not_waiting(
    fast: Any,  # noqa: F811
    q: Queue,
    r: redis.Redis,
) -> None:
    jid = q.enqueue({"x": 1})
    before = dump(r, q)
    for verb in ("release", "fail", "cancel"):
        ran = fast("--json", "flow", verb, q.name, jid, "--yes")
        assert ran.returncode == exits.REFUSED["not_waiting"], verb
        assert as_json(ran)["error"] == "refused"
    assert dump(r, q) == before
    assert fast("flow", "release", q.name, "nonsense", "--yes").returncode == exits.MALFORMED


def test_flow_cancel_and_sweep(fast: Any, q: Queue, r: redis.Redis) -> None:  # noqa: F811
    ids = q.enqueue_flow(Flow(payload=0, children=[Flow(payload=1), Flow(payload=2)]))
    ran = fast("--json", "flow", "cancel", q.name, ids.id, "--yes")
    assert ran.returncode == 0
    doc = as_json(ran)
    assert (doc["removed"], doc["cancelling"], doc["failed"]) == (2, 0, 1)
    assert q.counts().pending == 0 and q.job_state(ids.id) == "dead"
    other = q.enqueue_flow(Flow(payload=0, children=[Flow(payload=1)]))
    r.delete(q.keys.job(other.children[0].id))
    r.zrem(q.keys.pending, other.children[0].id)
    swept = as_json(fast("--json", "flow", "sweep", q.name, "--grace-ms", "0"))
    assert (swept["parents"], swept["missing"], swept["resolved"]) == (1, 1, 1)
    assert q.job_state(other.id) == "dead"
    again = fast("flow", "sweep", q.name, "--grace-ms", "0")
    assert again.returncode == 0 and "0 resolved" in again.stdout


def test_stats_counts_waiting_parents(fast: Any, q: Queue) -> None:  # noqa: F811
    q.enqueue_flow(Flow(payload=0, children=[Flow(payload=1)]))
    doc = as_json(fast("--json", "stats", q.name))
    assert doc["waiting_children"] == 1 and doc["pending"] == 1
    assert "waiting_children" in fast("stats", q.name).stdout
    page = as_json(fast("--json", "jobs", q.name, "waiting_children"))
    assert len(page["jobs"]) == 1


def test_drain_and_obliterate_say_what_they_do_to_flows(
    server: EmbeddedServer,
    q: Queue,
    make_queue: Callable[..., Queue],
    r: redis.Redis,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    other = make_queue(q.name + "-o")
    q.enqueue_flow(Flow(payload=0, children=[Flow(payload=1)]))  # a parent and child here
    other.enqueue_flow(Flow(payload=0, children=[Flow(queue=q.name, payload=2)]))
    q.pause()
    before = dump(r, q)
    monkeypatch.setattr(cli_app, "stdin_is_terminal", lambda: True)
    for verb, outcome in (("drain", "drained"), ("obliterate", "obliterated")):
        no = CliRunner().invoke(cli_app.cli, ["--url", server.url, verb, q.name], input="n\n")
        assert no.exit_code == exits.NOT_CONFIRMED
        text = " ".join(no.output.split())
        assert "1 waiting flow parent(s) will be removed" in text, text
        assert f"2 flow child(ren) will resolve their parents as {outcome}, 1 of them in" in text
    assert dump(r, q) == before


def test_a_mistyped_queue_is_refused_before_anything_is_sent(fast: Any, q: Queue) -> None:  # noqa: F811
    ids = q.enqueue_flow(Flow(payload=0, children=[Flow(payload=1)]))
    for args in (("show",), ("release", "--yes"), ("cancel", "--yes")):
        ran = fast("flow", args[0], q.name + "x", ids.id, *args[1:])
        assert ran.returncode == exits.NO_QUEUE, args
    assert fast("flow", "sweep", q.name + "x").returncode == exits.NO_QUEUE
    assert q.job_state(ids.id) == "waiting_children"
