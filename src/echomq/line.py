"""A runner's own connection, on which it sends its commands directly.

redis-py's ``execute_command`` does bookkeeping on every call: a pool checkout that
polls the socket, a retry closure, observability hooks, the parse of a special
command. On the 2-core machines we measure on that costs about 30 µs a call, more
than the server's own work for most verbs, and a third of one-by-one enqueue.
A runner therefore keeps one connection of its own, made from the client's own
connection settings, and on it packs, writes and reads with redis-py's connection
methods. The replies get the client's response callbacks, so a plan sees exactly what
``execute_command`` (or a pipeline) would have handed it.

A line declines (the caller then uses the client's own path) when:

- the client is not a plain one: a cluster client, a pool of another kind (Sentinel),
  a client-side cache, a single-connection client;
- the line is busy: another thread, or another task on the loop, is using it;
- the connection fails: the line drops the connection and the caller re-sends the
  command through the client, under the client's retry policy, just as redis-py's
  own retry would re-send it.

A line is made per process and, for asyncio, per event loop: after a fork, or on
another loop, it starts a fresh connection rather than share a socket.
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Sequence
from typing import Any

import hiredis
import redis
import redis.asyncio

#: What a line answers when it declined; the caller then uses the client.
DECLINED: Any = object()

_PLAIN_POOLS = (
    redis.ConnectionPool,
    redis.BlockingConnectionPool,
    redis.asyncio.ConnectionPool,
    redis.asyncio.BlockingConnectionPool,
)
_DROPPED = (redis.ConnectionError, redis.TimeoutError, OSError)

Command = Sequence[Any]

# Bumped in a forked child, so a line knows its connection is the parent's without
# asking the kernel for its pid on every call.
_forks = 0


def _forked() -> None:
    global _forks
    _forks += 1


os.register_at_fork(after_in_child=_forked)


def _packer(kwargs: dict[str, Any]) -> Any:
    """hiredis's packer (C) when the connection encodes text as strict UTF-8, which is
    what hiredis does; otherwise None and redis-py's own packer is used."""
    if kwargs.get("encoding", "utf-8").lower().replace("_", "-") not in ("utf-8", "utf8"):
        return None
    if kwargs.get("encoding_errors", "strict") != "strict":
        return None
    return getattr(hiredis, "pack_command", None)  # hiredis >= 2.1


def _pack(pack: Any, conn: Any, cmd: Command) -> Any:
    return [pack(cmd)] if pack is not None else conn.pack_command(*cmd)


def _pack_all(pack: Any, conn: Any, cmds: Sequence[Command]) -> Any:
    # one buffer, so the batch leaves in one write (a list is one sendall per item)
    return [b"".join([pack(cmd) for cmd in cmds])] if pack is not None else conn.pack_commands(cmds)


def _settings(client: Any) -> tuple[Any, dict[str, Any]] | None:
    """The connection class and settings a line copies, or None to always decline."""
    pool: Any = getattr(client, "connection_pool", None)
    if type(pool) not in _PLAIN_POOLS or getattr(client, "connection", None) is not None:
        return None
    if getattr(pool, "cache", None) is not None:
        return None
    return pool.connection_class, dict(pool.connection_kwargs)


class _Replies:
    """Applies the client's response callbacks, as its own read path does."""

    def __init__(self, client: Any) -> None:
        self._callbacks = getattr(client, "response_callbacks", {})

    def one(self, name: Any, reply: Any) -> Any:
        callback = self._callbacks.get(name)
        return reply if callback is None else callback(reply)

    def each(self, cmds: Sequence[Command], replies: list[Any]) -> list[Any]:
        return [
            r if isinstance(r, redis.ResponseError) else self.one(cmd[0], r)
            for cmd, r in zip(cmds, replies)
        ]


