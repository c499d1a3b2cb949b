"""Prometheus: the exposition of queues in a known state, parsed by prometheus_client's
own parser, and the scrape's server work (each call bounded, lanes included)."""

from __future__ import annotations

import time
import urllib.request
from collections.abc import Callable
from typing import Any

import pytest
import redis

pytest.importorskip("prometheus_client")

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from echomq import Queue, ids
from echomq.observability.prometheus import QueueCollector, serve_queues
from echomq.observability.scrape import snapshots
from echomq.queue import AsyncQueue

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def parse(text: str) -> Samples:
    out: Samples = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples[(name, tuple(sorted(labels.items())))]


def known_state(q: Queue) -> None:
    """Two completed, one dead; then 3 flat pending, a lane 'big' of 4 (1 claimed), a
    lane 'small' of 1, one delayed; then paused."""
    for i in range(2):
        q.enqueue({"done": i})
    q.enqueue({"dies": 1}, max_attempts=1)
    for _ in range(2):
        c = q.claim()
        assert c is not None and "done" in c.payload
        q.complete(c.id, c.token)
    c = q.claim()
    assert c is not None and c.payload == {"dies": 1}
    assert q.retry(c.id, c.token, "boom") == "dead"
    for i in range(3):
        q.enqueue({"n": i})
    for i in range(4):
        q.enqueue({"g": i}, group="big")
    q.enqueue({"g": 9}, group="small")
    q.enqueue({"later": 1}, delay_ms=600_000)
    while True:  # claims alternate flat / grouped: hand flat ones back
        c = q.claim()
        assert c is not None
        if c.group == "big":
            break
        q.release(c.id, c.token)
    q.pause()


def test_exposition_matches_a_queue_in_a_known_state(
    make_queue: Callable[..., Queue], qname: str
) -> None:
    q = make_queue(qname)
    known_state(q)
    counts = q.counts()
    # one live worker record (a crashed one, its record gone, is not counted)
    q.client.hset(q.keys.worker("0123456789abcdef"), mapping={"host": "h", "beat": "1"})
    q.client.zadd(q.keys.workers, {"0123456789abcdef": 1, "fedcba9876543210": 1})
    other = make_queue(qname + "-empty")
    registry = CollectorRegistry(auto_describe=False)
    registry.register(QueueCollector(q.client, [q.name, other.name], top_groups=1))
    s = parse(generate_latest(registry).decode())

    for state in ("pending", "active", "scheduled", "dead"):
        assert value(s, "echomq_queue_jobs", queue=q.name, state=state) == getattr(counts, state)
    assert value(s, "echomq_queue_jobs", queue=q.name, state="pending") == 3 + 3 + 1
    assert value(s, "echomq_queue_jobs", queue=q.name, state="active") == 1
    assert value(s, "echomq_queue_jobs", queue=q.name, state="scheduled") == 1
    assert value(s, "echomq_queue_jobs", queue=q.name, state="dead") == 1
    assert value(s, "echomq_queue_paused", queue=q.name) == 1
    assert value(s, "echomq_jobs_completed_total", queue=q.name) == 2
    assert value(s, "echomq_jobs_failed_total", queue=q.name) == 1
    assert value(s, "echomq_queue_groups", queue=q.name) == 2
    assert value(s, "echomq_queue_workers", queue=q.name) == 1
    assert value(s, "echomq_queue_jobs", queue=q.name, state="completed") == counts.kept
    assert value(s, "echomq_queue_workers", queue=other.name) == 0
    # top 1 group: 'big' (3 waiting + 1 in flight); 'small' is left out
    assert value(s, "echomq_group_jobs", queue=q.name, group="big", state="pending") == 3
    assert value(s, "echomq_group_jobs", queue=q.name, group="big", state="active") == 1
    assert not any(k[0] == "echomq_group_jobs" and ("group", "small") in k[1] for k in s)
    age = value(s, "echomq_queue_oldest_pending_age_seconds", queue=q.name)
    assert 0 <= age < 60
    # the empty queue: all zero, not paused
    for state in ("pending", "active", "scheduled", "dead"):
        assert value(s, "echomq_queue_jobs", queue=other.name, state=state) == 0
    assert value(s, "echomq_queue_paused", queue=other.name) == 0
    assert value(s, "echomq_queue_oldest_pending_age_seconds", queue=other.name) == 0


def test_oldest_age_comes_from_the_ids_of_first_and_last_priority_bands(q: Queue) -> None:
    now = int(time.time() * 1000)

    def aged(ms_ago: int) -> str:
        return ids.encode((now - ms_ago - ids.EPOCH_MS) << (ids.NODE_BITS + ids.SEQ_BITS))

    q.enqueue({"x": 1}, job_id=aged(5_000), priority=0)  # the head band
    q.enqueue({"x": 2}, job_id=aged(90_000), priority=7)  # the last band: starving
    q.enqueue({"x": 3}, job_id=aged(1_000), priority=7)
    q.enqueue({"x": 4}, job_id=aged(200_000), group="lane", priority=3)  # a lane head
    (snap,) = q.runner.drive(snapshots([q.ctx]))
    assert 199 < snap.oldest_pending_age_s < 230
    # obs_queue, one groups page, the worker registry
    assert snap.pending == 4 and snap.groups == 1 and snap.server_calls == 3
    q.remove_job(aged(200_000))
    (snap,) = q.runner.drive(snapshots([q.ctx]))
    assert 89 < snap.oldest_pending_age_s < 120


