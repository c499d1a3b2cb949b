"""Flows on a real Redis Cluster: a parent and children on three primaries, resolved
through the outbox and the relay (every queue its own slot), by real workers."""

from __future__ import annotations

import contextlib
from typing import Any

import pytest

from cluster_support import LocalCluster
from echomq import Flow, Queue, Worker
from worker_support import FAST, running, wait_until

pytestmark = [pytest.mark.cluster, pytest.mark.slow]


def _on_three_primaries(cluster: LocalCluster) -> list[str]:
    names: list[str] = []
    owners: set[int] = set()
    for i in range(200):
        name = f"flowq{i}"
        port = cluster.owner(f"emq:{{{name}}}:pending").port
        if port not in owners:
            owners.add(port)
            names.append(name)
        if len(names) == 3:
            return names
    raise AssertionError("no three queues on three primaries")


def test_children_on_three_primaries(cluster: LocalCluster) -> None:
    names = _on_three_primaries(cluster)
    qs = [Queue(n, url=cluster.url) for n in names]
    got: list[Any] = []

    async def handle(job: Any) -> Any:
        if job.data == "parent":
            res = await job.children_results()
            got.append(sorted(res.completed.values()))
            return None
        return job.data

    kids = [Flow(names[i % 3], i) for i in range(9)]
    ids = qs[0].enqueue_flow(Flow(payload="parent", children=kids))
    assert qs[0].job_state(ids.id) == "waiting_children"
    with contextlib.ExitStack() as stack:
        for q in qs:
            stack.enter_context(running(Worker(q, handle, config=FAST)))
        wait_until(lambda: got, timeout=30)
    assert got == [list(range(9))]
    wait_until(lambda: qs[0].job_state(ids.id) is None, timeout=10)
    for q in qs:
        assert q.client.zcard(q.keys.base + "outbox") == 0
        assert q.client.zcard(q.keys.base + "waiting") == 0
        q.pause()
        while not q.obliterate(force=True):
            pass
        q.close()
