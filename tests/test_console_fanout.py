"""The console's event streams share one pub/sub subscription per queue: every stream
of a queue gets that queue's events and no other's, the caps still hold at admission,
a stream that lags loses its own events without holding up the others, and the last
stream to leave gives the subscription back.

Tested on a real uvicorn over raw sockets (streams opened side by side) and on the
console's fan-out itself over the test's server.
"""

from __future__ import annotations

import asyncio
import json
import socket
import time
from collections.abc import Callable
from typing import Any

import pytest
import redis

from console_support import serving
from echomq import Queue
from echomq.console import event_fanout
from echomq.console.handlers import Console
from echomq.embedded import EmbeddedServer

pytestmark = pytest.mark.single_node("one uvicorn over the single server")


class Sse:
    """One event stream over a raw socket (the status line read on open)."""

    def __init__(self, port: int, path: str) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.sock.sendall(
            f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
            "Accept: text/event-stream\r\n\r\n".encode()
        )
        self.lines = self.sock.makefile("rb")
        self.status = int(self.lines.readline().split()[1])

    def listening(self) -> None:
        """Read until the console says the subscription is up (``: ping``)."""
        for raw in self.lines:
            if raw.startswith(b": ping"):
                return
        raise AssertionError("stream ended before it was listening")

    def events(self, count: int) -> list[dict[str, Any]]:
        """The next ``count`` events (beats skipped), whatever their queue."""
        out: list[dict[str, Any]] = []
        beat = False
        for raw in self.lines:
            line = raw.decode().rstrip("\r\n")
            if line == "event: beat":
                beat = True
            elif line.startswith("data: "):
                if not beat:
                    out.append(json.loads(line[6:]))
                    if len(out) == count:
                        return out
                beat = False
        raise AssertionError("stream ended")

    def close(self) -> None:
        self.lines.close()
        self.sock.close()


def subscribers(r: redis.Redis, channel: str) -> int:
    return int(r.pubsub_numsub(channel)[0][1])


def settle(read: Callable[[], int], want: int) -> int:
    """``read()`` once it answers ``want`` (or its last answer after 10 s)."""
    deadline = time.monotonic() + 10
    got = read()
    while got != want and time.monotonic() < deadline:
        time.sleep(0.05)
        got = read()
    return got


def test_streams_of_a_queue_share_one_subscription_and_get_only_its_events(
    server: EmbeddedServer, make_queue: Callable[..., Queue], qname: str, r: redis.Redis
) -> None:
    a, b = make_queue(f"{qname}-a"), make_queue(f"{qname}-b")
    ja, jb = a.enqueue({"x": 1}), b.enqueue({"x": 2})
    with serving(server.url, log_level="error", streams_per_client=6) as port:
        streams = [Sse(port, f"/api/queues/{a.name}/events") for _ in range(3)]
        streams.append(Sse(port, f"/api/queues/{b.name}/events"))
        streams += [Sse(port, "/api/events") for _ in range(2)]
        over = Sse(port, f"/api/queues/{a.name}/events")
        try:
            # the cap is counted per stream at admission, shared subscription or not
            assert [s.status for s in streams] == [200] * 6 and over.status == 429
            for s in streams:
                s.listening()
            # six streams: one subscription per queue, one pattern for every queue
            assert subscribers(r, a.keys.events) == 1
            assert subscribers(r, b.keys.events) == 1
            assert r.pubsub_numpat() == 1
            a.update_progress(ja, 30)
            b.pause()
            a.pause()
            for s in streams[:3]:  # b's pause, sent between a's two, never reaches them
                assert s.events(2) == [
                    {"event": "progress", "job": ja, "progress": 30, "queue": a.name},
                    {"event": "paused", "queue": a.name},
                ]
            assert streams[3].events(1) == [{"event": "paused", "queue": b.name}]
            for s in streams[4:]:
                assert s.events(3) == [
                    {"event": "progress", "job": ja, "progress": 30, "queue": a.name},
                    {"event": "paused", "queue": b.name},
                    {"event": "paused", "queue": a.name},
                ]
        finally:
            for s in [*streams, over]:
                s.close()
        # the last stream of each gave its subscription back
        assert settle(lambda: subscribers(r, a.keys.events), 0) == 0
        assert settle(lambda: subscribers(r, b.keys.events), 0) == 0
        assert settle(r.pubsub_numpat, 0) == 0
    # the events changed what they announce, and nothing else
    assert r.hget(a.keys.job(ja), "progress") == "30"
    assert a.counts().paused and b.counts().paused
    assert a.counts().pending == 1 and b.counts().pending == 1
    assert r.hget(b.keys.job(jb), "progress") is None


async def test_a_stream_that_lags_loses_its_own_events_only(
    server: EmbeddedServer, q: Queue, r: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(event_fanout, "BOX_SIZE", 2)
    jid = q.enqueue({"x": 1})
    console = Console(server.url)
    try:
        fanout = console.fanout
        async with fanout.listen(q.name) as slow, fanout.listen(q.name) as fast:
            assert fanout.subscribers(q.name) == 2
            assert subscribers(r, q.keys.events) == 1
            seen = []
            for n in range(5):
                q.update_progress(jid, n)
                event = await asyncio.wait_for(fast.get(), 5)
                seen.append((event.name, event.job, event.get("progress")))
            assert seen == [("progress", jid, n) for n in range(5)]
            # the slow box kept the first two and lost the rest
            assert slow.qsize() == 2
            assert [slow.get_nowait().get("progress") for _ in range(2)] == [0, 1]
        assert fanout.subscribers(q.name) == 0 and fanout.pumps == {}
        assert settle(lambda: subscribers(r, q.keys.events), 0) == 0
    finally:
        await console.aclose()
    assert r.hget(q.keys.job(jid), "progress") == "4"
