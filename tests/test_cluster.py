"""echomq on a real Redis Cluster (private, loopback: 3 primaries + 3 replicas).

Every key of a queue carries the hash tag ``{q}``, so each script's keys sit on one
slot. What is checked here is what the cluster adds: the URL detected as a cluster,
every tool on it, discovery over every primary, sharded events, cluster replies typed.
The suites themselves run on the cluster too (tests/test_cluster_<suite>.py); the
failover is tests/test_cluster_failover.py.
"""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest
import redis
from redis.asyncio.cluster import RedisCluster as AsyncRedisCluster
from redis.cluster import RedisCluster

from cluster_support import LocalCluster
from echomq import AsyncQueue, InvalidArgument, JobGone, Queue, QueueNotPaused, Worker
from echomq.console.handlers import Console
from echomq.discovery import QueueDirectory, discover_queues
from echomq.errors import ServerUnavailable
from echomq.events import every_queue
from echomq.results import Counts
from echomq.scripts import all_scripts, script, sharded
from worker_support import FAST, running, wait_until

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

#: Queue names whose slots fall on each of the three primaries (checked below).
SPREAD = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot"]


@pytest.fixture()
def rc(cluster: LocalCluster) -> Iterator[RedisCluster]:
    client = RedisCluster.from_url(cluster.url, decode_responses=True)
    yield client
    client.close()


def wipe(q: Queue) -> None:
    q.pause()
    while not q.obliterate(force=True):
        pass


def test_one_url_makes_a_cluster_client_for_every_facade(cluster: LocalCluster) -> None:
    q = Queue("detect", url=cluster.url)
    assert isinstance(q.client, RedisCluster)
    named = Queue("detect", url=cluster.url.replace("redis://", "redis+cluster://"))
    assert isinstance(named.client, RedisCluster)
    jid = q.enqueue({"n": 1})
    assert named.get_job(jid).data == {"n": 1}

    async def on_asyncio() -> None:
        aq = AsyncQueue("detect", url=cluster.url)
        assert isinstance(aq.client, AsyncRedisCluster)
        got = await aq.claim()
        assert got is not None and got.id == jid
        await aq.complete(got.id, got.token)
        await aq.aclose()

    asyncio.run(on_asyncio())
    assert q.counts().completed == 1
    wipe(q)
    named.close()
    q.close()
    with pytest.raises(InvalidArgument, match="database 0 only"):
        Queue("detect", url=cluster.url.rsplit("/", 1)[0] + "/3")


def test_queues_spread_over_every_primary(cluster: LocalCluster, rc: RedisCluster) -> None:
    owners = {cluster.owner(f"emq:{{{n}}}:pending").port for n in SPREAD}
    assert len(owners) == 3  # the names below land on all three primaries
    for name in SPREAD:
        q = Queue(name, client=rc)
        ids = q.enqueue_many([{"i": i} for i in range(5)])
        g = q.enqueue({"g": 1}, group="tenant-1")
        got = [q.claim(lease_ms=5000) for _ in range(6)]
        assert sorted(c.id for c in got if c) == sorted([*ids, g])
        first, second = got[0], got[1]
        assert first is not None and second is not None
        q.complete(first.id, first.token)
        with pytest.raises(JobGone):
            q.complete(first.id, first.token)
        assert q.retry(second.id, second.token, "boom", max_attempts=1) == "dead"
        q.reprocess_job(second.id)
        assert q.job_state(second.id) == "pending"
        with pytest.raises(QueueNotPaused):
            q.obliterate()
    found = discover_queues(rc)
    assert found.complete and set(SPREAD) <= set(found.queues)
    for name in SPREAD:
        q = Queue(name, client=rc)
        wipe(q)
        assert list(rc.scan_iter(match=q.keys.pattern())) == []


