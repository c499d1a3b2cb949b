"""A queue's lifecycle events as typed objects, from its pub/sub channel.

Every transition script publishes a JSON object on ``emq:{q}:events`` whose ``event``
field names it (``enqueued``, ``active``, ``progress``, ``completed``, ``retrying``,
``dead``, ``stalled``, ``released``, ``removed``, ``reprocessed``, ``paused``, ...).
:func:`decode` turns one message into an :class:`Event`; :class:`EventStream` (sync)
and :class:`AsyncEventStream` iterate them, subscribing again after a lost connection.

Pub/sub is at-most-once: events published while no subscription is up (before the
stream opens, or while it reconnects) are not seen. An event is a notification; the
rows and the sets are the truth.

**On a cluster** the scripts publish with ``SPUBLISH`` (sharded pub/sub, Redis/Valkey
7.0+: the message stays in the shard that holds the queue's slot), and the streams
follow with ``SSUBSCRIBE`` on a connection to that shard's primary. After a failover
(the connection lost, or the server's ``sunsubscribe`` when the slot moves) the stream
asks the cluster client for the slot's owner again and subscribes there.
:func:`every_queue` cannot use a pattern there (sharded pub/sub has none): it
subscribes to each queue the discovery walk finds, a new queue joining within
:data:`REDISCOVER_S`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import redis
from typing_extensions import Self

from .connect import is_cluster
from .context import as_str
from .keyspace import EVENTS_PATTERN, queue_of_key

#: How long one wait on the socket lasts before the loop looks again (seconds).
POLL_S = 1.0
#: The pause before subscribing again after a lost connection, doubling up to the cap.
RETRY_FIRST_S, RETRY_CAP_S = 0.05, 2.0
#: On a cluster: how often :func:`every_queue` looks for new queues (seconds).
REDISCOVER_S = 5.0
_LOST = (redis.ConnectionError, redis.TimeoutError, OSError, redis.exceptions.ClusterError)


@dataclass(frozen=True)
class Event:
    """One lifecycle event.

    Attributes:
        queue: the queue that published it.
        name: the event name (``"completed"``, ``"progress"``, ...).
        job: the job id, or ``None`` for a queue-scope event (``paused``, ``drained``).
        fields: every other field of the message (``attempt``, ``progress``,
            ``error``, ``due``, ``count``, ...).
    """

    queue: str
    name: str
    job: str | None = None
    fields: Mapping[str, Any] = field(default_factory=dict)

    def get(self, key: str, default: Any = None) -> Any:
        """A field of the message, or ``default``."""
        return self.fields.get(key, default)


def decode(queue: str, message: Mapping[str, Any] | None) -> Event | None:
    """Turn a pub/sub message into an :class:`Event`; ``None`` for anything else
    (subscribe confirmations, text that is not an event object)."""
    if not message or as_str(message.get("type")) not in ("message", "pmessage", "smessage"):
        return None
    try:
        doc = json.loads(as_str(message["data"]))
    except (ValueError, KeyError):
        return None
    if not isinstance(doc, dict) or not isinstance(doc.get("event"), str):
        return None
    name = doc.pop("event")
    job = doc.pop("job", None)
    return Event(queue, name, None if job is None else str(job), doc)


def _retry_delay(failures: int) -> float:
    return float(min(RETRY_CAP_S, RETRY_FIRST_S * (2 ** min(failures, 10))))


def _wait_s(deadline: float | None) -> float:
    if deadline is None:
        return POLL_S
    return max(0.0, min(POLL_S, deadline - time.monotonic()))


def _expired(deadline: float | None) -> bool:
    return deadline is not None and time.monotonic() >= deadline


class EventStream:
    """A queue's events, synchronously. Subscribes on ``with`` (or on first use).

    Use ``with queue.events() as stream:`` then ``for event in stream`` (endless) or
    ``stream.get(timeout)``. A lost connection is re-subscribed with a short backoff.

    Args:
        client: a ``redis.Redis``.
        queue: the queue name.
        channel: the queue's events channel.
    """

    def __init__(self, client: Any, queue: str, channel: str) -> None:
        self._client, self.queue, self.channel = client, queue, channel
        self._pubsub: Any = None
        self.reconnects = 0

    def open(self) -> Self:
        """Subscribe now (idempotent), so later events are not missed."""
        if self._pubsub is None:
            if is_cluster(self._client):
                pubsub = _shard_node(self._client, self.channel, self.reconnects > 0).pubsub(
                    ignore_subscribe_messages=True
                )
                pubsub.ssubscribe(self.channel)
            else:
                pubsub = self._client.pubsub(ignore_subscribe_messages=True)
                pubsub.subscribe(self.channel)
            self._pubsub = pubsub
        return self

    def get(self, timeout: float | None = None) -> Event | None:
        """The next event, or ``None`` when ``timeout`` seconds pass without one."""
        deadline = None if timeout is None else time.monotonic() + timeout
        failures = 0
        while True:
            try:
                self.open()
                msg = self._pubsub.get_message(timeout=_wait_s(deadline))
                if not self._pubsub.subscribed:  # the server unsubscribed us (slot moved)
                    raise redis.ConnectionError("unsubscribed by the server")
                failures = 0
            except _LOST:
                self.close()
                self.reconnects += 1
                time.sleep(_retry_delay(failures))
                failures += 1
                continue
            event = decode(self.queue, msg)
            if event is not None:
                return event
            if _expired(deadline):
                return None

    def __iter__(self) -> Iterator[Event]:
        while True:
            event = self.get()
            if event is not None:
                yield event

    def close(self) -> None:
        """Unsubscribe and give the connection back."""
        pubsub, self._pubsub = self._pubsub, None
        if pubsub is not None:
            with contextlib.suppress(*_LOST):
                pubsub.close()

    def __enter__(self) -> Self:
        return self.open()

    def __exit__(self, *exc: object) -> None:
        self.close()


class AsyncEventStream:
    """A queue's events, for asyncio. Subscribes on ``async with`` (or on first use).

    Use ``async with aqueue.events() as stream:`` then ``async for event in stream``
    or ``await stream.get(timeout)``. A lost connection is re-subscribed.

    Args:
        client: a ``redis.asyncio.Redis``.
        queue: the queue name.
        channel: the queue's events channel.
    """

    def __init__(self, client: Any, queue: str, channel: str, *, pattern: bool = False) -> None:
        self._client, self.queue, self.channel = client, queue, channel
        self.pattern = pattern  # channel is a pattern; each event names its own queue
        self._pubsub: Any = None
        self.reconnects = 0

    async def open(self) -> Self:
        """Subscribe now (idempotent), so later events are not missed."""
        if self._pubsub is None:
            if is_cluster(self._client):
                shards = _Shards(self._client, None if self.pattern else [self.channel])
                await shards.open(refresh=self.reconnects > 0)
                self._pubsub = shards
                return self
            pubsub = self._client.pubsub(ignore_subscribe_messages=True)
            if self.pattern:
                await pubsub.psubscribe(self.channel)
            else:
                await pubsub.subscribe(self.channel)
            self._pubsub = pubsub
        return self

    async def get(self, timeout: float | None = None) -> Event | None:
        """The next event, or ``None`` when ``timeout`` seconds pass without one."""
        deadline = None if timeout is None else time.monotonic() + timeout
        failures = 0
        while True:
            try:
                await self.open()
                msg = await self._pubsub.get_message(timeout=_wait_s(deadline))
                if not self._pubsub.subscribed:  # the server unsubscribed us (slot moved)
                    raise redis.ConnectionError("unsubscribed by the server")
                failures = 0
            except _LOST:
                await self.aclose()
                self.reconnects += 1
                await asyncio.sleep(_retry_delay(failures))
                failures += 1
                continue
            queue = self.queue
            if self.pattern and msg:
                queue = queue_of_key(as_str(msg.get("channel")) or "") or ""
            event = decode(queue, msg)
            if event is not None:
                return event
            if _expired(deadline):
                return None

    async def __aiter__(self) -> AsyncIterator[Event]:
        while True:
            event = await self.get()
            if event is not None:
                yield event

    async def aclose(self) -> None:
        """Unsubscribe and give the connection back."""
        pubsub, self._pubsub = self._pubsub, None
        if pubsub is not None:
            with contextlib.suppress(*_LOST):
                await pubsub.aclose()

    async def __aenter__(self) -> Self:
        return await self.open()

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


def every_queue(client: Any) -> AsyncEventStream:
    """Every queue's events on the server ``client`` talks to, for asyncio (one
    pattern subscription; each :class:`Event` names its queue). The console's
    all-queues page reads this. On a cluster: one sharded subscription per queue the
    discovery finds, a new queue joining within :data:`REDISCOVER_S`.

    Args:
        client: a ``redis.asyncio.Redis`` or ``redis.asyncio.cluster.RedisCluster``.
    """
    return AsyncEventStream(client, "*", EVENTS_PATTERN, pattern=True)


def _shard_node(cluster: Any, channel: str, refresh: bool) -> Any:
    """The sync ``redis.Redis`` of the primary serving ``channel``'s slot. After a loss
    (``refresh``) a read of the slot through the cluster client first, so a stale slot
    map is corrected (the client re-reads it on a redirection or a dead node)."""
    if refresh:
        with contextlib.suppress(redis.RedisError, redis.exceptions.RedisClusterException):
            cluster.exists(channel)
    return cluster.get_node_from_key(channel).redis_connection


class _Shards:
    """Sharded subscriptions over a cluster (asyncio): one connection per primary that
    serves one of the channels, read in turn. ``channels=None`` follows every queue
    (found by :class:`~echomq.discovery.QueueDirectory`, looked for again every
    :data:`REDISCOVER_S`). Quacks like the part of a ``PubSub`` the stream uses."""

    def __init__(self, cluster: Any, channels: list[str] | None) -> None:
        self.cluster = cluster
        self.fixed = channels
        self.by_node: dict[str, tuple[Any, Any]] = {}  # node name -> (client, pubsub)
        self.channels: set[str] = set()
        self.directory: Any = None
        self.looked = 0.0
        self.lost = False

    async def open(self, refresh: bool = False) -> None:
        if self.fixed is not None:
            await self._add(self.fixed, refresh)
        else:
            await self._discover(refresh)

    async def _discover(self, refresh: bool = False) -> None:
        from .discovery import QueueDirectory
        from .keyspace import Keyspace

        if self.directory is None:
            self.directory = QueueDirectory()
        self.looked = time.monotonic()
        names, _ = await self.directory.refresh(self.cluster)
        await self._add([Keyspace(n).events for n in names], refresh)

    async def _add(self, channels: list[str], refresh: bool) -> None:
        new = [c for c in channels if c not in self.channels]
        if not new:
            return
        await self.cluster.initialize()  # the slot map (a no-op once read)
        if refresh:
            with contextlib.suppress(redis.RedisError, redis.exceptions.RedisClusterException):
                await self.cluster.exists(new[0])
        groups: dict[str, list[str]] = {}
        nodes: dict[str, Any] = {}
        for ch in new:
            node = self.cluster.get_node_from_key(ch)
            groups.setdefault(node.name, []).append(ch)
            nodes[node.name] = node
        for name, chans in groups.items():
            if name not in self.by_node:
                node = nodes[name]
                pool = redis.asyncio.ConnectionPool(
                    connection_class=node.connection_class, **node.connection_kwargs
                )
                client = redis.asyncio.Redis(connection_pool=pool)
                self.by_node[name] = (client, client.pubsub(ignore_subscribe_messages=True))
            await _ssubscribe(self.by_node[name][1], chans)
            self.channels.update(chans)

    @property
    def subscribed(self) -> bool:
        return not self.lost

    async def get_message(self, timeout: float | None = None) -> Any:
        if self.fixed is None and time.monotonic() - self.looked >= REDISCOVER_S:
            await self._discover()
        subs = [p for _, p in self.by_node.values()]
        if not subs:
            await asyncio.sleep(timeout or 0.0)
            return None
        if len(subs) == 1:
            msg = await subs[0].get_message(timeout=timeout)
            self.lost = not subs[0].subscribed
            return msg
        end = time.monotonic() + (timeout or 0.0)
        while True:
            for pubsub in subs:
                msg = await pubsub.get_message(timeout=0.0)
                if not pubsub.subscribed:
                    self.lost = True
                if msg is not None:
                    return msg
            if self.lost or time.monotonic() >= end:
                return None
            await asyncio.sleep(min(0.02, max(0.0, end - time.monotonic())))

    async def aclose(self) -> None:
        for client, pubsub in self.by_node.values():
            with contextlib.suppress(*_LOST):
                await pubsub.aclose()
            with contextlib.suppress(*_LOST):
                await client.aclose()
        self.by_node.clear()


async def _ssubscribe(pubsub: Any, channels: list[str]) -> None:
    if not hasattr(pubsub, "ssubscribe"):  # redis-py 5.0's asyncio PubSub
        raise redis.exceptions.RedisClusterException(
            "sharded events on asyncio need a newer redis-py (asyncio PubSub.ssubscribe)"
        )
    for channel in channels:  # one command per slot: SSUBSCRIBE refuses a cross-slot set
        await pubsub.ssubscribe(channel)
