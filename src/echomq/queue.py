"""``Queue`` and ``AsyncQueue``: thin shells that run the verbs' plans.

Every verb is declared once, on :class:`echomq.verbs.VerbTable` (its plan, kind and
transitions), which both facades inherit. A verb attribute binds its plan to the
queue's context and runner: on ``Queue`` it returns the result, on ``AsyncQueue`` an
awaitable of it.
"""

from __future__ import annotations

from typing import Any, ClassVar

from typing_extensions import Self

from . import history, journal
from .connect import DEFAULT_URL as DEFAULT_URL
from .connect import async_client, sync_client
from .context import DEFAULT_MAX_ATTEMPTS, Context, JsonSerializer, Serializer
from .events import AsyncEventStream, EventStream
from .keyspace import Keyspace
from .native import Executor
from .transport import AsyncRunner, SyncRunner
from .verbs import Verb, VerbTable


class _Verbs(VerbTable):
    """What both facades share: the verbs of :class:`~echomq.verbs.VerbTable`, a context."""

    ctx: Context
    runner: SyncRunner | AsyncRunner
    #: Whether a verb's call returns an awaitable (the runner is async).
    is_async: ClassVar[bool] = False

    def __init__(
        self,
        name: str,
        serializer: Serializer | None,
        max_attempts: int,
        actor: str | None = None,
        executor: str | None = None,
    ) -> None:
        self.name = name
        codec = serializer or JsonSerializer()
        self.ctx = Context(Keyspace(name), codec, max_attempts, executor=Executor(executor))
        self.ctx.actor = journal.default_actor() if actor is None else str(actor)

    @property
    def actor(self) -> str:
        """Who this queue's operator verbs name in the audit journal."""
        return self.ctx.actor

    @property
    def keys(self) -> Keyspace:
        """The queue's keyspace."""
        return self.ctx.keys


