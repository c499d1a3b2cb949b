"""The one transport: every command a verb sends leaves through here.

A verb is a plan (:mod:`echomq.scripts`) that yields operations; a runner drives it
and hands each operation to its transport, which writes the commands on a connection
of the client's pool and reads the replies, with redis-py's documented API only
(``ConnectionPool.get_connection``/``release``, ``Connection.pack_commands``,
``send_packed_command``, ``read_response``, ``disconnect``).

**At most once.** The transport knows, for every failure, whether the commands left:

- the connection failed before the write (connect refused, a reset seen at the write):
  nothing ran, the commands are sent once more on a fresh connection;
- the write went out and no reply came (a reset or a timeout after the write): the
  outcome is unknown. An operation whose verb is idempotent on the server
  (:data:`RESEND`, one line per script, with the reason) is sent once more; any other
  raises :class:`~echomq.errors.OutcomeUnknown` carrying the job id, and is never sent
  again, by echomq or by redis-py: the transport does its own I/O, so the client's
  ``Retry`` policy only ever re-runs a *connect*, never a command.

**The fast path.** An idempotent operation (the hot path: enqueue, claim, complete,
extend, the pause gate) travels on one connection the transport keeps, made like the
pool's own (its documented ``connection_class`` and ``connection_kwargs``) but outside
it, so it never counts against the pool's ``max_connections`` and goes with the queue
when the queue is dropped. That skips the pool's per-call checkout (a lock and a
socket poll). Any other operation, or one that meets the kept connection busy (another
thread or task), takes a connection from the pool per call, whose checkout checks it
is still sound, so a server restart never turns a stale socket into an unknown
outcome. A pool of another kind (Sentinel) or with a client-side cache has no kept
connection. ``bench/spine.py``
measures both; ``EMQ_FAST_PATH=0`` in the environment turns the kept connection off.

A cluster client (no single pool) is driven through its ``execute_command``; its own
retry policy applies there (build it with retries off for at-most-once sending).

**Quiet recovery.** A failure the transport recovers from by itself is logged at
DEBUG. One that reaches the caller starts an *outage*: one WARNING line, then one
line "recovered after N s" at the next success; tracebacks only at DEBUG.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import os
import threading
import time
from collections.abc import Generator, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import redis
import redis.asyncio

from . import errors
from .connect import is_cluster
from .errors import InvalidJobId
from .ids import validate
from .keyspace import KEYSPACE_VERSION, VERSION_KEY
from .native import UNASKED, Executor
from .replies import outcome
from .scripts import (
    Arg,
    Batch,
    Cmd,
    Eval,
    Op,
    Plan,
    command,
    is_noscript,
    map_error,
    sharded_command,
)
from .transitions import RESEND as _RESEND

T = TypeVar("T")
log = logging.getLogger("echomq.transport")

#: Whether the kept connection is used (``EMQ_FAST_PATH=0`` turns it off).
FAST_PATH = os.environ.get("EMQ_FAST_PATH", "1").strip() not in ("0", "false", "no", "off")

#: Whether a script may be sent again after a write with no reply: declared once per
#: transition, with the reason, in :mod:`echomq.transitions`.
RESEND = _RESEND


def resendable(op: Eval | Cmd) -> bool:
    """Whether ``op`` may be sent again after a write with no reply. A plain command
    is a read (plans send every write as a script)."""
    if isinstance(op, Cmd):
        return True
    return RESEND.get(op.script.name, False)


def job_of(op: Eval | Cmd) -> str | None:
    """The job a verb is about: KEYS[2] is its row (``<base>job:<id>``), else a
    leading job id argument; ``None`` for a queue-scope verb."""
    if not isinstance(op, Eval):
        return None
    keys = op.keys
    if len(keys) >= 2 and keys[1].startswith(f"{keys[0]}job:"):
        return keys[1][len(keys[0]) + 4 :]
    if op.args and isinstance(op.args[0], str) and op.args[0].startswith("JOB"):
        try:
            return validate(op.args[0])
        except InvalidJobId:
            return None
    return None


class NotSent(Exception):
    """Nothing of the write reached the server (internal to the transport)."""


class NoReply(Exception):
    """The write went out and the replies stopped (internal to the transport).

    Attributes:
        got: the replies read before the cut, in order.
    """

    def __init__(self, got: list[Any], cause: BaseException) -> None:
        super().__init__(str(cause))
        self.got = got
        self.cause = cause


@dataclass(frozen=True)
class Request:
    """Commands to write in one go and read back, and whether the kept connection
    may carry them (only operations that may be re-sent)."""

    cmds: list[tuple[Arg, ...]]
    fast: bool


# What a transport yields to its driver: send these, give me the replies (each a
# reply or the redis.ResponseError in its place), or throw NotSent / NoReply.
Exchange = Generator[Request, list[Any], Any]


def native_command(op: Eval | Cmd, executor: Executor | None) -> tuple[Arg, ...]:
    """The command ``op`` sends: a script with a native twin goes as
    ``EMQ.<VERB> numkeys keys... args...`` once ``executor`` resolved to native
    (:mod:`echomq.native`), anything else as :func:`~echomq.scripts.command` builds it."""
    if executor is not None and isinstance(op, Eval):
        twin = executor.twin(op.script.name)
        if twin is not None:
            return (twin, len(op.keys), *op.keys, *op.args)
    return command(op)


def exchange(op: Op, executor: Executor | None = None) -> Exchange:
    """Run one operation (a batch: each of its operations) with the at-most-once
    rule and the ``NOSCRIPT`` reload; return its reply (a batch: the list of replies,
    each error as the mapped exception instance).

    Raises:
        ServerUnavailable: the server could not be reached (nothing ran), or an
            idempotent operation failed twice.
        OutcomeUnknown: an operation that is not re-sent was written and no reply came.
        EchoMQError: the mapped error reply of a single operation.
    """
    ops: tuple[Eval | Cmd, ...] = op.ops if isinstance(op, Batch) else (op,)
    results: list[Any] = [None] * len(ops)
    todo = list(range(len(ops)))
    loaded = resent = False
    while todo:
        fast = all(resendable(ops[i]) for i in todo)
        try:
            replies = yield Request([native_command(ops[i], executor) for i in todo], fast)
            failure: NoReply | None = None
        except NotSent as exc:
            if resent:
                raise errors.ServerUnavailable(str(exc)) from exc
            resent = True  # nothing ran: once more on a fresh connection
            continue
        except NoReply as exc:
            replies, failure = exc.got, exc
        noscript: list[int] = []
        for i, r in zip(todo, replies):
            if is_noscript(r) and not loaded:
                noscript.append(i)
            else:
                results[i] = outcome(ops[i], r)  # the one translation of every reply
        unknown = todo[len(replies) :]
        if failure is not None:
            held = [ops[i] for i in unknown if not resendable(ops[i])]
            if held:
                ids = tuple(j for o in held if (j := job_of(o)) is not None)
                name = held[0].script.name if isinstance(held[0], Eval) else None
                raise errors.OutcomeUnknown(
                    f"{name or 'a write'}: sent, no reply ({failure})", job_ids=ids, verb=name
                ) from failure.cause
            if resent:
                raise errors.ServerUnavailable(str(failure)) from failure.cause
            resent = True
            # each goes again in its re-send form, which looks for its first run
            ops = tuple(
                o.resent() if i in unknown and isinstance(o, Eval) else o for i, o in enumerate(ops)
            )
        if noscript:
            loaded = True
            scripts = {o.script.name: o.script for i in noscript if isinstance(o := ops[i], Eval)}
            # loading is idempotent, so it may travel on the kept connection
            yield from _load([("SCRIPT", "LOAD", s.body) for s in scripts.values()])
        todo = sorted(noscript + unknown)
    if isinstance(op, Batch):
        return results
    if isinstance(results[0], Exception):
        raise results[0]
    return results[0]


def _load(cmds: list[tuple[Arg, ...]]) -> Exchange:
    for attempt in (1, 2):
        try:
            replies = yield Request(cmds, True)
        except (NotSent, NoReply) as exc:
            if attempt == 2:
                raise errors.ServerUnavailable(str(exc)) from exc
            continue
        for r in replies:
            if isinstance(r, redis.ResponseError):
                raise map_error(r)
        return


def _as_text(value: Any) -> str | None:
    if value is None:
        return None
    return value.decode() if isinstance(value, bytes) else str(value)


def fence(executor: Executor | None = None) -> Exchange:
    """Read ``{emq}:version`` and compare it; write it (``SET NX``) only when absent,
    so a full server, which refuses the write, still lets every client in. Then, when
    ``executor`` is not resolved yet, ask ``MODULE LIST`` whether native commands serve.

    Raises:
        VersionMismatch: the server speaks another keyspace version.
    """
    found = yield from exchange(Cmd(("GET", VERSION_KEY)))
    if found is None:
        yield from exchange(Cmd(("SET", VERSION_KEY, KEYSPACE_VERSION, "NX")))
        found = yield from exchange(Cmd(("GET", VERSION_KEY)))
    got = _as_text(found)
    if got != KEYSPACE_VERSION:
        raise errors.VersionMismatch(
            f"server keyspace version {got!r}, this client speaks {KEYSPACE_VERSION!r}"
        )
    if executor is not None and executor.native is None:
        try:
            listing: Any = yield from exchange(Cmd(("MODULE", "LIST")))
        except errors.ScriptError as exc:  # a server or proxy that refuses MODULE LIST
            listing = exc
        executor.resolve(listing)


class Outage:
    """Logs a failure that reached a caller once per outage, and the recovery."""

    #: A new outage this soon after the last one's first line logs nothing new.
    QUIET_S = 5.0

    def __init__(self, where: str) -> None:
        self.where = where
        self.since: float | None = None
        self.errors = 0
        self._last_line = -1e9
        self._said = False  # whether this outage's first line was logged

    def transient(self, exc: BaseException) -> None:
        """A failure the transport recovers from by itself: DEBUG only."""
        log.debug("echomq: connection to %s failed, retrying: %s", self.where, exc, exc_info=exc)

    def failed(self, exc: BaseException) -> None:
        """A failure that reaches the caller."""
        now = time.monotonic()
        self.errors += 1
        log.debug("echomq: %s: %s", self.where, exc, exc_info=exc)
        if self.since is None:
            self.since = now
            # a link that flaps faster than QUIET_S logs its first outage only
            self._said = now - self._last_line >= self.QUIET_S
            if self._said:
                self._last_line = now
                log.warning("echomq: lost the server at %s: %s", self.where, exc)

    def ok(self) -> None:
        """A success: ends an outage with its one line."""
        if self.since is not None and self._said:
            log.warning(
                "echomq: server at %s recovered after %.1f s (%d failed calls)",
                self.where,
                time.monotonic() - self.since,
                self.errors,
            )
        if self.since is not None:
            self.since, self.errors = None, 0


_DROPPED = (redis.ConnectionError, redis.TimeoutError, OSError)

# What a cluster client raises for a command that did not run: the cluster down or
# failing over (CLUSTERDOWN), a slot being moved (TRYAGAIN), a redirection (MOVED, ASK)
# it stopped following, a slot no node serves. Raised before the command ran, so a
# first one may be sent again; all end as ServerUnavailable, never as a ScriptError.
_NOT_RUN: tuple[type[BaseException], ...] = (
    redis.exceptions.ClusterDownError,
    redis.exceptions.TryAgainError,
    redis.exceptions.AskError,
    redis.exceptions.ClusterError,
    *((c,) if (c := getattr(redis.exceptions, "SlotNotCoveredError", None)) else ()),
)
# The cluster client's own failures (no node known for a slot, its slot map not
# readable, often while re-reading it after a connection error): whether the command
# left is not known.
_CLUSTER_LOST = (*_DROPPED, redis.exceptions.RedisClusterException)


def _cluster_failed(got: list[Any], exc: BaseException) -> Exception:
    """What a cluster command's failure means to :func:`exchange`: nothing of the
    request ran (:class:`NotSent`), or the replies stopped (:class:`NoReply`)."""
    if isinstance(exc, _NOT_RUN) and not got:
        return NotSent(f"{type(exc).__name__}: {exc}")
    return NoReply(got, exc)


# Bumped in a forked child, so a kept connection knows it is the parent's without
# asking the kernel for its pid on every call.
_forks = 0


def _forked() -> None:
    global _forks
    _forks += 1


os.register_at_fork(after_in_child=_forked)


def _where(client: Any) -> str:
    if is_cluster(client):
        node = client.get_default_node()  # the node it first asked (None before then)
        return "the cluster" + (f" of {node.name}" if node is not None else "")
    pool = getattr(client, "connection_pool", None)
    kw = getattr(pool, "connection_kwargs", None) or {}
    if "path" in kw:
        return f"unix:{kw['path']}"
    if "host" in kw:
        return f"{kw['host']}:{kw.get('port', 6379)}"
    return type(client).__name__


_PLAIN_POOLS = (
    redis.ConnectionPool,
    redis.BlockingConnectionPool,
    redis.asyncio.ConnectionPool,
    redis.asyncio.BlockingConnectionPool,
)


def _keeps(pool: Any) -> bool:
    """Whether a kept connection may be made like ``pool``'s own."""
    return type(pool) in _PLAIN_POOLS and getattr(pool, "cache", None) is None


