"""The same verbs on a real three-node Redis Cluster (private, loopback only).

Every key of a queue carries the hash tag ``{q}``, so each script's keys sit on one
slot and the scripts run unchanged through ``redis.RedisCluster``.
"""

from __future__ import annotations

import random
import socket
import time
from collections.abc import Iterator

import pytest
import redis
from redis.asyncio.cluster import RedisCluster as AsyncRedisCluster
from redis.cluster import RedisCluster

from echomq import AsyncQueue, JobGone, Queue, QueueNotPaused, Worker
from echomq.embedded import EmbeddedServer
from echomq.results import Counts
from echomq.scripts import script
from worker_support import FAST, running, wait_until

SLOTS = 16384


def cluster_port() -> int:
    """A free port whose cluster bus port (port + 10000) is free and valid too."""
    for port in random.sample(range(20000, 50000), 200):
        ok = True
        for p in (port, port + 10000):
            with socket.socket() as s:
                try:
                    s.bind(("127.0.0.1", p))
                except OSError:
                    ok = False
        if ok:
            return port
    raise RuntimeError("no free port pair")


@pytest.fixture(scope="module")
def cluster() -> Iterator[list[EmbeddedServer]]:
    nodes = [
        EmbeddedServer(
            port=cluster_port(),
            extra_args=(
                "--cluster-enabled", "yes",
                "--cluster-config-file", f"nodes-{i}.conf",
                "--cluster-node-timeout", "2000",
            )
        )
        for i in range(3)
    ]  # fmt: skip
    for n in nodes:
        n.start()
    try:
        clients = [redis.Redis(port=n.port, decode_responses=True) for n in nodes]
        bounds = [0, SLOTS // 3, 2 * SLOTS // 3, SLOTS]
        for i, c in enumerate(clients):
            c.execute_command("CLUSTER", "ADDSLOTSRANGE", bounds[i], bounds[i + 1] - 1)
        for c in clients[1:]:
            c.execute_command("CLUSTER", "MEET", "127.0.0.1", nodes[0].port)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            infos = [c.execute_command("CLUSTER", "INFO") for c in clients]
            if all("cluster_state:ok" in i and "cluster_known_nodes:3" in i for i in infos):
                break
            time.sleep(0.1)
        else:
            pytest.fail("the private cluster did not converge")
        for c in clients:
            c.close()
        yield nodes
    finally:
        for n in nodes:
            n.stop()


@pytest.fixture()
def rc(cluster: list[EmbeddedServer]) -> Iterator[RedisCluster]:
    client = RedisCluster(host="127.0.0.1", port=cluster[0].port, decode_responses=True)
    yield client
    client.close()


def test_spine_and_operator_plane_on_a_cluster(rc: RedisCluster) -> None:
    names = ["alpha", "bravo", "charlie", "delta"]  # spread over the three nodes' slots
    slots = {rc.keyslot(f"emq:{{{n}}}:pending") for n in names}
    assert len(slots) == len(names)
    for name in names:
        q = Queue(name, client=rc)
        ids = q.enqueue_many([{"i": i} for i in range(5)])
        g = q.enqueue({"g": 1}, group="tenant-1")
        assert q.counts().pending == 6
        got = [q.claim(lease_ms=5000) for _ in range(6)]
        assert sorted(c.id for c in got if c) == sorted([*ids, g])
        first = got[0]
        assert first is not None
        q.complete(first.id, first.token)
        with pytest.raises(JobGone):
            q.complete(first.id, first.token)
        second = got[1]
        assert second is not None
        assert q.retry(second.id, second.token, "boom", max_attempts=1) == "dead"
        q.reprocess_job(second.id)
        assert q.job_state(second.id) == "pending"
        with pytest.raises(QueueNotPaused):
            q.obliterate()
        q.pause()
        while not q.obliterate(force=True, budget=2):
            pass
        assert list(rc.scan_iter(match=q.keys.pattern())) == []


def test_scripts_reload_on_every_node_after_flush(rc: RedisCluster) -> None:
    q = Queue("echo", client=rc)
    q.enqueue(1)
    enqueue_sha = script("enqueue").sha
    for node in rc.get_nodes():
        node.redis_connection.script_flush()
        assert node.redis_connection.script_exists(enqueue_sha) == [False]
    assert len(q.enqueue_many([2, 3])) == 2
    assert q.counts().pending == 3
    assert sorted(c.payload for c in q.claim_many(5)) == [1, 2, 3]
    q.pause()
    while not q.obliterate(force=True):
        pass
    assert list(rc.scan_iter(match=q.keys.pattern())) == []


def test_a_worker_serves_a_queue_on_the_cluster(
    cluster: list[EmbeddedServer], rc: RedisCluster
) -> None:
    q = Queue("worked", client=rc)
    q.enqueue_many(range(20))
    q.enqueue_many(range(20, 25), group="tenant")
    seen: list[int] = []
    client = AsyncRedisCluster(host="127.0.0.1", port=cluster[0].port)
    aq = AsyncQueue("worked", client=client)
    with running(Worker(aq, lambda job: seen.append(job.data), config=FAST)):
        wait_until(lambda: q.counts().completed == 25)
        # idle now, blocked on the wake list: a new job wakes it
        q.enqueue(99)
        wait_until(lambda: q.counts().completed == 26)
    assert sorted(seen) == [*range(25), 99]
    assert q.counts() == Counts(
        pending=0, active=0, scheduled=0, dead=0, completed=26, failed=0, paused=False
    )
    assert not rc.exists(q.keys.active, q.keys.pending, q.keys.lane("tenant"))
    q.pause()
    while not q.obliterate():
        pass
    assert list(rc.scan_iter(match=q.keys.pattern())) == []
