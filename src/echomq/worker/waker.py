"""The worker's connections: an :class:`AsyncQueue` for its verbs, and one more
connection that may sit blocked on the wake list without holding up anything else."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any

import redis
import redis.asyncio

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


def async_queue_for(source: str | Queue | AsyncQueue, url: str | None) -> tuple[AsyncQueue, bool]:
    """The async queue a worker runs on, and whether the worker made (and so closes)
    its client.

    Raises:
        InvalidArgument: a sync queue whose client cannot be mirrored (pass ``url=``).
    """
    if isinstance(source, AsyncQueue):
        return source, False
    if isinstance(source, str):
        return AsyncQueue(source, url=url or DEFAULT_URL), True
    # a sync Queue: the same server, serializer and default max_attempts, async
    ctx = source.ctx
    if url is not None:
        client: Any = redis.asyncio.Redis.from_url(url)
    else:
        client = _mirror(source.client)
    aq = AsyncQueue(
        source.name, client=client, serializer=ctx.serializer, max_attempts=ctx.max_attempts
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


@dataclass
class Woke:
    """What an idle wait ended with.

    Attributes:
        gate: the pause-gate read made right after the ``BLPOP`` (when no claim rode
            along): the caller claims, or not, by it.
        claim: the reply of the claim that rode behind the ``BLPOP`` (``armed``).
        armed: whether a claim rode along; ``claim`` is then its reply, ``None`` when
            the transaction was dropped because the pause gate moved meanwhile.
    """

    armed: bool
    gate: Any = None
    claim: Any = None


class Waker:
    """The idle worker's wait on the wake list, on a connection of its own.

    On a plain client the wait takes two round trips, and a job that arrives costs
    the worker no client round trip at all after the wake:

    1. ``WATCH meta`` and the pause-gate read (``HEXISTS meta paused``), made before
       the wait: the separate gate, read in its own round trip.
    2. While the gate reads open: ``BLPOP`` on the wake list with ``MULTI``, the claim
       script call and ``EXEC`` written right behind it. The server runs them the
       moment the ``BLPOP`` returns (a client's commands run in order). The claim
       script is the plain one, with no pause logic; the ``WATCH`` drops the whole
       transaction if the gate moved since it was read, so a claim never runs on a
       queue paused after the read. The caller then reads the gate again.

    While the gate reads closed, the wait is ``BLPOP`` with the gate read behind it,
    and no claim rides along. A cluster client (no single pool) gets that form too,
    as a pipeline.

    ``state`` tells a stopping worker how to end a wait: ``"armed"`` (blocked with a
    claim behind) must be unblocked, not cancelled, or its claim could lease jobs no
    one reads; any other state can be cancelled.
    """

    def __init__(self, blocker: Any, wake_key: str, gate: tuple[Any, ...]) -> None:
        """``gate`` is the pause-gate read (``plans.gate_read``): a read of the meta
        hash, which is the key watched."""
        self.blocker = blocker
        self.wake_key, self.gate = wake_key, gate
        self.meta_key = gate[1]
        self.state = "idle"
        self.client_id: int | None = None  # the blocking connection's, for CLIENT UNBLOCK

    async def wait(self, timeout_s: float, claim: tuple[Any, ...]) -> Woke:
        """Wait for a wake token or ``timeout_s``; send ``claim`` behind it if the gate
        is open."""
        pool = getattr(self.blocker, "connection_pool", None)
        if pool is None:
            return await self._pipelined(timeout_s)
        conn = await pool.get_connection()
        try:
            self.state = "gating"
            await conn.send_packed_command(
                conn.pack_commands([("CLIENT", "ID"), ("WATCH", self.meta_key), self.gate])
            )
            self.client_id = int(await conn.read_response())
            await conn.read_response()  # OK
            if not int(await conn.read_response()):
                return await self._armed(conn, timeout_s, claim)
            # closed: wait with no claim behind, the gate read again after the BLPOP
            self.state = "blocked"
            await conn.send_packed_command(
                conn.pack_commands([("UNWATCH",), ("BLPOP", self.wake_key, timeout_s), self.gate])
            )
            await conn.read_response()  # OK
            await conn.read_response()  # the token, or nil after the timeout
            reply = await conn.read_response()
        except BaseException:
            # cancelled or cut off between replies: the connection is unusable
            await conn.disconnect()
            raise
        finally:
            self.state = "idle"
            await pool.release(conn)
        return Woke(armed=False, gate=reply)

    async def _armed(self, conn: Any, timeout_s: float, claim: tuple[Any, ...]) -> Woke:
        self.state = "armed"
        await conn.send_packed_command(
            conn.pack_commands([("BLPOP", self.wake_key, timeout_s), ("MULTI",), claim, ("EXEC",)])
        )
        await conn.read_response()  # the token, or nil after the timeout or an unblock
        self.state = "claiming"  # the claim has run: its reply must be read
        await conn.read_response()  # OK
        with contextlib.suppress(redis.ResponseError):
            # refused when queued: EXEC then answers EXECABORT, read below
            await conn.read_response()  # QUEUED
        try:
            replies = await conn.read_response()
        except redis.ResponseError as exc:
            return Woke(armed=True, claim=exc)
        return Woke(armed=True, claim=None if replies is None else replies[0])

    async def _pipelined(self, timeout_s: float) -> Woke:
        self.state = "blocked"
        try:
            pipe = self.blocker.pipeline(transaction=False)
            pipe.blpop([self.wake_key], timeout=timeout_s)
            pipe.execute_command(*self.gate)
            reply = (await pipe.execute())[1]
        finally:
            self.state = "idle"
        return Woke(armed=False, gate=reply)

    async def unblock(self, client: Any) -> None:
        """End an armed wait now (as if it timed out): its claim runs and is read."""
        if self.state == "armed" and self.client_id is not None:
            await client.client_unblock(self.client_id)
