"""Driving a cluster client: its commands one at a time (each routed by its key),
what its failures mean to the exchange, and the version fence deferred while its
node is unreachable.

A cluster client (no single pool) is driven through its ``execute_command``; its own
retry policy applies there (build it with retries off for at-most-once sending).
:func:`send` and :func:`send_async` are one logic, kept as a checked mirror
(``tests/test_transport_mirror.py``).
"""

from __future__ import annotations

import logging
import time
from typing import Any

import redis

from .. import errors
from ..connect import is_cluster
from ..keyspace import VERSION_KEY
from ..scripts import Arg, sharded_command
from .connections import DROPPED
from .exchange import NoReply, NotSent, Request

log = logging.getLogger("echomq.transport")

# What a cluster client raises for a command that did not run: the cluster down or
# failing over (CLUSTERDOWN), a slot being moved (TRYAGAIN), a redirection (MOVED, ASK)
# it stopped following, a slot no node serves. Raised before the command ran, so a
# first one may be sent again; all end as ServerUnavailable, never as a ScriptError.
NOT_RUN: tuple[type[BaseException], ...] = (
    redis.exceptions.ClusterDownError,
    redis.exceptions.TryAgainError,
    redis.exceptions.AskError,
    redis.exceptions.ClusterError,
    *((c,) if (c := getattr(redis.exceptions, "SlotNotCoveredError", None)) else ()),
)
# The cluster client's own failures (no node known for a slot, its slot map not
# readable, often while re-reading it after a connection error): whether the command
# left is not known.
CLUSTER_LOST = (*DROPPED, redis.exceptions.RedisClusterException)


def cluster_failed(got: list[Any], exc: BaseException) -> Exception:
    """What a cluster command's failure means to the exchange: nothing of the
    request ran (:class:`NotSent`), or the replies stopped (:class:`NoReply`)."""
    if isinstance(exc, NOT_RUN) and not got:
        return NotSent(f"{type(exc).__name__}: {exc}")
    return NoReply(got, exc)


def send(client: Any, req: Request) -> list[Any]:
    """Send ``req`` on a sync cluster client, one command at a time (each routed by
    its key; scripts in their publishing-sharded form, :func:`~echomq.scripts.sharded`).

    Raises:
        NotSent: nothing reached the server.
        NoReply: the replies stopped (those read are ``got``).
    """
    got: list[Any] = []
    for cmd in req.cmds:
        cmd = sharded_command(cmd)
        try:
            if cmd[0] == "SCRIPT":  # not routed by a key: every primary that answers
                got.append(load_everywhere(client, cmd))
            else:
                got.append(client.execute_command(*cmd))
        except NOT_RUN as exc:
            raise cluster_failed(got, exc) from exc
        except redis.ResponseError as exc:
            got.append(exc)
        except CLUSTER_LOST as exc:
            raise NoReply(got, exc) from exc
    return got


def load_everywhere(client: Any, cmd: tuple[Arg, ...]) -> Any:
    """Load a script on every primary: one that is down does not stop the others from
    serving their queues (a replica promoted later answers NOSCRIPT and loads it)."""
    sha, failure = None, None
    for node in client.get_primaries():
        try:
            sha = client.execute_command(*cmd, target_nodes=node)
        except CLUSTER_LOST as exc:
            failure = exc
    if sha is None and failure is not None:
        raise failure
    return sha


async def send_async(client: Any, req: Request) -> list[Any]:
    """As :func:`send`, on an asyncio cluster client."""
    got: list[Any] = []
    for cmd in req.cmds:
        cmd = sharded_command(cmd)
        try:
            if cmd[0] == "SCRIPT":  # not routed by a key: every primary that answers
                got.append(await load_everywhere_async(client, cmd))
            else:
                got.append(await client.execute_command(*cmd))
        except NOT_RUN as exc:
            raise cluster_failed(got, exc) from exc
        except redis.ResponseError as exc:
            got.append(exc)
        except CLUSTER_LOST as exc:
            raise NoReply(got, exc) from exc
    return got


async def load_everywhere_async(client: Any, cmd: tuple[Arg, ...]) -> Any:
    """As :func:`load_everywhere`, on an asyncio cluster client."""
    sha, failure = None, None
    for node in client.get_primaries():
        try:
            sha = await client.execute_command(*cmd, target_nodes=node)
        except CLUSTER_LOST as exc:
            failure = exc
    if sha is None and failure is not None:
        raise failure
    return sha


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
