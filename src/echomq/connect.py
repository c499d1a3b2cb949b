"""One URL, any topology: the client a URL calls for, single node or cluster.

``redis://host:port`` (and ``rediss://``) names a single server or one node of a
Redis/Valkey Cluster; which one is found on the first connect (``INFO cluster`` says
``cluster_enabled:1``) and remembered per URL for the life of the process. A cluster
gets redis-py's ``RedisCluster`` (sync) or ``redis.asyncio.cluster.RedisCluster``,
a single node ``redis.Redis`` / ``redis.asyncio.Redis``. ``redis+cluster://`` (and
``rediss+cluster://``) skips the question: a cluster, always. ``unix://`` is a single
node. A server that does not answer at detection gets a single-node client and is
asked again by the next client made for that URL.

**At most once on a cluster.** ``RedisCluster`` re-runs a command after a connection
error or a ``CLUSTERDOWN`` (its ``retry``, or ``cluster_error_retry_attempts`` before
redis-py 6), which would send a transition twice whose first run may have happened.
The cluster clients made here have that retry off (``Retry(NoBackoff(), 0)``; on
redis-py 5: ``cluster_error_retry_attempts=0``); redirections (``MOVED``/``ASK``/
``TRYAGAIN``), which mean the command did not run, are still followed by the client.
The transport (:mod:`echomq.transport`) decides what may be sent again
(``transport.RESEND``). Pass a cluster client of your own with the same settings.
"""

from __future__ import annotations

import logging
import threading
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import redis
import redis.asyncio
from redis.asyncio.cluster import RedisCluster as AsyncRedisCluster
from redis.backoff import NoBackoff
from redis.cluster import RedisCluster

from .errors import InvalidArgument

log = logging.getLogger("echomq.connect")

#: The address used when none is given.
DEFAULT_URL = "redis://127.0.0.1:6379/0"
#: Schemes that say "a cluster" without asking the server, and the scheme they stand for.
CLUSTER_SCHEMES = {"redis+cluster": "redis", "rediss+cluster": "rediss"}
#: How long the detection's connect and reply may take (seconds).
DETECT_TIMEOUT_S = 2.0

_modes: dict[str, bool] = {}
_lock = threading.Lock()
_REDIS_MAJOR = int(redis.__version__.split(".")[0])


def split_url(url: str) -> tuple[str, bool]:
    """``(url redis-py reads, forced)``: a ``+cluster`` scheme is taken off and forces
    cluster mode."""
    parts = urlsplit(url)
    plain = CLUSTER_SCHEMES.get(parts.scheme.lower())
    if plain is None:
        return url, False
    return urlunsplit(parts._replace(scheme=plain)), True


def cluster_mode(url: str, timeout: float = DETECT_TIMEOUT_S) -> bool:
    """Whether ``url`` names a cluster node (asked once per URL per process).

    Args:
        url: a ``redis://``, ``rediss://``, ``unix://`` or ``redis+cluster://`` URL.
        timeout: connect and reply timeout of the question (seconds).

    Returns:
        ``True`` for a cluster node; ``False`` for a single node, or when the server
        did not answer (not remembered: the next client asks again).
    """
    plain, forced = split_url(url)
    if forced:
        return True
    if urlsplit(plain).scheme.lower() not in ("redis", "rediss"):
        return False
    # asked of database 0: a cluster node refuses SELECT of any other
    server = urlunsplit(urlsplit(plain)._replace(path=""))
    with _lock:
        known = _modes.get(server)
    if known is not None:
        return known
    retry = redis.retry.Retry(NoBackoff(), 0)
    try:
        probe = redis.Redis.from_url(
            server, socket_connect_timeout=timeout, socket_timeout=timeout, retry=retry
        )
    except (ValueError, TypeError):
        return False  # not a URL redis-py reads: the client made from it says so
    try:
        info = probe.info("cluster")
    except redis.ResponseError:
        enabled = False  # INFO refused (an ACL, a proxy): treated as a single node
    except (redis.RedisError, OSError) as exc:
        log.debug("echomq: cluster detection at %s: no answer (%s)", _safe(server), exc)
        return False
    else:
        enabled = str(info.get("cluster_enabled", "0")) == "1"
    finally:
        probe.close()
    with _lock:
        _modes[server] = enabled
    return enabled


def _safe(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.hostname}:{parts.port}"


def cluster_options(asyncio: bool = False) -> dict[str, Any]:
    """The ``RedisCluster`` keyword arguments that turn off its re-running of commands
    (see the module docstring)."""
    if _REDIS_MAJOR >= 6:
        retry_cls = redis.asyncio.retry.Retry if asyncio else redis.retry.Retry
        return {"retry": retry_cls(NoBackoff(), 0)}
    if asyncio:
        return {"cluster_error_retry_attempts": 0, "connection_error_retry_attempts": 0}
    return {"cluster_error_retry_attempts": 0}


def _cluster_url(url: str) -> str:
    plain = split_url(url)[0]
    db = urlsplit(plain).path.strip("/")
    if db not in ("", "0"):
        raise InvalidArgument(f"a cluster has database 0 only; the URL names database {db}")
    return plain


def sync_client(url: str | None = None, **kwargs: Any) -> Any:
    """A ``redis.Redis``, or a ``RedisCluster`` when ``url`` names a cluster node.

    Args:
        url: the server URL (default ``redis://127.0.0.1:6379/0``).
        kwargs: more client options (``decode_responses``, ``socket_timeout``, ...).

    Raises:
        InvalidArgument: a cluster URL that names a database other than 0.
    """
    url = url or DEFAULT_URL
    if cluster_mode(url):
        return RedisCluster.from_url(_cluster_url(url), **cluster_options(), **kwargs)
    return redis.Redis.from_url(split_url(url)[0], **kwargs)


def async_client(url: str | None = None, **kwargs: Any) -> Any:
    """A ``redis.asyncio.Redis``, or a ``redis.asyncio.cluster.RedisCluster`` when
    ``url`` names a cluster node (the question is asked synchronously, once per URL).

    Raises:
        InvalidArgument: a cluster URL that names a database other than 0.
    """
    url = url or DEFAULT_URL
    if cluster_mode(url):
        return AsyncRedisCluster.from_url(
            _cluster_url(url), **cluster_options(asyncio=True), **kwargs
        )
    return redis.asyncio.Redis.from_url(split_url(url)[0], **kwargs)


def is_cluster(client: Any) -> bool:
    """Whether ``client`` is a cluster client (sync or asyncio)."""
    return isinstance(client, (RedisCluster, AsyncRedisCluster))


def async_client_for(client: Any) -> AsyncRedisCluster:
    """An asyncio cluster client for the same cluster and settings as the sync
    ``client`` (a worker made from a sync ``Queue`` on a cluster)."""
    node = client.get_default_node()
    pool = node.redis_connection.connection_pool if node.redis_connection else None
    kwargs = dict(pool.connection_kwargs) if pool is not None else {}
    keep = {
        "username", "password", "socket_timeout", "socket_connect_timeout", "client_name",
        "encoding", "encoding_errors", "decode_responses", "protocol",
    }  # fmt: skip
    opts = {k: v for k, v in kwargs.items() if k in keep or k.startswith("ssl_")}
    if pool is not None and pool.connection_class.__name__ == "SSLConnection":
        opts["ssl"] = True
    return AsyncRedisCluster(
        host=node.host, port=node.port, **cluster_options(asyncio=True), **opts
    )
