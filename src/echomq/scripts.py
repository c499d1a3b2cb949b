"""The script registry and the operations plans yield.

Each ``lua/<name>.lua`` is read once per process; a line ``--! include <lib>`` splices in
``lua/lib/<lib>.lua`` (shared helpers such as the ring upkeep) so each transition stays
one self-contained script on the server. The sha1 is computed locally and every call is
an ``EVALSHA``; on ``NOSCRIPT`` the runner loads the body and retries once.

A *verb* is written once, as a plan: a generator that yields :class:`Eval`, :class:`Cmd`
or :class:`Batch` operations, receives their replies and returns the verb's result. The
sync and async runners (:mod:`echomq.transport`) are the only code that knows about
I/O; they drive the same plans. Every reply passes once through
:func:`echomq.replies.outcome`: normalised (text as ``str``, one shape per reply), a
refusal (a code of :data:`echomq.errors.REPLY_CODES`, or ``-1`` from an op naming its
job) thrown into the plan as the typed exception with the op's job id.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Generator, Sequence
from dataclasses import dataclass, replace
from functools import cache
from importlib import resources
from typing import Any, TypeVar

import redis
import redis.asyncio

from . import functions
from .functions import Library
from .replies import CLUSTER_REPLIES, cluster_unavailable  # noqa: F401 (their old home)

T = TypeVar("T")
Arg = str | int | float | bytes

_INCLUDE = re.compile(r"^--! include (\w+)\s*$", re.MULTILINE)


@dataclass(frozen=True)
class Script:
    """One Lua transition: its name, full body and locally computed sha1, and its
    Functions form (:mod:`echomq.functions`; none for a cluster's sharded form)."""

    name: str
    body: str
    sha: str
    library: Library | None = None


# A top-level definition in a lib file: `local function name(` or `local NAME =`.
_DEFINITION = re.compile(r"^local (?:function )?(\w+)", re.MULTILINE)
_WORD = re.compile(r"\w+")
_COMMENT = re.compile(r"--[^\n]*")


def _words(code: str) -> set[str]:
    """The words ``code`` uses, its comments left out (a comment that names a key is
    no use of it)."""
    return set(_WORD.findall(_COMMENT.sub("", code)))


def _definitions(lib: str) -> list[tuple[str, str]]:
    """Split a lib into its top-level definitions, each with the comment above it."""
    lines = lib.splitlines(keepends=True)
    starts: list[tuple[int, str]] = []  # (first line of the block, defined name)
    for i, line in enumerate(lines):
        m = _DEFINITION.match(line)
        if m:
            first = i
            while first > 0 and lines[first - 1].startswith("--"):
                first -= 1
            starts.append((first, m.group(1)))
    blocks: list[tuple[str, str]] = []
    for k, (first, name) in enumerate(starts):
        end = starts[k + 1][0] if k + 1 < len(starts) else len(lines)
        blocks.append((name, "".join(lines[first:end]).rstrip("\n") + "\n"))
    return blocks


def splice_lib(lib: str, user: str) -> str:
    """The definitions of ``lib`` that ``user`` needs, directly or through each other,
    in the lib's order. Every definition a script carries costs a closure on every
    call, so a script carries only what it uses."""
    blocks = _definitions(lib)
    names = {n for n, _ in blocks}
    needed = _words(user) & names
    for name, text in reversed(blocks):  # a definition only uses earlier ones
        if name in needed:
            needed |= _words(text) & names
    return "".join(text for name, text in blocks if name in needed)


@cache
def script(name: str) -> Script:
    """Load ``lua/<name>.lua`` once per process; each ``--! include <lib>`` line is
    replaced by the definitions of ``lua/lib/<lib>.lua`` that the script uses."""
    root = resources.files("echomq") / "lua"
    text = (root / f"{name}.lua").read_text(encoding="utf-8")
    # A lib may use the libs included before it (common reads the names of keys), so
    # the last is spliced first and what it carries counts as used by the earlier ones.
    spliced: dict[str, str] = {}
    used = text
    for lib in reversed(_INCLUDE.findall(text)):
        source = (root / "lib" / f"{lib}.lua").read_text(encoding="utf-8")
        spliced[lib] = "" if lib in _INLINED else splice_lib(source, used)
        used += spliced[lib]
    inlined = [
        (root / "lib" / f"{lib}.lua").read_text(encoding="utf-8") for lib in _INLINED & set(spliced)
    ]

    def splice(code: str) -> str:
        code = _INCLUDE.sub(lambda m: spliced[m.group(1)], code)
        for lib in inlined:
            code = inline_constants(lib, code)
        return code

    body = splice(text)
    flags, prelude, helpers, rest = functions.split(text)
    form = functions.library(name, flags, prelude, splice(helpers), splice(rest))
    return Script(name, body, hashlib.sha1(body.encode()).hexdigest(), form)


#: Libs of constants (strings, whole numbers) put in place of their names rather than
#: spliced: lib/keys' suffixes and the run order's numbers. As locals they would be
#: upvalues of every helper that reads them, made anew on each call (measured: +0.3
#: to +0.6 us a call on claim/complete).
_INLINED = frozenset({"keys"})
_CONSTANT = re.compile(r"^local ([A-Z][A-Z0-9_]*) = ('[^'\n]*'|[0-9]+)$", re.MULTILINE)


def inline_constants(lib: str, body: str) -> str:
    """``body`` with each name ``lib`` defines as ``local NAME = 'text'`` (or a whole
    number) replaced by its text: the script runs as if it were spelled where used."""
    consts = dict(_CONSTANT.findall(lib))
    if not consts:
        return body
    names = re.compile(r"\b(" + "|".join(sorted(consts, key=len, reverse=True)) + r")\b")
    return names.sub(lambda m: consts[m.group(1)], body)


@dataclass(frozen=True)
class Eval:
    """Run a script by sha with ``keys`` and ``args``.

    ``job`` names the job a verb on one job is about: a ``-1`` reply is then
    ``JobGone``, and every refusal the call raises carries it as ``exc.job_id``.

    ``again`` is what the transport sends in place of ``args`` when it sends the call
    once more after a lost reply (``None``: the same ``args``). A transition whose
    first send cannot meet its own earlier run (a fresh request id, minted job ids)
    skips the reads that detect one, and asks for them on the re-send only.
    """

    script: Script
    keys: Sequence[str]
    args: Sequence[Arg] = ()
    job: str | None = None
    again: Sequence[Arg] | None = None

    def resent(self) -> Eval:
        """The call as it goes when sent again after a lost reply."""
        return self if self.again is None else replace(self, args=self.again, again=None)


@dataclass(frozen=True)
class Cmd:
    """Run one plain command (reads such as ``HGET`` or ``ZCARD``)."""

    args: tuple[Arg, ...]


@dataclass(frozen=True)
class Batch:
    """Run several operations in one pipelined round trip.

    The reply is a list with one entry per operation: its reply, or the mapped
    exception instance when that operation failed.
    """

    ops: tuple[Eval | Cmd, ...]


Op = Eval | Cmd | Batch
#: A verb's plan: yields operations, receives their replies, returns the result.
Plan = Generator[Op, Any, T]


def is_noscript(exc: BaseException) -> bool:
    """Whether a reply says the script is not on the server (``NOSCRIPT`` to an
    ``EVALSHA``, ``Function not found`` to an ``FCALL``): nothing ran, load it."""
    if isinstance(exc, redis.exceptions.NoScriptError):
        return True
    if not isinstance(exc, redis.ResponseError):
        return False
    text = str(exc)
    return text.startswith("NOSCRIPT") or text.startswith(_NO_FUNCTION)


_NO_FUNCTION = ("Function not found", "ERR Function not found")


def command(op: Eval | Cmd, fcall: bool = False) -> tuple[Arg, ...]:
    """The command ``op`` sends: a script as ``FCALL <function> numkeys keys...
    args...`` when ``fcall`` (its Functions form), else as ``EVALSHA sha numkeys
    keys... args...``."""
    if isinstance(op, Eval):
        form = op.script.library
        if fcall and form is not None:
            return ("FCALL", form.name, len(op.keys), *op.keys, *op.args)
        return ("EVALSHA", op.script.sha, len(op.keys), *op.keys, *op.args)
    return op.args


# A publish in a script: `redis.call('PUBLISH', ...)` or pcall, either quote.
_PUBLISH = re.compile(r"""redis\.(p?call)\(\s*(['"])PUBLISH\2""", re.IGNORECASE)


@cache
def sharded(s: Script) -> Script:
    """``s`` with every ``PUBLISH`` made a sharded ``SPUBLISH`` (Redis/Valkey 7.0+): what
    runs on a cluster, where a plain publish goes to every node and a sharded one stays
    in the queue's shard (the events channel carries the queue's hash tag). The same
    script otherwise: same name, keys, arguments and replies; its own sha."""
    body = _PUBLISH.sub(r"redis.\1(\2SPUBLISH\2", s.body)
    if body == s.body:
        return s
    return Script(s.name, body, hashlib.sha1(body.encode()).hexdigest())


@cache
def _sharded_by_sha() -> dict[str, Script]:
    return {s.sha: sharded(s) for s in all_scripts()}


@cache
def _sharded_by_body() -> dict[str, Script]:
    return {s.body: sharded(s) for s in all_scripts()}


def sharded_command(cmd: tuple[Arg, ...]) -> tuple[Arg, ...]:
    """The cluster form of a command: an ``EVALSHA`` of a script that publishes calls
    its :func:`sharded` form, and a ``SCRIPT LOAD`` of it loads that form; anything else
    is sent as it is."""
    if cmd[0] == "EVALSHA":
        form = _sharded_by_sha().get(str(cmd[1]))
        if form is not None:
            return ("EVALSHA", form.sha, *cmd[2:])
    elif cmd[0] == "SCRIPT" and len(cmd) == 3:
        form = _sharded_by_body().get(str(cmd[2]))
        if form is not None:
            return ("SCRIPT", "LOAD", form.body)
    return cmd


def all_scripts() -> list[Script]:
    """Every transition script shipped with echomq."""
    root = resources.files("echomq") / "lua"
    names = sorted(p.name[:-4] for p in root.iterdir() if p.name.endswith(".lua"))
    return [script(n) for n in names]


# Re-exported so plan modules need a single import for the async client type.
AsyncRedis = redis.asyncio.Redis
