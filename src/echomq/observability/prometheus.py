"""Prometheus metrics (the ``metrics`` extra: ``pip install 'echomq[metrics]'``).

Two sides:

- **Queues**, read on scrape: :class:`QueueCollector` reads every queue's state with
  bounded server work (see :mod:`echomq.observability.scrape`) and exports

  ========================================================  ==============================
  ``echomq_queue_jobs{queue,state}``                        pending (lanes included),
                                                            active, scheduled, dead
  ``echomq_queue_paused{queue}``                            1 while the claim gate is shut
  ``echomq_queue_oldest_pending_age_seconds{queue}``        see the scrape module
  ``echomq_queue_groups{queue}``                            live groups
  ``echomq_jobs_completed_total{queue}``                    from ``metrics:completed``
  ``echomq_jobs_failed_total{queue}``                       from ``metrics:failed``
  ``echomq_group_jobs{queue,group,state}``                  the busiest groups only
  ========================================================  ==============================

  Served by the console at ``/metrics`` and by ``emq exporter --port P``.

- **Workers**, in process: :class:`WorkerMetrics` (``echomq_job_duration_seconds``
  by queue and outcome, ``echomq_worker_jobs_in_hand``, ``echomq_claim_latency_seconds``,
  ``echomq_worker_jobs_claimed_total``), in a registry the host passes to the worker
  (``Worker(..., metrics=registry)``) or served by ``emq worker --metrics-port P``.
"""

from __future__ import annotations

import threading
import time
import weakref
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from prometheus_client import (
    REGISTRY,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
    start_http_server,
)
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4
from prometheus_client.registry import Collector

from ..context import Context
from ..keyspace import Keyspace, check_name
from ..transport import AsyncRunner, SyncRunner
from .scrape import GROUP_PAGE, TOP_GROUPS, QueueSnapshot, snapshots

#: The exposition's content type (text format 0.0.4).
CONTENT_TYPE = CONTENT_TYPE_PLAIN_0_0_4
STATES = ("pending", "active", "scheduled", "dead")

Queues = Iterable[str] | Callable[[], Iterable[str]]


def _names(queues: Queues) -> list[str]:
    names = queues() if callable(queues) else queues
    return sorted({check_name(n) for n in names})


class SnapshotCollector(Collector):
    """Exports already-read snapshots (one scrape's worth)."""

    def __init__(self, snaps: Iterable[QueueSnapshot], scrape_s: float | None = None) -> None:
        self.snaps = list(snaps)
        self.scrape_s = scrape_s

    def collect(self) -> Iterator[Metric]:
        jobs = GaugeMetricFamily(
            "echomq_queue_jobs",
            "Jobs in each state (pending includes lanes).",
            labels=["queue", "state"],
        )
        paused = GaugeMetricFamily(
            "echomq_queue_paused", "1 while the queue is paused.", labels=["queue"]
        )
        age = GaugeMetricFamily(
            "echomq_queue_oldest_pending_age_seconds",
            "Seconds since the oldest pending candidate was enqueued (0 = none pending).",
            labels=["queue"],
        )
        ngroups = GaugeMetricFamily("echomq_queue_groups", "Live groups (lanes).", labels=["queue"])
        done = CounterMetricFamily(
            "echomq_jobs_completed", "Jobs completed (metrics:completed).", labels=["queue"]
        )
        failed = CounterMetricFamily(
            "echomq_jobs_failed",
            "Jobs dead-lettered by failures (metrics:failed).",
            labels=["queue"],
        )
        groups = GaugeMetricFamily(
            "echomq_group_jobs",
            "Jobs of the busiest groups only (a bounded top-N), by state.",
            labels=["queue", "group", "state"],
        )
        for s in self.snaps:
            q = s.queue
            for state in STATES:
                jobs.add_metric([q, state], getattr(s, state))
            paused.add_metric([q], 1.0 if s.paused else 0.0)
            age.add_metric([q], s.oldest_pending_age_s)
            ngroups.add_metric([q], s.groups)
            done.add_metric([q], s.completed)
            failed.add_metric([q], s.failed)
            for g in s.top_groups:
                groups.add_metric([q, g.name, "pending"], g.pending)
                groups.add_metric([q, g.name, "active"], g.active)
        yield from (jobs, paused, age, ngroups, done, failed, groups)
        if self.scrape_s is not None:
            took = GaugeMetricFamily(
                "echomq_scrape_duration_seconds", "How long reading the queues took."
            )
            took.add_metric([], self.scrape_s)
            yield took


def _contexts(names: list[str]) -> list[Context]:
    return [Context(Keyspace(n)) for n in names]


class QueueCollector(Collector):
    """Reads the queues' state on every scrape (register it in a registry).

    Args:
        client: a ``redis.Redis`` (or ``RedisCluster``).
        queues: the queue names, or a callable returning them (called per scrape).
        top_groups: how many of each queue's busiest groups ``echomq_group_jobs`` shows.
        group_page: groups read per server call.
    """

    def __init__(
        self,
        client: Any,
        queues: Queues,
        *,
        top_groups: int = TOP_GROUPS,
        group_page: int = GROUP_PAGE,
    ) -> None:
        self.runner = SyncRunner(client)
        self.queues, self.top_groups, self.group_page = queues, top_groups, group_page

    def read(self) -> list[QueueSnapshot]:
        """Read every queue's snapshot now."""
        plan = snapshots(
            _contexts(_names(self.queues)), top_groups=self.top_groups, page=self.group_page
        )
        return self.runner.drive(plan)

    def collect(self) -> Iterator[Metric]:
        t0 = time.perf_counter()
        snaps = self.read()
        yield from SnapshotCollector(snaps, time.perf_counter() - t0).collect()


