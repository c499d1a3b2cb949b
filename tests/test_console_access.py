"""The console's access: event-stream caps counted at admission (a burst cannot slip
past them), roles (viewer, operator, admin), sessions that expire, are revoked at
logout and belong to one console.

The stream caps are tested on a real uvicorn with a hundred sockets opened at once.
"""

from __future__ import annotations

import hashlib
import json
import socket
import time
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from conftest import dump
from console_support import serving
from echomq import Queue
from echomq.console import UnsafeBind, create_app
from echomq.console.app import (
    OPERATOR_TOKEN_ENV,
    TOKEN_ENV,
    TOKEN_FILE_ENV,
    USERS_FILE_ENV,
    VIEWER_TOKEN_ENV,
)
from echomq.console.limits import STREAMS_PER_CLIENT
from echomq.embedded import EmbeddedServer

pytestmark = pytest.mark.single_node("one uvicorn over the single server")


def open_streams(port: int, path: str, n: int) -> tuple[list[socket.socket], list[int]]:
    """Send ``n`` stream requests at once; answer the sockets and each status code."""
    socks = [socket.create_connection(("127.0.0.1", port), timeout=10) for _ in range(n)]
    request = f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAccept: text/event-stream\r\n\r\n"
    for s in socks:  # every request is on the wire before any answer is read
        s.sendall(request.encode())
    codes = []
    for s in socks:
        line = b""
        while not line.endswith(b"\r\n"):
            chunk = s.recv(1)
            assert chunk, "the console closed a connection without a status line"
            line += chunk
        codes.append(int(line.split()[1]))
    return socks, codes


def test_a_burst_of_streams_is_capped_at_admission(
    server: EmbeddedServer, q: Queue, r: redis.Redis
) -> None:
    q.enqueue({"x": 1})
    with serving(server.url, log_level="error") as port:
        socks, codes = open_streams(port, f"/api/queues/{q.name}/events", 100)
        try:
            assert codes.count(200) == STREAMS_PER_CLIENT == 8
            assert codes.count(429) == 100 - 8
            # the admitted streams share one pub/sub subscription of the queue
            deadline = time.monotonic() + 10
            while True:
                subs = r.pubsub_numsub(q.keys.events)[0][1]
                if int(subs) == 1 or time.monotonic() > deadline:
                    break
                time.sleep(0.05)
            assert int(subs) == 1
        finally:
            for s in socks:
                s.close()
        # the closed streams give their slots back
        deadline = time.monotonic() + 15
        while True:
            again, codes = open_streams(port, f"/api/queues/{q.name}/events", 8)
            for s in again:
                s.close()
            if codes == [200] * 8 or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert codes == [200] * 8


# --------------------------------------------------------------- roles and sessions
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from starlette.testclient import TestClient

CHANGE = {"Content-Type": "application/json", "X-Requested-With": "echomq-console"}


@pytest.fixture()
def make_client(
    server: EmbeddedServer, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Callable[..., TestClient]]:
    for var in (TOKEN_ENV, TOKEN_FILE_ENV, OPERATOR_TOKEN_ENV, VIEWER_TOKEN_ENV, USERS_FILE_ENV):
        monkeypatch.delenv(var, raising=False)
    opened: list[TestClient] = []

    def make(port: int = 8765, **kw: Any) -> TestClient:
        client = TestClient(create_app(server.url, **kw), base_url=f"http://127.0.0.1:{port}")
        client.__enter__()
        opened.append(client)
        return client

    yield make
    for client in opened:
        client.__exit__(None, None, None)


def change(client: TestClient, q: Queue, path: str, body: Any = None, **headers: str) -> Any:
    return client.post(
        f"/api/queues/{q.name}{path}", content=json.dumps(body or {}), headers={**CHANGE, **headers}
    )


def login(client: TestClient, token: str, user: str | None = None) -> Any:
    body = {"token": token} | ({"user": user} if user else {})
    return client.post("/api/login", content=json.dumps(body), headers=CHANGE)


def sha(token: str) -> str:
    return "sha256:" + hashlib.sha256(token.encode()).hexdigest()


def test_rerun_is_an_operator_verb(
    make_client: Callable[..., TestClient], q: Queue, r: redis.Redis
) -> None:
    client = make_client(viewer_token="look", operator_token="act")
    jid = q.enqueue({"x": 1}, max_attempts=1)
    c = q.claim()
    assert c is not None and q.retry(jid, c.token, "boom") == "dead"
    before = dump(r, q)
    denied = change(client, q, f"/jobs/{jid}/rerun", **{"X-EMQ-Token": "look"})
    assert denied.status_code == 403 and denied.json()["reason"] == "role"
    assert dump(r, q) == before
    done = change(client, q, f"/jobs/{jid}/rerun", **{"X-EMQ-Token": "act"})
    assert done.status_code == 200 and r.hget(q.keys.job(jid), "rerun_as") == done.json()["copy"]


