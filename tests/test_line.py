"""The runner's own connection (``echomq.line``): what it sends, and when it declines.

Each test checks the verb's reply and the keys it leaves, and, where the line must
have stepped aside, that the client's own pool carried the call instead.
"""

from __future__ import annotations

import asyncio
import os
import threading
from typing import Any

import pytest
import redis
import redis.asyncio

from echomq import AsyncQueue, Queue
from echomq.embedded import EmbeddedServer
from echomq.line import DECLINED, AsyncLine, SyncLine


def line_client_id(line: SyncLine) -> int:
    conn = line._conn
    assert conn is not None
    conn.send_command("CLIENT", "ID")
    return int(conn.read_response())


def test_verbs_travel_on_the_line_not_the_pool(q: Queue, r: redis.Redis) -> None:
    jid = q.enqueue({"a": 1})
    assert q.is_paused() is False  # the client's callback (HEXISTS -> bool) applied
    assert q.job_state(jid) == "pending"
    # the pool made only the fence's connection; the verbs went on the line
    assert q.client.connection_pool._created_connections == 1
    assert q.runner.line._conn is not None
    assert r.zrange(q.keys.pending, 0, -1) == [jid]


def test_a_busy_line_declines_and_the_pool_serves(q: Queue, r: redis.Redis) -> None:
    q.counts()
    line = q.runner.line
    assert line._lock.acquire()  # another thread is mid-call on the line
    try:
        assert line.call(("PING",)) is DECLINED
        jid = q.enqueue({"b": 2})
    finally:
        line._lock.release()
    assert r.hget(q.keys.job(jid), "state") == "pending"
    assert r.zrange(q.keys.pending, 0, -1) == [jid]


def test_a_killed_connection_is_resent_through_the_client(q: Queue, r: redis.Redis) -> None:
    q.counts()
    r.client_kill_filter(_id=line_client_id(q.runner.line))
    jid = q.enqueue({"c": 3})  # the line fails, the client re-sends once
    assert r.zrange(q.keys.pending, 0, -1) == [jid]
    assert r.hget(q.keys.job(jid), "payload") == '{"c":3}'
    # the next call opens a fresh line
    q.enqueue({"d": 4})
    assert r.zcard(q.keys.pending) == 2


def test_a_timed_out_read_drops_the_connection(server: EmbeddedServer, r: redis.Redis) -> None:
    client = redis.Redis.from_url(server.url, socket_timeout=0.2)
    line = SyncLine(client)
    key = "line-test:empty"
    assert line.call(("BLPOP", key, 1)) is DECLINED  # the read timed out
    assert line._conn is not None and line._conn._sock is None  # dropped, not reused
    r.rpush(key, "x")
    # a fresh connection: the late BLPOP reply can never be read as this one's
    assert line.call(("LLEN", key)) == 1
    r.delete(key)
    client.close()
    line.close()


def test_after_a_fork_the_child_opens_its_own_connection(q: Queue, r: redis.Redis) -> None:
    parent_job = q.enqueue({"who": "parent"})
    parent_conn = q.runner.line._conn
    pid = os.fork()
    if pid == 0:  # the child: must not write on the parent's socket
        code = 1
        try:
            q.enqueue({"who": "child"})
            code = 0 if q.runner.line._conn is not parent_conn else 2
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    # the parent's connection is untouched: its next reply is its own
    assert q.job_state(parent_job) == "pending"
    assert q.runner.line._conn is parent_conn
    payloads = sorted(r.hget(q.keys.job(j), "payload") for j in r.zrange(q.keys.pending, 0, -1))
    assert payloads == ['{"who":"child"}', '{"who":"parent"}']


def test_text_is_packed_as_the_client_would(q: Queue, r: redis.Redis) -> None:
    jid = q.enqueue({"name": "café ☕", "n": 1.5})
    assert r.hget(q.keys.job(jid), "payload") == '{"name":"café ☕","n":1.5}'
    assert q.get_job(jid)["data"] == {"name": "café ☕", "n": 1.5}


def test_close_hangs_up_the_line(server: EmbeddedServer, qname: str, r: redis.Redis) -> None:
    q = Queue(qname, url=server.url)
    q.enqueue({"f": 6})
    line_id = line_client_id(q.runner.line)
    ids = {int(c["id"]) for c in r.client_list()}
    assert line_id in ids
    q.close()
    assert line_id not in {int(c["id"]) for c in r.client_list()}


def test_threads_sharing_a_queue_all_land(q: Queue, r: redis.Redis) -> None:
    got: list[str] = []

    def work() -> None:
        for i in range(200):
            got.append(q.enqueue({"i": i}))

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(got)) == 800
    assert r.zcard(q.keys.pending) == 800


class OwnPool(redis.ConnectionPool):
    """A pool of another kind (as Sentinel's is): its connections are its business."""


def test_unusual_clients_have_no_line_and_verbs_still_work(
    server: EmbeddedServer, qname: str, r: redis.Redis
) -> None:
    single = redis.Redis.from_url(server.url, single_connection_client=True)
    own = redis.Redis(connection_pool=OwnPool.from_url(server.url))
    # (a client-side cache declines too; it needs Redis 7.4, newer than Debian's)
    for i, client in enumerate((single, own)):
        assert SyncLine(client).call(("PING",)) is DECLINED
        q = Queue(f"{qname}-{i}", client=client)
        jid = q.enqueue({"i": i})  # through the client's own path
        assert r.zrange(q.keys.pending, 0, -1) == [jid]
        assert q.runner.line._conn is None
        client.close()


async def test_async_verbs_travel_on_the_line(aq: AsyncQueue, r: redis.Redis) -> None:
    jid = await aq.enqueue({"g": 7})
    assert await aq.is_paused() is False
    pool = aq.client.connection_pool
    made = len(pool._available_connections) + len(pool._in_use_connections)
    assert made == 1  # the fence's; the verbs went on the line
    claimed = await aq.claim()
    assert claimed is not None and claimed.id == jid
    assert r.hget(aq.keys.job(jid), "state") == "active"


async def test_async_cancel_mid_call_drops_the_connection(
    server: EmbeddedServer, r: redis.Redis
) -> None:
    client = redis.asyncio.Redis.from_url(server.url)
    line = AsyncLine(client)
    key = "line-test:cancel"
    task = asyncio.ensure_future(line.call(("BLPOP", key, 5)))
    await asyncio.sleep(0.1)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert line._conn is None
    r.rpush(key, "late")
    # a fresh connection: this reply is LLEN's, not the BLPOP's
    assert await line.call(("LLEN", key)) == 1
    r.delete(key)
    await line.aclose()
    await client.aclose()


async def test_async_concurrent_tasks_all_land(aq: AsyncQueue, r: redis.Redis) -> None:
    await aq.counts()
    # the line carries one call at a time; the others go through the pool
    got: Any = await asyncio.gather(*(aq.enqueue({"i": i}) for i in range(60)))
    assert len(set(got)) == 60
    assert r.zcard(aq.keys.pending) == 60


async def test_async_batch_carries_error_replies(server: EmbeddedServer) -> None:
    client = redis.asyncio.Redis.from_url(server.url)
    line = AsyncLine(client)
    out = await line.batch([("SET", "line-test:k", "v"), ("LPUSH", "line-test:k", "x")])
    assert out[0] is True  # SET's callback
    assert isinstance(out[1], redis.ResponseError)  # WRONGTYPE, kept in place
    assert await line.call(("GET", "line-test:k")) == b"v"
    await line.call(("DEL", "line-test:k"))
    await line.aclose()
    await client.aclose()
