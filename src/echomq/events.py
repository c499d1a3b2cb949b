"""A queue's lifecycle events as typed objects, from its pub/sub channel.

Every transition script publishes a JSON object on ``emq:{q}:events`` whose ``event``
field names it (``enqueued``, ``active``, ``progress``, ``completed``, ``retrying``,
``dead``, ``stalled``, ``released``, ``removed``, ``reprocessed``, ``paused``, ...).
:func:`decode` turns one message into an :class:`Event`; :class:`EventStream` (sync)
and :class:`AsyncEventStream` iterate them, subscribing again after a lost connection.

Pub/sub is at-most-once: events published while no subscription is up (before the
stream opens, or while it reconnects) are not seen. An event is a notification; the
rows and the sets are the truth.
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

from .context import as_str
from .keyspace import EVENTS_PATTERN, queue_of_key

#: How long one wait on the socket lasts before the loop looks again (seconds).
POLL_S = 1.0
#: The pause before subscribing again after a lost connection, doubling up to the cap.
RETRY_FIRST_S, RETRY_CAP_S = 0.05, 2.0
_LOST = (redis.ConnectionError, redis.TimeoutError, OSError)


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
    if not message or as_str(message.get("type")) not in ("message", "pmessage"):
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
    all-queues page reads this.

    Args:
        client: a ``redis.asyncio.Redis``.
    """
    return AsyncEventStream(client, "*", EVENTS_PATTERN, pattern=True)