def test_scripts_reload_on_every_node_after_flush(rc: RedisCluster) -> None:
    q = Queue("reload", client=rc)
    q.enqueue(1)
    for node in rc.get_primaries():
        node.redis_connection.script_flush()
    assert len(q.enqueue_many([2, 3])) == 2
    assert sorted(c.payload for c in q.claim_many(5)) == [1, 2, 3]
    # what runs is the sharded form of each script (SPUBLISH), loaded where it runs
    owner = rc.get_node_from_key(q.keys.pending)
    enqueue = script("enqueue")
    assert owner.redis_connection.script_exists(sharded(enqueue).sha) == [True]
    assert "SPUBLISH" in sharded(enqueue).body and "'PUBLISH'" not in sharded(enqueue).body
    wipe(q)


def test_every_script_publishes_sharded_on_a_cluster() -> None:
    published = 0
    for s in all_scripts():
        twin = sharded(s)
        code = re.sub(r"--[^\n]*", "", s.body).upper()  # a comment may say "published"
        assert (twin.name, twin is s) == (s.name, "PUBLISH" not in code)
        code = re.sub(r"--[^\n]*", "", twin.body).upper()
        assert "PUBLISH" not in code.replace("SPUBLISH", "")
        published += twin is not s
    assert published > 10


def test_a_single_node_client_on_a_cluster_node_gets_server_unavailable(
    cluster: LocalCluster,
) -> None:
    # a key served by another primary than the one the plain client talks to: MOVED
    plain = redis.Redis(port=cluster.port)
    name = next(n for n in SPREAD if cluster.owner(f"emq:{{{n}}}:pending").port != cluster.port)
    q = Queue(name, client=plain)
    with pytest.raises(ServerUnavailable, match="MOVED"):
        q.enqueue(1)
    plain.close()


def test_a_worker_from_a_sync_cluster_queue(cluster: LocalCluster, rc: RedisCluster) -> None:
    q = Queue("worked", client=rc)
    q.enqueue_many(range(20))
    q.enqueue_many(range(20, 25), group="tenant")
    seen: list[int] = []
    with running(Worker(q, lambda job: seen.append(job.data), config=FAST)):
        wait_until(lambda: q.counts().completed == 25)
        q.enqueue(99)  # idle now, waiting on the wake list: a new job wakes it
        wait_until(lambda: q.counts().completed == 26)
    assert sorted(seen) == [*range(25), 99]
    assert q.counts() == Counts(
        pending=0, active=0, scheduled=0, dead=0, completed=26, failed=0, paused=False
    )
    wipe(q)


def test_an_async_handler_worker_from_a_url(cluster: LocalCluster, rc: RedisCluster) -> None:
    q = Queue("worked-async", client=rc)
    q.enqueue_many(range(10))
    seen: list[int] = []

    async def handler(job: Any) -> None:
        await asyncio.sleep(0)
        seen.append(job.data)

    with running(Worker("worked-async", handler, url=cluster.url, config=FAST)):
        wait_until(lambda: q.counts().completed == 10)
    assert sorted(seen) == list(range(10))
    wipe(q)


def test_a_worker_over_queues_on_several_primaries(cluster: LocalCluster, rc: RedisCluster) -> None:
    # the wake lists live in different slots: the shared wait takes them in turn
    qs = [Queue(name, client=rc) for name in ("multi-alpha", "multi-bravo", "multi-charlie")]
    for q in qs:
        q.enqueue_many(range(5))
    seen: list[str] = []
    names = [q.name for q in qs]
    with running(Worker(names, lambda job: seen.append(job.queue), url=cluster.url, config=FAST)):
        wait_until(lambda: len(seen) == 15)
        qs[2].enqueue(99)  # idle now: a job on the last queue wakes it
        wait_until(lambda: len(seen) == 16)
    assert seen[:15] == [n for n in names for _ in range(5)]  # priority order
    for q in qs:
        wipe(q)