def _make(pool: Any) -> Any:
    return pool.connection_class(**pool.connection_kwargs)


def _takes_name(pool: Any) -> bool:
    # redis-py < 5.3 requires the command name; later ones warn when given one
    try:
        param = inspect.signature(pool.get_connection).parameters.get("command_name")
    except (TypeError, ValueError):
        return False
    return param is not None and param.default is inspect.Parameter.empty


def _callbacks(client: Any) -> Any:
    return getattr(client, "response_callbacks", None) or {}


def _shape(callbacks: Any, cmds: Sequence[tuple[Arg, ...]], replies: list[Any]) -> list[Any]:
    """Apply the client's response callbacks (``set_response_callback``) to replies of
    plain commands, as ``execute_command`` would; a script's reply has none."""
    out = []
    for cmd, r in zip(cmds, replies):
        name = cmd[0]
        if name == "EVALSHA" or isinstance(r, redis.ResponseError):
            out.append(r)
            continue
        cb = callbacks.get(name)
        out.append(r if cb is None else cb(r))
    return out


class SyncTransport:
    """Sends a sync client's commands (thread-safe).

    Args:
        client: a ``redis.Redis`` (or ``redis.RedisCluster``).
        fast: keep a connection for idempotent operations (default: :data:`FAST_PATH`).
    """

    def __init__(self, client: Any, *, fast: bool | None = None) -> None:
        self.client = client
        self.pool: Any = getattr(client, "connection_pool", None)
        self.fast = (FAST_PATH if fast is None else fast) and _keeps(self.pool)
        self.outage = Outage(_where(client))
        self._name = self.pool is not None and _takes_name(self.pool)
        self._callbacks = _callbacks(client)
        self._lock = threading.Lock()
        self._kept: Any = None
        self._forks = _forks

    def _checkout(self) -> Any:
        return self.pool.get_connection("_") if self._name else self.pool.get_connection()

    def _io(self, conn: Any, cmds: list[tuple[Arg, ...]]) -> list[Any]:
        try:
            conn.send_packed_command(conn.pack_commands(cmds))
        except _DROPPED as exc:
            conn.disconnect()
            raise NotSent(str(exc)) from exc
        got: list[Any] = []
        try:
            for _ in cmds:
                try:
                    got.append(conn.read_response())
                except redis.ResponseError as exc:
                    got.append(exc)
        except _DROPPED as exc:
            conn.disconnect()
            raise NoReply(_shape(self._callbacks, cmds, got), exc) from exc
        except BaseException:
            conn.disconnect()  # interrupted between write and read: unusable
            raise
        return _shape(self._callbacks, cmds, got)

    def _kept_conn(self) -> Any:
        """The kept connection with the lock held, or None (lock not held)."""
        if not self._lock.acquire(blocking=False):
            return None
        if self._forks != _forks:  # forked: the parent's socket is not ours
            self._kept, self._forks = None, _forks
        if self._kept is None:
            self._kept = _make(self.pool)
        return self._kept

    def send(self, req: Request) -> list[Any]:
        """Write ``req``'s commands and read every reply.

        Raises:
            NotSent: nothing reached the server.
            NoReply: the write went out and the replies stopped.
        """
        if self.pool is None:
            return self._cluster(req)
        if self.fast and req.fast:
            try:
                conn = self._kept_conn()
            except _DROPPED as exc:
                raise NotSent(str(exc)) from exc
            if conn is not None:
                try:
                    return self._io(conn, req.cmds)
                finally:
                    self._lock.release()
        try:
            conn = self._checkout()
        except _DROPPED as exc:
            raise NotSent(str(exc)) from exc
        try:
            return self._io(conn, req.cmds)
        finally:
            self.pool.release(conn)

    def _cluster(self, req: Request) -> list[Any]:
        """Send on a cluster client, one command at a time (each routed by its key;
        scripts in their publishing-sharded form, :func:`~echomq.scripts.sharded`)."""
        got: list[Any] = []
        for cmd in req.cmds:
            cmd = sharded_command(cmd)
            try:
                if cmd[0] == "SCRIPT":  # not routed by a key: every primary that answers
                    got.append(self._load_everywhere(cmd))
                else:
                    got.append(self.client.execute_command(*cmd))
            except _NOT_RUN as exc:
                raise _cluster_failed(got, exc) from exc
            except redis.ResponseError as exc:
                got.append(exc)
            except _CLUSTER_LOST as exc:
                raise NoReply(got, exc) from exc
        return got

    def _load_everywhere(self, cmd: tuple[Arg, ...]) -> Any:
        # a primary that is down does not stop the others from serving their queues
        # (a replica promoted later answers NOSCRIPT and loads it then)
        sha, failure = None, None
        for node in self.client.get_primaries():
            try:
                sha = self.client.execute_command(*cmd, target_nodes=node)
            except _CLUSTER_LOST as exc:
                failure = exc
        if sha is None and failure is not None:
            raise failure
        return sha

    def run(self, ex: Exchange) -> Any:
        """Drive an exchange to its result."""
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
        except errors.ServerUnavailable as exc:
            if isinstance(exc, errors.ServerFull):
                self.outage.ok()
            else:
                self.outage.failed(exc)
            raise
        except errors.EchoMQError:
            self.outage.ok()
            raise

    def close(self) -> None:
        """Give the kept connection back (a later call takes a new one)."""
        with self._lock:
            conn, self._kept = self._kept, None
            if conn is not None and self._forks == _forks:
                conn.disconnect()


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
        if _takes_name(self.pool):
            self.conn = await self.pool.get_connection("_")
        else:
            self.conn = await self.pool.get_connection()
        return self

    async def __aexit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        try:
            if exc_type is not None:
                await self.conn.disconnect()
        finally:
            await self.pool.release(self.conn)

    async def send(self, *cmds: Sequence[Arg]) -> None:
        """Write ``cmds`` in one buffer."""
        await self.conn.send_packed_command(self.conn.pack_commands([tuple(c) for c in cmds]))

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


