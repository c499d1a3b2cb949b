"""The console's core: one client, a facade per queue and actor, the read-only switch.

:class:`ConsoleCore` is what every group of handlers builds on (the reads, the event
relay, the verbs: see :mod:`echomq.console.handlers`, which puts them together as
:class:`~echomq.console.handlers.Console`).

**Who acts.** Every verb a handler calls names an actor in the queue's audit journal:
the one set with :func:`acting_as` for the request (the app sets the logged-in user,
``console:<user>@<address>``), else ``console``. Each actor gets its own facade of a
queue (the actor is part of a facade's context), from a bounded cache.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import OrderedDict
from collections.abc import Iterator
from contextvars import ContextVar
from typing import Any

import redis.asyncio

from ..connect import async_client, cluster_mode
from ..discovery import QueueDirectory, server_label
from ..errors import EchoMQError
from ..queue import DEFAULT_URL, AsyncQueue
from ..views import LenientJson
from .event_fanout import Fanout
from .limits import DEFAULT_ACTOR, HISTORY_TTL_S, POOL_SIZE, POOL_WAIT_S, QUEUE_CACHE
from .shared_reads import SharedReads

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


class ConsoleCore:
    """What every handler of the console shares: the client, the queues' facades, the
    directory of queues found so far and the read-only switch.

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
        #: Each queue's last walk of its groups (or the walk in flight), shared by every
        #: request for a few seconds (see :mod:`.group_reads`).
        self.group_walks: dict[str, Any] = {}
        #: The background walks replacing a walk past its interval (one per queue).
        self.group_rewalks: dict[str, asyncio.Task[Any]] = {}
        #: Reads shared between identical requests (off until ``create_app`` sets it).
        self.shared_reads = SharedReads()
        #: The history series' reads, shared per span (see :mod:`.queue_reads`).
        self.history_reads = {span: SharedReads(ttl) for span, ttl in HISTORY_TTL_S.items()}
        #: The event streams' shared subscriptions (see :mod:`.event_relay`).
        self._fanout: Fanout | None = None

    def forget_groups(self, queue: str) -> None:
        """Drop the queue's shared groups walk (after a change to a group)."""
        self.group_walks.pop(queue, None)

    def forget_reads(self, queue: str) -> None:
        """Drop every shared read of the queue (after any change to it)."""
        self.forget_groups(queue)
        self.shared_reads.forget(queue)
        for reads in self.history_reads.values():
            reads.forget(queue)

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
        """Stop the shared subscriptions; close the client if this console created it."""
        if self._fanout is not None:
            await self._fanout.aclose()
            self._fanout = None
        for task in list(self.group_rewalks.values()):
            task.cancel()
        self.group_rewalks.clear()
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
