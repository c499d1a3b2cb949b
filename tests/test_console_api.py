"""The console's JSON API, through Starlette's TestClient, against the private server.

Every verb checks its reply and the keys it leaves; every refusal (typed, auth,
cross-site, read-only) compares the queue's keys before and after and finds them equal.
"""

from __future__ import annotations

import base64
import json
import time
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis

from conftest import dump, queue_keys
from console_support import serving
from echomq import InvalidArgument, JobGone, Queue
from echomq.console import Console, ReadOnly, UnsafeBind, create_app
from echomq.console.app import STATIC, TOKEN_ENV, TOKEN_FILE_ENV
from echomq.discovery import QueueDirectory
from echomq.embedded import EmbeddedServer, free_port
from worker_support import wait_until

pytestmark = pytest.mark.both_servers

with warnings.catch_warnings():
    # Starlette nudges toward httpx2; the test extra pins httpx, which it still drives.
    warnings.simplefilter("ignore")
    from starlette.testclient import TestClient

ORIGIN = "http://127.0.0.1:8765"
#: What the page sends with every change.
CHANGE = {"Content-Type": "application/json", "X-Requested-With": "echomq-console"}
BAD_ID = "JOB-not-an-id"


@pytest.fixture(autouse=True)
def _no_env_token(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(TOKEN_ENV, raising=False)
    monkeypatch.delenv(TOKEN_FILE_ENV, raising=False)


@pytest.fixture()
def make_client(server: EmbeddedServer) -> Iterator[Callable[..., TestClient]]:
    """Factory: a TestClient on a console app over the private server."""
    opened: list[TestClient] = []

    def make(base_url: str = ORIGIN, **kw: Any) -> TestClient:
        client = TestClient(create_app(server.url, **kw), base_url=base_url)
        client.__enter__()
        opened.append(client)
        return client

    yield make
    for client in opened:
        client.__exit__(None, None, None)


@pytest.fixture()
def api(make_client: Callable[..., TestClient]) -> TestClient:
    return make_client()


def post(
    client: TestClient, path: str, body: Any = None, headers: dict[str, str] | None = None
) -> httpx.Response:
    return client.post(path, content=json.dumps(body or {}), headers={**CHANGE, **(headers or {})})


def qp(q: Queue, rest: str = "") -> str:
    return f"/api/queues/{q.name}{rest}"


def dead_job(q: Queue, payload: Any = None, **kw: Any) -> str:
    """A job of ``q`` moved to dead through the real claim/retry path."""
    # the lowest priority number is claimed first, ahead of anything already pending
    jid = q.enqueue(
        payload if payload is not None else {"n": 1}, max_attempts=1, priority=-(10**6), **kw
    )
    claimed = q.claim()
    assert claimed is not None and claimed.id == jid
    assert q.retry(jid, claimed.token, "boom: no such user") == "dead"
    return jid


def refused(resp: httpx.Response, status: int, error: str, reason: str) -> None:
    assert resp.status_code == status, resp.text
    body = resp.json()
    assert (body["error"], body["reason"]) == (error, reason)
    assert isinstance(body["message"], str)


# ----------------------------------------------------------------------------- reads
def test_config_and_page(api: TestClient) -> None:
    cfg = api.get("/api/config").json()
    assert cfg["read_only"] is False and cfg["token_required"] is False
    assert cfg["states"] == [
        "pending",
        "active",
        "scheduled",
        "dead",
        "completed",
        "waiting_children",
    ]
    page = api.get("/")
    assert page.status_code == 200 and '<script src="/static/app.js"' in page.text
    assert "frame-ancestors 'none'" in page.headers["content-security-policy"]
    assert page.headers["x-frame-options"] == "DENY"
    for name in ("app.js", "app.css"):
        assert api.get(f"/static/{name}").status_code == 200


def test_static_page_fetches_nothing_from_elsewhere() -> None:
    for path in STATIC.iterdir():
        text = path.read_text(encoding="utf-8")
        assert "http://" not in text and "https://" not in text and "//cdn" not in text, path


def test_list_queues_counts_and_pause(
    api: TestClient, make_queue: Callable[..., Queue], qname: str, r: redis.Redis
) -> None:
    a, b = make_queue(qname + "-a"), make_queue(qname + "-b")
    a.enqueue({"x": 1})
    a.enqueue({"x": 2}, delay_ms=60000)
    b.enqueue({"y": 1})
    b.pause()
    before = dump(r, a), dump(r, b)

    def listed() -> Any:
        reply = api.get("/api/queues")
        assert reply.status_code == 200
        got = reply.json()
        # each call walks the server one bounded chunk further: on a server the tests
        # before this one filled, a whole pass takes a few calls
        return got if got["complete"] else None

    body = wait_until(listed)
    rows = {row["name"]: row for row in body["queues"]}
    assert body["complete"] is True
    assert rows[a.name]["paused"] is False and rows[b.name]["paused"] is True
    assert rows[a.name]["counts"] == {
        "pending": 1,
        "active": 0,
        "scheduled": 1,
        "dead": 0,
        "completed": 0,
        "failed": 0,
        "kept": 0,
        "waiting_children": 0,
    }
    assert rows[b.name]["counts"]["pending"] == 1
    # health at a glance: no live worker; a's job waits with the gate open, b is paused
    assert rows[a.name]["workers"] == 0 and rows[a.name]["stranded"] is True
    assert rows[b.name]["workers"] == 0 and rows[b.name]["stranded"] is False
    assert (dump(r, a), dump(r, b)) == before


@pytest.mark.single_node("scans one node with a plain client (test_cluster.py walks the cluster)")
async def test_directory_scan_is_bounded_and_forgets_obliterated(
    server: EmbeddedServer, make_queue: Callable[..., Queue], qname: str
) -> None:
    q = make_queue(qname)
    q.enqueue({"x": 1})
    client = redis.asyncio.Redis.from_url(server.url, decode_responses=True)
    try:
        directory = QueueDirectory(scan_count=5, steps=1)
        dbsize = await client.dbsize()
        calls, complete, names = 0, False, []
        while not complete:
            names, complete = await directory.refresh(client)
            calls += 1
        # one SCAN step of COUNT 5 per call: a full pass takes several calls
        assert calls > 1 or dbsize <= 5
        assert q.name in names
        q.pause()
        assert q.obliterate() is True
        complete = False
        while not complete:
            names, complete = await directory.refresh(client)
        assert q.name not in names
    finally:
        await client.aclose()


def test_queue_summary(api: TestClient, q: Queue, r: redis.Redis) -> None:
    q.enqueue({"x": 1})
    q.pause()
    before = dump(r, q)
    body = api.get(qp(q)).json()
    assert body["name"] == q.name and body["paused"] is True
    assert body["counts"]["pending"] == 1 and isinstance(body["now_ms"], int)
    assert body["workers"] == 0 and body["stranded"] is False  # paused: waiting on purpose
    assert dump(r, q) == before
    q.resume()
    assert api.get(qp(q)).json()["stranded"] is True
    r.hset(q.keys.worker("0123456789abcdef"), mapping={"host": "h", "beat": "1"})
    r.zadd(q.keys.workers, {"0123456789abcdef": 1})
    body = api.get(qp(q)).json()
    assert body["workers"] == 1 and body["stranded"] is False


def test_queue_summary_shows_the_flow_control_badge_data(
    api: TestClient, q: Queue, r: redis.Redis
) -> None:
    q.set_rate_limit(1, 60_000)
    q.enqueue({"x": 1})
    q.enqueue({"x": 2})
    body = api.get(qp(q)).json()
    assert body["rate_limited"] is False and body["limited_until_ms"] is None
    assert len(q.claim_many(2)) == 1
    before = dump(r, q)
    body = api.get(qp(q)).json()
    assert body["rate_limited"] is True
    assert 59_000 <= body["limited_until_ms"] - body["now_ms"] <= 60_000
    assert dump(r, q) == before


def test_jobs_page_in_run_order_with_rows(api: TestClient, q: Queue, r: redis.Redis) -> None:
    ids = [q.enqueue({"n": i}, name=f"job{i}") for i in range(5)]
    dead = dead_job(q)
    before = dump(r, q)
    first = api.get(qp(q, "/jobs?state=pending&n=2&offset=0")).json()
    assert first["total"] == 5 and first["state"] == "pending" and first["order"] == "run"
    # pending in run order: the next job a worker claims comes first
    assert [j["id"] for j in first["jobs"]] == [ids[0], ids[1]]
    assert first["jobs"][0]["name"] == "job0" and first["jobs"][0]["attempts"] == 0
    last = api.get(qp(q, "/jobs?state=pending&n=2&offset=4")).json()
    assert [j["id"] for j in last["jobs"]] == [ids[4]]
    dead_page = api.get(qp(q, "/jobs?state=dead")).json()
    (row,) = dead_page["jobs"]
    assert row["id"] == dead and row["last_error"] == "boom: no such user"
    assert row["failures"] == 1 and isinstance(row["score"], int)
    assert row["score"] == int(r.zscore(q.keys.dead, dead) or 0)
    assert dump(r, q) == before


@pytest.mark.parametrize(
    "query",
    ["state=done", "state=pending&n=0", "state=pending&n=201", "n=x", "offset=-1"],
    ids=["state", "n0", "n201", "nx", "offset"],
)
def test_jobs_page_bad_input_is_400(api: TestClient, q: Queue, r: redis.Redis, query: str) -> None:
    q.enqueue({"x": 1})
    before = dump(r, q)
    refused(api.get(qp(q, f"/jobs?{query}")), 400, "invalid", "argument")
    assert dump(r, q) == before


def test_job_detail_row_logs_and_score(api: TestClient, q: Queue, r: redis.Redis) -> None:
    jid = dead_job(q, {"to": "a@example.com"}, name="send")
    q.add_log(jid, "first")
    q.add_log(jid, "second")
    before = dump(r, q)
    body = api.get(qp(q, f"/jobs/{jid}")).json()
    job = body["job"]
    assert job["id"] == jid and job["state"] == "dead" and job["name"] == "send"
    assert job["data"] == {"to": "a@example.com"} and job["last_error"] == "boom: no such user"
    assert job["attempts"] == "1" and job["failures"] == "1"
    assert body["logs"] == ["first", "second"] and body["locked"] is False
    assert body["score"] == int(r.zscore(q.keys.dead, jid) or 0) and body["log_count"] == 2
    # the server time of each line, aligned with logs
    assert body["log_times"] == [int(t) for t in r.lrange(q.keys.logtimes(jid), 0, -1)]
    assert all(isinstance(t, int) for t in body["log_times"]) and len(body["log_times"]) == 2
    assert dump(r, q) == before


def test_job_detail_log_times_are_null_for_lines_older_than_log_times(
    api: TestClient, q: Queue, r: redis.Redis
) -> None:
    jid = q.enqueue({"x": 1})
    r.rpush(q.keys.logs(jid), "old")
    q.add_log(jid, "new")
    before = dump(r, q)
    body = api.get(qp(q, f"/jobs/{jid}")).json()
    assert body["logs"] == ["old", "new"]
    assert body["log_times"] == [None, int(r.lindex(q.keys.logtimes(jid), 0) or 0)]
    assert dump(r, q) == before


def test_job_detail_shows_a_payload_that_is_not_json(
    api: TestClient, make_queue: Callable[..., Queue], qname: str
) -> None:
    class Raw:
        def dumps(self, value: Any) -> str:
            return f"raw<{value}>"

        def loads(self, text: str) -> Any:
            return text

    q = make_queue(qname, serializer=Raw())
    jid = q.enqueue("x")
    job = api.get(qp(q, f"/jobs/{jid}")).json()["job"]
    assert job["data"] == "raw<x>" and job["payload"] == "raw<x>"


def test_job_detail_refusals(api: TestClient, q: Queue, r: redis.Redis) -> None:
    q.enqueue({"x": 1})
    before = dump(r, q)
    refused(api.get(qp(q, "/jobs/JOB00000000001")), 404, "refused", "gone")
    refused(api.get(qp(q, f"/jobs/{BAD_ID}")), 400, "invalid", "job_id")
    refused(api.get("/api/queues/bad*name"), 400, "invalid", "name")
    assert dump(r, q) == before


def test_groups_and_metrics(api: TestClient, q: Queue, r: redis.Redis) -> None:
    q.enqueue({"x": 1}, group="b")
    q.enqueue({"x": 2}, group="a")
    q.set_group_limit("a", 2)
    q.pause_group("b")
    for _ in range(2):
        q.enqueue({"n": 1})
    claimed = q.claim_many(10)
    for c in claimed:
        if c.group is None:
            q.complete(c.id, c.token)
    dead_job(q)
    before = dump(r, q)
    groups = api.get(qp(q, "/groups?sort=name&desc=0")).json()["groups"]
    assert [g["name"] for g in groups] == ["a", "b"]
    a, b = groups
    assert (a["limit"], a["paused"], b["limit"], b["paused"]) == (2, False, None, True)
    assert a["depth"] + a["in_flight"] == 1 and b["depth"] == 1
    m = api.get(qp(q, "/metrics?minutes=5")).json()
    assert m["minutes"] == 5 and len(m["completed"]["series"]) == 5
    assert m["completed"]["total"] == 2 and sum(m["completed"]["series"]) == 2
    assert m["failed"]["total"] == 1 and m["failed"]["series"][-1] + m["failed"]["series"][-2] == 1
    refused(api.get(qp(q, "/metrics?minutes=0")), 400, "invalid", "argument")
    # the history series, per range (issue 29): per point, oldest first
    for span, points in (("1h", 60), ("24h", 96), ("7d", 168)):
        hist = api.get(qp(q, f"/history?range={span}")).json()
        got = (hist["span"], len(hist["completed"]), len(hist["mean_run_ms"]))
        assert got == (span, points, points)
        assert (sum(hist["completed"]), sum(hist["dead"])) == (2, 1)
        assert hist["mean_wait_ms"].count(None) >= points - 2
    assert api.get(qp(q, "/history")).json()["span"] == "1h"
    refused(api.get(qp(q, "/history?range=2d")), 400, "invalid", "argument")
    assert dump(r, q) == before


def test_history_lists_the_busiest_lanes(api: TestClient, q: Queue, r: redis.Redis) -> None:
    # issue 29 item 5: the history reply carries the range's busiest lanes (hourly)
    for g in ("a", "b", "a", None):
        q.enqueue({"g": g}, group=g, max_attempts=1)
    got = q.claim_many(4, lock_ms=60_000)
    for c in got:
        if c.group == "b":
            assert q.retry(c.id, c.token, "boom") == "dead"
        else:
            q.complete(c.id, c.token)
    before = dump(r, q)
    for span in ("1h", "24h", "7d"):
        busy = api.get(qp(q, f"/history?range={span}")).json()["lanes"]
        assert busy["lanes_seen"] == 2 and busy["end_hour"] >= busy["first_hour"]
        rows = [(x["lane"], x["completed"], x["dead"]) for x in busy["lanes"]]
        assert rows == [("a", 2, 0), ("b", 0, 1)]
        assert all(x["mean_run_ms"] is not None for x in busy["lanes"])
    assert dump(r, q) == before


async def test_handlers_run_without_http(server: EmbeddedServer, q: Queue, r: redis.Redis) -> None:
    """The handlers are plain coroutines: no request, no framework."""
    jid = q.enqueue({"x": 1})
    console = Console(server.url)
    frozen = Console(server.url, read_only=True)
    try:
        assert await console.pause(q.name, {}) == {"ok": True, "paused": True}
        assert r.hget(q.keys.meta, "paused") == "1"
        detail = await console.job_detail(q.name, jid)
        assert detail["job"]["data"] == {"x": 1} and detail["logs"] == []
        before = dump(r, q)
        with pytest.raises(ReadOnly):
            await frozen.resume(q.name, {})
        with pytest.raises(InvalidArgument):
            await console.obliterate(q.name, {"budget": 0})
        with pytest.raises(JobGone):
            await console.reprocess_job(q.name, "JOB00000000001", {})
        assert dump(r, q) == before
    finally:
        await console.aclose()
        await frozen.aclose()


# ----------------------------------------------------------------------- queue verbs
def test_pause_and_resume(api: TestClient, q: Queue, r: redis.Redis) -> None:
    jid = q.enqueue({"x": 1})
    reply = post(api, qp(q, "/pause"))
    assert reply.status_code == 200 and reply.json() == {"ok": True, "paused": True}
    assert r.hget(q.keys.meta, "paused") == "1" and r.zscore(q.keys.pending, jid) is not None
    before = dump(r, q)
    assert post(api, qp(q, "/pause")).json()["paused"] is True  # idempotent
    assert dump(r, q) == before
    assert post(api, qp(q, "/resume")).json() == {"ok": True, "paused": False}
    assert not r.hexists(q.keys.meta, "paused")
    assert r.zscore(q.keys.pending, jid) is not None


def test_drain_with_and_without_schedule(api: TestClient, q: Queue, r: redis.Redis) -> None:
    q.enqueue({"a": 1})
    q.enqueue({"a": 2}, group="g")
    later = q.enqueue({"b": 1}, delay_ms=60000)
    busy = q.enqueue({"c": 1}, priority=-1)
    claimed = q.claim()
    assert claimed is not None and claimed.id == busy
    q.enqueue({"a": 3})
    # one bounded call per request: the page calls again while done is false
    reply = post(api, qp(q, "/drain"), {"budget": 2})
    assert reply.json() == {
        "ok": True, "drained": 2, "done": False, "remaining": {"pending": 1, "scheduled": 1}
    }  # fmt: skip
    reply = post(api, qp(q, "/drain"), {"budget": 2})
    assert reply.json() == {
        "ok": True, "drained": 1, "done": True, "remaining": {"pending": 0, "scheduled": 1}
    }  # fmt: skip
    assert r.zcard(q.keys.pending) == 0 and r.zcard(q.keys.lane("g")) == 0
    assert r.zscore(q.keys.schedule, later) is not None
    assert r.zscore(q.keys.active, claimed.id) is not None and r.exists(q.keys.job(claimed.id))
    reply = post(api, qp(q, "/drain"), {"include_schedule": True})
    assert reply.json() == {
        "ok": True, "drained": 1, "done": True, "remaining": {"pending": 0, "scheduled": 0}
    }  # fmt: skip
    assert not r.exists(q.keys.schedule) and not r.exists(q.keys.job(later))
    assert r.exists(q.keys.job(busy)) and r.zscore(q.keys.active, busy) is not None


def test_drain_bad_body_is_400(api: TestClient, q: Queue, r: redis.Redis) -> None:
    q.enqueue({"a": 1})
    before = dump(r, q)
    refused(post(api, qp(q, "/drain"), {"include_schedule": "yes"}), 400, "invalid", "argument")
    refused(post(api, qp(q, "/drain"), {"schedule": True}), 400, "invalid", "argument")
    refused(post(api, qp(q, "/drain"), {"budget": 0}), 400, "invalid", "argument")
    refused(post(api, qp(q, "/drain"), {"budget": 10**6}), 400, "invalid", "argument")
    resp = api.post(qp(q, "/drain"), content="[1]", headers=CHANGE)
    refused(resp, 400, "invalid", "json")
    refused(api.post(qp(q, "/drain"), content="{", headers=CHANGE), 400, "invalid", "json")
    assert dump(r, q) == before


def test_obliterate_refusals_change_nothing(api: TestClient, q: Queue, r: redis.Redis) -> None:
    q.enqueue({"a": 1})
    q.enqueue({"a": 2})
    assert q.claim() is not None
    before = dump(r, q)
    refused(post(api, qp(q, "/obliterate")), 409, "refused", "not_paused")
    assert dump(r, q) == before
    q.pause()
    before = dump(r, q)
    refused(post(api, qp(q, "/obliterate")), 409, "refused", "active")
    for bad in ({"budget": 0}, {"budget": 10001}, {"budget": "9"}, {"force": 1}):
        refused(post(api, qp(q, "/obliterate"), bad), 400, "invalid", "argument")
    assert dump(r, q) == before


def test_obliterate_loops_in_bounded_calls(api: TestClient, q: Queue, r: redis.Redis) -> None:
    for i in range(5):
        q.enqueue({"i": i})
    dead_job(q)
    q.enqueue({"g": 1}, group="g")
    q.pause()
    replies = []
    while True:
        body = post(api, qp(q, "/obliterate"), {"budget": 2}).json()
        replies.append(body)
        assert len(replies) < 50
        if body["done"]:
            break
    assert len(replies) >= 4  # 7 jobs at 2 per call
    assert all(b["ok"] for b in replies) and not any(b["done"] for b in replies[:-1])
    left = [sum(b["remaining"][s] for s in ("pending", "scheduled", "dead")) for b in replies]
    assert left == sorted(left, reverse=True) and left[-1] == 0
    assert queue_keys(r, q) == set()


def test_obliterate_forced_takes_jobs_in_flight(api: TestClient, q: Queue, r: redis.Redis) -> None:
    q.enqueue({"a": 1})
    assert q.claim() is not None
    q.pause()
    body = post(api, qp(q, "/obliterate"), {"force": True}).json()
    assert body == {
        "ok": True,
        "done": True,
        "remaining": {
            "pending": 0,
            "active": 0,
            "scheduled": 0,
            "dead": 0,
            "completed": 0,
            "failed": 0,
            "kept": 0,
            "waiting_children": 0,
        },
    }
    assert queue_keys(r, q) == set()


# ----------------------------------------------------------------------- group verbs
def test_group_verbs(api: TestClient, q: Queue, r: redis.Redis) -> None:
    for i in range(3):
        q.enqueue({"i": i}, group="g")
    q.enqueue({"h": 1}, group="h")
    g = qp(q, "/groups/g")
    assert post(api, g + "/pause").json() == {"ok": True}
    assert r.sismember(q.keys.gpaused, "g")
    assert post(api, g + "/resume").json() == {"ok": True}
    assert not r.sismember(q.keys.gpaused, "g")
    assert post(api, g + "/limit", {"limit": 2}).json() == {"ok": True, "limit": 2}
    assert r.hget(q.keys.glimit, "g") == "2"
    assert post(api, g + "/limit", {"limit": None}).json() == {"ok": True, "limit": None}
    assert not r.hexists(q.keys.glimit, "g")
    assert post(api, g + "/weight", {"weight": 4}).json() == {"ok": True, "weight": 4}
    assert r.hget(q.keys.gweight, "g") == "4"
    assert post(api, g + "/drain").json() == {"ok": True, "drained": 3}
    assert r.zcard(q.keys.lane("g")) == 0 and r.zcard(q.keys.lane("h")) == 1


def test_group_verb_refusals(api: TestClient, q: Queue, r: redis.Redis) -> None:
    q.enqueue({"i": 1}, group="g")
    before = dump(r, q)
    g = qp(q, "/groups/g")
    refused(post(api, g + "/limit", {"limit": 0}), 400, "invalid", "argument")
    refused(post(api, g + "/limit", {}), 400, "invalid", "argument")
    refused(post(api, g + "/weight", {"weight": True}), 400, "invalid", "argument")
    refused(post(api, qp(q, "/groups/b*d/pause")), 400, "invalid", "name")
    refused(post(api, g + "/explode"), 404, "invalid", "not_found")
    assert dump(r, q) == before


# ------------------------------------------------------------------------- job verbs
def test_job_verbs_write_the_row(api: TestClient, q: Queue, r: redis.Redis) -> None:
    jid = q.enqueue({"old": 1})
    j = qp(q, f"/jobs/{jid}")
    assert post(api, j + "/data", {"data": {"new": [1, 2]}}).json() == {"ok": True}
    assert json.loads(r.hget(q.keys.job(jid), "payload") or "") == {"new": [1, 2]}
    assert post(api, j + "/progress", {"progress": 42}).json() == {"ok": True}
    assert r.hget(q.keys.job(jid), "progress") == "42"
    assert post(api, j + "/progress", {"progress": {"step": "b"}}).json() == {"ok": True}
    assert json.loads(r.hget(q.keys.job(jid), "progress") or "") == {"step": "b"}
    for line in ("one", "two", "three"):
        kept = post(api, j + "/log", {"line": line}).json()
    assert kept == {"ok": True, "kept": 3}
    assert post(api, j + "/log", {"line": "four", "keep": 2}).json() == {"ok": True, "kept": 2}
    assert r.lrange(q.keys.logs(jid), 0, -1) == ["three", "four"]
    assert post(api, j + "/remove").json() == {"ok": True}
    assert not r.exists(q.keys.job(jid)) and not r.exists(q.keys.logs(jid))
    assert r.zscore(q.keys.pending, jid) is None


def test_reprocess_dead_job(api: TestClient, q: Queue, r: redis.Redis) -> None:
    jid = dead_job(q)
    assert post(api, qp(q, f"/jobs/{jid}/reprocess")).json() == {"ok": True}
    row = r.hgetall(q.keys.job(jid))
    assert row["state"] == "pending" and "last_error" not in row
    assert row["attempts"] == "1" and row["failures"] == "1"
    assert r.zscore(q.keys.pending, jid) is not None and r.zscore(q.keys.dead, jid) is None


def test_rerun_a_dead_job_as_a_linked_copy(api: TestClient, q: Queue, r: redis.Redis) -> None:
    jid = dead_job(q, name="mail")
    reply = post(api, qp(q, f"/jobs/{jid}/rerun"))
    assert reply.status_code == 200
    copy = reply.json()["copy"]
    assert reply.json() == {"ok": True, "copy": copy} and copy != jid
    assert r.zrange(q.keys.pending, 0, -1) == [copy]
    assert r.hget(q.keys.job(copy), "rerun_of") == jid
    assert r.hget(q.keys.job(copy), "name") == "mail"
    # the old job's page shows the link to the copy, the copy's the link back
    assert api.get(qp(q, f"/jobs/{jid}")).json()["job"]["rerun_as"] == copy
    assert api.get(qp(q, f"/jobs/{copy}")).json()["job"]["rerun_of"] == jid
    (entry,) = q.audit(1)
    assert (entry.verb, entry.args) == ("rerun_job", {"job": jid, "copy": copy})
    # the copy is pending: not finished, refused, nothing changed
    before = dump(r, q)
    refused(post(api, qp(q, f"/jobs/{copy}/rerun")), 409, "refused", "not_finished")
    refused(post(api, qp(q, f"/jobs/{jid}/rerun"), {"x": 1}), 400, "invalid", "argument")
    assert dump(r, q) == before


def test_job_verb_refusals_change_nothing(api: TestClient, q: Queue, r: redis.Redis) -> None:
    live = q.enqueue({"x": 1})
    held = q.enqueue({"x": 2})
    claimed = q.claim_many(5, lock_ms=60000)
    assert {c.id for c in claimed} == {live, held}
    q.enqueue({"x": 3})
    before = dump(r, q)
    refused(post(api, qp(q, f"/jobs/{held}/remove")), 409, "refused", "locked")
    refused(post(api, qp(q, f"/jobs/{live}/reprocess")), 409, "refused", "not_dead")
    gone = "JOB00000000001"
    for verb, body in (
        ("data", {"data": 1}),
        ("progress", {"progress": 1}),
        ("log", {"line": "x"}),
        ("remove", {}),
        ("reprocess", {}),
        ("rerun", {}),
    ):
        refused(post(api, qp(q, f"/jobs/{gone}/{verb}"), body), 404, "refused", "gone")
        refused(post(api, qp(q, f"/jobs/{BAD_ID}/{verb}"), body), 400, "invalid", "job_id")
    refused(post(api, qp(q, f"/jobs/{live}/data")), 400, "invalid", "argument")
    refused(post(api, qp(q, f"/jobs/{live}/log"), {"line": 5}), 400, "invalid", "argument")
    refused(
        post(api, qp(q, f"/jobs/{live}/log"), {"line": "x", "keep": -1}), 400, "invalid", "argument"
    )
    assert dump(r, q) == before


# ---------------------------------------------------------------------------- safety
def test_changes_are_post_only(api: TestClient, q: Queue, r: redis.Redis) -> None:
    q.enqueue({"x": 1})
    before = dump(r, q)
    for path in ("/pause", "/drain", "/obliterate", "/groups/g/drain"):
        refused(api.get(qp(q, path)), 405, "invalid", "method")
    refused(post(api, qp(q, "/explode")), 404, "invalid", "not_found")
    assert dump(r, q) == before


@pytest.mark.parametrize(
    "headers, status, reason",
    [
        ({"Origin": "http://evil.example"}, 403, "cross_site"),
        ({"Origin": "null"}, 403, "cross_site"),
        ({"Referer": "http://evil.example/page"}, 403, "cross_site"),
        ({"Sec-Fetch-Site": "cross-site"}, 403, "cross_site"),
        ({"Sec-Fetch-Site": "same-site"}, 403, "cross_site"),
        ({"Content-Type": "text/plain"}, 415, "content_type"),
        ({"Content-Type": "application/x-www-form-urlencoded"}, 415, "content_type"),
        ({"X-Requested-With": ""}, 403, "header"),
    ],
)
def test_cross_site_changes_are_refused(
    api: TestClient, q: Queue, r: redis.Redis, headers: dict[str, str], status: int, reason: str
) -> None:
    q.enqueue({"x": 1})
    before = dump(r, q)
    sent = {**CHANGE, **headers}
    if headers.get("X-Requested-With") == "":
        del sent["X-Requested-With"]
    resp = api.post(qp(q, "/pause"), content="{}", headers=sent)
    refused(resp, status, "forbidden", reason)
    assert dump(r, q) == before


def test_same_origin_change_passes(api: TestClient, q: Queue, r: redis.Redis) -> None:
    headers = {"Origin": ORIGIN, "Sec-Fetch-Site": "same-origin"}
    assert post(api, qp(q, "/pause"), headers=headers).status_code == 200
    assert r.hget(q.keys.meta, "paused") == "1"


def test_loopback_console_refuses_foreign_host(
    make_client: Callable[..., TestClient], q: Queue, r: redis.Redis
) -> None:
    """A DNS-rebinding page reaches a loopback console under its own name: refused."""
    q.enqueue({"x": 1})
    rebound = make_client(base_url="http://evil.example:8765")
    before = dump(r, q)
    refused(rebound.get("/api/queues"), 403, "forbidden", "host")
    refused(post(rebound, qp(q, "/pause")), 403, "forbidden", "host")
    assert dump(r, q) == before
    local = make_client(base_url="http://localhost:9000")
    assert local.get("/api/config").status_code == 200


@pytest.mark.parametrize("source", ["option", "env"])
def test_token_guards_changes(
    make_client: Callable[..., TestClient],
    q: Queue,
    r: redis.Redis,
    monkeypatch: pytest.MonkeyPatch,
    source: str,
) -> None:
    if source == "env":
        monkeypatch.setenv(TOKEN_ENV, "s3cret")
        client = make_client()
    else:
        client = make_client(token="s3cret")
    q.enqueue({"x": 1})
    assert client.get("/api/config").json()["token_required"] is True
    # reads are guarded too (payloads and logs may hold personal data)
    refused(client.get(qp(q)), 401, "unauthorized", "token")
    assert client.get(qp(q), headers={"X-EMQ-Token": "s3cret"}).status_code == 200
    before = dump(r, q)
    refused(post(client, qp(q, "/pause")), 401, "unauthorized", "token")
    refused(
        post(client, qp(q, "/pause"), headers={"X-EMQ-Token": "wrong"}),
        401,
        "unauthorized",
        "token",
    )
    assert dump(r, q) == before
    ok = client.post(
        qp(q, "/pause"),
        content="{}",
        headers={"Content-Type": "application/json", "X-EMQ-Token": "s3cret"},
    )
    assert ok.status_code == 200 and r.hget(q.keys.meta, "paused") == "1"


def test_read_only_refuses_every_change(
    make_client: Callable[..., TestClient], q: Queue, r: redis.Redis
) -> None:
    client = make_client(read_only=True, token="s3cret")
    jid = dead_job(q)
    q.enqueue({"x": 1}, group="g")
    q.pause()
    before = dump(r, q)
    token = {"X-EMQ-Token": "s3cret"}
    assert client.get("/api/config", headers=token).json()["read_only"] is True
    assert client.get(qp(q, "/jobs?state=dead"), headers=token).json()["jobs"][0]["id"] == jid
    paths = [qp(q, f"/{v}") for v in ("pause", "resume", "drain", "obliterate")]
    paths += [qp(q, f"/groups/g/{v}") for v in ("pause", "resume", "limit", "weight", "drain")]
    job_verbs = ("data", "progress", "log", "remove", "reprocess", "rerun")
    paths += [qp(q, f"/jobs/{jid}/{v}") for v in job_verbs]
    for path in paths:
        token = {"X-EMQ-Token": "s3cret"}
        refused(post(client, path, {}, headers=token), 403, "forbidden", "read_only")
    assert dump(r, q) == before


def test_non_loopback_bind_needs_a_token(
    server: EmbeddedServer, monkeypatch: pytest.MonkeyPatch, q: Queue, r: redis.Redis
) -> None:
    for host in ("0.0.0.0", "::", "192.0.2.10", "example.com"):
        with pytest.raises(UnsafeBind):
            create_app(server.url, host=host)
    monkeypatch.setenv(TOKEN_ENV, "")
    with pytest.raises(UnsafeBind):
        create_app(server.url, host="0.0.0.0")
    monkeypatch.setenv(TOKEN_ENV, "t0ken")
    app = create_app(server.url, host="0.0.0.0")
    with TestClient(app, base_url="http://console.lan:8765") as client:
        # no loopback Host check on a network bind; the token guards the changes
        assert client.get("/api/config").json()["token_required"] is True
        refused(post(client, qp(q, "/pause")), 401, "unauthorized", "token")
        assert not r.exists(q.keys.meta)
        assert post(client, qp(q, "/pause"), headers={"X-EMQ-Token": "t0ken"}).status_code == 200
        assert r.hget(q.keys.meta, "paused") == "1"


def test_no_server_is_503(q: Queue) -> None:
    nowhere = f"redis://127.0.0.1:{free_port()}/0"  # nothing listens there
    with TestClient(create_app(nowhere), base_url=ORIGIN) as client:
        refused(client.get("/api/queues"), 503, "unavailable", "server")
        refused(client.get(qp(q)), 503, "unavailable", "server")
        refused(post(client, qp(q, "/pause")), 503, "unavailable", "server")


# ---------------------------------------------------------------- server-sent events
@pytest.fixture()
def live_url(server: EmbeddedServer) -> Iterator[str]:
    """The console served by uvicorn on a free loopback port, in a thread."""
    with serving(server.url) as port:
        yield f"http://127.0.0.1:{port}"


def _next_events(lines: Iterator[str], queue: str, count: int) -> list[dict[str, Any]]:
    """The next ``count`` events of ``queue`` (the all-queues stream carries others too;
    a health beat, ``event: beat`` then its ``data:``, is no queue event: skipped)."""
    out = []
    named = None  # the `event:` line of the message being read, if any
    for line in lines:
        if line.startswith("event: "):
            named = line[7:]
        elif not line:
            named = None
        elif line.startswith("data: ") and named is None:
            event = json.loads(line[6:])
            if event["queue"] == queue:
                out.append(event)
            if len(out) == count:
                return out
    raise AssertionError("stream ended")


def _wait_listening(lines: Iterator[str]) -> None:
    for line in lines:
        if line.startswith(": ping"):
            return
    raise AssertionError("stream ended before it was listening")


@pytest.mark.parametrize("scope", ["queue", "all"])
def test_events_stream_relays_the_channel(
    live_url: str, q: Queue, r: redis.Redis, scope: str
) -> None:
    jid = q.enqueue({"x": 1})
    path = qp(q, "/events") if scope == "queue" else "/api/events"
    with (
        httpx.Client(base_url=live_url, timeout=10) as http,
        http.stream("GET", path) as resp,
    ):
        assert resp.status_code == 200
        assert resp.headers["content-type"].startswith("text/event-stream")
        lines = resp.iter_lines()
        _wait_listening(lines)
        q.update_progress(jid, 30)
        q.pause()
        events = _next_events(lines, q.name, 2)
    assert events == [
        {"event": "progress", "job": jid, "progress": 30, "queue": q.name},
        {"event": "paused", "queue": q.name},
    ]
    assert r.hget(q.keys.job(jid), "progress") == "30"


def test_events_stream_gates_the_name(live_url: str) -> None:
    resp = httpx.get(live_url + "/api/queues/bad*name/events", timeout=5)
    assert resp.status_code == 400 and resp.json()["reason"] == "name"


def test_static_dir_is_packaged() -> None:
    assert {p.name for p in STATIC.iterdir()} >= {"index.html", "app.js", "app.css"}
    assert Path(STATIC / "index.html").read_text(encoding="utf-8").startswith("<!doctype html>")


# ------------------------------------------------------------------- second edition
def test_reads_need_the_token_by_every_means(
    make_client: Callable[..., TestClient], q: Queue, r: redis.Redis
) -> None:
    jid = q.enqueue({"pii": "a@example.com"})
    q.add_log(jid, "sent to a@example.com")
    client = make_client(token="s3cret")
    before = dump(r, q)
    for path in ("/api/queues", qp(q), qp(q, "/jobs"), qp(q, f"/jobs/{jid}"), qp(q, "/groups")):
        resp = client.get(path)
        refused(resp, 401, "unauthorized", "token")
        assert "a@example.com" not in resp.text
        assert resp.headers["www-authenticate"].startswith("Bearer")  # no browser prompt
    # without the token the config says only that one is needed
    assert client.get("/api/config").json() == {"token_required": True, "authenticated": False}
    basic = "Basic " + base64.b64encode(b"ops:s3cret").decode()
    wrong = "Basic " + base64.b64encode(b"ops:nope").decode()
    for headers in (
        {"X-EMQ-Token": "s3cret"},
        {"Authorization": "Bearer s3cret"},
        {"Authorization": basic},
    ):
        assert client.get(qp(q, f"/jobs/{jid}"), headers=headers).status_code == 200
    for headers in ({"X-EMQ-Token": "x"}, {"Authorization": "Bearer x"}, {"Authorization": wrong}):
        refused(client.get(qp(q, f"/jobs/{jid}"), headers=headers), 401, "unauthorized", "token")
    assert dump(r, q) == before


def test_login_sets_a_strict_session_cookie(
    make_client: Callable[..., TestClient], q: Queue, r: redis.Redis
) -> None:
    client = make_client(token="s3cret")
    bad = client.post("/api/login", content='{"token": "nope"}', headers=CHANGE)
    refused(bad, 401, "unauthorized", "token")
    assert "set-cookie" not in bad.headers
    no_header = client.post(
        "/api/login", content='{"token": "s3cret"}', headers={"Content-Type": "application/json"}
    )
    refused(no_header, 403, "forbidden", "header")
    ok = client.post("/api/login", content='{"token": "s3cret"}', headers=CHANGE)
    assert ok.status_code == 200
    cookie = ok.headers["set-cookie"].lower()
    assert "httponly" in cookie and "samesite=strict" in cookie and "s3cret" not in cookie
    # the cookie now stands for the token: reads and changes pass
    assert client.get(qp(q)).status_code == 200
    assert client.get("/api/config").json()["authenticated"] is True
    assert post(client, qp(q, "/pause")).status_code == 200 and r.hget(q.keys.meta, "paused") == "1"
    client.post("/api/logout", content="{}", headers=CHANGE)
    refused(client.get(qp(q)), 401, "unauthorized", "token")


def test_token_from_a_file(
    make_client: Callable[..., TestClient],
    q: Queue,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    server: EmbeddedServer,
) -> None:
    secret = tmp_path / "token"
    secret.write_text("fr0m-file\n")
    client = make_client(token_file=str(secret))
    refused(client.get(qp(q)), 401, "unauthorized", "token")
    assert client.get(qp(q), headers={"X-EMQ-Token": "fr0m-file"}).status_code == 200
    monkeypatch.setenv(TOKEN_FILE_ENV, str(secret))
    assert create_app(server.url, host="0.0.0.0") is not None  # the file counts as a token
    empty = tmp_path / "empty"
    empty.write_text("  \n")
    with pytest.raises(UnsafeBind):
        create_app(server.url, token_file=str(empty))
    with pytest.raises(UnsafeBind):
        create_app(server.url, token_file=str(tmp_path / "missing"))


def test_search_groups_paging_repeats_and_a_missing_queue(
    api: TestClient, q: Queue, r: redis.Redis
) -> None:
    hit = dead_job(q, {"order": 1})
    r.hset(q.keys.job(hit), "last_error", "HTTPError: 404 Not Found [/v1/charges]")
    dead_job(q, {"order": 2})
    for i in range(7):
        q.enqueue({"i": i}, group=f"g{i}")
    q.repeat("tick", every_ms=60000)
    before = dump(r, q)
    found = api.get(qp(q, "/jobs?state=dead&q=/v1/charges&field=error")).json()
    assert [j["id"] for j in found["jobs"]] == [hit] and found["cursor"] is None
    assert found["fields"] == ["error"]
    step = api.get(qp(q, "/jobs?state=dead&q=order&budget=1")).json()
    assert step["scanned"] == 1 and step["cursor"] == 1
    refused(api.get(qp(q, "/jobs?state=dead&q=x&budget=0")), 400, "invalid", "argument")
    refused(api.get(qp(q, "/jobs?state=dead&q=x&field=secret")), 400, "invalid", "argument")
    seen, cursor = set(), "0"
    while True:
        page = api.get(qp(q, f"/groups?n=3&cursor={cursor}")).json()
        seen |= {g["name"] for g in page["groups"]}
        cursor = page["cursor"]
        if cursor == "0":
            break
    assert seen == {f"g{i}" for i in range(7)}
    lane = api.get(qp(q, "/jobs?state=pending&group=g3")).json()
    assert lane["group"] == "g3" and lane["total"] == 1
    (rep,) = api.get(qp(q, "/repeats")).json()["repeats"]
    assert rep["name"] == "tick" and rep["every_ms"] == 60000
    summary = api.get(qp(q)).json()
    assert summary["exists"] is True
    assert api.get("/api/queues/no-such-queue-here").json()["exists"] is False
    refused(api.get("/api/queues/.%2E"), 400, "invalid", "name")
    assert dump(r, q) == before
    cancelled = post(api, qp(q, "/repeats/tick/cancel"))
    assert cancelled.json() == {"ok": True, "cancelled": True}
    assert r.zscore(q.keys.repeat, "tick") is None
    assert post(api, qp(q, "/repeats/tick/cancel")).json()["cancelled"] is False


def test_numbers_are_numbers(api: TestClient, q: Queue) -> None:
    jid = dead_job(q)
    (row,) = api.get(qp(q, "/jobs?state=dead")).json()["jobs"]
    assert row["attempts"] == 1 and row["failures"] == 1 and row["priority"] == -(10**6)
    assert isinstance(api.get(qp(q, f"/jobs/{jid}")).json()["score"], int)


async def test_health_tells_a_dead_server(server: EmbeddedServer) -> None:
    console = Console(server.url)
    nowhere = Console(f"redis://127.0.0.1:{free_port()}/0")
    try:
        assert (await console.health())["redis"] is True
        assert (await nowhere.health())["redis"] is False
    finally:
        await console.aclose()
        await nowhere.aclose()


def test_event_streams_are_capped_per_client_and_beat(server: EmbeddedServer, q: Queue) -> None:
    with serving(server.url, streams_per_client=1) as port:
        url = f"http://127.0.0.1:{port}"
        with (
            httpx.Client(base_url=url, timeout=10) as http,
            http.stream("GET", qp(q, "/events")) as first,
        ):
            assert first.status_code == 200
            lines = first.iter_lines()
            started = time.monotonic()
            beats = 0
            for line in lines:
                if line == "event: beat":
                    beats += 1
                elif line.startswith("data: ") and beats:
                    assert json.loads(line[6:])["redis"] is True
                    if beats == 2:
                        break
            assert time.monotonic() - started < 5  # a beat a second
            second = http.get(qp(q, "/events"))
            refused(second, 429, "unavailable", "streams")
            assert second.headers["retry-after"]
        # the first stream closed: its slot is free again
        deadline = time.monotonic() + 5
        while True:
            with (
                httpx.Client(base_url=url, timeout=10) as http,
                http.stream("GET", qp(q, "/events")) as again,
            ):
                if again.status_code == 200:
                    break
            assert time.monotonic() < deadline, "the stream slot was never released"
            time.sleep(0.1)


def test_run_a_scheduled_job_now(api: TestClient, q: Queue, r: redis.Redis) -> None:
    later = q.enqueue({"x": 1}, delay_ms=3_600_000)
    now = q.enqueue({"x": 2})
    before = dump(r, q)
    refused(post(api, qp(q, f"/jobs/{now}/promote")), 409, "refused", "not_scheduled")
    assert dump(r, q) == before
    assert post(api, qp(q, f"/jobs/{later}/promote")).json() == {"ok": True}
    assert r.hget(q.keys.job(later), "state") == "pending"
    assert r.zscore(q.keys.schedule, later) is None and r.zscore(q.keys.pending, later) == 0


def test_workers_shows_a_workers_queues_order_and_batch(
    api: TestClient, make_queue: Callable[..., Queue], qname: str
) -> None:
    from echomq import Batch, Worker
    from worker_support import FAST, running

    a, b = make_queue(f"{qname}-a"), make_queue(f"{qname}-b")
    with running(Worker([a, b], lambda jobs: None, config=FAST, batch=Batch(size=10))):
        wait_until(b.workers)
        got = api.get(qp(b, "/workers"))
    assert got.status_code == 200
    (w,) = got.json()["workers"]
    assert w["queues"] == [a.name, b.name] and w["order"] == "priority"
    assert w["batch"] == "size=10,min_size=1,wait_ms=500"
