"""Shared reads: one server read per queue view per interval, whoever asks.

Fifty operators with the same queue page open each ask the same seven reads every
second; with ``shared_reads_s`` set, the first request in an interval reads the server
and every identical request in that interval (or while that read is in flight) gets its
answer, so fifty operators cost one page's reads. A change made through the console
drops every shared read of its queue at once (the next read is fresh); a change made
elsewhere (a worker, another tool) shows within the interval. A read that fails is not
kept. Off (``0``) by default in :func:`~echomq.console.create_app`; ``emq console``
turns it on (1 s).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

#: Shared reads kept at most (the oldest are dropped first).
MAX_SHARED = 4096

Key = tuple[str, ...]


class SharedReads:
    """Reads shared for ``ttl_s`` seconds, keyed by ``(queue, view, query...)``."""

    def __init__(self, ttl_s: float = 0.0) -> None:
        self.ttl_s = ttl_s
        self._kept: dict[Key, tuple[float, Any] | asyncio.Future[Any]] = {}

    async def read(self, key: Key, make: Callable[[], Awaitable[Any]]) -> Any:
        """``make()``'s answer, shared with every identical read for ``ttl_s``."""
        if self.ttl_s <= 0:
            return await make()
        got = self._kept.get(key)
        if isinstance(got, tuple) and time.monotonic() - got[0] < self.ttl_s:
            return got[1]
        if isinstance(got, asyncio.Future):
            return await asyncio.shield(got)
        task = asyncio.ensure_future(make())
        self._kept[key] = task

        def settle(done: asyncio.Future[Any]) -> None:
            if self._kept.get(key) is not done:
                return  # forgotten by a change meanwhile: never kept
            if done.cancelled() or done.exception() is not None:
                del self._kept[key]
            else:
                self._kept[key] = (time.monotonic(), done.result())
            while len(self._kept) > MAX_SHARED:
                self._kept.pop(next(iter(self._kept)))

        task.add_done_callback(settle)
        return await asyncio.shield(task)

    def forget(self, queue: str) -> None:
        """Drop every shared read of ``queue`` and of the queue list (after a change)."""
        for key in [k for k in self._kept if k[0] in (queue, "")]:
            del self._kept[key]
