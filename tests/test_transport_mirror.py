"""The sync half of the transport is a mirror of the asyncio half (``echomq.transport``'s
``sync`` and ``aio`` modules, and ``cluster``'s two senders): the same methods with
the same signatures, the same code once ``await`` is taken away (bar the few methods
whose waiting differs, each listed with why), and the same commands on the wire for
the same verbs. A change made to one half alone fails here."""

from __future__ import annotations

import ast
import asyncio
import inspect
import textwrap
from collections.abc import Callable
from typing import Any

import pytest
import redis

from echomq import AsyncQueue, Queue
from echomq.embedded import EmbeddedServer
from echomq.keyspace import KEYSPACE_VERSION, VERSION_KEY
from echomq.transport import (
    AsyncRunner,
    AsyncTransport,
    Request,
    SyncRunner,
    SyncTransport,
    cluster,
)

PAIRS = [(SyncTransport, AsyncTransport), (SyncRunner, AsyncRunner)]

#: The async names of the mirrored things, as their sync names.
SYNC_NAME = {
    "aclose": "close",
    "send_async": "send",
    "load_everywhere_async": "load_everywhere",
    "AsyncTransport": "SyncTransport",
}

#: Methods whose two halves differ on purpose, and why; every other one is the same
#: code in both.
DIFFERENT = {
    # the sync half takes a lock, the async one a busy flag and the loop's identity
    (SyncTransport, "__init__"),
    (SyncTransport, "_kept_conn"),
    (SyncTransport, "_release_kept"),
    (SyncTransport, "close"),
    # the async cluster client reads its slot map first, under its own lock
    (SyncRunner, "fence"),
}


def own_methods(cls: type) -> dict[str, Callable[..., Any]]:
    """The methods ``cls`` defines itself, by their sync name."""
    return {SYNC_NAME.get(name, name): f for name, f in vars(cls).items() if inspect.isfunction(f)}


class _Unasync(ast.NodeTransformer):
    """An async function's tree as its sync mirror would be written: no ``await``, no
    ``async def``, the async names as the sync ones, no docstrings, and the one
    keyword only the asyncio connection takes (``disconnect(nowait=True)``) dropped."""

    def visit_Await(self, node: ast.Await) -> ast.AST:
        return self.visit(node.value)

    def visit_AsyncFunctionDef(self, node: ast.AsyncFunctionDef) -> ast.AST:
        sync = ast.FunctionDef(**{f: getattr(node, f) for f in node._fields})
        return self.visit_FunctionDef(sync)

    def visit_FunctionDef(self, node: ast.FunctionDef) -> ast.AST:
        node.name = SYNC_NAME.get(node.name, node.name)
        body = node.body
        if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
            node.body = body[1:]  # the docstring
        self.generic_visit(node)
        return node

    def visit_Name(self, node: ast.Name) -> ast.AST:
        node.id = SYNC_NAME.get(node.id, node.id)
        return node

    def visit_Attribute(self, node: ast.Attribute) -> ast.AST:
        node.attr = SYNC_NAME.get(node.attr, node.attr)
        self.generic_visit(node)
        return node

    def visit_Call(self, node: ast.Call) -> ast.AST:
        node.keywords = [k for k in node.keywords if k.arg != "nowait"]
        self.generic_visit(node)
        return node


def code(f: Callable[..., Any]) -> str:
    tree = ast.parse(textwrap.dedent(inspect.getsource(f)))
    return ast.dump(_Unasync().visit(tree))


@pytest.mark.parametrize(("sync", "asyn"), PAIRS, ids=lambda c: c.__name__)
def test_the_halves_have_the_same_methods_and_signatures(sync: type, asyn: type) -> None:
    mine, theirs = own_methods(sync), own_methods(asyn)
    assert sorted(mine) == sorted(theirs)
    for name, f in mine.items():
        assert inspect.signature(f) == inspect.signature(theirs[name]), name
    # what does I/O is a coroutine on the async side
    for name in ("send", "run", "close", "fence", "execute", "drive"):
        if name in theirs:
            assert inspect.iscoroutinefunction(theirs[name]), name


@pytest.mark.parametrize(("sync", "asyn"), PAIRS, ids=lambda c: c.__name__)
def test_the_halves_are_one_logic(sync: type, asyn: type) -> None:
    mine, theirs = own_methods(sync), own_methods(asyn)
    for name, f in mine.items():
        same = code(f) == code(theirs[name])
        assert same != ((sync, name) in DIFFERENT), f"{sync.__name__}.{name}"


def test_the_cluster_senders_are_one_logic() -> None:
    assert code(cluster.send) == code(cluster.send_async)
    assert code(cluster.load_everywhere) == code(cluster.load_everywhere_async)


def shape(cmd: tuple[Any, ...]) -> tuple[Any, ...]:
    """A command without its ids and names: the command, the script's sha or function
    (or the loaded body's length), how many arguments."""
    calls, loads = ("EVALSHA", "FCALL"), ("SCRIPT", "FUNCTION")
    head = cmd[1] if cmd[0] in calls else len(str(cmd[2])) if cmd[0] in loads else None
    return (cmd[0], head, len(cmd))


def recording(transport: Any, sent: list[tuple[bool, list[tuple[Any, ...]]]]) -> None:
    real = transport.send

    def record(req: Request) -> Any:
        sent.append((req.fast, [shape(c) for c in req.cmds]))
        return real(req)

    transport.send = record


def test_the_halves_send_the_same_exchanges(
    server: EmbeddedServer, r: redis.Redis, qname: str
) -> None:
    """The same verbs on fresh queues: the same requests, in order, on the same path
    (the version fence passed already; every script's first call reloads it)."""
    r.set(VERSION_KEY, KEYSPACE_VERSION, nx=True)
    sync_sent: list[tuple[bool, list[tuple[Any, ...]]]] = []
    async_sent: list[tuple[bool, list[tuple[Any, ...]]]] = []

    with Queue(qname + "-sync", url=server.url, executor="scripts") as q:
        recording(q.runner.transport, sync_sent)
        r.script_flush()
        r.execute_command("FUNCTION", "FLUSH")
        q.enqueue_many(["a", "b"])
        claimed = q.claim_many(2)
        q.complete(claimed[0].id, claimed[0].token)
        q.pause()
        q.counts()

    async def verbs() -> None:
        aq = AsyncQueue(qname + "-async", url=server.url, executor="scripts")
        try:
            recording(aq.runner.transport, async_sent)
            r.script_flush()
            r.execute_command("FUNCTION", "FLUSH")
            await aq.enqueue_many(["a", "b"])
            claimed = await aq.claim_many(2)
            await aq.complete(claimed[0].id, claimed[0].token)
            await aq.pause()
            await aq.counts()
        finally:
            await aq.aclose()

    asyncio.run(verbs())
    assert sync_sent == async_sent
    # the reload ran: the Functions form's (FCALL is the default here)
    assert any(cmds[0][0] == "FUNCTION" for _, cmds in sync_sent)