class AsyncTransport:
    """Sends an asyncio client's commands (a kept connection in use by another task
    makes the call take a pooled one).

    Args:
        client: a ``redis.asyncio.Redis`` (or ``RedisCluster``).
        fast: keep a connection for idempotent operations (default: :data:`FAST_PATH`).
    """

    def __init__(self, client: Any, *, fast: bool | None = None) -> None:
        self.client = client
        self.pool: Any = getattr(client, "connection_pool", None)
        self.fast = (FAST_PATH if fast is None else fast) and _keeps(self.pool)
        self.outage = Outage(_where(client))
        self._name = self.pool is not None and _takes_name(self.pool)
        self._callbacks = _callbacks(client)
        self._busy = False
        self._kept: Any = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._forks = _forks

    async def _checkout(self) -> Any:
        if self._name:
            return await self.pool.get_connection("_")
        return await self.pool.get_connection()

    async def _io(self, conn: Any, cmds: list[tuple[Arg, ...]]) -> list[Any]:
        try:
            await conn.send_packed_command(conn.pack_commands(cmds))
        except _DROPPED as exc:
            await conn.disconnect(nowait=True)
            raise NotSent(str(exc)) from exc
        got: list[Any] = []
        try:
            for _ in cmds:
                try:
                    got.append(await conn.read_response())
                except redis.ResponseError as exc:
                    got.append(exc)
        except _DROPPED as exc:
            await conn.disconnect(nowait=True)
            raise NoReply(_shape(self._callbacks, cmds, got), exc) from exc
        except BaseException:
            await conn.disconnect(nowait=True)  # cancelled between write and read
            raise
        return _shape(self._callbacks, cmds, got)

    async def _kept_conn(self) -> Any:
        """The kept connection, marked busy; None when busy."""
        if self._busy:
            return None
        loop = asyncio.get_running_loop()
        if self._loop is not loop or self._forks != _forks:
            # another loop (or a fork): that connection's streams are not ours
            self._kept, self._loop, self._forks = None, loop, _forks
        self._busy = True
        if self._kept is None:
            self._kept = _make(self.pool)
        return self._kept

    async def send(self, req: Request) -> list[Any]:
        """As :meth:`SyncTransport.send`."""
        if self.pool is None:
            return await self._cluster(req)
        if self.fast and req.fast:
            try:
                conn = await self._kept_conn()
            except _DROPPED as exc:
                raise NotSent(str(exc)) from exc
            if conn is not None:
                try:
                    return await self._io(conn, req.cmds)
                finally:
                    self._busy = False
        try:
            conn = await self._checkout()
        except _DROPPED as exc:
            raise NotSent(str(exc)) from exc
        try:
            return await self._io(conn, req.cmds)
        finally:
            await self.pool.release(conn)

    async def _cluster(self, req: Request) -> list[Any]:
        """As :meth:`SyncTransport._cluster`."""
        got: list[Any] = []
        for cmd in req.cmds:
            cmd = sharded_command(cmd)
            try:
                if cmd[0] == "SCRIPT":  # not routed by a key: every primary that answers
                    got.append(await self._load_everywhere(cmd))
                else:
                    got.append(await self.client.execute_command(*cmd))
            except _NOT_RUN as exc:
                raise _cluster_failed(got, exc) from exc
            except redis.ResponseError as exc:
                got.append(exc)
            except _CLUSTER_LOST as exc:
                raise NoReply(got, exc) from exc
        return got

    async def _load_everywhere(self, cmd: tuple[Arg, ...]) -> Any:
        sha, failure = None, None
        for node in self.client.get_primaries():
            try:
                sha = await self.client.execute_command(*cmd, target_nodes=node)
            except _CLUSTER_LOST as exc:
                failure = exc
        if sha is None and failure is not None:
            raise failure
        return sha

    async def run(self, ex: Exchange) -> Any:
        """Drive an exchange to its result."""
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
        except errors.ServerUnavailable as exc:
            if isinstance(exc, errors.ServerFull):
                self.outage.ok()
            else:
                self.outage.failed(exc)
            raise
        except errors.EchoMQError:
            self.outage.ok()
            raise

    async def aclose(self) -> None:
        """Give the kept connection back (a later call takes a new one)."""
        conn, self._kept = self._kept, None
        if conn is not None and self._loop is asyncio.get_running_loop():
            await conn.disconnect()