def test_events_are_sharded_and_streams_follow(cluster: LocalCluster, rc: RedisCluster) -> None:
    q = Queue("evented", client=rc)
    with q.events() as stream:
        # the stream is a sharded subscriber on the queue's shard, not a plain one
        owner = rc.get_node_from_key(q.keys.events)
        counts = owner.redis_connection.execute_command("PUBSUB", "SHARDNUMSUB", q.keys.events)
        assert int(counts[1]) == 1
        assert rc.pubsub_numsub(q.keys.events, target_nodes=owner) == [(q.keys.events, 0)]
        jid = q.enqueue("x")
        ev = stream.get(timeout=5)
        assert ev is not None and (ev.queue, ev.name, ev.job) == ("evented", "enqueued", jid)
        q.update_progress(jid, 50)
        ev = stream.get(timeout=5)
        assert ev is not None and (ev.name, ev.get("progress")) == ("progress", 50)

    async def every() -> list[tuple[str, str]]:
        client = AsyncRedisCluster.from_url(cluster.url, decode_responses=True)
        try:
            stream = every_queue(client)
            async with stream:
                for name in SPREAD[:3]:
                    await AsyncQueue(name, client=client).pause()
                got = []
                while len(got) < 3:
                    ev = await stream.get(timeout=10)
                    assert ev is not None
                    got.append((ev.queue, ev.name))
                return sorted(got)
        finally:
            await client.aclose()

    # every_queue finds queues by discovery: each queue must have a key first
    for name in SPREAD[:3]:
        Queue(name, client=rc).enqueue(0)
    assert asyncio.run(every()) == sorted((n, "paused") for n in SPREAD[:3])
    for name in [*SPREAD[:3], "evented"]:
        wipe(Queue(name, client=rc))


def test_console_lists_queues_of_every_primary(cluster: LocalCluster, rc: RedisCluster) -> None:
    for name in SPREAD:
        Queue(name, client=rc).enqueue(1)

    async def listed() -> tuple[list[str], bool]:
        console = Console(cluster.url)
        try:
            assert isinstance(console.client, AsyncRedisCluster)
            doc: dict[str, Any] = {"complete": False}
            while not doc["complete"]:
                doc = await console.list_queues()
            health = await console.health()
            return [row["name"] for row in doc["queues"]], health["redis"]
        finally:
            await console.aclose()

    names, healthy = asyncio.run(listed())
    assert set(SPREAD) <= set(names) and healthy

    async def directory() -> list[str]:
        client = AsyncRedisCluster.from_url(cluster.url, decode_responses=True)
        try:
            d = QueueDirectory(scan_count=5, steps=1)
            complete, found = False, []
            while not complete:
                found, complete = await d.refresh(client)
            return found
        finally:
            await client.aclose()

    assert set(SPREAD) <= set(asyncio.run(directory()))
    for name in SPREAD:
        wipe(Queue(name, client=rc))


def emq(url: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "echomq.cli", "--url", url, *args],
        capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=60, check=False,
    )  # fmt: skip


@pytest.mark.parametrize("scheme", ["redis", "redis+cluster"])
def test_the_cli_on_a_cluster(cluster: LocalCluster, rc: RedisCluster, scheme: str) -> None:
    url = cluster.url.replace("redis://", f"{scheme}://")
    for name in SPREAD:
        Queue(name, client=rc).enqueue(1)
    listed = emq(url, "--json", "queues")
    assert listed.returncode == 0, listed.stderr
    doc = json.loads(listed.stdout)
    assert doc["complete"] and set(SPREAD) <= {row["queue"] for row in doc["queues"]}
    for name in SPREAD:  # every verb reaches the node that holds the queue
        done = emq(url, "--json", "pause", name)
        assert done.returncode == 0, done.stderr
        assert Queue(name, client=rc).is_paused()
        done = emq(url, "--json", "obliterate", name, "--yes", "--force")
        assert done.returncode == 0, done.stderr
    assert not set(SPREAD) & set(discover_queues(rc).queues)
