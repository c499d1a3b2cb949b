"""One pub/sub subscription per queue, fanned out to every event stream of that queue.

Fifty operators watching one queue used to hold fifty pub/sub connections, and every
event crossed the wire and was decoded fifty times. Now the first stream of a queue
starts a pump that holds the one subscription (:meth:`AsyncQueue.events`, which
subscribes again after a lost link) and hands each decoded event to every stream of
that queue; the last stream to leave stops it and gives the connection back. The
every-queue streams share one pattern subscription the same way (key ``None``).

Each stream has its own bounded box: a stream that does not keep up loses events
(pub/sub is at-most-once anyway: events are hints to re-read) and never slows the
others. The caps on streams (per address, in all) are counted where a stream is
admitted (:mod:`.event_stream`), before it reaches the fan-out.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Any

from ..events import AsyncEventStream

#: Events one stream may have waiting before it loses the newest.
BOX_SIZE = 1024

#: What a stream's box carries: an event, or the pump's failure (the stream ends).
Item = Any


class _Pump:
    """One subscription and the boxes of the streams it feeds."""

    def __init__(self) -> None:
        self.boxes: set[asyncio.Queue[Item]] = set()
        self.ready = asyncio.Event()
        self.failed: BaseException | None = None
        self.task: asyncio.Task[None] | None = None


class Fanout:
    """The console's shared subscriptions, one per queue (``None``: every queue).

    Args:
        open_stream: the subscription of a queue (or of every queue for ``None``),
            opened on ``async with`` (an :class:`~echomq.events.AsyncEventStream`).
        wait_s: how long a pump waits for an event before it looks again (it must
            notice a cancelled pump; :data:`~.limits.HEARTBEAT_S`).
    """

    def __init__(
        self, open_stream: Callable[[str | None], AsyncEventStream], wait_s: float
    ) -> None:
        self.open_stream, self.wait_s = open_stream, wait_s
        self.pumps: dict[str | None, _Pump] = {}

    def subscribers(self, queue: str | None) -> int:
        """Streams fed by ``queue``'s subscription now (0: none held)."""
        pump = self.pumps.get(queue)
        return 0 if pump is None else len(pump.boxes)

    @contextlib.asynccontextmanager
    async def listen(self, queue: str | None) -> AsyncIterator[asyncio.Queue[Item]]:
        """A box that receives ``queue``'s events once the subscription is up (on
        entry); leaving gives the box back, and the subscription with the last one.

        Raises:
            Exception: whatever the subscription raised while opening.
        """
        pump = self.pumps.get(queue)
        if pump is None:
            pump = self.pumps[queue] = _Pump()
            pump.task = asyncio.create_task(self._run(queue, pump))
        box: asyncio.Queue[Item] = asyncio.Queue(maxsize=BOX_SIZE)
        pump.boxes.add(box)
        try:
            await pump.ready.wait()
            if pump.failed is not None:
                raise pump.failed
            yield box
        finally:
            pump.boxes.discard(box)
            if not pump.boxes and self.pumps.get(queue) is pump:
                del self.pumps[queue]
                await _stop(pump)

    async def _run(self, queue: str | None, pump: _Pump) -> None:
        try:
            async with self.open_stream(queue) as stream:
                pump.ready.set()
                while True:
                    event = await stream.get(self.wait_s)
                    if event is None:
                        continue
                    for box in list(pump.boxes):
                        with contextlib.suppress(asyncio.QueueFull):
                            box.put_nowait(event)  # a stream that lags loses it
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # handed to every stream: each ends
            pump.failed = exc
            if self.pumps.get(queue) is pump:
                del self.pumps[queue]  # the next stream subscribes afresh
            for box in list(pump.boxes):
                with contextlib.suppress(asyncio.QueueFull):
                    box.put_nowait(exc)
            pump.ready.set()

    async def aclose(self) -> None:
        """Stop every subscription (the console is closing)."""
        pumps, self.pumps = list(self.pumps.values()), {}
        for pump in pumps:
            await _stop(pump)


async def _stop(pump: _Pump) -> None:
    if pump.task is None:
        return
    pump.task.cancel()
    with contextlib.suppress(asyncio.CancelledError, Exception):
        await pump.task