#: Seconds between two tries of a deferred version check.
FENCE_RETRY_S = 10.0
_fence_logged = False


class Deferral:
    """When the version fence may be tried, for a runner on a cluster client.

    ``{emq}:version`` lives in one slot; a queue lives in another. While the fence's
    node is unreachable (down, failing over) the check is deferred rather than
    failing every queue: the verb goes ahead, the check is tried again on a later
    call :data:`FENCE_RETRY_S` on, and the first deferral in the process is logged
    once (WARNING). On a single node nothing is deferred: the fence and the queue
    share the server.
    """

    def __init__(self, client: Any) -> None:
        self.on_cluster = is_cluster(client)
        self.next_try = 0.0

    def due(self) -> bool:
        """Whether the fence should be tried now."""
        return time.monotonic() >= self.next_try

    def defer(self, exc: errors.ServerUnavailable) -> bool:
        """Defer after ``exc``; ``False`` when this runner does not defer (raise it)."""
        global _fence_logged
        if not self.on_cluster or isinstance(exc, errors.ServerFull):
            return False
        self.next_try = time.monotonic() + FENCE_RETRY_S
        if not _fence_logged:
            _fence_logged = True
            log.warning(
                "echomq: the keyspace version check (%s) cannot reach its node (%s); "
                "queues elsewhere are served, the check is retried in %.0f s",
                VERSION_KEY, exc, FENCE_RETRY_S,
            )  # fmt: skip
        return True