def test_a_scrape_reads_groups_a_page_per_call(q: Queue, r: redis.Redis) -> None:
    for g in range(30):
        q.enqueue_many([{"i": i} for i in range(g + 1)], group=f"g{g:02d}")
    (snap,) = q.runner.drive(snapshots([q.ctx], top_groups=3, page=5))
    assert snap.pending == sum(range(1, 31))
    assert [g.name for g in snap.top_groups] == ["g29", "g28", "g27"]
    assert [g.pending for g in snap.top_groups] == [30, 29, 28]
    assert snap.server_calls >= 1 + 30 // 10  # several pages, never one walk of them all


async def test_the_async_render_serves_the_same_text(aq: AsyncQueue) -> None:
    from echomq.observability.prometheus import render_async

    await aq.enqueue({"a": 1})
    await aq.enqueue({"a": 2}, group="g")
    s = parse((await render_async(aq.runner, [aq.name])).decode())
    assert value(s, "echomq_queue_jobs", queue=aq.name, state="pending") == 2
    assert value(s, "echomq_group_jobs", queue=aq.name, group="g", state="pending") == 1


def test_the_exporter_serves_http(q: Queue) -> None:
    q.enqueue({"a": 1})
    server, thread, _ = serve_queues(q.client, lambda: [q.name], 0)
    try:
        port = server.server_address[1]
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
            body: Any = resp.read().decode()
        s = parse(body)
        assert value(s, "echomq_queue_jobs", queue=q.name, state="pending") == 1
    finally:
        server.shutdown()
        thread.join(5)


def test_the_grafana_dashboard_queries_only_metrics_echomq_exports(q: Queue) -> None:
    import json
    import re
    from pathlib import Path

    from echomq.observability.prometheus import WorkerMetrics

    q.enqueue({"a": 1}, group="g")
    registry = CollectorRegistry(auto_describe=False)
    registry.register(QueueCollector(q.client, [q.name]))
    m = WorkerMetrics(registry).bind(q.name)
    m.duration["completed"].observe(0.1)
    m.claim.observe(0.001)
    m.claimed.inc()
    exported = {s.name for f in registry.collect() for s in f.samples}
    path = Path(__file__).resolve().parents[1] / "docs" / "grafana" / "echomq-dashboard.json"
    dash = json.loads(path.read_text(encoding="utf-8"))
    exprs = [t["expr"] for p in dash["panels"] for t in p["targets"]]
    used = {n for e in exprs for n in re.findall(r"echomq_[a-z_]+", e)}
    assert used and used <= exported, used - exported
    assert used >= {"echomq_queue_jobs", "echomq_job_duration_seconds_bucket"}


def test_emq_exporter_serves_the_named_queues(server: Any, q: Queue) -> None:
    import os
    import subprocess
    import sys

    from echomq.embedded import free_port
    from worker_support import wait_until

    q.enqueue({"a": 1})
    q.pause()
    port = free_port()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    cmd = [sys.executable, "-m", "echomq.cli", "--url", server.url, "exporter"]
    cmd += ["--port", str(port), "--queue", q.name]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        body = ""

        def scraped() -> bool:
            nonlocal body
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as r:
                    body = r.read().decode()
            except OSError:
                return False
            return True

        wait_until(scraped, timeout=20)
        s = parse(body)
        assert value(s, "echomq_queue_jobs", queue=q.name, state="pending") == 1
        assert value(s, "echomq_queue_paused", queue=q.name) == 1
        assert {k[1] for k in s if k[0] == "echomq_queue_paused"} == {(("queue", q.name),)}
    finally:
        proc.terminate()
        proc.wait(20)


def test_worker_histograms_bucket_like_prometheus() -> None:
    from echomq.observability.prometheus import WorkerMetrics

    registry = CollectorRegistry(auto_describe=False)
    m = WorkerMetrics(registry).bind("q")
    for v in (0.001, 0.0011, 0.3, 1000.0):
        m.duration["failed"].observe(v)
    m.running.add(("JOB0000000000A", 1))
    s = parse(generate_latest(registry).decode())
    name = "echomq_job_duration_seconds_bucket"
    assert value(s, name, queue="q", outcome="failed", le="0.001") == 1  # le is inclusive
    assert value(s, name, queue="q", outcome="failed", le="0.005") == 2
    assert value(s, name, queue="q", outcome="failed", le="0.5") == 3
    assert value(s, name, queue="q", outcome="failed", le="300.0") == 3
    assert value(s, name, queue="q", outcome="failed", le="+Inf") == 4
    assert value(s, "echomq_job_duration_seconds_count", queue="q", outcome="failed") == 4
    total = value(s, "echomq_job_duration_seconds_sum", queue="q", outcome="failed")
    assert abs(total - 1000.3021) < 1e-9
    assert value(s, "echomq_job_duration_seconds_count", queue="q", outcome="completed") == 0
    assert value(s, "echomq_worker_jobs_in_hand", queue="q") == 1


def test_kept_history_and_live_workers_are_in_the_snapshot(q: Queue, r: redis.Redis) -> None:
    jid = q.enqueue({"x": 1}, keep_ms=60_000)
    got = q.claim()
    assert got is not None and got.id == jid
    q.complete(jid, got.token)
    (snap,) = q.runner.drive(snapshots([q.ctx]))
    assert snap.kept == 1 and snap.workers == 0 and snap.pending == 0
    r.hset(q.keys.worker("0123456789abcdef"), mapping={"host": "h", "beat": "1"})
    r.zadd(q.keys.workers, {"0123456789abcdef": 1})
    (snap,) = q.runner.drive(snapshots([q.ctx]))
    assert snap.workers == 1
    assert r.zrange(q.keys.completed, 0, -1) == [jid]
