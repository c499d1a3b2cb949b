"""The transport (``echomq.transport``): what it sends, on which connection, and what
it does when a reply does not come.

A lost reply is made real, with no mock: the fault proxy of the fault suite
(``tests/faults/proxy.py``) lets the command through to the server, which runs it, and
swallows the reply, resetting the connection. Each test checks the reply (or the typed
error) and the keys left.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
from typing import Any

import pytest
import redis
import redis.asyncio

from conftest import dump, script_calls
from echomq import AsyncQueue, JobGone, Queue, ServerUnavailable, new_id
from echomq.embedded import EmbeddedServer, free_port
from echomq.errors import OutcomeUnknown
from echomq.scripts import all_scripts
from echomq.transport import FAST_PATH, RESEND, Request, SyncRunner, SyncTransport
from faults.proxy import FaultProxy
from worker_support import wait_until

#: The tests of the kept connection itself skip in the run with it off.
kept = pytest.mark.skipif(not FAST_PATH, reason="the fast path is off (EMQ_FAST_PATH=0)")


def calls(r: redis.Redis, command: str | None = None) -> int:
    """How many times the server ran ``command`` so far (default: script calls,
    ``EVALSHA`` and ``FCALL`` together)."""
    if command is None:
        return script_calls(r)
    return int(r.info("commandstats").get(f"cmdstat_{command}", {}).get("calls", 0))


def kept_id(q: Queue) -> int:
    conn = q.runner.transport._kept
    assert conn is not None
    conn.send_command("CLIENT", "ID")
    return int(conn.read_response())


def test_every_script_decides_whether_it_may_be_resent() -> None:
    names = {s.name for s in all_scripts()}
    assert names <= set(RESEND), sorted(names - set(RESEND))


@kept
def test_verbs_travel_on_the_kept_connection(q: Queue, r: redis.Redis) -> None:
    jid = q.enqueue({"a": 1})
    assert q.is_paused() is False  # the client's callback (HEXISTS -> bool) applied
    assert q.job_state(jid) == "pending"
    pool = q.client.connection_pool
    # the pool made no connection: every call so far went on the kept one
    assert not pool._in_use_connections and not pool._available_connections
    assert q.runner.transport._kept is not None
    assert r.zrange(q.keys.pending, 0, -1) == [jid]


def test_the_fast_path_can_be_turned_off(server: EmbeddedServer, qname: str) -> None:
    client = redis.Redis.from_url(server.url, decode_responses=True)
    runner = SyncRunner(client, fast=False)
    q = Queue(qname, client=client)
    q.runner = runner
    jid = q.enqueue({"b": 2})
    assert runner.transport._kept is None  # a pooled connection per call
    assert q.get_job(jid).data == {"b": 2}  # type: ignore[union-attr]
    assert client.zrange(q.keys.pending, 0, -1) == [jid]
    q.close()
    client.close()


def test_the_environment_switch_reads_zero_as_off() -> None:
    code = "import echomq.transport as t, sys; sys.exit(0 if t.FAST_PATH is False else 1)"
    env = {**os.environ, "EMQ_FAST_PATH": "0"}
    import subprocess
    import sys

    assert subprocess.run([sys.executable, "-c", code], env=env, check=False).returncode == 0


@kept
def test_a_killed_kept_connection_is_resent_for_an_idempotent_verb(
    q: Queue, r: redis.Redis
) -> None:
    q.counts()
    r.client_kill_filter(_id=kept_id(q))
    jid = q.enqueue({"c": 3})  # the write fails or the reply does: enqueue is re-sent
    assert r.zrange(q.keys.pending, 0, -1) == [jid]
    assert r.hget(q.keys.job(jid), "payload") == '{"c":3}'
    q.enqueue({"d": 4})
    assert r.zcard(q.keys.pending) == 2


def test_a_lost_reply_of_add_log_is_never_resent(
    pq: Queue, proxy: FaultProxy, r: redis.Redis
) -> None:
    jid = pq.enqueue({"e": 5})
    with pytest.raises(JobGone):  # a pooled connection made (its handshake is not dropped)
        pq.add_log(new_id(), "x")
    before = calls(r)
    proxy.drop_replies(1)
    with pytest.raises(OutcomeUnknown) as err:
        pq.add_log(jid, "once")
    assert err.value.job_id == jid and err.value.verb == "add_log"
    assert isinstance(err.value, ServerUnavailable)
    # the one write ran once; nothing was sent again
    assert calls(r) - before == 1 and proxy.replies_dropped == 1
    assert r.lrange(pq.keys.logs(jid), 0, -1) == ["once"]


def test_a_lost_reply_of_remove_is_resent_and_answered_by_its_request_id(
    pq: Queue, proxy: FaultProxy, r: redis.Redis
) -> None:
    jid = pq.enqueue({"e": 5})
    with pytest.raises(JobGone):  # warm: the connection, the fence, the script loaded
        pq.remove_job(new_id())
    before = calls(r)
    proxy.drop_replies(1)
    assert pq.remove_job(jid) is None  # the re-send answers the first run's 1
    assert calls(r) - before == 2 and proxy.replies_dropped == 1
    assert r.exists(pq.keys.job(jid)) == 0 and r.zcard(pq.keys.pending) == 0
    assert r.zscore(pq.keys.settled, jid) is not None
    # one act, one entry: the entry carries the request id the re-send was answered by
    assert [e.verb for e in pq.audit(10)] == ["remove_job"]
    (entry,) = r.xrange(pq.keys.audit)
    assert len(entry[1]["req"]) == 16
    with pytest.raises(JobGone):  # a second call is a second act: the job is gone
        pq.remove_job(jid)


def test_a_lost_reply_of_a_bulk_remove_step_is_resent_and_counts_once(
    pq: Queue, proxy: FaultProxy, r: redis.Redis
) -> None:
    ids = [pq.enqueue({"i": i}, name="x") for i in range(3)]
    assert pq.remove_jobs("pending", name="nomatch").matched == 0  # warm: script loaded
    proxy.drop_replies(1)
    result = pq.remove_jobs("pending", name="x")
    assert proxy.replies_dropped == 1
    assert (result.matched, result.cursor) == (3, None)
    assert r.zcard(pq.keys.pending) == 0 and not any(r.exists(pq.keys.job(j)) for j in ids)
    assert [(e.verb, e.count) for e in pq.audit(10)] == [("remove_jobs", 3)]
    (entry,) = r.xrange(pq.keys.audit)
    assert entry[1]["reply"] == "3 3 0 1 0"  # removed, examined, next offset, done, locked


def test_a_lost_reply_of_a_clean_step_is_resent_and_counts_once(
    pq: Queue, proxy: FaultProxy, r: redis.Redis
) -> None:
    for i in range(2):
        c = pq.enqueue({"i": i}, max_attempts=1)
        job = pq.claim()
        assert job is not None and job.id == c
        pq.retry(c, job.token, "boom")
    assert r.zcard(pq.keys.dead) == 2
    assert pq.clean(86_400_000, "dead").matched == 0  # warm: the script loaded
    proxy.drop_replies(1)
    result = pq.clean(0, "dead")
    assert proxy.replies_dropped == 1 and result.matched == 2
    assert r.zcard(pq.keys.dead) == 0
    assert [(e.verb, e.count) for e in pq.audit(10)] == [("clean", 2)]


def test_a_lost_reply_of_enqueue_is_resent_and_lands_once(
    pq: Queue, proxy: FaultProxy, r: redis.Redis
) -> None:
    jid = new_id()
    pq.counts()
    before = calls(r)
    proxy.drop_replies(1)
    assert pq.enqueue({"f": 6}, job_id=jid) == jid  # the re-send answered "duplicate"
    assert calls(r) - before == 2
    assert r.zrange(pq.keys.pending, 0, -1) == [jid]
    assert r.hget(pq.keys.job(jid), "payload") == '{"f":6}'
    assert r.hget(pq.keys.job(jid), "attempts") == "0"


def test_a_minted_enqueue_resent_does_not_write_twice(
    pq: Queue, proxy: FaultProxy, r: redis.Redis
) -> None:
    pq.counts()
    proxy.drop_replies(1)
    jid = pq.enqueue({"m": 1})
    assert r.zrange(pq.keys.pending, 0, -1) == [jid]
    assert r.hgetall(pq.keys.job(jid)) == {
        "state": "pending",
        "attempts": "0",
        "payload": '{"m":1}',
        "seq": "0",
    }


def test_no_server_is_server_unavailable_and_nothing_else(qname: str) -> None:
    q = Queue(qname, url=f"redis://127.0.0.1:{free_port()}/0")
    with pytest.raises(ServerUnavailable) as err:
        q.enqueue({"g": 7})
    assert not isinstance(err.value, OutcomeUnknown)  # nothing was written
    q.close()


def test_one_log_line_per_outage(qname: str, caplog: pytest.LogCaptureFixture) -> None:
    port = free_port()
    srv = EmbeddedServer(port=port).start()
    q = Queue(qname, url=srv.url)
    try:
        q.enqueue({"h": 8})
        srv.stop()
        with caplog.at_level(logging.DEBUG, logger="echomq.transport"):
            for _ in range(20):
                with pytest.raises(ServerUnavailable):
                    q.counts()
            srv = EmbeddedServer(port=port).start()
            assert q.counts().pending == 0  # a fresh server: nothing kept
        warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
        assert [w.getMessage().split(":")[1].strip() for w in warnings] == [
            "lost the server at 127.0.0.1",
            "server at 127.0.0.1",
        ]
        assert "recovered after" in warnings[1].getMessage()
        assert all(w.exc_info is None for w in warnings)  # tracebacks only at DEBUG
    finally:
        q.close()
        srv.stop()


def test_a_timed_out_read_drops_the_connection(server: EmbeddedServer, r: redis.Redis) -> None:
    client = redis.Redis.from_url(server.url, socket_timeout=0.2)
    t = SyncTransport(client, fast=True)
    key = "transport-test:empty"
    with pytest.raises(Exception) as err:
        t.send(Request([("BLPOP", key, 1)], True))
    assert type(err.value).__name__ == "NoReply"
    r.rpush(key, "x")
    # a fresh connection: the late BLPOP reply can never be read as this one's
    assert t.send(Request([("LLEN", key)], True)) == [1]
    r.delete(key)
    t.close()
    client.close()


@kept
def test_after_a_fork_the_child_takes_its_own_connection(q: Queue, r: redis.Redis) -> None:
    parent_job = q.enqueue({"who": "parent"})
    parent_conn = q.runner.transport._kept
    pid = os.fork()
    if pid == 0:  # the child: must not write on the parent's socket
        code = 1
        try:
            q.enqueue({"who": "child"})
            code = 0 if q.runner.transport._kept is not parent_conn else 2
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert q.job_state(parent_job) == "pending"
    assert q.runner.transport._kept is parent_conn
    payloads = sorted(r.hget(q.keys.job(j), "payload") for j in r.zrange(q.keys.pending, 0, -1))
    assert payloads == ['{"who":"child"}', '{"who":"parent"}']


@kept
def test_close_hangs_up_the_kept_connection(
    server: EmbeddedServer, qname: str, r: redis.Redis
) -> None:
    q = Queue(qname, url=server.url)
    q.enqueue({"i": 9})
    kid = kept_id(q)
    assert kid in {int(c["id"]) for c in r.client_list()}
    q.close()
    # The server notices a hang-up on its next loop turn, not before close() returns.
    wait_until(lambda: kid not in {int(c["id"]) for c in r.client_list()}, timeout=5)
    assert kid not in {int(c["id"]) for c in r.client_list()}


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


def test_a_refused_call_through_the_pool_changes_nothing(q: Queue, r: redis.Redis) -> None:
    jid = q.enqueue({"j": 10})
    before = dump(r, q)
    with pytest.raises(Exception) as err:
        q.reprocess_job(jid)  # not dead: refused, on a pooled connection
    assert type(err.value).__name__ == "JobNotDead"
    assert dump(r, q) == before


@kept
async def test_async_verbs_travel_on_the_kept_connection(aq: AsyncQueue, r: redis.Redis) -> None:
    jid = await aq.enqueue({"k": 11})
    assert await aq.is_paused() is False
    pool = aq.client.connection_pool
    assert not pool._in_use_connections and not pool._available_connections
    claimed = await aq.claim()
    assert claimed is not None and claimed.id == jid
    assert r.hget(aq.keys.job(jid), "state") == "active"


async def test_async_lost_reply_of_add_log_is_outcome_unknown(
    proxy: FaultProxy, qname: str, r: redis.Redis
) -> None:
    aq = AsyncQueue(qname, url=proxy.url)
    jid = await aq.enqueue({"l": 12})
    with pytest.raises(JobGone):  # a pooled connection made (its handshake is not dropped)
        await aq.add_log(new_id(), "x")
    before = calls(r)
    proxy.drop_replies(1)
    with pytest.raises(OutcomeUnknown) as err:
        await aq.add_log(jid, "once")
    assert err.value.job_id == jid
    assert calls(r) - before == 1
    assert r.lrange(aq.keys.logs(jid), 0, -1) == ["once"]
    await aq.aclose()


async def test_async_concurrent_tasks_all_land(aq: AsyncQueue, r: redis.Redis) -> None:
    await aq.counts()
    # the kept connection carries one call at a time; the others take pooled ones
    got: Any = await asyncio.gather(*(aq.enqueue({"i": i}) for i in range(60)))
    assert len(set(got)) == 60
    assert r.zcard(aq.keys.pending) == 60


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_commands_pack_as_redis_py_packs_them(kind: str) -> None:
    # hiredis packs where it can: byte for byte what redis-py's own packer makes
    from echomq.transport.connections import packed

    conn: Any = (redis.Connection if kind == "sync" else redis.asyncio.Connection)()
    cmds = [
        ("EVALSHA", "a" * 40, 2, "emq:{q}:", "é\u202e", -3, 2**70, 0.1, 1e20, b"\x00\xff"),
        ("BLPOP", "k1", "k2", 0.001),
    ]
    want = b"".join(conn.pack_commands(cmds))
    assert b"".join(packed(conn, cmds)) == want
    # a connection with another encoding, and an argument hiredis refuses, go through
    # redis-py's packer (which raises its own error for what it refuses)
    latin: Any = (redis.Connection if kind == "sync" else redis.asyncio.Connection)(
        encoding="latin-1"
    )
    assert b"".join(packed(latin, [("SET", "k", "é")])) == b"".join(
        latin.pack_commands([("SET", "k", "é")])
    )
    assert b"".join(packed(conn, [("SET", "k", memoryview(b"v"))])) == b"".join(
        conn.pack_commands([("SET", "k", b"v")])
    )
    with pytest.raises(redis.DataError):
        packed(conn, [("SET", "k", True)])
