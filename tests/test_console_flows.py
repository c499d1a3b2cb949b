"""The console's flow tools (issue 27) through its JSON API: the waiting_children tab
and count, a job's flow tree, and release/fail/cancel of a waiting parent: operators
only, CSRF-guarded like every change, journaled with the console's actor; refusals
change nothing; job text comes back as data (the page escapes it)."""

from __future__ import annotations

from collections.abc import Callable

import redis

from conftest import dump
from echomq import Queue
from echomq.flows import Flow
from test_console_api import CHANGE, TestClient, api, make_client, post, qp, refused

__all__ = ["api", "make_client"]  # the fixtures, imported for the tests below

HOSTILE = "<img src=x onerror=alert(1)>\x1b]0;t\x07"


def test_waiting_parents_have_a_tab_and_a_count(api: TestClient, q: Queue) -> None:
    ids = q.enqueue_flow(Flow(payload=0, children=[Flow(payload=1)]))
    assert "waiting_children" in api.get("/api/config").json()["states"]
    assert api.get(qp(q)).json()["counts"]["waiting_children"] == 1
    page = api.get(qp(q, "/jobs?state=waiting_children")).json()
    assert [j["id"] for j in page["jobs"]] == [ids.id] and page["total"] == 1


def test_a_job_page_reads_its_flow_tree(api: TestClient, q: Queue) -> None:
    ids = q.enqueue_flow(Flow(payload=0, name=HOSTILE, children=[Flow(payload=1), Flow(payload=2)]))
    got = q.claim()
    assert got is not None
    q.complete(got.id, got.token, result=HOSTILE)
    tree = api.get(qp(q, f"/jobs/{ids.children[1].id}/flow")).json()["flow"]
    assert tree["job"] == ids.children[1].ref and tree["nodes"] == 3
    root = tree["root"]
    assert (root["ref"], root["state"], root["name"], root["unresolved"]) == (
        ids.ref,
        "waiting_children",
        HOSTILE,  # data, as stored: the page shows it through text nodes, escaped
        1,
    )
    done = root["kids"][0]
    assert (done["outcome"], done["state"]) == ("completed", None)
    assert api.get(qp(q, f"/jobs/{ids.id}")).json()["job"]["children"] == "2"
    refused(api.get(qp(q, "/jobs/JOB00000000001/flow")), 404, "refused", "gone")


def test_release_fail_and_cancel_from_the_console(
    api: TestClient, q: Queue, r: redis.Redis
) -> None:
    plain = q.enqueue({"x": 1})
    before = dump(r, q)
    for verb in ("release_parent", "fail_parent", "cancel_flow"):
        refused(post(api, qp(q, f"/jobs/{plain}/{verb}")), 409, "refused", "not_waiting")
    assert dump(r, q) == before
    a = q.enqueue_flow(Flow(payload=0, children=[Flow(payload=1), Flow(payload=2)]))
    resp = post(api, qp(q, f"/jobs/{a.id}/release_parent"))
    assert resp.json() == {"ok": True, "unresolved": 2}
    assert q.job_state(a.id) == "pending"
    b = q.enqueue_flow(Flow(payload=0, children=[Flow(payload=1)]))
    resp = post(api, qp(q, f"/jobs/{b.id}/fail_parent"), {"error": HOSTILE})
    assert resp.json() == {"ok": True}
    row = q.get_job(b.id)
    assert row is not None and row.state == "dead" and row.last_error == HOSTILE
    c = q.enqueue_flow(Flow(payload=0, children=[Flow(payload=1)]))
    resp = post(api, qp(q, f"/jobs/{c.id}/cancel_flow"))
    body = resp.json()
    assert (body["ok"], body["removed"], body["cancelling"], body["failed"]) == (True, 1, 0, 1)
    assert q.job_state(c.children[0].id) is None and q.job_state(c.id) == "dead"
    entries = api.get(qp(q, "/audit?n=5")).json()["entries"]
    assert [e["verb"] for e in entries[:3]] == ["cancel_flow", "fail_parent", "release_parent"]
    assert {e["actor"] for e in entries[:3]} == {"console:local@testclient"}


def test_flow_verbs_are_operator_verbs_and_csrf_guarded(
    make_client: Callable[..., TestClient], q: Queue, r: redis.Redis
) -> None:
    client = make_client(viewer_token="look", operator_token="act")
    ids = q.enqueue_flow(Flow(payload=0, children=[Flow(payload=1)]))
    before = dump(r, q)
    path = qp(q, f"/jobs/{ids.id}/release_parent")
    denied = client.post(path, content="{}", headers={**CHANGE, "X-EMQ-Token": "look"})
    assert denied.status_code == 403 and denied.json()["reason"] == "role"
    cross = client.post(
        path,
        content="{}",
        headers={**CHANGE, "X-EMQ-Token": "act", "Origin": "http://evil.example"},
    )
    assert cross.status_code == 403 and cross.json()["reason"] == "cross_site"
    assert dump(r, q) == before
    done = client.post(path, content="{}", headers={**CHANGE, "X-EMQ-Token": "act"})
    assert done.status_code == 200 and q.job_state(ids.id) == "pending"


def test_flow_impact_for_the_drain_and_obliterate_confirmations(api: TestClient, q: Queue) -> None:
    q.enqueue_flow(Flow(payload=0, children=[Flow(payload=1)]))
    got = api.get(qp(q, "/flow_impact")).json()
    assert got == {
        "waiting": 1, "examined": 1, "backlog": 1, "children": 1, "elsewhere": 0, "exact": True
    }  # fmt: skip
