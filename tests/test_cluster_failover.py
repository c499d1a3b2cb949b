"""A primary fails on the private cluster: SIGKILL, its replica promoted, and then it
comes back as a replica. Workers ride it; no acknowledged job is lost; the queues of
the other primaries are served while it is down; the version fence, whose slot may be
on the dead primary, does not stop them.

No timing is asserted (the benchmark ``bench/cluster.py --failover`` measures the
rates): only that work went on and every job ran at least once.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Iterator
from contextlib import ExitStack

import pytest
from redis.cluster import RedisCluster

from cluster_support import LocalCluster
from echomq import JobContext, Queue, Worker, transport
from echomq.errors import ServerUnavailable
from echomq.keyspace import VERSION_KEY
from worker_support import FAST, running, wait_until

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

#: Two queues on each primary (test_cluster.py checks the spread).
QUEUES = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot"]
JOBS = 150


@pytest.fixture()
def rc(cluster: LocalCluster) -> Iterator[RedisCluster]:
    client = RedisCluster.from_url(cluster.url, decode_responses=True)
    yield client
    client.close()


def synced(rc: RedisCluster) -> None:
    """Until every primary's writes so far are on its replica (``WAIT``): what was
    acknowledged before the kill is then on the replica that takes over."""
    for node in rc.get_primaries():
        assert node.redis_connection is not None
        assert int(node.redis_connection.execute_command("WAIT", 1, 5000)) >= 1


def test_a_primary_dies_and_nothing_is_lost(
    cluster: LocalCluster,
    rc: RedisCluster,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    queues = {n: Queue(f"fo-{n}", client=rc) for n in QUEUES}
    victim = cluster.owner(VERSION_KEY)  # the fence's node dies too
    doomed = {n for n, q in queues.items() if cluster.owner(q.keys.pending) is victim}
    healthy = set(QUEUES) - doomed
    assert doomed and healthy
    ids = {n: set(q.enqueue_many(range(JOBS))) for n, q in queues.items()}
    synced(rc)
    ran: dict[str, set[str]] = {n: set() for n in QUEUES}
    lock = threading.Lock()

    def handler_for(name: str):  # type: ignore[no-untyped-def]
        def handle(job: JobContext) -> None:
            with lock:
                ran[name].add(job.id)

        return handle

    with ExitStack() as stack:
        for n in QUEUES:  # one worker per queue, each with its own cluster client
            stack.enter_context(
                running(Worker(queues[n].name, handler_for(n), url=cluster.url, config=FAST))
            )
        wait_until(lambda: all(ran[n] for n in QUEUES))
        victim.kill()
        # the fence's node is down: a fresh client still serves a queue elsewhere
        monkeypatch.setattr(transport.cluster, "_fence_logged", False)
        caplog.set_level(logging.WARNING, logger="echomq.transport")
        fresh = Queue(queues[min(healthy)].name, url=cluster.url)
        late = set(fresh.enqueue_many(range(JOBS, JOBS + 20)))
        ids[min(healthy)] |= late
        assert any("version check" in r.getMessage() for r in caplog.records)
        # the dead shard, unless its replica took over already: typed either way
        with contextlib.suppress(ServerUnavailable):
            Queue(queues[min(doomed)].name, client=fresh.client).counts()
        # the healthy queues finish while the doomed ones wait for their promotion
        wait_until(lambda: all(ran[n] >= ids[n] for n in healthy), timeout=60)
        wait_until(lambda: all(ran[n] >= ids[n] for n in doomed), timeout=60)
        fresh.close()
    for n, q in queues.items():
        counts = q.counts()
        assert (counts.pending, counts.active, counts.scheduled, counts.dead) == (0, 0, 0, 0)
        assert ran[n] >= ids[n]  # every job ran (a job may run twice: at-least-once)
    victim.start()  # back, as a replica of the primary that took over
    cluster.wait_ok()
    for q in queues.values():
        q.pause()
        while not q.obliterate(force=True):
            pass
