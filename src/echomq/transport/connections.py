"""What the sync and async transports share about connections: which failures mean
a connection dropped, the kept connection's making and its fork check, the name of
the server for the outage log, and the client's response callbacks."""

from __future__ import annotations

import inspect
import os
from collections.abc import Sequence
from typing import Any

import redis
import redis.asyncio

from ..connect import is_cluster
from ..scripts import Arg

_pack_one: Any
try:  # hiredis's documented packer (hiredis >= 2.1): C, where redis-py's asyncio one is Python
    from hiredis import pack_command as _pack_one
except ImportError:  # pragma: no cover - an older hiredis, or none
    _pack_one = None

#: Whether the kept connection is used (``EMQ_FAST_PATH=0`` turns it off).
FAST_PATH = os.environ.get("EMQ_FAST_PATH", "1").strip() not in ("0", "false", "no", "off")

#: A connection that failed: at the write nothing ran, after it the replies stopped.
DROPPED = (redis.ConnectionError, redis.TimeoutError, OSError)

# Bumped in a forked child, so a kept connection knows it is the parent's without
# asking the kernel for its pid on every call.
_forks = 0


def _forked() -> None:
    global _forks
    _forks += 1


os.register_at_fork(after_in_child=_forked)


def forks() -> int:
    """How many forks this process is from the one that imported echomq (a kept
    connection made at another count belongs to another process)."""
    return _forks


def where(client: Any) -> str:
    """The server ``client`` talks to, as the outage log names it."""
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


def keeps(pool: Any) -> bool:
    """Whether a kept connection may be made like ``pool``'s own."""
    return type(pool) in _PLAIN_POOLS and getattr(pool, "cache", None) is None


def make(pool: Any) -> Any:
    """A connection made like ``pool``'s own, outside it (the kept connection)."""
    return pool.connection_class(**pool.connection_kwargs)


def takes_name(pool: Any) -> bool:
    """Whether ``pool.get_connection`` wants a command name."""
    # redis-py < 5.3 requires the command name; later ones warn when given one
    try:
        param = inspect.signature(pool.get_connection).parameters.get("command_name")
    except (TypeError, ValueError):
        return False
    return param is not None and param.default is inspect.Parameter.empty


def packed(conn: Any, cmds: Sequence[tuple[Arg, ...]]) -> Any:
    """``cmds`` in the wire's form, for ``conn.send_packed_command``.

    hiredis packs them when it can: the same bytes as redis-py's packer (str as UTF-8,
    an int in decimal, a float as ``repr``), at a fraction of its cost, which a batch
    completion of a hundred ids pays on every call (``bench/multiqueue.py``). A
    connection with another encoding, or an argument hiredis does not take, goes
    through redis-py's packer, which also raises its own error for a bad argument.
    """
    if _pack_one is not None and _utf8(conn):
        try:
            if len(cmds) == 1:  # one command (a verb's usual): no join
                return [_pack_one(cmds[0])]
            return [b"".join([_pack_one(cmd) for cmd in cmds])]
        except (TypeError, UnicodeError):
            pass
    return conn.pack_commands(cmds)


def _utf8(conn: Any) -> bool:
    encoder = getattr(conn, "encoder", None)
    return (
        encoder is not None
        and encoder.encoding.lower() in ("utf-8", "utf8")
        and encoder.encoding_errors == "strict"
    )


_SCRIPT_CALLS = ("EVALSHA", "FCALL")


def callbacks(client: Any) -> Any:
    """The client's response callbacks (``set_response_callback``)."""
    return getattr(client, "response_callbacks", None) or {}


def shape(callbacks: Any, cmds: Sequence[tuple[Arg, ...]], replies: list[Any]) -> list[Any]:
    """Apply the client's response callbacks (``set_response_callback``) to replies of
    plain commands, as ``execute_command`` would; a script's reply has none."""
    out = []
    for cmd, r in zip(cmds, replies):
        name = cmd[0]
        if name in _SCRIPT_CALLS or isinstance(r, redis.ResponseError):
            out.append(r)
            continue
        cb = callbacks.get(name)
        out.append(r if cb is None else cb(r))
    return out