class SyncLine:
    """A sync runner's connection (thread-safe: a busy line declines)."""

    def __init__(self, client: Any) -> None:
        self._settings = _settings(client)
        self._replies = _Replies(client)
        self._pack = None if self._settings is None else _packer(self._settings[1])
        self._lock = threading.Lock()
        self._conn: Any = None
        self._forks = _forks

    def _take(self) -> Any:
        """The connection, with the lock held; None (lock not held) to decline."""
        if self._settings is None or not self._lock.acquire(blocking=False):
            return None
        if self._forks != _forks:  # forked: the parent's socket is not ours
            self._conn, self._forks = None, _forks
        if self._conn is None:
            cls, kwargs = self._settings
            self._conn = cls(**kwargs)
        return self._conn

    def call(self, cmd: Command) -> Any:
        """One command's reply, or :data:`DECLINED`.

        Raises:
            redis.ResponseError: the server's error reply (the connection stays good).
        """
        conn = self._take()
        if conn is None:
            return DECLINED
        try:
            conn.send_packed_command(_pack(self._pack, conn, cmd))
            reply = conn.read_response()
        except redis.ResponseError:
            raise
        except _DROPPED:
            conn.disconnect()
            return DECLINED
        except BaseException:
            conn.disconnect()  # interrupted between write and read: unusable
            raise
        finally:
            self._lock.release()
        return self._replies.one(cmd[0], reply)

    def batch(self, cmds: Sequence[Command]) -> Any:
        """Each command's reply or error, in one pipelined write; or :data:`DECLINED`."""
        conn = self._take()
        if conn is None:
            return DECLINED
        replies: list[Any] = []
        try:
            conn.send_packed_command(_pack_all(self._pack, conn, cmds))
            for _ in cmds:
                try:
                    replies.append(conn.read_response())
                except redis.ResponseError as exc:
                    replies.append(exc)
        except _DROPPED:
            conn.disconnect()
            return DECLINED
        except BaseException:
            conn.disconnect()
            raise
        finally:
            self._lock.release()
        return self._replies.each(cmds, replies)

    def close(self) -> None:
        """Close the connection (a later call opens a new one)."""
        with self._lock:
            conn, self._conn = self._conn, None
        if conn is not None and self._forks == _forks:
            conn.disconnect()


class AsyncLine:
    """An async runner's connection (a line in use by another task declines)."""

    def __init__(self, client: Any) -> None:
        self._settings = _settings(client)
        self._replies = _Replies(client)
        self._pack = None if self._settings is None else _packer(self._settings[1])
        self._busy = False
        self._conn: Any = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._forks = _forks

    def _take(self) -> Any:
        """The connection, marked busy; None to decline."""
        if self._settings is None or self._busy:
            return None
        loop = asyncio.get_running_loop()
        if self._loop is not loop or self._forks != _forks:
            # another loop (or a fork): that connection's streams are not ours
            self._conn, self._loop, self._forks = None, loop, _forks
        if self._conn is None:
            cls, kwargs = self._settings
            self._conn = cls(**kwargs)
        self._busy = True
        return self._conn

    async def _drop(self, conn: Any) -> None:
        self._conn = None
        await conn.disconnect(nowait=True)

    async def call(self, cmd: Command) -> Any:
        """As :meth:`SyncLine.call`."""
        conn = self._take()
        if conn is None:
            return DECLINED
        try:
            await conn.send_packed_command(_pack(self._pack, conn, cmd))
            reply = await conn.read_response()
        except redis.ResponseError:
            raise
        except _DROPPED:
            await self._drop(conn)
            return DECLINED
        except BaseException:
            await self._drop(conn)  # cancelled between write and read: unusable
            raise
        finally:
            self._busy = False
        return self._replies.one(cmd[0], reply)

    async def batch(self, cmds: Sequence[Command]) -> Any:
        """As :meth:`SyncLine.batch`."""
        conn = self._take()
        if conn is None:
            return DECLINED
        replies: list[Any] = []
        try:
            await conn.send_packed_command(_pack_all(self._pack, conn, cmds))
            for _ in cmds:
                try:
                    replies.append(await conn.read_response())
                except redis.ResponseError as exc:
                    replies.append(exc)
        except _DROPPED:
            await self._drop(conn)
            return DECLINED
        except BaseException:
            await self._drop(conn)
            raise
        finally:
            self._busy = False
        return self._replies.each(cmds, replies)

    async def aclose(self) -> None:
        """Close the connection (a later call opens a new one)."""
        conn, self._conn = self._conn, None
        if conn is not None and self._loop is asyncio.get_running_loop():
            await conn.disconnect()