async def render_async(
    runner: AsyncRunner,
    queues: Iterable[str],
    *,
    top_groups: int = TOP_GROUPS,
    group_page: int = GROUP_PAGE,
) -> bytes:
    """The exposition text of ``queues``, read on an async runner (for the console)."""
    t0 = time.perf_counter()
    plan = snapshots(_contexts(_names(queues)), top_groups=top_groups, page=group_page)
    snaps = await runner.drive(plan)
    return generate_latest(SnapshotCollector(snaps, time.perf_counter() - t0))


def serve_queues(
    client: Any,
    queues: Queues,
    port: int,
    *,
    addr: str = "127.0.0.1",
    top_groups: int = TOP_GROUPS,
) -> tuple[Any, threading.Thread, CollectorRegistry]:
    """Serve the queues' metrics on ``addr:port`` (``emq exporter``), from a thread.

    Returns:
        ``(server, thread, registry)``; ``server.shutdown()`` stops it.
    """
    registry = CollectorRegistry(auto_describe=False)
    registry.register(QueueCollector(client, queues, top_groups=top_groups))
    server, thread = start_http_server(port, addr=addr, registry=registry)
    return server, thread, registry


# ---- workers ----------------------------------------------------------------------

#: Job duration buckets (seconds): 1 ms to 5 min.
DURATION_BUCKETS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300)
#: Claim round-trip buckets (seconds): 100 us to 1 s.
CLAIM_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1)
OUTCOMES = ("completed", "failed", "cancelled")


class BoundWorkerMetrics:
    """One queue's pre-labelled worker metrics (no label lookup per job)."""

    def __init__(self, m: WorkerMetrics, queue: str) -> None:
        self.duration = {o: m.duration.labels(queue, o) for o in OUTCOMES}
        #: the jobs whose handler runs now: a set's add/discard need no lock of ours,
        #: and the gauge reads its size only when scraped
        self.running: set[tuple[str, int]] = set()
        m.in_hand.labels(queue).set_function(lambda: len(self.running))
        self.claim = m.claim.labels(queue)
        self.claimed = m.claimed.labels(queue)


class WorkerMetrics:
    """The metrics of the workers in this process, in one registry.

    Args:
        registry: where to register them (default: ``prometheus_client.REGISTRY``).
            Use :meth:`for_registry` to share one set per registry.
    """

    def __init__(self, registry: CollectorRegistry = REGISTRY) -> None:
        self.registry = registry
        self.duration = Histogram(
            "echomq_job_duration_seconds",
            "Handler run time, by queue and outcome (completed, failed, cancelled).",
            ["queue", "outcome"],
            registry=registry,
            buckets=DURATION_BUCKETS,
        )
        self.in_hand = Gauge(
            "echomq_worker_jobs_in_hand",
            "Jobs whose handler is running.",
            ["queue"],
            registry=registry,
        )
        self.claim = Histogram(
            "echomq_claim_latency_seconds",
            "Round trip of a worker's claim call (settlements pipelined with it included).",
            ["queue"],
            registry=registry,
            buckets=CLAIM_BUCKETS,
        )
        self.claimed = Counter(
            "echomq_worker_jobs_claimed",
            "Jobs leased by this process.",
            ["queue"],
            registry=registry,
        )
        self._bound: dict[str, BoundWorkerMetrics] = {}
        self._lock = threading.Lock()

    def bind(self, queue: str) -> BoundWorkerMetrics:
        """The metrics of ``queue``'s workers, labelled once."""
        with self._lock:
            b = self._bound.get(queue)
            if b is None:
                b = self._bound[queue] = BoundWorkerMetrics(self, queue)
            return b

    @classmethod
    def for_registry(cls, registry: CollectorRegistry | None = None) -> WorkerMetrics:
        """The one :class:`WorkerMetrics` of ``registry`` (made on first use)."""
        reg = REGISTRY if registry is None else registry
        with _shared_lock:
            m = _shared.get(reg)
            if m is None:
                m = _shared[reg] = cls(reg)
            return m


_shared: weakref.WeakKeyDictionary[CollectorRegistry, WorkerMetrics] = weakref.WeakKeyDictionary()
_shared_lock = threading.Lock()


def worker_metrics(metrics: Any) -> WorkerMetrics:
    """``metrics`` as a :class:`WorkerMetrics`: itself, or the one of a registry
    (``True`` = the default registry).

    Raises:
        TypeError: anything else.
    """
    if isinstance(metrics, WorkerMetrics):
        return metrics
    if metrics is True:
        return WorkerMetrics.for_registry()
    if isinstance(metrics, CollectorRegistry):
        return WorkerMetrics.for_registry(metrics)
    raise TypeError(f"metrics must be a CollectorRegistry or WorkerMetrics, got {metrics!r}")


def serve_registry(
    port: int, registry: CollectorRegistry = REGISTRY, addr: str = "127.0.0.1"
) -> tuple[Any, threading.Thread]:
    """Serve ``registry`` on ``addr:port`` from a daemon thread (``--metrics-port``)."""
    return start_http_server(port, addr=addr, registry=registry)