class SyncRunner:
    """Drives plans on a sync client through a :class:`SyncTransport`."""

    def __init__(
        self, client: Any, executor: Executor | None = None, *, fast: bool | None = None
    ) -> None:
        self.client = client
        self.transport = SyncTransport(client, fast=fast)
        #: scripts or native commands (shared with the queue's context); resolved by
        #: the fence, once per runner
        self.executor = executor or Executor("scripts")
        self._fenced = False
        self._deferral = Deferral(client)

    def fence(self) -> None:
        """Check ``{emq}:version`` once per runner (see :func:`fence`); on a cluster,
        deferred while its node is unreachable (:class:`Deferral`)."""
        if not self._fenced and self._deferral.due():
            if self._deferral.on_cluster and self.executor.native is None:
                self.executor.resolve(UNASKED)  # MODULE LIST has no key to route by
            try:
                self.transport.run(fence(self.executor))
            except redis.exceptions.RedisClusterException:  # MODULE LIST not routable
                self.executor.resolve(UNASKED)
            except errors.ServerUnavailable as exc:
                if not self._deferral.defer(exc):
                    raise
                return
            self._fenced = True

    def command(self, op: Eval | Cmd) -> tuple[Arg, ...]:
        """The command this runner sends for ``op`` (its native twin when resolved)."""
        return native_command(op, self.executor)

    def execute(self, op: Op) -> Any:
        """Run one operation and return its reply (errors mapped, see :func:`exchange`)."""
        return self.transport.run(exchange(op, self.executor))

    def drive(self, plan: Plan[T]) -> T:
        """Run ``plan`` to completion and return its result.

        The plan's first step (where it gates its arguments) runs before the version
        fence, so a malformed id or name raises before anything is sent.
        """
        try:
            op = next(plan)
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


