"""The console's groups table: every lane of a queue sorted, filtered, counted and paged.

A queue with 1,000 lanes listed in ``SSCAN`` order tells an operator nothing; the
table answers "which lanes are deepest" and "where is tenant acme". Sorting needs every
group, so the console walks the groups set in bounded calls (``groups_page``: one
``SSCAN`` page of about ``WALK_PAGE`` groups and their depths per call, never
one call over them all), at most ``MAX_GROUPS_WALK`` groups, and keeps the result for
``GROUPS_TTL_S``: fifty operators on one queue page cost one walk per interval, not
fifty (concurrent requests share the walk in flight). Past the interval, and up to
``GROUPS_STALE_S``, a request gets the last walk at once while one new walk runs in the
background (no request waits for the tens of round trips a walk takes); a change made
through the console drops the walk, and the next request waits for a fresh one.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import asdict, dataclass

from ..errors import InvalidArgument
from ..lanes import GroupInfo
from ..reads.limits import MAX_GROUPS_PAGE
from .body import Reply
from .core import ConsoleCore
from .limits import GROUPS_PAGE, GROUPS_STALE_S, GROUPS_TTL_S, MAX_GROUPS_WALK, QUEUE_CACHE

#: The columns the table sorts by (the default: depth, deepest first).
GROUP_SORTS = ("depth", "in_flight", "name", "limit", "weight", "paused")
#: Groups one call of the walk reads (its server time grows with it).
WALK_PAGE = 50
#: The longest filter text.
MAX_FILTER = 200


@dataclass(frozen=True)
class _Walk:
    at: float
    groups: list[GroupInfo]
    complete: bool
    calls: int


def _key(sort: str) -> object:
    if sort == "name":
        return lambda g: g.name
    if sort == "limit":  # no limit sorts as the largest
        return lambda g: (g.limit is None, g.limit or 0, g.name)
    return lambda g: (getattr(g, sort), g.name)


class GroupReads(ConsoleCore):
    """``GET /api/queues/{q}/groups?sort=&desc=&filter=&offset=&n=``."""

    async def _walk(self, queue: str) -> _Walk:
        q = self.queue(queue)
        seen: dict[str, GroupInfo] = {}
        cursor, calls = "0", 0
        while True:
            # half the largest page: a page of 100 measured 9 ms on a loaded machine
            page = await q.groups_page(cursor, WALK_PAGE)
            calls += 1
            for g in page.groups:
                seen[g.name] = g  # SSCAN may answer a member twice
            cursor = page.cursor
            if cursor == "0" or len(seen) >= MAX_GROUPS_WALK:
                break
        return _Walk(time.monotonic(), list(seen.values()), cursor == "0", calls)

    async def _groups(self, queue: str) -> _Walk:
        walks = self.group_walks
        got = walks.get(queue)
        if isinstance(got, _Walk):
            age = time.monotonic() - got.at
            if age < GROUPS_TTL_S:
                return got
            if age < GROUPS_STALE_S:
                # a walk is tens of round trips: the requests of a busy page are not
                # made to wait for it; they get the last one (``age_ms`` says how old)
                # while one walk runs in the background and replaces it
                self._walk_behind(queue, got)
                return got
        if isinstance(got, asyncio.Task):
            # shielded: a waiter that goes away does not cancel the others' walk
            shared: _Walk = await asyncio.shield(got)
            return shared
        task = asyncio.ensure_future(self._walk(queue))
        walks[queue] = task

        def settle(done: asyncio.Task[_Walk]) -> None:
            # the walk replaces itself with its result (or goes, on an error), even
            # when every request that waited on it went away
            if walks.get(queue) is not done:
                return  # forgotten by a change meanwhile
            if done.cancelled() or done.exception() is not None:
                walks.pop(queue, None)
            else:
                walks[queue] = done.result()
            if len(walks) > QUEUE_CACHE:  # bounded memory: forget the oldest queue's walk
                walks.pop(next(iter(walks)))

        task.add_done_callback(settle)
        walk: _Walk = await asyncio.shield(task)
        return walk

    def _walk_behind(self, queue: str, stale: _Walk) -> None:
        """Start one background walk of ``queue`` (unless one runs) that replaces
        ``stale``; a change meanwhile (which forgets ``stale``) discards its result."""
        if queue in self.group_rewalks:
            return
        task = asyncio.ensure_future(self._walk(queue))
        self.group_rewalks[queue] = task

        def settle(done: asyncio.Task[_Walk]) -> None:
            if self.group_rewalks.get(queue) is done:
                del self.group_rewalks[queue]
            if done.cancelled() or done.exception() is not None:
                return  # the stale walk stays; the next request past the TTL tries again
            if self.group_walks.get(queue) is stale:
                self.group_walks[queue] = done.result()

        task.add_done_callback(settle)

    async def group_table(
        self,
        queue: str,
        sort: str = "depth",
        desc: bool = True,
        text: str = "",
        offset: int = 0,
        n: int = GROUPS_PAGE,
    ) -> Reply:
        """One page of the queue's groups, sorted by a column, filtered by name.

        Args:
            sort: a column of :data:`GROUP_SORTS`.
            desc: largest first (names: z to a).
            text: keep the groups whose name contains it (case-insensitive).
            offset: groups to skip (past the end: the last page).
            n: page size (1..``MAX_GROUPS_PAGE``).

        Returns:
            ``{"groups", "total", "matched", "offset", "n", "sort", "desc", "filter",
            "complete", "pending", "in_flight", "paused", "age_ms", "calls"}``:
            ``total`` groups read, ``matched`` those the filter keeps (``pending``,
            ``in_flight``, ``paused``: their sums), ``complete`` false when the walk
            stopped at ``MAX_GROUPS_WALK``, ``age_ms`` how old the shared walk is.

        Raises:
            InvalidArgument: a bad column, page or filter (before any I/O).
        """
        if sort not in GROUP_SORTS:
            raise InvalidArgument(f"sort must be one of {', '.join(GROUP_SORTS)}, got {sort!r}")
        if not 1 <= n <= MAX_GROUPS_PAGE:
            raise InvalidArgument(f"n must be within 1..{MAX_GROUPS_PAGE}, got {n}")
        if offset < 0:
            raise InvalidArgument(f"offset must be >= 0, got {offset}")
        if len(text) > MAX_FILTER:
            raise InvalidArgument(f"the filter is at most {MAX_FILTER} characters")
        walk = await self._groups(queue)
        needle = text.casefold()
        kept = [g for g in walk.groups if needle in g.name.casefold()]
        kept.sort(key=_key(sort), reverse=desc)  # type: ignore[arg-type]
        if kept and offset >= len(kept):
            offset = (len(kept) - 1) // n * n  # past the end: the last page
        return {
            "groups": [asdict(g) for g in kept[offset : offset + n]],
            "total": len(walk.groups),
            "matched": len(kept),
            "offset": offset,
            "n": n,
            "sort": sort,
            "desc": desc,
            "filter": text,
            "complete": walk.complete,
            "pending": sum(g.depth for g in kept),
            "in_flight": sum(g.in_flight for g in kept),
            "paused": sum(g.paused for g in kept),
            "age_ms": int((time.monotonic() - walk.at) * 1000),
            "calls": walk.calls,
        }
