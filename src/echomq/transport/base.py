"""What the sync and async halves share, written once: a transport's state, and a
runner's executor and version-fence bookkeeping. The halves (:mod:`.sync`,
:mod:`.aio`) add only their I/O."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Generic, TypeVar

import redis

from .. import errors
from ..native import UNASKED, Executor
from ..scripts import Arg, Cmd, Eval
from .cluster import Deferral
from .connections import FAST_PATH, callbacks, keeps, takes_name, where
from .exchange import native_command
from .outage import Outage

TransportT = TypeVar("TransportT")


class TransportBase:
    """A transport's state: its client and pool, whether it keeps a connection
    (:data:`~.connections.FAST_PATH`, a plain pool only), its outage log.

    Args:
        client: a redis-py client, sync or asyncio (or a cluster client: no pool).
        fast: keep a connection for idempotent operations (default: ``FAST_PATH``).
    """

    def __init__(self, client: Any, *, fast: bool | None = None) -> None:
        self.client = client
        self.pool: Any = getattr(client, "connection_pool", None)
        self.fast = (FAST_PATH if fast is None else fast) and keeps(self.pool)
        self.outage = Outage(where(client))
        self._name = self.pool is not None and takes_name(self.pool)
        self._callbacks = callbacks(client)
        self._kept: Any = None


class RunnerBase(Generic[TransportT]):
    """A runner's state: its transport, its executor (scripts or native commands,
    shared with the queue's context, resolved by the fence once per runner) and
    whether the version fence has passed."""

    def __init__(self, client: Any, transport: TransportT, executor: Executor | None) -> None:
        self.client = client
        self.transport = transport
        #: scripts or native commands (shared with the queue's context); resolved by
        #: the fence, once per runner
        self.executor = executor or Executor("scripts")
        self._fenced = False
        self._deferral = Deferral(client)
        if self._deferral.on_cluster:  # scripts go as EVALSHA in their sharded form
            self.executor.fcall = False

    def command(self, op: Eval | Cmd) -> tuple[Arg, ...]:
        """The command this runner sends for ``op`` (its native twin when resolved)."""
        return native_command(op, self.executor)

    def _fence_due(self) -> bool:
        """Whether the fence is to be tried now. On a cluster the executor is taken
        as unasked first: ``MODULE LIST`` has no key to route by."""
        if self._fenced or not self._deferral.due():
            return False
        if self._deferral.on_cluster and self.executor.native is None:
            self.executor.resolve(UNASKED)
        return True

    @contextmanager
    def _fencing(self) -> Iterator[None]:
        """Around the fence's exchange: passed, or deferred on a cluster whose fence
        node is unreachable (:class:`~.cluster.Deferral`)."""
        try:
            yield
        except redis.exceptions.RedisClusterException:  # MODULE LIST not routable
            self.executor.resolve(UNASKED)
        except errors.ServerUnavailable as exc:
            if not self._deferral.defer(exc):
                raise
            return
        self._fenced = True