class AsyncRunner:
    """Drives plans on an asyncio client through an :class:`AsyncTransport`."""

    def __init__(
        self, client: Any, executor: Executor | None = None, *, fast: bool | None = None
    ) -> None:
        self.client = client
        self.transport = AsyncTransport(client, fast=fast)
        #: scripts or native commands (shared with the queue's context); resolved by
        #: the fence, once per runner
        self.executor = executor or Executor("scripts")
        self._fenced = False
        self._deferral = Deferral(client)

    async def fence(self) -> None:
        """As :meth:`SyncRunner.fence`."""
        if not self._fenced and self._deferral.due():
            if self._deferral.on_cluster:
                # read the slot map once, under the client's own lock: many first
                # calls at once would each start reading it and close each other's
                # connections
                with contextlib.suppress(*_CLUSTER_LOST):
                    await self.client.initialize()
                if self.executor.native is None:
                    self.executor.resolve(UNASKED)  # MODULE LIST has no key to route by
            try:
                await self.transport.run(fence(self.executor))
            except redis.exceptions.RedisClusterException:  # MODULE LIST not routable
                self.executor.resolve(UNASKED)
            except errors.ServerUnavailable as exc:
                if not self._deferral.defer(exc):
                    raise
                return
            self._fenced = True

    def command(self, op: Eval | Cmd) -> tuple[Arg, ...]:
        """The command this runner sends for ``op`` (its native twin when resolved)."""
        return native_command(op, self.executor)

    async def execute(self, op: Op) -> Any:
        """Run one operation and return its reply (errors mapped)."""
        return await self.transport.run(exchange(op, self.executor))

    async def drive(self, plan: Plan[T]) -> T:
        """Run ``plan`` to completion and return its result (gates before the fence)."""
        try:
            op = next(plan)
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
