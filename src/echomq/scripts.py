"""The script registry and the runners that drive verbs against a server.

Each ``lua/<name>.lua`` is read once per process; a line ``--! include <lib>`` splices in
``lua/lib/<lib>.lua`` (shared helpers such as the ring upkeep) so each transition stays
one self-contained script on the server. The sha1 is computed locally and every call is
an ``EVALSHA``; on ``NOSCRIPT`` the runner loads the body and retries once.

A *verb* is written once, as a plan: a generator that yields :class:`Eval`, :class:`Cmd`
or :class:`Batch` operations, receives their replies and returns the verb's result. The
sync and async runners below are the only code that knows about I/O; they drive the
same plans. A server error whose code is in :data:`echomq.errors.REPLY_CODES` is thrown
into the plan as the typed exception.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Generator, Sequence
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any, TypeVar

import redis
import redis.asyncio

from . import errors
from .keyspace import KEYSPACE_VERSION, VERSION_KEY
from .line import DECLINED, AsyncLine, SyncLine

T = TypeVar("T")
Arg = str | int | float | bytes

_INCLUDE = re.compile(r"^--! include (\w+)\s*$", re.MULTILINE)


@dataclass(frozen=True)
class Script:
    """One Lua transition: its name, full body and locally computed sha1."""

    name: str
    body: str
    sha: str


# A top-level definition in a lib file: `local function name(` or `local NAME =`.
_DEFINITION = re.compile(r"^local (?:function )?(\w+)", re.MULTILINE)
_WORD = re.compile(r"\w+")


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
    needed = set(_WORD.findall(user)) & names
    for name, text in reversed(blocks):  # a definition only uses earlier ones
        if name in needed:
            needed |= set(_WORD.findall(text)) & names
    return "".join(text for name, text in blocks if name in needed)


@cache
def script(name: str) -> Script:
    """Load ``lua/<name>.lua`` once per process; each ``--! include <lib>`` line is
    replaced by the definitions of ``lua/lib/<lib>.lua`` that the script uses."""
    root = resources.files("echomq") / "lua"
    text = (root / f"{name}.lua").read_text(encoding="utf-8")

    def splice(m: re.Match[str]) -> str:
        lib = (root / "lib" / f"{m.group(1)}.lua").read_text(encoding="utf-8")
        return splice_lib(lib, text)

    body = _INCLUDE.sub(splice, text)
    return Script(name, body, hashlib.sha1(body.encode()).hexdigest())


@dataclass(frozen=True)
class Eval:
    """Run a script by sha with ``keys`` and ``args``."""

    script: Script
    keys: Sequence[str]
    args: Sequence[Arg] = ()


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


def map_error(exc: redis.ResponseError) -> Exception:
    """Translate a server error reply into the echomq tree (or a ScriptError)."""
    msg = str(exc)
    mapped = errors.from_reply(msg)
    if mapped is not None:
        return mapped
    return errors.ScriptError(msg)


def is_noscript(exc: BaseException) -> bool:
    return isinstance(exc, redis.exceptions.NoScriptError) or (
        isinstance(exc, redis.ResponseError) and str(exc).startswith("NOSCRIPT")
    )


def command(op: Eval | Cmd) -> tuple[Arg, ...]:
    """The command ``op`` sends (``EVALSHA sha numkeys keys... args...`` for a script)."""
    if isinstance(op, Eval):
        return ("EVALSHA", op.script.sha, len(op.keys), *op.keys, *op.args)
    return op.args


def _queue_ops(pipe: Any, cmds: Sequence[tuple[Arg, ...]]) -> None:
    for cmd in cmds:
        pipe.execute_command(*cmd)


def _settle(
    batch: Batch, todo: list[int], replies: list[Any], first: bool, results: list[Any]
) -> list[int]:
    """Store each reply (errors mapped); return the indexes to rerun after a NOSCRIPT."""
    retry: list[int] = []
    for i, reply in zip(todo, replies):
        if first and is_noscript(reply):
            retry.append(i)
        elif isinstance(reply, redis.ResponseError):
            results[i] = map_error(reply)
        else:
            results[i] = reply
    return retry


def _scripts_of(batch: Batch, idx: list[int]) -> list[Script]:
    return list(
        {op.script.name: op.script for i in idx if isinstance(op := batch.ops[i], Eval)}.values()
    )


def _as_str(value: Any) -> str | None:
    if value is None:
        return None
    return value.decode() if isinstance(value, bytes) else str(value)


def _check_version(found: Any) -> None:
    got = _as_str(found)
    if got != KEYSPACE_VERSION:
        raise errors.VersionMismatch(
            f"server keyspace version {got!r}, this client speaks {KEYSPACE_VERSION!r}"
        )


class SyncRunner:
    """Drives plans on a ``redis.Redis`` (or ``redis.RedisCluster``) client."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self.line = SyncLine(client)
        self._fenced = False

    def fence(self) -> None:
        """Set ``{emq}:version`` if absent and compare it, once per runner."""
        if self._fenced:
            return
        try:
            self.client.set(VERSION_KEY, KEYSPACE_VERSION, nx=True)
            _check_version(self.client.get(VERSION_KEY))
        except redis.ConnectionError as exc:
            raise errors.ServerUnavailable(str(exc)) from exc
        self._fenced = True

    def close(self) -> None:
        """Close the runner's own connection (the client is the caller's)."""
        self.line.close()

    def _call(self, cmd: tuple[Arg, ...]) -> Any:
        reply = self.line.call(cmd)
        return self.client.execute_command(*cmd) if reply is DECLINED else reply

    def _eval(self, op: Eval) -> Any:
        try:
            return self._call(command(op))
        except redis.ResponseError as exc:
            if not is_noscript(exc):
                raise
            self.client.script_load(op.script.body)
            return self._call(command(op))

    def _pipeline(self, cmds: list[tuple[Arg, ...]]) -> list[Any]:
        replies = self.line.batch(cmds)
        if replies is DECLINED:
            pipe = self.client.pipeline(transaction=False)
            _queue_ops(pipe, cmds)
            replies = pipe.execute(raise_on_error=False)
        return list(replies)

    def _batch(self, batch: Batch) -> list[Any]:
        results: list[Any] = [None] * len(batch.ops)
        todo = list(range(len(batch.ops)))
        for first in (True, False):
            replies = self._pipeline([command(batch.ops[i]) for i in todo])
            todo = _settle(batch, todo, replies, first, results)
            if not todo:
                break
            for s in _scripts_of(batch, todo):
                self.client.script_load(s.body)
        return results

    def execute(self, op: Op) -> Any:
        """Run one operation and return its raw reply (errors mapped)."""
        try:
            if isinstance(op, Eval):
                return self._eval(op)
            if isinstance(op, Cmd):
                return self._call(op.args)
            return self._batch(op)
        except redis.ResponseError as exc:
            raise map_error(exc) from exc
        except redis.ConnectionError as exc:
            raise errors.ServerUnavailable(str(exc)) from exc

    def drive(self, plan: Plan[T]) -> T:
        """Run ``plan`` to completion and return its result.

        The plan's first step (where it gates its arguments) runs before the version
        fence, so a malformed id or name raises before anything is sent.
        """
        try:
            op = next(plan)
            self.fence()
            while True:
                try:
                    reply = self.execute(op)
                except errors.EchoMQError as exc:
                    op = plan.throw(exc)
                else:
                    op = plan.send(reply)
        except StopIteration as stop:
            result: T = stop.value
            return result


