"""Fixtures: one private server per test session, a fresh queue name per test.

The server is a real ``redis-server``/``valkey-server`` started by
:class:`echomq.embedded.EmbeddedServer` on a free loopback port, with nothing kept on
disk, and stopped at the end. No test touches a server it did not start.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import pytest
import redis
import redis.asyncio

from echomq import AsyncQueue, Queue
from echomq.embedded import EmbeddedServer

_names = itertools.count()


@pytest.fixture(scope="session")
def server() -> Iterator[EmbeddedServer]:
    with EmbeddedServer() as srv:
        yield srv


@pytest.fixture()
def r(server: EmbeddedServer) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(server.url, decode_responses=True)
    yield client
    client.close()


@pytest.fixture()
def qname(request: pytest.FixtureRequest) -> str:
    """A queue name no other test uses."""
    base = request.node.name.replace("[", "-").replace("]", "").replace("/", "-")
    return f"t{os.getpid()}-{next(_names)}-{base}"[:120].replace(" ", "_")


@pytest.fixture()
def make_queue(server: EmbeddedServer) -> Iterator[Callable[..., Queue]]:
    """Factory: ``make_queue(name, **kw)`` -> a Queue on the private server."""
    made: list[Queue] = []

    def make(name: str, **kw: Any) -> Queue:
        q = Queue(name, url=server.url, **kw)
        made.append(q)
        return q

    yield make
    for q in made:
        q.close()


@pytest.fixture()
def q(make_queue: Callable[..., Queue], qname: str) -> Queue:
    return make_queue(qname)


@pytest.fixture()
async def aq(server: EmbeddedServer, qname: str) -> AsyncIterator[AsyncQueue]:
    queue = AsyncQueue(qname, url=server.url)
    yield queue
    await queue.aclose()


def dump(r: redis.Redis, queue: Queue | AsyncQueue) -> dict[str, Any]:
    """Every key of a queue with its type, value and ttl presence: a byte-for-byte
    picture to compare before and after a refused call."""
    out: dict[str, Any] = {}
    for key in sorted(r.scan_iter(match=queue.keys.pattern(), count=1000)):
        out[key] = (r.type(key), r.dump(key), r.pttl(key) > 0)
    return out


def queue_keys(r: redis.Redis, queue: Queue | AsyncQueue) -> set[str]:
    """The names of every key the queue has."""
    return set(r.scan_iter(match=queue.keys.pattern(), count=1000))
