"""The console's operator tools of issue 16 through its JSON API: workers, the audit
journal (with the console's actor), cancel, bulk verbs by filter in bounded pieces,
the queue latency and "which queue holds this job".

Every change checks its reply and the keys it leaves; every refusal compares the
queue's keys before and after and finds them equal.
"""

from __future__ import annotations

import base64
from collections.abc import Callable

import redis

from conftest import dump
from echomq import Queue, ids, new_id
from test_console_api import CHANGE, TestClient, api, dead_job, make_client, post, qp, refused
from worker_support import server_ms

__all__ = ["api", "make_client"]  # the fixtures, imported for the tests below


def test_workers_and_latency(api: TestClient, q: Queue, r: redis.Redis) -> None:
    assert api.get(qp(q, "/workers")).json() == {"workers": []}
    assert api.get(qp(q)).json()["latency_ms"] is None
    wid = "0123456789abcdef"
    r.hset(
        q.keys.worker(wid),
        mapping={"host": "<img src=x onerror=alert(1)>", "pid": "42", "jobs": "2", "beat": "1"},
    )
    r.zadd(q.keys.workers, {wid: 1})
    (w,) = api.get(qp(q, "/workers")).json()["workers"]
    assert (w["id"], w["pid"], w["jobs"], w["host"]) == (wid, 42, 2, "<img src=x onerror=alert(1)>")
    q.enqueue(1)
    assert isinstance(api.get(qp(q)).json()["latency_ms"], int)
    refused(api.get(qp(q, "/workers?n=0")), 400, "invalid", "argument")


def test_changes_journal_the_console_actor(
    make_client: Callable[..., TestClient], q: Queue, r: redis.Redis
) -> None:
    local = make_client()
    assert post(local, qp(q, "/pause")).status_code == 200
    (entry,) = local.get(qp(q, "/audit?n=5")).json()["entries"]
    assert (entry["verb"], entry["actor"]) == ("pause", "console:local@testclient")
    guarded = make_client(token="s3cret")
    # a Basic user is named; a bare token is "token"; a login names its user
    basic = "Basic " + base64.b64encode(b"ann:s3cret").decode()
    post(guarded, qp(q, "/resume"), headers={"Authorization": basic})
    post(guarded, qp(q, "/pause"), headers={"X-EMQ-Token": "s3cret"})
    ok = guarded.post("/api/login", content='{"token": "s3cret", "user": "bo b"}', headers=CHANGE)
    assert ok.json()["user"] == "bo_b"
    assert "s3cret" not in ok.headers["set-cookie"]
    post(guarded, qp(q, "/resume"))
    actors = [e["actor"] for e in guarded.get(qp(q, "/audit")).json()["entries"]]
    assert actors[:3] == [
        "console:bo_b@testclient",
        "console:token@testclient",
        "console:ann@testclient",
    ]
    assert guarded.get("/api/config").json()["actor"] == "console:bo_b@testclient"
    # the cookie is a random session id held by this console (named after its port):
    # it names no user and cannot be made up
    cookie = guarded.cookies.get("emq_session_8765")
    assert cookie is not None and "bo_b" not in cookie and len(cookie) >= 40
    guarded.cookies.set("emq_session_8765", "root." + cookie)
    refused(guarded.get(qp(q, "/audit")), 401, "unauthorized", "token")


def test_cancel_a_running_job(api: TestClient, q: Queue, r: redis.Redis) -> None:
    pending = q.enqueue({"p": 1})
    before = dump(r, q)
    refused(post(api, qp(q, f"/jobs/{pending}/cancel")), 409, "refused", "not_active")
    refused(post(api, qp(q, "/jobs/JOB00000000001/cancel")), 404, "refused", "gone")
    assert dump(r, q) == before
    got = q.claim()
    assert got is not None and got.id == pending
    resp = post(api, qp(q, f"/jobs/{pending}/cancel"))
    assert resp.json() == {"ok": True, "requested": True}
    assert r.hget(q.keys.job(pending), "cancel") == str(got.token)
    assert post(api, qp(q, f"/jobs/{pending}/cancel")).json()["requested"] is False
    assert q.audit(1)[0].verb == "cancel_job"


def test_bulk_verbs_in_bounded_pieces(api: TestClient, q: Queue, r: redis.Redis) -> None:
    dead = [dead_job(q, {"n": n}, name="mail" if n % 2 else "sms") for n in range(12)]
    before = dump(r, q)
    dry = post(api, qp(q, "/bulk/reprocess"), {"name": "mail", "dry_run": True, "scan": 1})
    doc = dry.json()
    assert dry.status_code == 200 and doc["dry_run"] is True and doc["calls"] <= 8
    assert dump(r, q) == before  # a dry run writes nothing
    # the page loops with the cursor until done; each piece is at most 8 calls
    matched, cursor, pieces = 0, None, 0
    while True:
        body = {"name": "mail", "scan": 1, **({"cursor": cursor} if cursor else {})}
        doc = post(api, qp(q, "/bulk/reprocess"), body).json()
        matched += doc["matched"]
        pieces += 1
        cursor = doc["cursor"]
        if doc["done"]:
            break
    assert matched == 6 and pieces >= 2
    assert r.zcard(q.keys.dead) == 6 and r.zcard(q.keys.pending) == 6
    assert {e.verb for e in q.audit(20)} == {"reprocess_jobs"}
    assert q.audit(1)[0].actor == "console:local@testclient"
    removed = post(api, qp(q, "/bulk/remove"), {"state": "dead", "error": "boom"}).json()
    assert removed["matched"] == 6 and removed["done"] and not r.exists(q.keys.dead)
    assert all(not r.exists(q.keys.job(j)) for j in dead[::2])
    later = q.enqueue(1, delay_ms=600_000)
    assert post(api, qp(q, "/bulk/promote"), {}).json()["matched"] == 1
    assert q.job_state(later) == "pending"
    assert post(api, qp(q, "/bulk/clean"), {"older_than_ms": 0}).json()["done"] is True