class AsyncRunner:
    """Drives plans on a ``redis.asyncio.Redis`` client."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self.line = AsyncLine(client)
        self._fenced = False

    async def fence(self) -> None:
        """Set ``{emq}:version`` if absent and compare it, once per runner."""
        if self._fenced:
            return
        try:
            await self.client.set(VERSION_KEY, KEYSPACE_VERSION, nx=True)
            _check_version(await self.client.get(VERSION_KEY))
        except redis.ConnectionError as exc:
            raise errors.ServerUnavailable(str(exc)) from exc
        self._fenced = True

    async def aclose(self) -> None:
        """Close the runner's own connection (the client is the caller's)."""
        await self.line.aclose()

    async def _call(self, cmd: tuple[Arg, ...]) -> Any:
        reply = await self.line.call(cmd)
        return await self.client.execute_command(*cmd) if reply is DECLINED else reply

    async def _eval(self, op: Eval) -> Any:
        try:
            return await self._call(command(op))
        except redis.ResponseError as exc:
            if not is_noscript(exc):
                raise
            await self.client.script_load(op.script.body)
            return await self._call(command(op))

    async def _pipeline(self, cmds: list[tuple[Arg, ...]]) -> list[Any]:
        replies = await self.line.batch(cmds)
        if replies is DECLINED:
            pipe = self.client.pipeline(transaction=False)
            _queue_ops(pipe, cmds)
            replies = await pipe.execute(raise_on_error=False)
        return list(replies)

    async def _batch(self, batch: Batch) -> list[Any]:
        results: list[Any] = [None] * len(batch.ops)
        todo = list(range(len(batch.ops)))
        for first in (True, False):
            replies = await self._pipeline([command(batch.ops[i]) for i in todo])
            todo = _settle(batch, todo, replies, first, results)
            if not todo:
                break
            for s in _scripts_of(batch, todo):
                await self.client.script_load(s.body)
        return results

    async def execute(self, op: Op) -> Any:
        """Run one operation and return its raw reply (errors mapped)."""
        try:
            if isinstance(op, Eval):
                return await self._eval(op)
            if isinstance(op, Cmd):
                return await self._call(op.args)
            return await self._batch(op)
        except redis.ResponseError as exc:
            raise map_error(exc) from exc
        except redis.ConnectionError as exc:
            raise errors.ServerUnavailable(str(exc)) from exc

    async def drive(self, plan: Plan[T]) -> T:
        """Run ``plan`` to completion and return its result (gates before the fence)."""
        try:
            op = next(plan)
            await self.fence()
            while True:
                try:
                    reply = await self.execute(op)
                except errors.EchoMQError as exc:
                    op = plan.throw(exc)
                else:
                    op = plan.send(reply)
        except StopIteration as stop:
            result: T = stop.value
            return result


def all_scripts() -> list[Script]:
    """Every transition script shipped with echomq."""
    root = resources.files("echomq") / "lua"
    names = sorted(p.name[:-4] for p in root.iterdir() if p.name.endswith(".lua"))
    return [script(n) for n in names]


# Re-exported so plan modules need a single import for the async client type.
AsyncRedis = redis.asyncio.Redis
