"""The console's event relay: a queue's events channel (or every queue's) as replies."""

from __future__ import annotations

from collections.abc import AsyncGenerator

from .. import events
from ..events import Event
from .body import Reply
from .core import ConsoleCore
from .limits import HEARTBEAT_S


class EventRelay(ConsoleCore):
    """Relays the server's pub/sub events (what the page's live updates read)."""

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


def _event_reply(event: Event) -> Reply:
    out: Reply = {"event": event.name}
    if event.job is not None:
        out["job"] = event.job
    out.update(event.fields)
    out["queue"] = event.queue
    return out
