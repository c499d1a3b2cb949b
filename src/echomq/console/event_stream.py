"""The console's event streams: ``GET /api/events`` and ``/api/queues/{q}/events`` as
server-sent events, capped per client address and in all (a refused stream answers
429 or 503 and the page polls instead). A stream is counted when it is admitted, in
the same step as the check, so a burst of a hundred requests from one address gets
its eight streams and a hundred minus eight refusals. The streams of one queue share
one pub/sub subscription (:mod:`.event_fanout`), so the server sees one connection per
queue watched (and one for every-queue streams), not one per stream."""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter
from collections.abc import AsyncIterator
from typing import Any

from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from ..errors import EchoMQError
from ..views import to_json
from .handlers import MAX_STREAMS, Console
from .safety import Denied, Safety
from .web import error_reply

#: Seconds between two beats on an event stream (the page's live dot reads them).
BEAT_S = 1.0


class EventStreams:
    """The event-stream endpoint of one console and the streams it holds open.

    Args:
        per_client: event streams one client address may hold at once.
    """

    def __init__(self, console: Console, safety: Safety, per_client: int) -> None:
        self.console, self.safety, self.per_client = console, safety, per_client
        #: Streams open now, by client address.
        self.streams: Counter[str] = Counter()

    async def events(self, request: Request) -> Response:
        """Open a stream of the queue's events (every queue's without one), or refuse."""
        name = request.path_params.get("queue")
        peer = request.client.host if request.client is not None else "?"
        try:
            self.safety.check_read(request)
            if name is not None:
                self.console.queue(name)  # check the name before the stream starts
            # checked and counted in one step (no await between them): a burst of
            # requests cannot all pass the check before any of them is counted
            ticket = self.admit(peer)
        except (EchoMQError, Denied) as exc:
            return error_reply(exc)
        return StreamingResponse(
            _sse(self.console, name, ticket),
            media_type="text/event-stream",
            headers={"cache-control": "no-store", "x-accel-buffering": "no"},
        )

    def admit(self, peer: str) -> Ticket:
        """Count one more stream of ``peer``, or refuse it; atomic within the event loop.

        Raises:
            Denied: 429 past ``per_client`` streams of this address, 503 past
                ``MAX_STREAMS`` in all.
        """
        if self.streams[peer] >= self.per_client:
            raise Denied(
                429,
                "unavailable",
                "streams",
                f"this client has {self.per_client} event streams open; poll instead",
            )
        if sum(self.streams.values()) >= MAX_STREAMS:
            raise Denied(503, "unavailable", "streams", "too many event streams; poll instead")
        self.streams[peer] += 1
        ticket = Ticket(self.streams, peer)
        # a response never started (the client went away first) gives its slot back
        with contextlib.suppress(RuntimeError):  # no running loop: a direct call
            asyncio.get_running_loop().call_later(UNSTARTED_S, ticket.expire)
        return ticket


#: Seconds an admitted stream may take to start before its slot is given back.
UNSTARTED_S = 10.0


class Ticket:
    """One admitted stream's slot: released once, by the stream's end or, when the
    stream never started, after ``UNSTARTED_S``."""

    def __init__(self, streams: Counter[str], peer: str) -> None:
        self.streams, self.peer = streams, peer
        self.started = False
        self.released = False

    def release(self) -> None:
        """Give the slot back (idempotent)."""
        if self.released:
            return
        self.released = True
        self.streams[self.peer] -= 1
        if self.streams[self.peer] <= 0:
            del self.streams[self.peer]

    def expire(self) -> None:
        """Release a slot whose stream never started."""
        if not self.started:
            self.release()


async def _sse(console: Console, queue: str | None, ticket: Ticket) -> AsyncIterator[str]:
    """Server-sent events: one ``data:`` line per event, ``: ping`` once subscribed,
    and an ``event: beat`` every ``BEAT_S`` with the server's health, so the page's
    live dot tells the truth within two beats. A relay that fails (the server went
    away) ends the stream after a last beat; the browser reconnects on its own."""
    if ticket.released:  # expired before it started: the slot went to another
        return
    ticket.started = True
    relay = console.events(queue)
    box: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue(maxsize=1024)

    async def pump() -> None:
        async for item in relay:
            await box.put(item)

    task = asyncio.create_task(pump())
    try:
        yield "retry: 2000\n\n"
        while True:
            try:
                item = await asyncio.wait_for(box.get(), BEAT_S)
            except asyncio.TimeoutError:
                beat = await console.health()
                yield "event: beat\ndata: " + to_json(beat) + "\n\n"
                if task.done():
                    return
                continue
            if item is None:
                yield ": ping\n\n"
            else:
                yield "data: " + to_json(item) + "\n\n"
    finally:
        ticket.release()
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await task
        with contextlib.suppress(Exception):
            await relay.aclose()