def test_roles_viewer_operator_admin(
    make_client: Callable[..., TestClient], q: Queue, r: redis.Redis, tmp_path: Path
) -> None:
    users = tmp_path / "users"
    users.write_text(
        f"# who may do what\nann admin {sha('ann-token')}\nbob operator {sha('bob-token')}\n"
        f"cy viewer {sha('cy-token')}  # read only\n"
    )
    assert "ann-token" not in users.read_text()  # hashed at rest
    client = make_client(users_file=str(users), viewer_token="view-all")
    q.enqueue({"x": 1}, group="g")
    before = dump(r, q)
    for token in ("cy-token", "view-all"):
        assert (
            client.get(f"/api/queues/{q.name}", headers={"X-EMQ-Token": token}).status_code == 200
        )
        denied = change(client, q, "/pause", **{"X-EMQ-Token": token})
        assert denied.status_code == 403 and denied.json()["reason"] == "role"
    assert dump(r, q) == before
    # an operator acts, but neither obliterates nor changes limits
    assert change(client, q, "/pause", **{"X-EMQ-Token": "bob-token"}).status_code == 200
    for path, body in (("/obliterate", {}), ("/groups/g/limit", {"limit": 2})):
        denied = change(client, q, path, body, **{"X-EMQ-Token": "bob-token"})
        assert denied.status_code == 403 and denied.json()["reason"] == "role"
    assert r.hget(q.keys.glimit, "g") is None
    # the admin does; the audit names each user
    assert (
        change(client, q, "/groups/g/limit", {"limit": 2}, **{"X-EMQ-Token": "ann-token"}).json()[
            "limit"
        ]
        == 2
    )
    actors = [e.actor for e in q.audit(5)]
    assert actors[:2] == ["console:ann@testclient", "console:bob@testclient"]
    # a login takes the users file's name, whatever the page says, and its role
    ok = login(client, "bob-token", user="mallory")
    assert ok.json() == {"ok": True, "token_required": True, "user": "bob", "role": "operator"}
    cfg = client.get("/api/config").json()
    assert (cfg["user"], cfg["role"]) == ("bob", "operator")
    assert change(client, q, "/obliterate").status_code == 403
    assert change(client, q, "/resume").status_code == 200
    # a read-only console caps every role at viewer
    ro = make_client(port=8766, users_file=str(users), read_only=True)
    assert login(ro, "ann-token").json()["role"] == "viewer"
    assert ro.get("/api/config").json()["role"] == "viewer"


def test_a_bad_users_file_refuses_to_start(tmp_path: Path, server: EmbeddedServer) -> None:
    for text in ("ann root " + sha("x"), "ann admin plain-token", "ann admin sha256:abc", "# none"):
        users = tmp_path / "users"
        users.write_text(text + "\n")
        with pytest.raises(UnsafeBind) as err:
            create_app(server.url, users_file=str(users))
        assert "plain-token" not in str(err.value)


def test_sessions_expire_are_revoked_at_logout_and_belong_to_one_console(
    make_client: Callable[..., TestClient], q: Queue
) -> None:
    path = f"/api/queues/{q.name}"
    q.enqueue({"x": 1})
    client = make_client(token="s3cret")
    assert login(client, "s3cret").status_code == 200
    sid = client.cookies.get("emq_session_8765")
    assert sid is not None and "s3cret" not in sid
    assert client.get(path).status_code == 200
    # logout ends the session on the server: a copy of the cookie opens nothing
    out = client.post("/api/logout", content="{}", headers=CHANGE)
    assert out.json() == {"ok": True, "revoked": True}
    client.cookies.set("emq_session_8765", sid)
    assert client.get(path).status_code == 401
    # a session expires
    short = make_client(port=8767, token="s3cret", session_ttl_s=0.3)
    assert login(short, "s3cret").status_code == 200
    assert short.get(path).status_code == 200
    time.sleep(0.5)
    assert short.get(path).status_code == 401
    # a session of one console (a read-only one, say) opens no other, even with the
    # same token and the cookie copied under the other's name
    viewer = make_client(port=8768, token="s3cret", read_only=True)
    assert login(viewer, "s3cret").status_code == 200
    copied = viewer.cookies.get("emq_session_8768")
    assert copied is not None
    writable = make_client(port=8769, token="s3cret")
    writable.cookies.set("emq_session_8769", copied)
    assert writable.get(path).status_code == 401
    assert change(writable, q, "/pause").status_code == 401