def test_bulk_refusals_change_nothing(
    make_client: Callable[..., TestClient], api: TestClient, q: Queue, r: redis.Redis
) -> None:
    dead_job(q)
    before = dump(r, q)
    refused(post(api, qp(q, "/bulk/remove"), {"state": "active"}), 409, "refused", "locked")
    refused(post(api, qp(q, "/bulk/reprocess"), {"state": "dead"}), 400, "invalid", "argument")
    refused(post(api, qp(q, "/bulk/reprocess"), {"since_ms": "x"}), 400, "invalid", "argument")
    refused(post(api, qp(q, "/bulk/reprocess"), {"group": "../x"}), 400, "invalid", "name")
    refused(post(api, qp(q, "/bulk/nope"), {}), 404, "invalid", "not_found")
    frozen = make_client(read_only=True)
    refused(
        post(frozen, qp(q, "/bulk/reprocess"), {"dry_run": True}), 403, "forbidden", "read_only"
    )
    refused(api.post(qp(q, "/bulk/reprocess"), content="{}"), 415, "forbidden", "content_type")
    assert dump(r, q) == before


def test_locate_a_job_by_id(api: TestClient, q: Queue, make_queue: Callable[..., Queue]) -> None:
    other = make_queue(q.name + "-other")
    jid = other.enqueue({"x": 1})
    q.enqueue(1)
    assert api.get(f"/api/jobs/{jid}").json() == {"queue": other.name, "id": jid}
    refused(api.get(f"/api/jobs/{new_id()}"), 404, "refused", "gone")  # no queue holds it
    refused(api.get("/api/jobs/nope"), 400, "invalid", "job_id")


def test_repeatables_pause_resume_and_run_now(api: TestClient, q: Queue, r: redis.Redis) -> None:
    q.repeat("digest", every_ms=3_600_000, first_in_ms=600_000)
    rp = qp(q, "/repeats/digest")
    assert post(api, rp + "/pause").json() == {"ok": True, "paused": True}
    (row,) = api.get(qp(q, "/repeats")).json()["repeats"]
    assert row["paused"] is True
    before = dump(r, q)
    assert post(api, rp + "/run").json() == {"ok": True, "id": None}  # paused: nothing made
    assert post(api, rp + "/pause").json()["paused"] is False
    assert dump(r, q) == before
    assert isinstance(post(api, rp + "/resume").json()["next_run_ms"], int)
    made = post(api, rp + "/run").json()["id"]
    assert q.job_state(made) == "pending" and q.get_job(made).name == "digest"  # type: ignore[union-attr]
    verbs = [e.verb for e in q.audit(10)]
    assert verbs[:3] == ["run_repeat", "resume_repeat", "pause_repeat"]
    refused(post(api, qp(q, "/repeats/../run")), 404, "invalid", "not_found")


def test_find_by_creation_time(api: TestClient, q: Queue, r: redis.Redis) -> None:
    old_ms = server_ms(r) - 3_600_000
    shift = ids.NODE_BITS + ids.SEQ_BITS
    old = q.enqueue({"age": "old"}, job_id=ids.encode((old_ms - ids.EPOCH_MS) << shift))
    new = q.enqueue({"age": "new"})
    found = api.get(qp(q, f"/jobs?state=pending&until={old_ms + 1000}")).json()
    assert [j["id"] for j in found["jobs"]] == [old] and found["cursor"] is None
    found = api.get(qp(q, f"/jobs?state=pending&since={old_ms + 1000}")).json()
    assert [j["id"] for j in found["jobs"]] == [new]
    # text and range together; no text and no range is a page as before
    found = api.get(qp(q, f"/jobs?state=pending&q=old&field=payload&since={old_ms}")).json()
    assert [j["id"] for j in found["jobs"]] == [old]
    assert "total" in api.get(qp(q, "/jobs?state=pending")).json()
    refused(api.get(qp(q, "/jobs?state=pending&since=x")), 400, "invalid", "argument")


def test_history_in_the_completed_tab_and_the_job_view(
    api: TestClient, q: Queue, r: redis.Redis
) -> None:
    q.set_retention(completed=100)
    jid = q.enqueue({"to": "ann"}, max_attempts=3)
    got = q.claim()
    assert got is not None and got.id == jid
    q.retry(jid, got.token, "HTTPError: 503 <b>busy</b>")
    q.promote_job(jid)
    got = q.claim()
    assert got is not None
    q.complete(jid, got.token, result={"sent": True, "html": "<img src=x>"})
    assert api.get(qp(q)).json()["counts"]["kept"] == 1
    page = api.get(qp(q, "/jobs?state=completed")).json()
    assert [j["id"] for j in page["jobs"]] == [jid] and page["order"] == "newest"
    d = api.get(qp(q, f"/jobs/{jid}")).json()
    assert d["job"]["state"] == "completed" and d["result"] == {"sent": True, "html": "<img src=x>"}
    assert [e["error"] for e in d["errors"]] == ["HTTPError: 503 <b>busy</b>"]
    assert d["errors"][0]["attempt"] == 1 and d["errors"][0]["time_ms"] > 0
    row = d["job"]
    assert int(row["enqueued_at"]) <= int(row["started_at"]) <= int(row["finished_at"])
    assert d["score"] == int(row["finished_at"])
    found = api.get(qp(q, "/jobs?state=completed&q=ann&field=payload")).json()
    assert [j["id"] for j in found["jobs"]] == [jid]