class Queue(_Verbs):
    """A queue on a Valkey/Redis server, synchronous.

    Args:
        name: the queue name, ``[A-Za-z0-9._-]{1,128}``.
        url: the server URL (default ``redis://127.0.0.1:6379/0``); ignored with ``client``.
            A cluster node's URL makes a ``RedisCluster`` (see docs/cluster.md).
        client: a ``redis.Redis`` (or ``redis.RedisCluster``) to use.
        serializer: payload codec (JSON by default).
        max_attempts: failures before a job is dead when the job does not say.
        actor: who this queue's operator verbs name in the audit journal (default
            ``user@host:pid``).
        executor: ``"auto"`` (default; or ``EMQ_EXECUTOR``): the server module's native
            commands when the server has loaded it, else the scripts; ``"scripts"``;
            ``"native"`` (the module required). See docs/native.md.

    Raises:
        InvalidName: the queue name is malformed (before any connection is made).
        InvalidArgument: an unknown executor.
    """

    runner: SyncRunner

    def __init__(
        self,
        name: str,
        *,
        url: str | None = None,
        client: Any = None,
        serializer: Serializer | None = None,
        max_attempts: int = DEFAULT_MAX_ATTEMPTS,
        actor: str | None = None,
        executor: str | None = None,
    ) -> None:
        super().__init__(name, serializer, max_attempts, actor, executor)
        self._owns_client = client is None
        self.client: Any = client or sync_client(url or DEFAULT_URL)
        self.runner = SyncRunner(self.client, self.ctx.executor)

    def events(self) -> EventStream:
        """The queue's lifecycle events: ``with q.events() as stream: for ev in stream``."""
        return EventStream(self.client, self.name, self.keys.events)

    def result(self, job_id: str, timeout_s: float | None = None) -> Any:
        """Wait for a kept job's result (see ``set_retention`` and ``keep_ms``).

        Subscribes to the queue's events first, then reads the job's row: a job already
        settled answers at once, and one that settles between the two is seen by the
        read. Then it waits on the subscription (no polling of the row) for the job's
        ``completed``, ``dead`` or ``removed`` event, reading the row again after each
        such event and after a lost subscription.

        Args:
            job_id: the job.
            timeout_s: how long to wait, in seconds (``None``: as long as it takes).

        Returns:
            The handler's return value, deserialized by the queue's serializer
            (``None`` when it returned ``None``).

        Raises:
            InvalidJobId, InvalidArgument: a malformed id or timeout, before any I/O.
            JobNotKept: the job keeps no history, or no row of it exists; at once.
            JobFailed: the job is dead (``.error``: its last error).
            ResultTimeout: it did not settle within ``timeout_s``.
        """
        steps = history.wait_for_result(self.ctx, job_id, timeout_s)
        with self.events() as stream:
            reconnects = stream.reconnects
            reply: Any = None
            while True:
                try:
                    step = steps.send(reply)
                except StopIteration as done:
                    return done.value
                if isinstance(step, history.RunPlan):
                    reply = self.runner.drive(step.plan)
                else:
                    event = stream.get(timeout=step.left)
                    reply = (event, stream.reconnects != reconnects)
                    reconnects = stream.reconnects

    def close(self) -> None:
        """Close the queue's own connection, and the pool if this queue created it."""
        self.runner.close()
        if self._owns_client:
            self.client.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AsyncQueue(_Verbs):
    """A queue on a Valkey/Redis server, for asyncio. Same verbs as :class:`Queue`.

    Args:
        name: the queue name, ``[A-Za-z0-9._-]{1,128}``.
        url: the server URL (default ``redis://127.0.0.1:6379/0``); ignored with ``client``.
            A cluster node's URL makes a ``redis.asyncio.cluster.RedisCluster``.
        client: a ``redis.asyncio.Redis`` (or ``redis.asyncio.cluster.RedisCluster``) to use.
        serializer: payload codec (JSON by default).
        max_attempts: failures before a job is dead when the job does not say.
        actor: who this queue's operator verbs name in the audit journal (default
            ``user@host:pid``).
        executor: ``"auto"`` (default; or ``EMQ_EXECUTOR``): the server module's native
            commands when the server has loaded it, else the scripts; ``"scripts"``;
            ``"native"`` (the module required). See docs/native.md.

    Raises:
        InvalidName: the queue name is malformed (before any connection is made).
        InvalidArgument: an unknown executor.
    """

    runner: AsyncRunner
    is_async: ClassVar[bool] = True

    def __init__(
        self,
        name: str,
        *,
        url: str | None = None,
        client: Any = None,
        serializer: Serializer | None = None,
        max_attempts: int = DEFAULT_MAX_ATTEMPTS,
        actor: str | None = None,
        executor: str | None = None,
    ) -> None:
        super().__init__(name, serializer, max_attempts, actor, executor)
        self._owns_client = client is None
        self.client: Any = client or async_client(url or DEFAULT_URL)
        self.runner = AsyncRunner(self.client, self.ctx.executor)

    def events(self) -> AsyncEventStream:
        """The queue's events: ``async with aq.events() as stream: async for ev in stream``."""
        return AsyncEventStream(self.client, self.name, self.keys.events)

    async def result(self, job_id: str, timeout_s: float | None = None) -> Any:
        """Wait for a kept job's result; as :meth:`Queue.result`, awaited.

        Args:
            job_id: the job.
            timeout_s: how long to wait, in seconds (``None``: as long as it takes).

        Returns:
            The handler's return value, deserialized (``None`` when it returned ``None``).

        Raises:
            InvalidJobId, InvalidArgument: a malformed id or timeout, before any I/O.
            JobNotKept: the job keeps no history, or no row of it exists; at once.
            JobFailed: the job is dead (``.error``: its last error).
            ResultTimeout: it did not settle within ``timeout_s``.
        """
        steps = history.wait_for_result(self.ctx, job_id, timeout_s)
        async with self.events() as stream:
            reconnects = stream.reconnects
            reply: Any = None
            while True:
                try:
                    step = steps.send(reply)
                except StopIteration as done:
                    return done.value
                if isinstance(step, history.RunPlan):
                    reply = await self.runner.drive(step.plan)
                else:
                    event = await stream.get(timeout=step.left)
                    reply = (event, stream.reconnects != reconnects)
                    reconnects = stream.reconnects

    async def aclose(self) -> None:
        """Close the queue's own connection, and the pool if this queue created it."""
        await self.runner.aclose()
        if self._owns_client:
            await self.client.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


def verb_names(cls: type) -> list[str]:
    """The verbs a facade class exposes (its own and inherited), sorted."""
    return sorted(n for n in dir(cls) if isinstance(getattr(cls, n, None), Verb))
