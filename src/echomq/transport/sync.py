"""The sync half: a transport that moves a sync client's bytes, and the runner that
drives plans through it.

A mirror of :mod:`.aio` (the asyncio half), method for method; what differs is the
waiting (a lock where the asyncio half has a busy flag) and ``await``.
``tests/test_transport_mirror.py`` checks the two stay one logic.
"""

from __future__ import annotations

import threading
from typing import Any, TypeVar

import redis

from .. import errors
from ..native import Executor
from ..scripts import Arg, Op, Plan
from . import cluster
from .base import RunnerBase, TransportBase
from .connections import DROPPED, forks, make, packed, shape
from .exchange import Exchange, NoReply, NotSent, Request, exchange, fence

T = TypeVar("T")


class SyncTransport(TransportBase):
    """Sends a sync client's commands (thread-safe).

    Args:
        client: a ``redis.Redis`` (or ``redis.RedisCluster``).
        fast: keep a connection for idempotent operations (default: :data:`FAST_PATH`).
    """

    def __init__(self, client: Any, *, fast: bool | None = None) -> None:
        super().__init__(client, fast=fast)
        self._lock = threading.Lock()
        self._forks = forks()

    def _checkout(self) -> Any:
        return self.pool.get_connection("_") if self._name else self.pool.get_connection()

    def _io(self, conn: Any, cmds: list[tuple[Arg, ...]]) -> list[Any]:
        try:
            conn.send_packed_command(packed(conn, cmds))
        except DROPPED as exc:
            conn.disconnect()
            raise NotSent(str(exc)) from exc
        got: list[Any] = []
        try:
            for _ in cmds:
                try:
                    got.append(conn.read_response())
                except redis.ResponseError as exc:
                    got.append(exc)
        except DROPPED as exc:
            conn.disconnect()
            raise NoReply(shape(self._callbacks, cmds, got), exc) from exc
        except BaseException:
            conn.disconnect()  # interrupted between write and read: unusable
            raise
        return shape(self._callbacks, cmds, got)

    def _kept_conn(self) -> Any:
        """The kept connection with the lock held, or None (lock not held)."""
        if not self._lock.acquire(blocking=False):
            return None
        if self._forks != forks():  # forked: the parent's socket is not ours
            self._kept, self._forks = None, forks()
        if self._kept is None:
            self._kept = make(self.pool)
        return self._kept

    def _release_kept(self) -> None:
        self._lock.release()

    def send(self, req: Request) -> list[Any]:
        """Write ``req``'s commands and read every reply.

        Raises:
            NotSent: nothing reached the server.
            NoReply: the write went out and the replies stopped.
        """
        if self.pool is None:
            return cluster.send(self.client, req)
        if self.fast and req.fast:
            try:
                conn = self._kept_conn()
            except DROPPED as exc:
                raise NotSent(str(exc)) from exc
            if conn is not None:
                try:
                    return self._io(conn, req.cmds)
                finally:
                    self._release_kept()
        try:
            conn = self._checkout()
        except DROPPED as exc:
            raise NotSent(str(exc)) from exc
        try:
            return self._io(conn, req.cmds)
        finally:
            self.pool.release(conn)

    def run(self, ex: Exchange) -> Any:
        """Drive an exchange to its result (reported to the outage log)."""
        # reported inline (Outage.raised), not by a context manager: 11,000 Ir a call less
        try:
            req = next(ex)
            while True:
                try:
                    replies = self.send(req)
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

    def close(self) -> None:
        """Give the kept connection back (a later call takes a new one)."""
        with self._lock:
            conn, self._kept = self._kept, None
            if conn is not None and self._forks == forks():
                conn.disconnect()


class SyncRunner(RunnerBase[SyncTransport]):
    """Drives plans on a sync client through a :class:`SyncTransport`."""

    def __init__(
        self, client: Any, executor: Executor | None = None, *, fast: bool | None = None
    ) -> None:
        super().__init__(client, SyncTransport(client, fast=fast), executor)

    def fence(self) -> None:
        """Check ``{emq}:version`` once per runner (see
        :func:`~echomq.transport.exchange.fence`); on a cluster, deferred while its
        node is unreachable (:class:`~echomq.transport.cluster.Deferral`)."""
        if self._fence_due():
            with self._fencing():
                self.transport.run(fence(self.executor))

    def execute(self, op: Op) -> Any:
        """Run one operation and return its reply (errors mapped, see
        :func:`~echomq.transport.exchange.exchange`)."""
        return self.transport.run(exchange(op, self.executor))

    def drive(self, plan: Plan[T]) -> T:
        """Run ``plan`` to completion and return its result.

        The plan's first step (where it checks its arguments) runs before the version
        fence, so a malformed id or name raises before anything is sent.
        """
        try:
            op = next(plan)
            if not self._fenced:  # the fence's own check, without its call once passed
                self.fence()
            while True:
                try:
                    reply = self.execute(op)
                except errors.EchoMQError as exc:
                    op = plan.throw(exc)
                else:
                    op = plan.send(reply)
        except StopIteration as stop:
            result: T = stop.value
            return result

    def close(self) -> None:
        """Give back the transport's kept connection (the client is the caller's)."""
        self.transport.close()
