"""The worker's connections: an :class:`AsyncQueue` for its verbs, and one more
connection that may sit blocked on the wake list without holding up anything else
(the :class:`~echomq.worker.waker.Waker` waits on it)."""

from __future__ import annotations

from typing import Any

import redis
import redis.asyncio

from ..connect import async_client, async_client_for, is_cluster
from ..errors import InvalidArgument
from ..queue import DEFAULT_URL, AsyncQueue, Queue

# Connection settings that mean the same to the sync and the async client.
_PORTABLE = {
    "host",
    "port",
    "db",
    "username",
    "password",
    "path",
    "socket_timeout",
    "socket_connect_timeout",
    "client_name",
    "encoding",
    "encoding_errors",
    "decode_responses",
    "protocol",
}
_ASYNC_CLASS = {
    "Connection": redis.asyncio.Connection,
    "SSLConnection": redis.asyncio.SSLConnection,
    "UnixDomainSocketConnection": redis.asyncio.UnixDomainSocketConnection,
}


def async_queue_for(
    source: str | Queue | AsyncQueue, url: str | None, executor: str | None = None
) -> tuple[AsyncQueue, bool]:
    """The async queue a worker runs on, and whether the worker made (and so closes)
    its client. A sync queue on a cluster gets an asyncio cluster client of its own
    (one per worker: a cluster client re-reads the slot map after any node's error,
    so one shared by many workers stalls them all during a failover).

    Raises:
        InvalidArgument: a sync queue whose client cannot be mirrored (pass ``url=``).
    """
    if isinstance(source, AsyncQueue):
        return source, False
    if isinstance(source, str):
        return AsyncQueue(source, url=url or DEFAULT_URL, executor=executor), True
    # a sync Queue: the same server, serializer and default max_attempts, async
    ctx = source.ctx
    if url is not None:
        client: Any = async_client(url)
    elif is_cluster(source.client):
        client = async_client_for(source.client)  # a client of the worker's own
    else:
        client = _mirror(source.client)
    aq = AsyncQueue(
        source.name,
        client=client,
        serializer=ctx.serializer,
        max_attempts=ctx.max_attempts,
        executor=executor or ctx.executor.choice,
    )
    return aq, True


def _mirror(sync_client: Any) -> redis.asyncio.Redis:
    pool = getattr(sync_client, "connection_pool", None)
    cls = _ASYNC_CLASS.get(pool.connection_class.__name__) if pool is not None else None
    if pool is None or cls is None:
        raise InvalidArgument("cannot reuse this client's connection for a worker: pass url=")
    kwargs = {
        k: v
        for k, v in pool.connection_kwargs.items()
        if k in _PORTABLE or (k.startswith("ssl_") and cls is redis.asyncio.SSLConnection)
    }
    pool = redis.asyncio.ConnectionPool(connection_class=cls, **kwargs)
    return redis.asyncio.Redis(connection_pool=pool)


def blocking_client(aq: AsyncQueue) -> Any:
    """A client of its own for ``BLPOP`` on the wake list (a cluster client is shared:
    it keeps a pool per node and routes the blocking call by key)."""
    pool = getattr(aq.client, "connection_pool", None)
    if pool is None:
        return aq.client
    kwargs = dict(pool.connection_kwargs)
    # a blocked read must outlive the beat's BLPOP timeout
    kwargs["socket_timeout"] = None
    return redis.asyncio.Redis(
        connection_pool=redis.asyncio.ConnectionPool(
            connection_class=pool.connection_class, max_connections=2, **kwargs
        )
    )
