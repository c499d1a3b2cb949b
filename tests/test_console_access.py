"""The console's access: event-stream caps counted at admission (a burst cannot slip
past them), roles (viewer, operator, admin), sessions that expire, are revoked at
logout and belong to one console.

The stream caps are tested on a real uvicorn with a hundred sockets opened at once.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
import redis
import uvicorn

from echomq import Queue
from echomq.console import create_app
from echomq.console.limits import STREAMS_PER_CLIENT
from echomq.embedded import EmbeddedServer, free_port

pytestmark = pytest.mark.single_node("one uvicorn over the single server")


@contextmanager
def serving(url: str, **kw: Any) -> Iterator[int]:
    """The console over ``url`` on a free loopback port (uvicorn in a thread)."""
    port = free_port()
    config = uvicorn.Config(create_app(url, **kw), host="127.0.0.1", port=port, log_level="error")
    config.timeout_graceful_shutdown = 1
    srv = uvicorn.Server(config)
    thread = threading.Thread(target=srv.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not srv.started:
        assert time.monotonic() < deadline and thread.is_alive(), "uvicorn did not start"
        time.sleep(0.02)
    try:
        yield port
    finally:
        srv.should_exit = True
        thread.join(5)


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
    with serving(server.url) as port:
        socks, codes = open_streams(port, f"/api/queues/{q.name}/events", 100)
        try:
            assert codes.count(200) == STREAMS_PER_CLIENT == 8
            assert codes.count(429) == 100 - 8
            # one pub/sub subscription per admitted stream, no more
            deadline = time.monotonic() + 10
            while True:
                subs = r.pubsub_numsub(q.keys.events)[0][1]
                if int(subs) == 8 or time.monotonic() > deadline:
                    break
                time.sleep(0.05)
            assert int(subs) == 8
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
