"""The console's reads of queues: the queue list, one queue's summary, its workers,
audit journal, groups, throughput, the history series and repeatables, the health of the server, and
which queue holds a job."""

from __future__ import annotations

import asyncio
import time
from dataclasses import asdict

import redis.asyncio

from .. import ids
from ..errors import InvalidArgument, JobGone
from ..journal import DEFAULT_AUDIT_ENTRIES
from ..queue import AsyncQueue
from ..registry import DEFAULT_WORKERS, MAX_WORKERS
from ..version import __version__
from ..views import HISTORY_RANGES, MAX_PAGE, PAGE_STATES, SEARCH_FIELDS
from .body import Reply
from .core import ConsoleCore
from .limits import (
    GROUPS_PAGE,
    HEALTH_TIMEOUT_S,
    HEALTH_TTL_S,
    HISTORY_LANES,
    LOOKUP_CHUNKS,
    MAX_AUDIT,
    MAX_LOOKUP,
    METRIC_MINUTES,
    SUMMARY_CONCURRENCY,
)


class QueueReads(ConsoleCore):
    """Reads of queues and of the server (no change, so no read-only check)."""

    def config(self) -> Reply:
        """What the page needs to know about this console."""
        return {
            "read_only": self.read_only,
            "version": __version__,
            "states": list(PAGE_STATES),
            "search_fields": list(SEARCH_FIELDS),
            "server": self.server,
        }

    async def health(self) -> Reply:
        """Whether the server answers a ``PING`` (one shared answer per ``HEALTH_TTL_S``).

        Returns:
            ``{"redis": bool, "checked_ms": int}`` (the console's clock).
        """
        now = time.monotonic()
        if now - self._health_at > HEALTH_TTL_S:
            self._health_at = now
            try:
                ok = bool(await asyncio.wait_for(self.client.ping(), HEALTH_TIMEOUT_S))
            except (redis.RedisError, OSError, asyncio.TimeoutError):
                ok = False
            self._health = ok
        return {"redis": self._health, "checked_ms": int(time.time() * 1000)}

    async def _summary(self, q: AsyncQueue) -> Reply:
        got, live = await asyncio.gather(q.counts(), q.workers(MAX_WORKERS))
        counts = got.as_dict()
        paused = counts.pop("paused")  # one call: the counts carry the pause
        # health at a glance: the live workers (the registry's records), and whether
        # jobs wait with none to take them while the gate is open
        stranded = counts["pending"] > 0 and not live and not paused
        return {
            "name": q.name,
            "paused": paused,
            "counts": counts,
            "workers": len(live),
            "stranded": stranded,
        }

    async def list_queues(self) -> Reply:
        """Every queue found so far with its counts and pause.

        Returns:
            ``{"queues": [{"name", "paused", "counts", "workers", "stranded"}],
            "complete": bool, "server"}`` (``workers``: live workers; ``stranded``:
            jobs pending, the gate open and no live worker);
            ``complete`` is false while the bounded discovery scan is still walking
            a large keyspace (later calls find more).
        """
        names, complete = await self.directory.refresh(self.client)
        limit = asyncio.Semaphore(SUMMARY_CONCURRENCY)

        async def summary(name: str) -> Reply:
            async with limit:
                return await self._summary(self.queue(name))

        rows = await asyncio.gather(*(summary(n) for n in names))
        return {"queues": list(rows), "complete": complete, "server": self.server}

    async def queue_summary(self, queue: str) -> Reply:
        """One queue's counts per state, its pause, whether it exists, the server time,
        its latency (ms the head of the backlog has waited; ``None``: none pending) and
        its flow control (``rate_limited``; ``limited_until_ms``: when the rate window
        or a handler's hold allows the next start, ``None`` when neither holds it)."""
        q = self.queue(queue)
        summary, now, exists, latency, limits = await asyncio.gather(
            self._summary(q), q.server_time(), q.queue_exists(), q.latency(), q.limits()
        )
        summary["now_ms"] = now
        summary["exists"] = exists
        summary["latency_ms"] = latency
        summary["rate_limited"] = limits.rate_limited
        wait = limits.next_start_in_ms
        summary["limited_until_ms"] = now + wait if wait else None
        return summary

    async def workers(self, queue: str, n: int = DEFAULT_WORKERS) -> Reply:
        """The queue's live workers from the registry, newest beat first.

        Returns:
            ``{"workers": [{"id", "host", "pid", "queues", "concurrency", "jobs",
            "job_ids", "started_ms", "beat_ms", "interval_ms", "version", "claimed",
            "completed", "failed", "cancelled", "age_ms", "order", "batch"}]}``: ``queues``
            lists every queue the worker serves, ``order`` is ``"priority"`` or
            ``"fair"`` for a worker over several (else ``""``), ``batch`` a batch
            worker's settings (else ``""``).
        """
        if not 1 <= n <= MAX_WORKERS:
            raise InvalidArgument(f"n must be within 1..{MAX_WORKERS}, got {n}")
        found = await self.queue(queue).workers(n)
        return {"workers": [asdict(w) for w in found]}

    async def audit(self, queue: str, n: int = DEFAULT_AUDIT_ENTRIES) -> Reply:
        """The newest ``n`` entries of the queue's audit journal, newest first.

        Returns:
            ``{"entries": [{"id", "time_ms", "verb", "args", "outcome", "count", "actor"}]}``.
        """
        if not 1 <= n <= MAX_AUDIT:
            raise InvalidArgument(f"n must be within 1..{MAX_AUDIT}, got {n}")
        entries = await self.queue(queue).audit(n)
        return {"entries": [asdict(e) for e in entries]}

    async def locate_job(self, job_id: str) -> Reply:
        """Which queue holds job ``job_id``: one ``EXISTS`` per queue found so far (at
        most ``MAX_LOOKUP``), for the page's "go to a job" box.

        Returns:
            ``{"queue": name, "id": job_id}``.

        Raises:
            InvalidJobId: a malformed id (before any I/O).
            JobGone: no queue found so far holds it.
        """
        ids.validate(job_id)
        # a few more chunks of the bounded discovery scan than a page's refresh, so a
        # queue made a moment ago is found (each chunk is short SCAN calls)
        for _ in range(LOOKUP_CHUNKS):
            names, complete = await self.directory.refresh(self.client)
            if complete:
                break
        names = sorted(names)[:MAX_LOOKUP]
        limit = asyncio.Semaphore(SUMMARY_CONCURRENCY)

        async def holds(name: str) -> bool:
            async with limit:
                return bool(await self.client.exists(self.queue(name).keys.job(job_id)))

        found = await asyncio.gather(*(holds(n) for n in names))
        for name, hit in zip(names, found):
            if hit:
                return {"queue": name, "id": job_id}
        raise JobGone(f"no queue holds job {job_id}", job_id=job_id)

    async def list_groups(self, queue: str, cursor: str = "0", n: int = GROUPS_PAGE) -> Reply:
        """One page of the queue's groups: depth, in flight, limit, weight, paused.

        Returns:
            ``{"groups": [...], "cursor": next}``; ``cursor`` is ``"0"`` after the last page.
        """
        return asdict(await self.queue(queue).groups_page(cursor, n))

    async def metrics(self, queue: str, minutes: int = METRIC_MINUTES) -> Reply:
        """The throughput record as per-minute series ending at the server's minute.

        Returns:
            ``{"minutes", "end_minute", "completed": {"total", "series"}, "failed": ...}``
            with ``series`` one count per minute, oldest first; a minute is ms // 60000.
        """
        return asdict(await self.queue(queue).throughput(minutes))

    async def history(self, queue: str, span: str = "1h") -> Reply:
        """The queue's history series over ``span`` (1h, 24h, 7d), shared by every request
        for a few seconds (``HISTORY_TTL_S``).

        Returns:
            ``{"span", "step", "first_minute", "end_minute", "completed", "dead",
            "wait_ms", "run_ms", "mean_wait_ms", "mean_run_ms"}``: lists, one value per
            point, oldest first (a mean is ``null`` where no job ended); and ``lanes``,
            the busiest lanes over the same span at hourly resolution (``{"first_hour",
            "end_hour", "lanes_seen", "lanes": [{"lane", "completed", "dead", "wait_ms",
            "run_ms", "mean_wait_ms", "mean_run_ms"}]}``, at most ``HISTORY_LANES``).
        """
        if span not in HISTORY_RANGES:
            raise InvalidArgument(f"range must be one of {', '.join(HISTORY_RANGES)}")

        async def read() -> Reply:
            q = self.queue(queue)
            hist = await q.history(span)
            busy = await q.busiest_lanes(span, top=HISTORY_LANES)
            waits, runs = hist.averages()
            lanes = []
            for lane in busy.lanes:
                wait, run = lane.averages()
                lanes.append({**asdict(lane), "mean_wait_ms": wait, "mean_run_ms": run})
            return {
                **asdict(hist),
                "mean_wait_ms": waits,
                "mean_run_ms": runs,
                "lanes": {
                    "first_hour": busy.first_hour,
                    "end_hour": busy.end_hour,
                    "lanes_seen": busy.lanes_seen,
                    "lanes": lanes,
                },
            }

        reply: Reply = await self.history_reads[span].read((queue, "history", span), read)
        return reply

    async def repeats(self, queue: str) -> Reply:
        """The queue's repeatables, soonest first (at most ``MAX_PAGE``)."""
        rows = await self.queue(queue).repeats(MAX_PAGE)
        return {"repeats": [asdict(r) for r in rows]}
