"""Finding the queues on a server: a bounded SCAN over ``emq:{*}:*``.

One module for every operator tool: the CLI calls :func:`discover_queues` (one bounded
walk), the console keeps a :class:`QueueDirectory` (an incremental walk, a bounded
chunk per request). Job rows, logs and locks (``emq:{q}:job:...``) are the bulk of
any keyspace, so the match skips keys whose suffix starts with ``j``; every queue
still shows through one of its sets, its meta hash or its metrics.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from .connect import is_cluster
from .context import as_str
from .keyspace import ANY_QUEUE_PATTERN, queue_of_key

#: Every key of every queue except job rows and their sub-keys (``job:...``).
QUEUE_KEYS_MATCH = ANY_QUEUE_PATTERN.removesuffix("*") + "[^j]*"
#: Keys examined per SCAN call.
SCAN_COUNT = 1000
#: Keys examined in all before a one-shot search stops (a bound on the server work).
DEFAULT_SCAN_LIMIT = 1_000_000
#: SCAN calls one incremental :meth:`QueueDirectory.refresh` makes at most.
SCAN_STEPS = 20


def server_label(url: str) -> str:
    """The server a URL names, as every tool shows it: ``host:port/db`` (never the password).

    A Unix socket shows as ``unix:<path>``; TLS adds ``(tls)``.
    """
    parts = urlsplit(url)
    if parts.scheme == "unix":
        return f"unix:{parts.path}"
    host = parts.hostname or "127.0.0.1"
    if ":" in host:
        host = f"[{host}]"
    try:
        port = parts.port or 6379
    except ValueError:
        port = 6379
    db = parts.path.strip("/") or "0"
    tls = " (tls)" if parts.scheme.startswith("rediss") else ""
    return f"{host}:{port}/{db}{tls}"


def queue_names(keys: Iterable[Any]) -> set[str]:
    """The queue names the keys of one SCAN reply belong to."""
    found: set[str] = set()
    for key in keys:
        name = queue_of_key(as_str(key))
        if name is not None:
            found.add(name)
    return found


@dataclass(frozen=True)
class Discovery:
    """What a search found.

    Attributes:
        queues: the queue names, sorted.
        complete: ``False`` when the scan stopped at its limit before the end.
    """

    queues: list[str]
    complete: bool


def discover_queues(client: Any, scan_limit: int = DEFAULT_SCAN_LIMIT) -> Discovery:
    """Every queue with at least one key on the server, examining at most ``scan_limit`` keys.

    On a cluster every primary is walked in turn (its own ``SCAN``), the limit
    shared between them.

    Args:
        client: a ``redis.Redis`` or a ``RedisCluster``.
        scan_limit: stop after this many keys were examined by the server(s).

    Returns:
        The names found and whether the scan reached the end (of every primary).
    """
    found: set[str] = set()
    examined = 0
    for node in _primaries(client):
        cursor: Any = 0
        while True:
            count = min(SCAN_COUNT, scan_limit)
            cursor, keys = _scan(client, node, cursor, count)
            examined += count
            found |= queue_names(keys)
            if int(cursor) == 0:
                break
            if examined >= scan_limit:
                return Discovery(sorted(found), False)
    return Discovery(sorted(found), True)


def _primaries(client: Any) -> list[Any]:
    """The nodes to walk: each primary of a cluster (by its documented
    ``get_primaries``), or ``[None]`` for a single server."""
    return list(client.get_primaries()) if is_cluster(client) else [None]


def _scan(client: Any, node: Any, cursor: Any, count: int) -> Any:
    args = ("SCAN", cursor, "MATCH", QUEUE_KEYS_MATCH, "COUNT", count)
    if node is None:
        return client.scan(cursor=cursor, match=QUEUE_KEYS_MATCH, count=count)
    return _one(client.execute_command(*args, target_nodes=node))


async def _ascan(client: Any, node: Any, cursor: Any, count: int) -> Any:
    if node is None:
        return await client.scan(cursor, match=QUEUE_KEYS_MATCH, count=count)
    args = ("SCAN", cursor, "MATCH", QUEUE_KEYS_MATCH, "COUNT", count)
    return _one(await client.execute_command(*args, target_nodes=node))


def _one(reply: Any) -> tuple[Any, Any]:
    """A node's ``SCAN`` reply, as ``(cursor, keys)`` (a cluster client may hand it, or
    its cursor, back keyed by node name)."""
    if isinstance(reply, dict):
        (reply,) = reply.values()
    cursor, keys = reply[0], reply[1]
    if isinstance(cursor, dict):
        (cursor,) = cursor.values()
    return cursor, keys


class QueueDirectory:
    """The queues on the server, found by an incremental, bounded SCAN (asyncio).

    Each :meth:`refresh` runs at most ``steps`` SCAN calls from where the last one
    stopped, so a server holding millions of keys is never walked in one request.
    Names seen during a full pass replace the previous pass's names when the cursor
    wraps, so an obliterated queue drops out after one pass. On a cluster a pass walks
    every primary in turn (a cursor per primary).
    """

    def __init__(self, scan_count: int = SCAN_COUNT, steps: int = SCAN_STEPS) -> None:
        self.scan_count = scan_count
        self.steps = steps
        self._cursor = 0
        self._node = 0  # on a cluster: which primary the cursor walks
        self._known: set[str] = set()
        self._seen: set[str] = set()
        self._lock = asyncio.Lock()

    def forget(self, name: str) -> None:
        """Drop a queue at once (after it was obliterated)."""
        self._known.discard(name)
        self._seen.discard(name)

    async def refresh(self, client: Any) -> tuple[list[str], bool]:
        """Advance the scan one bounded chunk.

        Args:
            client: a ``redis.asyncio.Redis`` or ``redis.asyncio.cluster.RedisCluster``.

        Returns:
            ``(names, complete)``: the queue names known, sorted, and whether the
            last full pass finished in this call (so ``names`` is exact).
        """
        async with self._lock:
            if is_cluster(client):
                await client.initialize()  # the node list (a no-op once read)
            nodes = sorted(_primaries(client), key=lambda n: "" if n is None else n.name)
            for _ in range(self.steps):
                self._node %= len(nodes)
                cursor, keys = await _ascan(
                    client, nodes[self._node], self._cursor, self.scan_count
                )
                self._cursor = int(cursor)
                self._seen |= queue_names(keys)
                if self._cursor == 0:
                    self._node += 1
                    if self._node >= len(nodes):
                        self._node = 0
                        self._known, self._seen = self._seen, set()
                        return sorted(self._known), True
            return sorted(self._known | self._seen), False
