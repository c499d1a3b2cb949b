"""The console's API, independent of any HTTP framework.

:class:`Console` holds one ``redis.asyncio`` client and an :class:`~echomq.AsyncQueue`
per queue it has served. Each handler is a plain coroutine: it takes parsed input
(names from the path, a JSON body already decoded to a mapping) and returns a plain,
JSON-ready dict, or raises a typed error:

- :class:`~echomq.errors.Refused` (and its subclasses) when a transition declined,
  with ``.reason``; nothing changed on the server;
- ``InvalidName`` / ``InvalidJobId`` / ``InvalidArgument`` for malformed input,
  raised before any I/O;
- :class:`ReadOnly` for any change asked of a read-only console.

The HTTP adapter (:mod:`echomq.console.app`) maps those to status codes; another
adapter (a test, a different framework) can call the handlers directly.

**Who acts.** Every verb a handler calls names an actor in the queue's audit journal:
the one set with :func:`acting_as` for the request (the app sets the logged-in user,
``console:<user>@<address>``), else ``console``. Each actor gets its own facade of a
queue (the actor is part of a facade's context), from a bounded cache.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import OrderedDict
from collections.abc import AsyncGenerator, Awaitable, Callable, Iterator, Mapping
from contextvars import ContextVar
from dataclasses import asdict
from typing import Any

import redis.asyncio

from .. import __version__, events, ids
from ..bulk import DEFAULT_CLEAN_BUDGET, DEFAULT_SCAN, MAX_SCAN, BulkResult
from ..connect import async_client, cluster_mode
from ..discovery import QueueDirectory, server_label
from ..errors import EchoMQError, InvalidArgument, JobGone
from ..events import Event
from ..journal import DEFAULT_AUDIT_ENTRIES
from ..queue import DEFAULT_URL, AsyncQueue
from ..registry import DEFAULT_WORKERS, MAX_WORKERS
from ..views import MAX_PAGE, PAGE_STATES, SEARCH_BUDGET, SEARCH_FIELDS, LenientJson

Body = Mapping[str, Any]
Reply = dict[str, Any]

#: Obliterate: the default and the largest budget (jobs per server call) per request.
OBLITERATE_BUDGET = 1000
MAX_OBLITERATE_BUDGET = 10000
#: The throughput chart's default and longest window, in minutes (buckets live a day).
METRIC_MINUTES = 60
MAX_METRIC_MINUTES = 1440
#: Seconds an event relay waits for a message before it yields a heartbeat.
HEARTBEAT_S = 10.0
#: Event streams open at once: each holds one server connection for its life.
MAX_STREAMS = 64
#: Event streams one client address may hold at once (a page holds one per tab);
#: past it the stream is refused with 429 and the page polls instead.
STREAMS_PER_CLIENT = 8
#: Server connections in all: the streams plus room for requests. A request waits
#: (up to ``POOL_WAIT_S``) for a free one rather than failing.
POOL_SIZE = MAX_STREAMS + 64
POOL_WAIT_S = 10.0
#: Queues whose counts the queue list reads at once.
SUMMARY_CONCURRENCY = 16
#: Queues kept in the facade cache (a queue is cheap to rebuild; the cap bounds memory).
QUEUE_CACHE = 256
#: Groups per page of the groups table.
GROUPS_PAGE = 50
#: Seconds a health answer (one PING) is reused by every stream and request.
HEALTH_TTL_S = 0.5
#: Seconds a health PING may take before the server counts as down.
HEALTH_TIMEOUT_S = 1.0
#: Audit entries one read answers at most.
MAX_AUDIT = 500
#: Server calls one bulk request makes at most; the page calls again with the cursor,
#: which is how it draws a progress bar (and no request holds a worker for long).
BULK_CALLS = 8
#: The actor journaled when no request set one.
DEFAULT_ACTOR = "console"
#: Queues one "which queue holds this job" lookup checks at most.
MAX_LOOKUP = 1000
#: Discovery chunks one lookup may advance (until a full pass is done).
LOOKUP_CHUNKS = 10

_ACTOR: ContextVar[str | None] = ContextVar("echomq_console_actor", default=None)


@contextlib.contextmanager
def acting_as(actor: str | None) -> Iterator[None]:
    """Journal the verbs called inside the block as ``actor`` (``None``: the default)."""
    token = _ACTOR.set(actor)
    try:
        yield
    finally:
        _ACTOR.reset(token)


class ReadOnly(EchoMQError):
    """A change was asked of a console started read-only; nothing was sent."""

    reason = "read_only"


class UnsafeBind(EchoMQError, ValueError):
    """The console was asked to listen beyond loopback without a token."""


# ---------------------------------------------------------------------------- body
def _check_keys(body: Body, allowed: tuple[str, ...]) -> None:
    if not isinstance(body, Mapping):
        raise InvalidArgument("the request body must be a JSON object")
    extra = sorted(set(body) - set(allowed))
    if extra:
        raise InvalidArgument(f"unexpected field(s): {', '.join(map(str, extra))}")


def _flag(body: Body, key: str) -> bool:
    value = body.get(key, False)
    if not isinstance(value, bool):
        raise InvalidArgument(f"{key} must be true or false, got {value!r}")
    return value


def _int(body: Body, key: str, default: int | None, low: int, high: int | None = None) -> int:
    value = body.get(key, default)
    if value is None:
        raise InvalidArgument(f"{key} is required")
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise InvalidArgument(f"{key} must be an integer >= {low}, got {value!r}")
    if high is not None and value > high:
        raise InvalidArgument(f"{key} must be at most {high}, got {value!r}")
    return value


def _text(body: Body, key: str) -> str:
    value = body.get(key)
    if not isinstance(value, str):
        raise InvalidArgument(f"{key} must be a string, got {value!r}")
    return value


def _required(body: Body, key: str) -> Any:
    if key not in body:
        raise InvalidArgument(f"{key} is required")
    return body[key]


# ------------------------------------------------------------------------- console
class Console:
    """The console's handlers over one server.

    Args:
        url: the server URL (default ``redis://127.0.0.1:6379/0``); ignored with ``client``.
        client: a ``redis.asyncio.Redis`` created with ``decode_responses=True``.
        read_only: refuse every change with :class:`ReadOnly`.
    """

    def __init__(
        self, url: str | None = None, *, client: Any = None, read_only: bool = False
    ) -> None:
        self.url = url or DEFAULT_URL
        self.read_only = read_only
        self._client: Any = client
        self._owns_client = client is None
        self._queues: OrderedDict[tuple[str, str], AsyncQueue] = OrderedDict()
        self.directory = QueueDirectory()
        #: The server as the page names it (``host:port/db``; no password).
        self.server = server_label(self.url)
        self._health = True
        self._health_at = float("-inf")

    @property
    def client(self) -> Any:
        """The shared client, created on first use (inside the serving event loop): on a
        cluster node's URL a cluster client (:mod:`echomq.connect`), else one pool that
        waits for a free connection."""
        if self._client is None:
            if cluster_mode(self.url):
                self._client = async_client(
                    self.url, decode_responses=True, max_connections=POOL_SIZE
                )
                return self._client
            pool = redis.asyncio.BlockingConnectionPool.from_url(
                self.url, decode_responses=True, max_connections=POOL_SIZE, timeout=POOL_WAIT_S
            )
            self._client = redis.asyncio.Redis.from_pool(pool)
        return self._client

    async def aclose(self) -> None:
        """Close the client if this console created it."""
        if self._owns_client and self._client is not None:
            await self._client.aclose()
            self._client = None
        self._queues.clear()

    def queue(self, name: str) -> AsyncQueue:
        """The facade of queue ``name`` for the current actor (:func:`acting_as`),
        validated before any I/O.

        Raises:
            InvalidName: the name is malformed.
        """
        actor = _ACTOR.get() or DEFAULT_ACTOR
        key = (name, actor)
        q = self._queues.get(key)
        if q is None:
            q = AsyncQueue(name, client=self.client, serializer=LenientJson(), actor=actor)
            self._queues[key] = q
            if len(self._queues) > QUEUE_CACHE:
                self._queues.popitem(last=False)
        else:
            self._queues.move_to_end(key)
        return q

    def _writable(self) -> None:
        if self.read_only:
            raise ReadOnly("the console is read-only")

    # ------------------------------------------------------------------- reads
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
        counts = (await q.counts()).as_dict()
        paused = counts.pop("paused")  # one call: the counts carry the pause
        return {"name": q.name, "paused": paused, "counts": counts}

    async def list_queues(self) -> Reply:
        """Every queue found so far with its counts and pause.

        Returns:
            ``{"queues": [{"name", "paused", "counts"}], "complete": bool, "server"}``;
            ``complete`` is false while the bounded discovery scan is still walking
            a large keyspace (later calls find more).
        """
        names, complete = await self.directory.refresh(self.client)
        gate = asyncio.Semaphore(SUMMARY_CONCURRENCY)

        async def summary(name: str) -> Reply:
            async with gate:
                return await self._summary(self.queue(name))

        rows = await asyncio.gather(*(summary(n) for n in names))
        return {"queues": list(rows), "complete": complete, "server": self.server}

    async def queue_summary(self, queue: str) -> Reply:
        """One queue's counts per state, its pause, whether it exists, the server time
        and its latency (ms the head of the backlog has waited; ``None``: none pending)."""
        q = self.queue(queue)
        summary, now, exists, latency = await asyncio.gather(
            self._summary(q), q.server_time(), q.queue_exists(), q.latency()
        )
        summary["now_ms"] = now
        summary["exists"] = exists
        summary["latency_ms"] = latency
        return summary

    async def workers(self, queue: str, n: int = DEFAULT_WORKERS) -> Reply:
        """The queue's live workers from the registry, newest beat first.

        Returns:
            ``{"workers": [{"id", "host", "pid", "queues", "concurrency", "jobs",
            "job_ids", "started_ms", "beat_ms", "interval_ms", "version", "claimed",
            "completed", "failed", "cancelled", "age_ms"}]}``.
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
        gate = asyncio.Semaphore(SUMMARY_CONCURRENCY)

        async def holds(name: str) -> bool:
            async with gate:
                return bool(await self.client.exists(self.queue(name).keys.job(job_id)))

        found = await asyncio.gather(*(holds(n) for n in names))
        for name, hit in zip(names, found):
            if hit:
                return {"queue": name, "id": job_id}
        raise JobGone(f"no queue holds job {job_id}", job_id=job_id)

    async def list_jobs(
        self, queue: str, state: str, n: int = 20, offset: int = 0, group: str | None = None
    ) -> Reply:
        """A page of jobs in ``state`` in the operator's order (see :mod:`echomq.views`).

        Pending is in run order, scheduled soonest first, active and dead newest
        first; ``group`` pages that group's lane (pending only).

        Returns:
            ``{"state", "group", "order", "n", "offset", "total", "now_ms", "jobs"}``.

        Raises:
            InvalidArgument: unknown state or a bad page; InvalidName: a bad group.
        """
        return asdict(await self.queue(queue).job_page(state, n, offset, group))

    async def find_jobs(
        self,
        queue: str,
        state: str,
        text: str,
        fields: list[str] | None = None,
        n: int = 20,
        cursor: int = 0,
        budget: int = SEARCH_BUDGET,
        group: str | None = None,
        since_ms: int | None = None,
        until_ms: int | None = None,
    ) -> Reply:
        """One bounded search step in ``state`` (at most ``budget`` jobs examined);
        ``since_ms``/``until_ms`` keep jobs created in that range (``text`` may then be
        empty).

        Returns:
            ``{"state", "text", "fields", "scanned", "cursor", "now_ms", "jobs"}``;
            ``cursor`` is where the next step starts, ``None`` at the end.
        """
        found = await self.queue(queue).find_jobs(
            state,
            text,
            fields=fields or SEARCH_FIELDS,
            n=n,
            cursor=cursor,
            budget=budget,
            group=group,
            since_ms=since_ms,
            until_ms=until_ms,
        )
        return asdict(found)

    async def job_detail(self, queue: str, job_id: str) -> Reply:
        """One job: its row (``data`` = the parsed payload), newest logs (with
        ``log_times``: the server ms each line was written, aligned with ``logs``;
        ``null`` for a line older than log times), lock and score.

        Raises:
            InvalidJobId: a malformed id (before any I/O).
            JobGone: no such job.
        """
        view = await self.queue(queue).job_view(job_id)
        if view is None:
            raise JobGone(f"job {job_id} is gone", job_id=job_id)
        return {
            "job": view.row,
            "logs": view.logs,
            "log_times": view.log_times,
            "log_count": view.log_count,
            "locked": view.locked,
            "score": view.score,
            "now_ms": view.now_ms,
            "errors": [asdict(e) for e in view.errors],
            "result": view.result,
        }

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

    async def repeats(self, queue: str) -> Reply:
        """The queue's repeatables, soonest first (at most ``MAX_PAGE``)."""
        rows = await self.queue(queue).repeats(MAX_PAGE)
        return {"repeats": [asdict(r) for r in rows]}

    async def events(self, queue: str | None = None) -> AsyncGenerator[Reply | None, None]:
        """Relay the events channel of ``queue`` (every queue when ``None``).

        Yields ``None`` once the subscription is up (so a caller knows later events
        will reach it), then each event as its JSON object plus ``"queue"``, and
        ``None`` again whenever ``HEARTBEAT_S`` passes without one (a chance to send
        a keep-alive and notice a client that left). Pub/sub is at-most-once: events
        are hints to re-read, the rows and sets are the truth.

        Raises:
            InvalidName: a malformed queue name (before any I/O).
        """
        if queue is None:
            async for item in self._every_queue_events():
                yield item
            return
        # one queue: the queue's own stream, which subscribes again after a lost link
        async with self.queue(queue).events() as stream:
            yield None
            while True:
                event = await stream.get(HEARTBEAT_S)
                yield None if event is None else _event_reply(event)

    async def _every_queue_events(self) -> AsyncGenerator[Reply | None, None]:
        # every queue: one pattern subscription, which subscribes again after a lost link
        async with events.every_queue(self.client) as stream:
            yield None
            while True:
                event = await stream.get(HEARTBEAT_S)
                yield None if event is None else _event_reply(event)

    # ------------------------------------------------------------ queue verbs
    async def pause(self, queue: str, body: Body) -> Reply:
        """Close the queue's claim gate (idempotent)."""
        _check_keys(body, ())
        self._writable()
        await self.queue(queue).pause()
        return {"ok": True, "paused": True}

    async def resume(self, queue: str, body: Body) -> Reply:
        """Open the queue's claim gate (idempotent)."""
        _check_keys(body, ())
        self._writable()
        await self.queue(queue).resume()
        return {"ok": True, "paused": False}

    async def drain(self, queue: str, body: Body) -> Reply:
        """Delete the pending backlog (``include_schedule``: the schedule too)."""
        _check_keys(body, ("include_schedule",))
        include = _flag(body, "include_schedule")
        self._writable()
        drained = await self.queue(queue).drain(include_schedule=include)
        return {"ok": True, "drained": drained}

    async def obliterate(self, queue: str, body: Body) -> Reply:
        """One bounded obliterate call; the page calls again while ``done`` is false.

        Body: ``force`` (bool), ``budget`` (jobs this call, 1..``MAX_OBLITERATE_BUDGET``).

        Returns:
            ``{"ok", "done", "remaining"}``: ``remaining`` is the counts left after
            this call, for a progress bar.

        Raises:
            QueueNotPaused, QueueHasActiveJobs: refused, nothing changed.
        """
        _check_keys(body, ("force", "budget"))
        force = _flag(body, "force")
        budget = _int(body, "budget", OBLITERATE_BUDGET, 1, MAX_OBLITERATE_BUDGET)
        self._writable()
        q = self.queue(queue)
        done = await q.obliterate(force=force, budget=budget)
        if done:
            self.directory.forget(queue)
        remaining = (await q.counts()).as_dict()
        del remaining["paused"]  # the reply keeps its shape: the jobs left, by state
        return {"ok": True, "done": done, "remaining": remaining}

    # ------------------------------------------------------------ group verbs
    async def pause_group(self, queue: str, group: str, body: Body) -> Reply:
        """Hold one group back (idempotent)."""
        _check_keys(body, ())
        self._writable()
        await self.queue(queue).pause_group(group)
        return {"ok": True}

    async def resume_group(self, queue: str, group: str, body: Body) -> Reply:
        """Serve a paused group again (idempotent)."""
        _check_keys(body, ())
        self._writable()
        await self.queue(queue).resume_group(group)
        return {"ok": True}

    async def limit_group(self, queue: str, group: str, body: Body) -> Reply:
        """Set the group's concurrency ``limit`` (``null`` clears it)."""
        _check_keys(body, ("limit",))
        limit = _required(body, "limit")
        if limit is not None:
            limit = _int(body, "limit", None, 1)
        self._writable()
        q = self.queue(queue)
        if limit is None:
            await q.clear_group_limit(group)
        else:
            await q.set_group_limit(group, limit)
        return {"ok": True, "limit": limit}

    async def weight_group(self, queue: str, group: str, body: Body) -> Reply:
        """Set how many of the group's jobs one turn of the ring serves."""
        _check_keys(body, ("weight",))
        weight = _int(body, "weight", None, 1)
        self._writable()
        await self.queue(queue).set_group_weight(group, weight)
        return {"ok": True, "weight": weight}

    async def drain_group(self, queue: str, group: str, body: Body) -> Reply:
        """Delete one group's pending lane."""
        _check_keys(body, ())
        self._writable()
        drained = await self.queue(queue).drain_group(group)
        return {"ok": True, "drained": drained}

    # -------------------------------------------------------------- job verbs
    async def update_data(self, queue: str, job_id: str, body: Body) -> Reply:
        """Replace the job's payload with ``data`` (any JSON value)."""
        _check_keys(body, ("data",))
        data = _required(body, "data")
        self._writable()
        await self.queue(queue).update_data(job_id, data)
        return {"ok": True}

    async def update_progress(self, queue: str, job_id: str, body: Body) -> Reply:
        """Write the job's ``progress`` (a number, a string or any JSON value)."""
        _check_keys(body, ("progress",))
        progress = _required(body, "progress")
        self._writable()
        await self.queue(queue).update_progress(job_id, progress)
        return {"ok": True}

    async def add_log(self, queue: str, job_id: str, body: Body) -> Reply:
        """Append ``line`` to the job's logs (``keep`` > 0 trims to the newest)."""
        _check_keys(body, ("line", "keep"))
        line = _text(body, "line")
        keep = _int(body, "keep", 0, 0)
        self._writable()
        kept = await self.queue(queue).add_log(job_id, line, keep)
        return {"ok": True, "kept": kept}

    async def remove_job(self, queue: str, job_id: str, body: Body) -> Reply:
        """Delete the job in any state (refused while a worker holds it)."""
        _check_keys(body, ())
        self._writable()
        await self.queue(queue).remove_job(job_id)
        return {"ok": True}

    async def promote_job(self, queue: str, job_id: str, body: Body) -> Reply:
        """Run a scheduled job now: it moves to pending (or its lane) at its priority.

        Raises:
            JobNotScheduled: the job is not in the schedule; nothing changed.
        """
        _check_keys(body, ())
        self._writable()
        await self.queue(queue).promote_job(job_id)
        return {"ok": True}

    async def cancel_repeat(self, queue: str, name: str, body: Body) -> Reply:
        """Remove repeatable ``name``; the jobs it already made stay (idempotent)."""
        _check_keys(body, ())
        self._writable()
        cancelled = await self.queue(queue).cancel_repeat(name)
        return {"ok": True, "cancelled": cancelled}

    async def cancel_job(self, queue: str, job_id: str, body: Body) -> Reply:
        """Ask the worker running an active job to stop it (cooperative).

        Returns:
            ``{"ok": true, "requested": bool}`` (``false``: already asked for this run).

        Raises:
            JobNotActive: the job is not running; nothing changed.
        """
        _check_keys(body, ())
        self._writable()
        requested = await self.queue(queue).cancel_job(job_id)
        return {"ok": True, "requested": requested}

    # -------------------------------------------------------------- bulk verbs
    async def bulk(self, queue: str, verb: str, body: Body) -> Reply:
        """One bounded piece of a bulk verb by filter: at most ``BULK_CALLS`` server
        calls, then the cursor to go on from (the page loops, drawing its progress).

        Body: ``state`` (``remove`` only: pending, scheduled or dead), the filter
        (``name``, ``group``, ``error``, ``since_ms``, ``until_ms``), ``dry_run``,
        ``cursor`` (from the last reply), ``scan`` (1..5000); ``clean`` takes
        ``older_than_ms`` and ``dry_run`` instead (and runs to its end: each of its
        calls deletes the oldest 500 that qualify).

        Returns:
            ``{"ok", "verb", "matched", "examined", "locked", "calls", "cursor",
            "dry_run", "done"}``: ``matched`` counts this piece only.

        Raises:
            InvalidArgument, InvalidName: a bad verb, state or filter (before any I/O).
            JobLocked: ``remove`` of ``active`` jobs (held by their workers).
            ReadOnly: a read-only console (a dry run too: it is the first step of a change).
        """
        if verb not in BULK_VERBS:
            raise InvalidArgument(f"unknown bulk verb {verb!r}")
        self._writable()
        q = self.queue(queue)
        dry = _flag(body, "dry_run")
        if verb == "clean":
            _check_keys(body, ("older_than_ms", "dry_run"))
            age = _int(body, "older_than_ms", None, 0)
            res: BulkResult = await q.clean(age, dry_run=dry, budget=DEFAULT_CLEAN_BUDGET)
            return {"ok": True, **asdict(res), "done": res.done}
        filters = ("name", "group", "error", "since_ms", "until_ms")
        _check_keys(body, ("state", "dry_run", "cursor", "scan", *filters))
        kw: dict[str, Any] = {k: body[k] for k in filters if body.get(k) not in (None, "")}
        cursor = body.get("cursor")
        if cursor is not None and not isinstance(cursor, str):
            raise InvalidArgument(f"cursor must be a string, got {cursor!r}")
        scan = _int(body, "scan", DEFAULT_SCAN, 1, MAX_SCAN)
        common: dict[str, Any] = {
            "dry_run": dry,
            "cursor": cursor,
            "scan": scan,
            "max_calls": BULK_CALLS,
        }
        if verb == "remove":
            state = _text(body, "state")
            res = await q.remove_jobs(state, **kw, **common)
        elif verb == "reprocess":
            _check_keys(body, ("dry_run", "cursor", "scan", *filters))
            res = await q.reprocess_jobs(**kw, **common)
        else:
            _check_keys(body, ("dry_run", "cursor", "scan", *filters))
            res = await q.promote_jobs(**kw, **common)
        return {"ok": True, **asdict(res), "done": res.done}

    async def pause_repeat(self, queue: str, name: str, body: Body) -> Reply:
        """Stop repeatable ``name`` making jobs (its next run is kept).

        Returns:
            ``{"ok": true, "paused": bool}`` (``false``: no such repeatable, or paused).
        """
        _check_keys(body, ())
        self._writable()
        return {"ok": True, "paused": await self.queue(queue).pause_repeat(name)}

    async def resume_repeat(self, queue: str, name: str, body: Body) -> Reply:
        """Let paused repeatable ``name`` make jobs again, from its next slot after now.

        Returns:
            ``{"ok": true, "next_run_ms": ms or null}`` (``null``: none, or not paused).
        """
        _check_keys(body, ())
        self._writable()
        return {"ok": True, "next_run_ms": await self.queue(queue).resume_repeat(name)}

    async def run_repeat(self, queue: str, name: str, body: Body) -> Reply:
        """Run repeatable ``name`` now: one job, made as its slots make theirs.

        Returns:
            ``{"ok": true, "id": job id or null}`` (``null``: none, paused, or a
            worker fired it just then).
        """
        _check_keys(body, ())
        self._writable()
        return {"ok": True, "id": await self.queue(queue).run_repeat(name)}

    async def reprocess_job(self, queue: str, job_id: str, body: Body) -> Reply:
        """Move a dead job back to the backlog."""
        _check_keys(body, ())
        self._writable()
        await self.queue(queue).reprocess_job(job_id)
        return {"ok": True}


def _event_reply(event: Event) -> Reply:
    out: Reply = {"event": event.name}
    if event.job is not None:
        out["job"] = event.job
    out.update(event.fields)
    out["queue"] = event.queue
    return out


QueueVerb = Callable[[Console, str, Body], Awaitable[Reply]]
GroupVerb = Callable[[Console, str, str, Body], Awaitable[Reply]]

#: POST /api/queues/{q}/<verb>
QUEUE_VERBS: dict[str, QueueVerb] = {
    "pause": Console.pause,
    "resume": Console.resume,
    "drain": Console.drain,
    "obliterate": Console.obliterate,
}
#: POST /api/queues/{q}/groups/{g}/<verb>
GROUP_VERBS: dict[str, GroupVerb] = {
    "pause": Console.pause_group,
    "resume": Console.resume_group,
    "limit": Console.limit_group,
    "weight": Console.weight_group,
    "drain": Console.drain_group,
}
#: POST /api/queues/{q}/repeats/{name}/<verb>
REPEAT_VERBS: dict[str, GroupVerb] = {
    "cancel": Console.cancel_repeat,
    "pause": Console.pause_repeat,
    "resume": Console.resume_repeat,
    "run": Console.run_repeat,
}
#: POST /api/queues/{q}/jobs/{id}/<verb>
JOB_VERBS: dict[str, GroupVerb] = {
    "data": Console.update_data,
    "progress": Console.update_progress,
    "log": Console.add_log,
    "remove": Console.remove_job,
    "reprocess": Console.reprocess_job,
    "promote": Console.promote_job,
    "cancel": Console.cancel_job,
}
#: POST /api/queues/{q}/bulk/<verb>
BULK_VERBS = ("reprocess", "remove", "promote", "clean")
