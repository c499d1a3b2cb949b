"""``Queue`` and ``AsyncQueue``: thin shells that run the verbs' plans.

Every verb is defined once, as a plan function in :mod:`spine`, :mod:`reads`,
:mod:`jobs`, :mod:`admin`, :mod:`lanes` or :mod:`views`, and listed once, on ``_Verbs``. A verb
attribute binds its plan to the queue's context and runner: on ``Queue`` it returns
the result, on ``AsyncQueue`` an awaitable of it.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Awaitable, Callable
from typing import Any, Concatenate, Generic, TypeVar, overload

from typing_extensions import ParamSpec, Self

from . import admin, bulk, history, jobs, journal, lanes, reads, registry, spine, views
from . import repeat as repeating
from .connect import DEFAULT_URL as DEFAULT_URL
from .connect import async_client, sync_client
from .context import DEFAULT_MAX_ATTEMPTS, Context, JsonSerializer, Serializer
from .events import AsyncEventStream, EventStream
from .keyspace import Keyspace
from .native import Executor
from .observability import hooks
from .scripts import Plan
from .transport import AsyncRunner, SyncRunner

P = ParamSpec("P")
T = TypeVar("T")


def _bound_signature(plan: Callable[..., Any]) -> inspect.Signature:
    sig = inspect.signature(plan)
    params = list(sig.parameters.values())[1:]  # drop the context
    return sig.replace(parameters=params)


class _Verb(Generic[P, T]):
    """One verb, bound to a facade on attribute access.

    On a :class:`Queue` calling it runs the plan and returns the result; on an
    :class:`AsyncQueue` it returns an awaitable of the result. The verb list is
    written once, on :class:`_Verbs`, for both facades.
    """

    def __init__(self, plan: Callable[Concatenate[Context, P], Plan[T]]) -> None:
        self.plan = plan
        self.__doc__ = plan.__doc__
        self.name = plan.__name__

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    @overload
    def __get__(self, obj: None, owner: type) -> Self: ...
    @overload
    def __get__(self, obj: Queue, owner: type) -> Callable[P, T]: ...
    @overload
    def __get__(self, obj: AsyncQueue, owner: type) -> Callable[P, Awaitable[T]]: ...
    def __get__(self, obj: _Verbs | None, owner: type) -> Any:
        if obj is None:
            return self
        plan, ctx, runner = self.plan, obj.ctx, obj.runner
        call: Callable[..., Any]
        if isinstance(runner, AsyncRunner):
            arunner = runner

            async def acall(*args: P.args, **kwargs: P.kwargs) -> T:
                return await arunner.drive(plan(ctx, *args, **kwargs))

            call = acall
        else:
            srunner = runner

            def scall(*args: P.args, **kwargs: P.kwargs) -> T:
                return srunner.drive(plan(ctx, *args, **kwargs))

            call = scall
        functools.update_wrapper(call, plan)
        call.__signature__ = _bound_signature(plan)  # type: ignore[union-attr]
        call = hooks.wrap_verb(self.name, obj.name, call, isinstance(runner, AsyncRunner))
        obj.__dict__[self.name] = call  # later lookups skip the descriptor
        return call


class _Verbs:
    """The verbs both facades expose, each bound to its plan once."""

    ctx: Context
    runner: SyncRunner | AsyncRunner

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

    # the spine
    enqueue = _Verb(spine.enqueue)
    enqueue_many = _Verb(spine.enqueue_many)
    claim = _Verb(spine.claim)
    claim_many = _Verb(spine.claim_many)
    complete = _Verb(spine.complete)
    complete_many = _Verb(spine.complete_many)
    retry = _Verb(spine.retry)
    delay = _Verb(spine.delay)
    extend_lock = _Verb(spine.extend_lock)
    extend_locks = _Verb(spine.extend_locks)
    promote = _Verb(spine.promote)
    reap = _Verb(spine.reap)
    check_stalled = _Verb(spine.check_stalled)
    release = _Verb(spine.release)
    # reads
    counts = _Verb(reads.counts)
    get_job = _Verb(reads.get_job)
    job_state = _Verb(reads.job_state)
    browse = _Verb(reads.browse)
    is_paused = _Verb(reads.is_paused)
    metrics = _Verb(reads.metrics)
    # the operator plane: queue scope
    pause = _Verb(admin.pause)
    resume = _Verb(admin.resume)
    drain = _Verb(admin.drain)
    drain_step = _Verb(admin.drain_step)
    obliterate = _Verb(admin.obliterate)
    # the operator plane: job scope
    update_data = _Verb(jobs.update_data)
    update_progress = _Verb(jobs.update_progress)
    add_log = _Verb(jobs.add_log)
    get_job_logs = _Verb(jobs.get_job_logs)
    get_job_log_entries = _Verb(jobs.get_job_log_entries)
    remove_job = _Verb(jobs.remove_job)
    reprocess_job = _Verb(jobs.reprocess_job)
    lock_job = _Verb(jobs.lock_job)
    unlock_job = _Verb(jobs.unlock_job)
    cancel_job = _Verb(jobs.cancel_job)
    # the worker registry
    workers = _Verb(registry.workers)
    # the audit journal
    audit = _Verb(journal.audit)
    # opt-in history
    set_retention = _Verb(history.set_retention)
    retention = _Verb(history.retention)
    # bulk verbs by filter
    reprocess_jobs = _Verb(bulk.reprocess_jobs)
    remove_jobs = _Verb(bulk.remove_jobs)
    promote_jobs = _Verb(bulk.promote_jobs)
    promote_job = _Verb(bulk.promote_job)
    clean = _Verb(bulk.clean)
    # lanes
    pause_group = _Verb(lanes.pause_group)
    resume_group = _Verb(lanes.resume_group)
    set_group_limit = _Verb(lanes.set_group_limit)
    clear_group_limit = _Verb(lanes.clear_group_limit)
    set_group_weight = _Verb(lanes.set_group_weight)
    group_depth = _Verb(lanes.group_depth)
    groups = _Verb(lanes.groups)
    drain_group = _Verb(lanes.drain_group)
    reassign = _Verb(lanes.reassign)
    reindex = _Verb(lanes.reindex)
    # repeatables
    repeat = _Verb(repeating.repeat)
    cancel_repeat = _Verb(repeating.cancel_repeat)
    pause_repeat = _Verb(repeating.pause_repeat)
    resume_repeat = _Verb(repeating.resume_repeat)
    run_repeat = _Verb(repeating.run_repeat)
    repeats = _Verb(repeating.repeats)
    # views for the operator's tools (bounded pages, search, one job)
    server_time = _Verb(views.server_time)
    latency = _Verb(views.latency)
    queue_exists = _Verb(views.queue_exists)
    job_page = _Verb(views.job_page)
    find_jobs = _Verb(views.find_jobs)
    job_view = _Verb(views.job_view)
    groups_page = _Verb(views.groups_page)
    throughput = _Verb(views.throughput)


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
                if isinstance(step, history.Check):
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
                if isinstance(step, history.Check):
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
    return sorted(n for n in dir(cls) if isinstance(getattr(cls, n, None), _Verb))
