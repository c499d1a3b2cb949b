"""The asyncio half: a transport that moves an asyncio client's bytes, the runner
that drives plans through it, and the held connection of the worker's blocking wait.

A mirror of :mod:`.sync`, method for method; what differs is the waiting (a busy
flag and the event loop's identity where the sync half has a lock) and ``await``.
``tests/test_transport_mirror.py`` checks the two stay one logic.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence
from typing import Any, TypeVar

import redis

from .. import errors
from ..native import Executor
from ..scripts import Arg, Op, Plan
from . import cluster
from .base import RunnerBase, TransportBase
from .connections import DROPPED, forks, make, packed, shape, takes_name
from .exchange import Exchange, NoReply, NotSent, Request, exchange, fence

T = TypeVar("T")


class HeldConnection:
    """One pooled connection held for an exchange of several steps, so a blocking
    exchange leaves through the transport too: the idle worker's wait (``WATCH`` and
    the pause-gate read, then ``BLPOP`` with a claim written behind it) sends on it
    and reads its replies in order.

    Leaving the block with an exception (a cancel, a cut between replies) drops the
    connection, whose replies are out of step; the pool gets it back either way.
    Nothing here re-sends: the caller owns the exchange's meaning.
    """

    def __init__(self, pool: Any) -> None:
        self.pool = pool
        self.conn: Any = None

    async def __aenter__(self) -> HeldConnection:
        return await self.take()

    async def __aexit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        await self.give_back(broken=exc_type is not None)

    async def take(self) -> HeldConnection:
        """Take a connection from the pool (for a holder that keeps it past one block:
        the idle worker's waits)."""
        if takes_name(self.pool):
            self.conn = await self.pool.get_connection("_")
        else:
            self.conn = await self.pool.get_connection()
        return self

    async def give_back(self, *, broken: bool) -> None:
        """Give the connection back to the pool, cut first when ``broken`` (its
        replies may be out of step)."""
        try:
            if broken:
                await self.conn.disconnect()
        finally:
            await self.pool.release(self.conn)

    async def send(self, *cmds: Sequence[Arg]) -> None:
        """Write ``cmds`` in one buffer."""
        await self.conn.send_packed_command(packed(self.conn, [tuple(c) for c in cmds]))

    async def read(self, n: int) -> list[Any]:
        """The next ``n`` replies, an error reply as its exception (the parser has
        read it whole, so the connection stays in step)."""
        out: list[Any] = []
        for _ in range(n):
            try:
                out.append(await self.conn.read_response())
            except redis.ResponseError as exc:
                out.append(exc)
        return out


class AsyncTransport(TransportBase):
    """Sends an asyncio client's commands (a kept connection in use by another task
    makes the call take a pooled one).

    Args:
        client: a ``redis.asyncio.Redis`` (or ``RedisCluster``).
        fast: keep a connection for idempotent operations (default: :data:`FAST_PATH`).
    """

    def __init__(self, client: Any, *, fast: bool | None = None) -> None:
        super().__init__(client, fast=fast)
        self._busy = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._forks = forks()

    async def _checkout(self) -> Any:
        return await (self.pool.get_connection("_") if self._name else self.pool.get_connection())

    async def _io(self, conn: Any, cmds: list[tuple[Arg, ...]]) -> list[Any]:
        try:
            await conn.send_packed_command(packed(conn, cmds))
        except DROPPED as exc:
            await conn.disconnect(nowait=True)
            raise NotSent(str(exc)) from exc
        got: list[Any] = []
        try:
            for _ in cmds:
                try:
                    got.append(await conn.read_response())
                except redis.ResponseError as exc:
                    got.append(exc)
        except DROPPED as exc:
            await conn.disconnect(nowait=True)
            raise NoReply(shape(self._callbacks, cmds, got), exc) from exc
        except BaseException:
            await conn.disconnect(nowait=True)  # cancelled between write and read
            raise
        return shape(self._callbacks, cmds, got)

    async def _kept_conn(self) -> Any:
        """The kept connection, marked busy; None when busy."""
        if self._busy:
            return None
        loop = asyncio.get_running_loop()
        if self._loop is not loop or self._forks != forks():
            # another loop (or a fork): that connection's streams are not ours
            self._kept, self._loop, self._forks = None, loop, forks()
        self._busy = True
        if self._kept is None:
            self._kept = make(self.pool)
        return self._kept

    def _release_kept(self) -> None:
        self._busy = False

    async def send(self, req: Request) -> list[Any]:
        """As :meth:`SyncTransport.send`."""
        if self.pool is None:
            return await cluster.send_async(self.client, req)
        if self.fast and req.fast:
            try:
                conn = await self._kept_conn()
            except DROPPED as exc:
                raise NotSent(str(exc)) from exc
            if conn is not None:
                try:
                    return await self._io(conn, req.cmds)
                finally:
                    self._release_kept()
        try:
            conn = await self._checkout()
        except DROPPED as exc:
            raise NotSent(str(exc)) from exc
        try:
            return await self._io(conn, req.cmds)
        finally:
            await self.pool.release(conn)

    async def run(self, ex: Exchange) -> Any:
        """Drive an exchange to its result (reported to the outage log)."""
        # reported inline (Outage.raised), not by a context manager: 11,000 Ir a call less
        try:
            req = next(ex)
            while True:
                try:
                    replies = await self.send(req)
                except (NotSent, NoReply) as exc:
                    self.outage.transient(exc)
                    req = ex.throw(exc)
                else:
                    req = ex.send(replies)
        except StopIteration as stop:
            self.outage.ok()
            return stop.value
        except BaseException as exc:
            self.outage.raised(exc)
            raise

    async def aclose(self) -> None:
        """Give the kept connection back (a later call takes a new one)."""
        conn, self._kept = self._kept, None
        if conn is not None and self._loop is asyncio.get_running_loop():
            await conn.disconnect()


class AsyncRunner(RunnerBase[AsyncTransport]):
    """Drives plans on an asyncio client through an :class:`AsyncTransport`."""

    def __init__(
        self, client: Any, executor: Executor | None = None, *, fast: bool | None = None
    ) -> None:
        super().__init__(client, AsyncTransport(client, fast=fast), executor)

    async def fence(self) -> None:
        """As :meth:`SyncRunner.fence`."""
        if self._fence_due():
            if self._deferral.on_cluster:
                # read the slot map once, under the client's own lock: many first
                # calls at once would each start reading it and close each other's
                # connections
                with contextlib.suppress(*cluster.CLUSTER_LOST):
                    await self.client.initialize()
            with self._fencing():
                await self.transport.run(fence(self.executor))

    async def execute(self, op: Op) -> Any:
        """Run one operation and return its reply (errors mapped)."""
        return await self.transport.run(exchange(op, self.executor))

    async def drive(self, plan: Plan[T]) -> T:
        """Run ``plan`` to completion and return its result (checks before the fence)."""
        try:
            op = next(plan)
            if not self._fenced:  # the fence's own check, without its call once passed
                await self.fence()
            while True:
                try:
                    reply = await self.execute(op)
                except errors.EchoMQError as exc:
                    op = plan.throw(exc)
                else:
                    op = plan.send(reply)
        except StopIteration as stop:
            result: T = stop.value
            return result

    async def aclose(self) -> None:
        """Give back the transport's kept connection (the client is the caller's)."""
        await self.transport.aclose()
