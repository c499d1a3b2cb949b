"""The console's event relay: a queue's events channel (or every queue's) as replies,
one shared subscription per queue however many streams watch it."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator

from .. import events
from ..events import AsyncEventStream, Event
from .body import Reply
from .core import ConsoleCore
from .event_fanout import Fanout
from .limits import HEARTBEAT_S


class EventRelay(ConsoleCore):
    """Relays the server's pub/sub events (what the page's live updates read)."""

    @property
    def fanout(self) -> Fanout:
        """The shared subscriptions (one per queue watched), made on first use."""
        if self._fanout is None:
            self._fanout = Fanout(self._open_events, HEARTBEAT_S)
        return self._fanout

    def _open_events(self, queue: str | None) -> AsyncEventStream:
        # one queue: the queue's own stream; every queue: one pattern subscription;
        # both subscribe again after a lost link
        if queue is None:
            return events.every_queue(self.client)
        return self.queue(queue).events()

    async def events(self, queue: str | None = None) -> AsyncGenerator[Reply | None, None]:
        """Relay the events channel of ``queue`` (every queue when ``None``).

        Yields ``None`` once the subscription is up (so a caller knows later events
        will reach it), then each event as its JSON object plus ``"queue"``, and
        ``None`` again whenever ``HEARTBEAT_S`` passes without one (a chance to send
        a keep-alive and notice a client that left). Every relay of one queue shares
        one subscription (:mod:`.event_fanout`). Pub/sub is at-most-once: events are
        hints to re-read, the rows and sets are the truth.

        Raises:
            InvalidName: a malformed queue name (before any I/O).
        """
        if queue is not None:
            self.queue(queue)  # the name checked before any I/O
        async with self.fanout.listen(queue) as box:
            yield None
            while True:
                try:
                    item = await asyncio.wait_for(box.get(), HEARTBEAT_S)
                except asyncio.TimeoutError:
                    yield None
                    continue
                if isinstance(item, BaseException):
                    raise item  # the shared subscription failed: this relay ends
                yield _event_reply(item)


def _event_reply(event: Event) -> Reply:
    out: Reply = {"event": event.name}
    if event.job is not None:
        out["job"] = event.job
    out.update(event.fields)
    out["queue"] = event.queue
    return out
