"""The sans-IO exchange: what an operation sends, how each reply or failure is
judged, and whether it goes again.

An :data:`Exchange` is a generator: it yields a :class:`Request` (commands to write
in one go), receives their replies, or has :class:`NotSent` / :class:`NoReply` thrown
in by the transport that drives it, and returns the operation's result. The rules
(the at-most-once re-send, the ``NOSCRIPT`` reload, the version fence) live here
once; the sync and async transports only move bytes.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any, NamedTuple

import redis

from .. import errors
from ..errors import InvalidJobId
from ..ids import validate
from ..keyspace import KEYSPACE_VERSION, VERSION_KEY
from ..native import Executor
from ..replies import error, outcome
from ..scripts import Arg, Batch, Cmd, Eval, Op, command, is_noscript
from .resend import resendable


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


class Request(NamedTuple):
    """Commands to write in one go and read back, and whether the kept connection
    may carry them (only operations that may be re-sent)."""

    # a named tuple, not a frozen dataclass: one is made per call, and a frozen
    # dataclass's __init__ costs about twice as many instructions

    cmds: list[tuple[Arg, ...]]
    fast: bool


# What a transport yields to its driver: send these, give me the replies (each a
# reply or the redis.ResponseError in its place), or throw NotSent / NoReply.
Exchange = Generator[Request, list[Any], Any]


def native_command(op: Eval | Cmd, executor: Executor | None) -> tuple[Arg, ...]:
    """The command ``op`` sends: a script with a native twin goes as
    ``EMQ.<VERB> numkeys keys... args...`` once ``executor`` resolved to native
    (:mod:`echomq.native`), anything else as :func:`~echomq.scripts.command` builds it."""
    if executor is None:
        return command(op)
    if isinstance(op, Eval):
        twin = executor.twin(op.script.name)
        if twin is not None:
            return (twin, len(op.keys), *op.keys, *op.args)
    return command(op, executor.fcall)


def exchange(op: Op, executor: Executor | None = None) -> Exchange:
    """Run one operation (a batch: each of its operations) with the at-most-once
    rule and the ``NOSCRIPT`` reload; return its reply (a batch: the list of replies,
    each error as the mapped exception instance).

    A script sent as ``FCALL`` (``executor.fcall``) that meets ``Function not found``
    has its library loaded and goes again; one that meets a server without Functions
    (:func:`no_functions`), or whose library the server will not load, goes again as
    ``EVALSHA``, and the executor sends ``EVALSHA`` from then on. Neither ran.

    Raises:
        ServerUnavailable: the server could not be reached (nothing ran), or an
            idempotent operation failed twice.
        OutcomeUnknown: an operation that is not re-sent was written and no reply came.
        EchoMQError: the mapped error reply of a single operation.
    """
    ops: tuple[Eval | Cmd, ...] = op.ops if isinstance(op, Batch) else (op,)
    results: list[Any] = [None] * len(ops)
    todo = list(range(len(ops)))
    resent = False
    loaded: set[str] = set()  # what was loaded once: "SCRIPT", "FUNCTION"
    # ops a native command deferred to their script (EMQFLOW: a flow parent's completion)
    scripted: set[int] = set()
    while todo:
        if len(todo) == 1:  # one operation (a verb's usual): no lists to walk
            i = todo[0]
            fast = resendable(ops[i])
            cmds = [native_command(ops[i], None if i in scripted else executor)]
        else:
            fast = all([resendable(ops[i]) for i in todo])
            cmds = [native_command(ops[i], None if i in scripted else executor) for i in todo]
        try:
            replies = yield Request(cmds, fast)
            failure: NoReply | None = None
        except NotSent as exc:
            if resent:
                raise errors.ServerUnavailable(str(exc)) from exc
            resent = True  # nothing ran: once more on a fresh connection
            continue
        except NoReply as exc:
            replies, failure = exc.got, exc
        noscript: list[int] = []
        deferred: list[int] = []
        for i, cmd, r in zip(todo, cmds, replies):
            # only an error reply can ask for a load, a fall-back or the script
            if isinstance(r, redis.ResponseError):
                kind = "FUNCTION" if cmd[0] == "FCALL" else "SCRIPT"
                if kind == "FUNCTION" and no_functions(r):
                    assert executor is not None  # FCALL is only sent for an executor
                    executor.fcall = False  # not run: again as EVALSHA, and from now on
                    deferred.append(i)
                    continue
                if is_noscript(r) and kind not in loaded:
                    noscript.append(i)
                    continue
                if i not in scripted and _deferred(r):
                    # refused before any write: the same call again, as the script
                    scripted.add(i)
                    deferred.append(i)
                    continue
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
            assert all(isinstance(ops[i], Eval) for i in noscript)
            by_kind: dict[str, dict[str, Any]] = {"SCRIPT": {}, "FUNCTION": {}}
            for i in noscript:
                s = ops[i].script  # type: ignore[union-attr]
                kind = "FUNCTION" if cmds[todo.index(i)][0] == "FCALL" else "SCRIPT"
                by_kind[kind][s.name] = s
            for kind, scripts in by_kind.items():
                if not scripts:
                    continue
                loaded.add(kind)
                # loading is idempotent, so it may travel on the kept connection
                if kind == "SCRIPT":
                    yield from _load([("SCRIPT", "LOAD", s.body) for s in scripts.values()])
                elif not (yield from _load_libraries(list(scripts.values()))):
                    assert executor is not None
                    executor.fcall = False  # the server keeps no library: EVALSHA
        todo = sorted(noscript + unknown + deferred)
    if isinstance(op, Batch):
        return results
    if isinstance(results[0], Exception):
        raise results[0]
    return results[0]


def _deferred(reply: Any) -> bool:
    """A native command's ``EMQFLOW defer``: the job is a flow's, which the script
    settles (docs/native.md); nothing was written."""
    return isinstance(reply, redis.ResponseError) and str(reply).startswith("EMQFLOW")


def _send_loads(cmds: list[tuple[Arg, ...]]) -> Exchange:
    """Send loads (idempotent: once more on a fresh connection after a failure);
    their replies."""
    for attempt in (1, 2):
        try:
            return (yield Request(cmds, True))
        except (NotSent, NoReply) as exc:
            if attempt == 2:
                raise errors.ServerUnavailable(str(exc)) from exc
    raise AssertionError("unreachable: the second attempt returns or raises")


def _load(cmds: list[tuple[Arg, ...]]) -> Exchange:
    for r in (yield from _send_loads(cmds)):
        if isinstance(r, redis.ResponseError):
            raise error(r)


def no_functions(reply: Any) -> bool:
    """Whether an ``FCALL``'s error reply says the server runs no Functions: an
    unknown command (Redis 6, a proxy) or one this user may not run (an ACL). The
    call did not run."""
    if not isinstance(reply, redis.ResponseError):
        return False
    text = str(reply).lower()
    return "fcall" in text and ("unknown command" in text or "no permissions" in text)


def _load_libraries(scripts: list[Any]) -> Exchange:
    """``FUNCTION LOAD`` each script's library; whether the server took them all (a
    library another client loaded first counts as taken). A server that refuses a
    load (full, an ACL, no Functions) returns False: the scripts go as ``EVALSHA``."""
    cmds: list[tuple[Arg, ...]] = [("FUNCTION", "LOAD", s.library.code) for s in scripts]
    replies = yield from _send_loads(cmds)
    return all(
        not isinstance(r, redis.ResponseError) or "already exists" in str(r) for r in replies
    )


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
