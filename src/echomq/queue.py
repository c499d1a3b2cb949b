"""``Queue`` and ``AsyncQueue``: thin shells that run the verbs' plans.

Every verb is defined once, as a plan function in :mod:`spine`, :mod:`reads`,
:mod:`jobs`, :mod:`admin` or :mod:`lanes`. A facade attribute binds one plan to the
queue's context and runner: the sync shell returns the result, the async shell an
awaitable of it. Both shells list the same verbs (a test pins it).
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Awaitable, Callable
from typing import Any, Concatenate, Generic, TypeVar, overload

import redis
import redis.asyncio
from typing_extensions import ParamSpec, Self

from . import admin, jobs, lanes, reads, spine
from .context import DEFAULT_MAX_ATTEMPTS, Context, JsonSerializer, Serializer
from .keyspace import Keyspace
from .scripts import AsyncRunner, Plan, SyncRunner

DEFAULT_URL = "redis://127.0.0.1:6379/0"

P = ParamSpec("P")
T = TypeVar("T")


def _bound_signature(plan: Callable[..., Any]) -> inspect.Signature:
    sig = inspect.signature(plan)
    params = list(sig.parameters.values())[1:]  # drop the context
    return sig.replace(parameters=params)


class _SyncVerb(Generic[P, T]):
    """Binds a plan to a :class:`Queue`: calling it runs the plan and returns its result."""

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
    def __get__(self, obj: Queue | None, owner: type) -> Self | Callable[P, T]:
        if obj is None:
            return self
        plan, ctx, runner = self.plan, obj.ctx, obj.runner

        def call(*args: P.args, **kwargs: P.kwargs) -> T:
            return runner.drive(plan(ctx, *args, **kwargs))

        functools.update_wrapper(call, plan)
        call.__signature__ = _bound_signature(plan)  # type: ignore[attr-defined]
        obj.__dict__[self.name] = call  # later lookups skip the descriptor
        return call


class _AsyncVerb(Generic[P, T]):
    """Binds a plan to an :class:`AsyncQueue`: calling it returns an awaitable result."""

    def __init__(self, plan: Callable[Concatenate[Context, P], Plan[T]]) -> None:
        self.plan = plan
        self.__doc__ = plan.__doc__
        self.name = plan.__name__

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    @overload
    def __get__(self, obj: None, owner: type) -> Self: ...
    @overload
    def __get__(self, obj: AsyncQueue, owner: type) -> Callable[P, Awaitable[T]]: ...
    def __get__(self, obj: AsyncQueue | None, owner: type) -> Self | Callable[P, Awaitable[T]]:
        if obj is None:
            return self
        plan, ctx, runner = self.plan, obj.ctx, obj.runner

        async def call(*args: P.args, **kwargs: P.kwargs) -> T:
            return await runner.drive(plan(ctx, *args, **kwargs))

        functools.update_wrapper(call, plan)
        call.__signature__ = _bound_signature(plan)  # type: ignore[attr-defined]
        obj.__dict__[self.name] = call
        return call


class Queue:
    """A queue on a Valkey/Redis server, synchronous.

    Args:
        name: the queue name, ``[A-Za-z0-9._-]{1,128}``.
        url: the server URL (default ``redis://127.0.0.1:6379/0``); ignored with ``client``.
        client: a ``redis.Redis`` (or ``redis.RedisCluster``) to use.
        serializer: payload codec (JSON by default).
        max_attempts: failures before a job is dead when the job does not say.

    Raises:
        InvalidName: the queue name is malformed (before any connection is made).
    """

    def __init__(
        self,
        name: str,
        *,
        url: str | None = None,
        client: Any = None,
        serializer: Serializer | None = None,
        max_attempts: int = DEFAULT_MAX_ATTEMPTS,
    ) -> None:
        keys = Keyspace(name)
        self.name = name
        self.ctx = Context(keys, serializer or JsonSerializer(), max_attempts)
        self._owns_client = client is None
        self.client: Any = client or redis.Redis.from_url(url or DEFAULT_URL)
        self.runner = SyncRunner(self.client)

    @property
    def keys(self) -> Keyspace:
        """The queue's keyspace."""
        return self.ctx.keys

    def close(self) -> None:
        """Close the connection pool if this queue created it."""
        if self._owns_client:
            self.client.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # the spine
    enqueue = _SyncVerb(spine.enqueue)
    enqueue_many = _SyncVerb(spine.enqueue_many)
    claim = _SyncVerb(spine.claim)
    claim_many = _SyncVerb(spine.claim_many)
    complete = _SyncVerb(spine.complete)
    complete_many = _SyncVerb(spine.complete_many)
    retry = _SyncVerb(spine.retry)
    delay = _SyncVerb(spine.delay)
    extend_lock = _SyncVerb(spine.extend_lock)
    extend_locks = _SyncVerb(spine.extend_locks)
    promote = _SyncVerb(spine.promote)
    reap = _SyncVerb(spine.reap)
    check_stalled = _SyncVerb(spine.check_stalled)
    # reads
    counts = _SyncVerb(reads.counts)
    get_job = _SyncVerb(reads.get_job)
    job_state = _SyncVerb(reads.job_state)
    browse = _SyncVerb(reads.browse)
    is_paused = _SyncVerb(reads.is_paused)
    metrics = _SyncVerb(reads.metrics)
    # the operator plane: queue scope
    pause = _SyncVerb(admin.pause)
    resume = _SyncVerb(admin.resume)
    drain = _SyncVerb(admin.drain)
    obliterate = _SyncVerb(admin.obliterate)
    # the operator plane: job scope
    update_data = _SyncVerb(jobs.update_data)
    update_progress = _SyncVerb(jobs.update_progress)
    add_log = _SyncVerb(jobs.add_log)
    get_job_logs = _SyncVerb(jobs.get_job_logs)
    remove_job = _SyncVerb(jobs.remove_job)
    reprocess_job = _SyncVerb(jobs.reprocess_job)
    lock_job = _SyncVerb(jobs.lock_job)
    unlock_job = _SyncVerb(jobs.unlock_job)
    # lanes
    pause_group = _SyncVerb(lanes.pause_group)
    resume_group = _SyncVerb(lanes.resume_group)
    set_group_limit = _SyncVerb(lanes.set_group_limit)
    clear_group_limit = _SyncVerb(lanes.clear_group_limit)
    set_group_weight = _SyncVerb(lanes.set_group_weight)
    group_depth = _SyncVerb(lanes.group_depth)
    groups = _SyncVerb(lanes.groups)
    drain_group = _SyncVerb(lanes.drain_group)
    reassign = _SyncVerb(lanes.reassign)


class AsyncQueue:
    """A queue on a Valkey/Redis server, for asyncio. Same verbs as :class:`Queue`.

    Args:
        name: the queue name, ``[A-Za-z0-9._-]{1,128}``.
        url: the server URL (default ``redis://127.0.0.1:6379/0``); ignored with ``client``.
        client: a ``redis.asyncio.Redis`` to use.
        serializer: payload codec (JSON by default).
        max_attempts: failures before a job is dead when the job does not say.

    Raises:
        InvalidName: the queue name is malformed (before any connection is made).
    """

    def __init__(
        self,
        name: str,
        *,
        url: str | None = None,
        client: Any = None,
        serializer: Serializer | None = None,
        max_attempts: int = DEFAULT_MAX_ATTEMPTS,
    ) -> None:
        keys = Keyspace(name)
        self.name = name
        self.ctx = Context(keys, serializer or JsonSerializer(), max_attempts)
        self._owns_client = client is None
        self.client: Any = client or redis.asyncio.Redis.from_url(url or DEFAULT_URL)
        self.runner = AsyncRunner(self.client)

    @property
    def keys(self) -> Keyspace:
        """The queue's keyspace."""
        return self.ctx.keys

    async def aclose(self) -> None:
        """Close the connection pool if this queue created it."""
        if self._owns_client:
            await self.client.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    # the spine
    enqueue = _AsyncVerb(spine.enqueue)
    enqueue_many = _AsyncVerb(spine.enqueue_many)
    claim = _AsyncVerb(spine.claim)
    claim_many = _AsyncVerb(spine.claim_many)
    complete = _AsyncVerb(spine.complete)
    complete_many = _AsyncVerb(spine.complete_many)
    retry = _AsyncVerb(spine.retry)
    delay = _AsyncVerb(spine.delay)
    extend_lock = _AsyncVerb(spine.extend_lock)
    extend_locks = _AsyncVerb(spine.extend_locks)
    promote = _AsyncVerb(spine.promote)
    reap = _AsyncVerb(spine.reap)
    check_stalled = _AsyncVerb(spine.check_stalled)
    # reads
    counts = _AsyncVerb(reads.counts)
    get_job = _AsyncVerb(reads.get_job)
    job_state = _AsyncVerb(reads.job_state)
    browse = _AsyncVerb(reads.browse)
    is_paused = _AsyncVerb(reads.is_paused)
    metrics = _AsyncVerb(reads.metrics)
    # the operator plane: queue scope
    pause = _AsyncVerb(admin.pause)
    resume = _AsyncVerb(admin.resume)
    drain = _AsyncVerb(admin.drain)
    obliterate = _AsyncVerb(admin.obliterate)
    # the operator plane: job scope
    update_data = _AsyncVerb(jobs.update_data)
    update_progress = _AsyncVerb(jobs.update_progress)
    add_log = _AsyncVerb(jobs.add_log)
    get_job_logs = _AsyncVerb(jobs.get_job_logs)
    remove_job = _AsyncVerb(jobs.remove_job)
    reprocess_job = _AsyncVerb(jobs.reprocess_job)
    lock_job = _AsyncVerb(jobs.lock_job)
    unlock_job = _AsyncVerb(jobs.unlock_job)
    # lanes
    pause_group = _AsyncVerb(lanes.pause_group)
    resume_group = _AsyncVerb(lanes.resume_group)
    set_group_limit = _AsyncVerb(lanes.set_group_limit)
    clear_group_limit = _AsyncVerb(lanes.clear_group_limit)
    set_group_weight = _AsyncVerb(lanes.set_group_weight)
    group_depth = _AsyncVerb(lanes.group_depth)
    groups = _AsyncVerb(lanes.groups)
    drain_group = _AsyncVerb(lanes.drain_group)
    reassign = _AsyncVerb(lanes.reassign)


def verb_names(cls: type) -> list[str]:
    """The verbs a facade class exposes, in definition order."""
    return [n for n, v in vars(cls).items() if isinstance(v, (_SyncVerb, _AsyncVerb))]
