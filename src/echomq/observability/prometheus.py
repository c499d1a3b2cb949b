"""Prometheus metrics (the ``metrics`` extra: ``pip install 'echomq[metrics]'``).

Two sides:

- **Queues**, read on scrape: :class:`QueueCollector` reads every queue's state with
  bounded server work (see :mod:`echomq.observability.scrape`) and exports

  ========================================================  ==============================
  ``echomq_queue_jobs{queue,state}``                        pending (lanes included),
                                                            active, scheduled, dead,
                                                            completed (kept history)
  ``echomq_queue_paused{queue}``                            1 while the claim gate is shut
  ``echomq_queue_oldest_pending_age_seconds{queue}``        see the scrape module
  ``echomq_queue_groups{queue}``                            live groups
  ``echomq_queue_workers{queue}``                           live workers (registry)
  ``echomq_jobs_completed_total{queue}``                    from ``metrics:completed``
  ``echomq_jobs_failed_total{queue}``                       from ``metrics:failed``
  ``echomq_group_jobs{queue,group,state}``                  the busiest groups only
  ``echomq_queue_rate_limited{queue}``                      1 while no claim may start a
                                                            job (rate window, hold, cap)
  ``echomq_queue_rate_limited_seconds{queue}``              until a start is allowed
  ``echomq_queue_held_lanes{queue}``                        lanes held by their limit
  ``echomq_job_wait_seconds{queue}`` (summary: sum, count)  jobs that ended and their wait
                                                            (enqueue to first start)
  ``echomq_job_run_seconds{queue}`` (summary: sum, count)   ... and their run (last start
                                                            to end), from the history
                                                            series' closed minutes since
                                                            the exporter started
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
from bisect import bisect_left
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from prometheus_client import REGISTRY, CollectorRegistry, generate_latest, start_http_server
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
    SummaryMetricFamily,
)
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4
from prometheus_client.registry import Collector

from .. import checks
from ..context import Context
from ..keyspace import Keyspace, check_name
from ..transport import AsyncRunner, SyncRunner
from .scrape import GROUP_PAGE, TOP_GROUPS, QueueSnapshot, snapshots
from .series_tally import SeriesTally

#: The exposition's content type (text format 0.0.4).
CONTENT_TYPE = CONTENT_TYPE_PLAIN_0_0_4
#: The states the jobs gauge reports from a snapshot's fields (``completed``: the kept
#: jobs, exported apart); the four sets and the flow parents waiting for children.
STATES = (*checks.STATES, "waiting_children")

Queues = Iterable[str] | Callable[[], Iterable[str]]


def _names(queues: Queues) -> list[str]:
    names = queues() if callable(queues) else queues
    return sorted({check_name(n) for n in names})


class SnapshotCollector(Collector):
    """Exports already-read snapshots (one scrape's worth)."""

    def __init__(
        self,
        snaps: Iterable[QueueSnapshot],
        scrape_s: float | None = None,
        tally: SeriesTally | None = None,
    ) -> None:
        self.tally = tally
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
        nworkers = GaugeMetricFamily(
            "echomq_queue_workers", "Live workers (the registry's records).", labels=["queue"]
        )
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
        limited = GaugeMetricFamily(
            "echomq_queue_rate_limited",
            "1 while flow control lets no claim start a job (rate window, hold, cap).",
            labels=["queue"],
        )
        limited_for = GaugeMetricFamily(
            "echomq_queue_rate_limited_seconds",
            "Seconds until the rate limit or a handler's hold allows the next start.",
            labels=["queue"],
        )
        held = GaugeMetricFamily(
            "echomq_queue_held_lanes",
            "Lanes held off the ring by their rate limit or a handler's RateLimited.",
            labels=["queue"],
        )
        for s in self.snaps:
            q = s.queue
            limited.add_metric([q], 1.0 if s.rate_limited else 0.0)
            limited_for.add_metric([q], s.rate_limited_for_s)
            held.add_metric([q], s.held_lanes)
            for state in STATES:
                jobs.add_metric([q, state], getattr(s, state))
            jobs.add_metric([q, "completed"], s.kept)  # kept as history (retention)
            paused.add_metric([q], 1.0 if s.paused else 0.0)
            age.add_metric([q], s.oldest_pending_age_s)
            ngroups.add_metric([q], s.groups)
            nworkers.add_metric([q], s.workers)
            done.add_metric([q], s.completed)
            failed.add_metric([q], s.failed)
            for g in s.top_groups:
                groups.add_metric([q, g.name, "pending"], g.pending)
                groups.add_metric([q, g.name, "active"], g.active)
        yield from (jobs, paused, age, ngroups, nworkers, done, failed, groups)
        yield from (limited, limited_for, held)
        if self.tally is not None:
            yield from self._series()
        if self.scrape_s is not None:
            took = GaugeMetricFamily(
                "echomq_scrape_duration_seconds", "How long reading the queues took."
            )
            took.add_metric([], self.scrape_s)
            yield took

    def _series(self) -> Iterator[Metric]:
        assert self.tally is not None
        wait = SummaryMetricFamily(
            "echomq_job_wait_seconds",
            "Jobs that ended (completed or dead) and their wait, enqueue to first start "
            "(the history series' closed minutes since this exporter started).",
            labels=["queue"],
        )
        run = SummaryMetricFamily(
            "echomq_job_run_seconds",
            "Jobs that ended (completed or dead) and their run, last start to end "
            "(the history series' closed minutes since this exporter started).",
            labels=["queue"],
        )
        for s in self.snaps:
            t = self.tally.get(s.queue)
            if t is None:
                continue
            wait.add_metric([s.queue], count_value=t.ended, sum_value=t.wait_ms / 1000)
            run.add_metric([s.queue], count_value=t.ended, sum_value=t.run_ms / 1000)
        yield from (wait, run)


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
        self.tally = SeriesTally()

    def read(self) -> list[QueueSnapshot]:
        """Read every queue's snapshot now (and add the series' closed minutes)."""
        names = _names(self.queues)
        plan = snapshots(_contexts(names), top_groups=self.top_groups, page=self.group_page)
        snaps = self.runner.drive(plan)
        self.runner.drive(self.tally.update(names))
        return snaps

    def collect(self) -> Iterator[Metric]:
        t0 = time.perf_counter()
        snaps = self.read()
        yield from SnapshotCollector(snaps, time.perf_counter() - t0, self.tally).collect()


async def render_async(
    runner: AsyncRunner,
    queues: Iterable[str],
    *,
    top_groups: int = TOP_GROUPS,
    group_page: int = GROUP_PAGE,
    tally: SeriesTally | None = None,
) -> bytes:
    """The exposition text of ``queues``, read on an async runner (for the console);
    with ``tally`` (kept across scrapes), the wait and run summaries too."""
    t0 = time.perf_counter()
    names = _names(queues)
    plan = snapshots(_contexts(names), top_groups=top_groups, page=group_page)
    snaps = await runner.drive(plan)
    if tally is not None:
        await runner.drive(tally.update(names))
    return generate_latest(SnapshotCollector(snaps, time.perf_counter() - t0, tally))


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
OUTCOMES = ("completed", "failed", "cancelled", "rate_limited")


class LocalHistogram:
    """A histogram a worker fills per job: one ``bisect`` and one uncontended lock,
    where ``prometheus_client.Histogram`` takes a lock per counter it touches. Read
    only when scraped (:meth:`WorkerMetrics.collect`)."""

    __slots__ = ("_les", "_lock", "bounds", "counts", "total")

    def __init__(self, bounds: tuple[float, ...]) -> None:
        self.bounds = list(bounds)
        self._les = [repr(float(b)) for b in bounds] + ["+Inf"]
        self.counts = [0] * (len(bounds) + 1)  # the last one is +Inf
        self.total = 0.0
        self._lock = threading.Lock()

    def observe(self, value: float) -> None:
        """Count one observation (bucket ``le`` = the first bound >= value)."""
        i = bisect_left(self.bounds, value)
        with self._lock:
            self.counts[i] += 1
            self.total += value

    def read(self) -> tuple[list[tuple[str, float]], float]:
        """The cumulative buckets (``le`` text, count) and the sum."""
        with self._lock:
            counts, total = list(self.counts), self.total
        out: list[tuple[str, float]] = []
        acc = 0
        for le, n in zip(self._les, counts):
            acc += n
            out.append((le, acc))
        return out, total


class LocalCounter:
    """A counter with one lock per increment, read when scraped."""

    __slots__ = ("_lock", "value")

    def __init__(self) -> None:
        self.value = 0
        self._lock = threading.Lock()

    def inc(self, n: int = 1) -> None:
        """Add ``n``."""
        with self._lock:
            self.value += n


class BoundWorkerMetrics:
    """One queue's worker metrics (no label lookup per job)."""

    def __init__(self) -> None:
        self.duration = {o: LocalHistogram(DURATION_BUCKETS) for o in OUTCOMES}
        #: the jobs whose handler runs now: a set's add/discard need no lock of ours,
        #: and its size is read only when scraped
        self.running: set[tuple[str, int]] = set()
        self.claim = LocalHistogram(CLAIM_BUCKETS)
        self.claimed = LocalCounter()
        self.limited_ms = LocalCounter()  # waits the queue's limits imposed, in ms


class WorkerMetrics(Collector):
    """The metrics of the workers in this process, in one registry.

    ``echomq_job_duration_seconds{queue,outcome}`` and ``echomq_claim_latency_seconds{queue}``
    (histograms), ``echomq_worker_jobs_in_hand{queue}`` (gauge),
    ``echomq_worker_jobs_claimed_total{queue}`` and
    ``echomq_worker_limited_seconds_total{queue}`` (counters: the time the queue's flow
    control limits kept this process's workers from claiming).

    Args:
        registry: where to register them (default: ``prometheus_client.REGISTRY``).
            Use :meth:`for_registry` to share one set per registry.
    """

    def __init__(self, registry: CollectorRegistry = REGISTRY) -> None:
        self.registry = registry
        self._bound: dict[str, BoundWorkerMetrics] = {}
        self._lock = threading.Lock()
        registry.register(self)

    def bind(self, queue: str) -> BoundWorkerMetrics:
        """The metrics of ``queue``'s workers, made once."""
        with self._lock:
            b = self._bound.get(queue)
            if b is None:
                b = self._bound[queue] = BoundWorkerMetrics()
            return b

    def collect(self) -> Iterator[Metric]:
        duration = HistogramMetricFamily(
            "echomq_job_duration_seconds",
            "Handler run time, by queue and outcome (completed, failed, cancelled, rate_limited).",
            labels=["queue", "outcome"],
        )
        claim = HistogramMetricFamily(
            "echomq_claim_latency_seconds",
            "Round trip of a worker's claim call (settlements pipelined with it included).",
            labels=["queue"],
        )
        in_hand = GaugeMetricFamily(
            "echomq_worker_jobs_in_hand", "Jobs whose handler is running.", labels=["queue"]
        )
        claimed = CounterMetricFamily(
            "echomq_worker_jobs_claimed", "Jobs leased by this process.", labels=["queue"]
        )
        limited = CounterMetricFamily(
            "echomq_worker_limited_seconds",
            "Time this process's workers waited because the queue's limits held a claim.",
            labels=["queue"],
        )
        with self._lock:
            bound = sorted(self._bound.items())
        for queue, b in bound:
            for outcome in OUTCOMES:
                buckets, total = b.duration[outcome].read()
                duration.add_metric([queue, outcome], buckets, total)
            buckets, total = b.claim.read()
            claim.add_metric([queue], buckets, total)
            in_hand.add_metric([queue], len(b.running))
            claimed.add_metric([queue], b.claimed.value)
            limited.add_metric([queue], b.limited_ms.value / 1000)
        yield from (duration, claim, in_hand, claimed, limited)

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
