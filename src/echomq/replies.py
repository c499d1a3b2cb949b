"""Every server reply, normalised once and its refusal translated once.

The runner passes each operation's raw reply (or the server's error reply) through
:func:`outcome`, at one point, for single operations and for each operation of a
batch alike. What a plan then receives is one shape whatever the client:

- text is ``str`` (a client without ``decode_responses`` answers ``bytes``);
- arrays are lists; a map (RESP3, or a response callback) is a ``dict`` of text;
- ``HGETALL`` is always a ``dict``, ``ZRANGE ... WITHSCORES`` always a list of
  ``(member, score)`` pairs with float scores, whatever the protocol;
- a refusal is the typed exception of :data:`echomq.errors.REPLY_CODES`, and a
  script's ``-1`` (:data:`echomq.errors.GONE`) for an op on one job is
  :class:`~echomq.errors.JobGone`; either carries the op's job id (``exc.job_id``).

This module is the one reader of refusals: :func:`error` is the only place a server
error reply becomes an exception of :mod:`echomq.errors` (the runner's replies, the
script loads, the claim read behind the worker's wait), and :func:`refusal` the only
place a reason a batch verb answers per job (``gone``, ``stale``) does.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import redis

from . import errors

if TYPE_CHECKING:  # scripts.py re-exports this module's cluster replies
    from .scripts import Cmd, Eval


def text(raw: Any) -> Any:
    """``raw`` with every ``bytes`` decoded, arrays as lists and maps as dicts."""
    kind = type(raw)
    if kind is bytes:
        return raw.decode()
    if kind is list or kind is tuple:
        # scalars inline: a claim reply holds five per job, on the worker's hot path
        return [
            x.decode() if type(x) is bytes else x if type(x) in _SCALAR else text(x) for x in raw
        ]
    if kind is dict:
        return {text(k): text(v) for k, v in raw.items()}
    return raw


_SCALAR = (str, int, float, bool, type(None))


def _pairs(raw: Any) -> list[tuple[Any, Any]]:
    """A flat ``[k, v, k, v]``, a list of pairs or a map, as ``(k, v)`` pairs."""
    if isinstance(raw, dict):
        return list(raw.items())
    if raw and isinstance(raw[0], (list, tuple)):
        return [(p[0], p[1]) for p in raw]
    return list(zip(raw[::2], raw[1::2]))


def _command(args: Sequence[Any], raw: Any) -> Any:
    """A plain command's reply; the two whose shape differs by protocol get one."""
    name = str(args[0]).upper()
    if name == "HGETALL":
        return {k: v for k, v in _pairs(text(raw))}
    if name.startswith("ZRANGE") and any(str(a).upper() == "WITHSCORES" for a in args):
        return [(m, float(s)) for m, s in _pairs(text(raw))]
    return text(raw)


# Replies that say the command did not run because of the cluster (a redirection, the
# cluster down or failing over, a slot moving): a plain client talking to a cluster
# node meets them, and a cluster client that stopped following them.
CLUSTER_REPLIES: tuple[type[Exception], ...] = (
    redis.exceptions.AskError,  # and MovedError
    redis.exceptions.TryAgainError,
    redis.exceptions.ClusterDownError,  # and MasterDownError
)


def cluster_unavailable(exc: Exception) -> errors.ServerUnavailable:
    """A cluster reply (:data:`CLUSTER_REPLIES`) as the typed error it stands for."""
    kind = type(exc).__name__.removesuffix("Error").upper()
    return errors.ServerUnavailable(
        f"{kind} {exc}: the cluster cannot serve this here now (a node down, a failover, "
        "a slot moving, or a single-node client talking to a cluster node)"
    )


def error(raw: redis.ResponseError, job: str | None = None) -> Exception:
    """The exception a server error reply stands for: a cluster reply is
    :class:`~echomq.errors.ServerUnavailable`, a code of
    :data:`~echomq.errors.REPLY_CODES` its class (a refusal carrying ``job``), any
    other a :class:`~echomq.errors.ScriptError`."""
    if isinstance(raw, CLUSTER_REPLIES):  # not run: the cluster, not the verb, refused
        return cluster_unavailable(raw)
    message = str(raw)
    if type(raw).__name__ == "OutOfMemoryError":
        message = f"OOM {message}"  # redis-py takes the code off as it picks the class
    return errors.from_reply(message, job) or errors.ScriptError(message)


def refusal(job_id: str, reason: str) -> errors.Refused:
    """The refusal a verb answered for one job as its reason (``extend_lock``'s
    ``(id, reason)`` pairs): the class of :data:`~echomq.errors.BY_REASON`."""
    return errors.BY_REASON[reason](f"job {job_id}: {reason}", job_id=job_id)


def script_outcome(raw: Any, job: str | None = None) -> Any:
    """What a plan receives for a script call's reply ``raw`` (see :func:`outcome`);
    ``job`` is the job the call names, if any."""
    if isinstance(raw, redis.ResponseError):
        return error(raw, job)
    if job is not None and raw == errors.GONE:
        return errors.gone(job)
    return text(raw)


def outcome(op: Eval | Cmd, raw: Any) -> Any:
    """What the plan that yielded ``op`` receives for ``raw``, its server reply.

    Returns:
        The normalised reply; or, for a refusal, the typed exception instance (the
        runner raises it for a single op and leaves it in place in a batch). An
        error reply that is no refusal is a :class:`~echomq.errors.ScriptError`.
    """
    if getattr(op, "script", None) is not None:  # only a script call names a job
        return script_outcome(raw, getattr(op, "job", None))
    if isinstance(raw, redis.ResponseError):
        return error(raw)
    return _command(op.args, raw)
