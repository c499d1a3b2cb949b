"""The scripts' Functions form (echomq.functions): every library loads, ``FCALL`` first
with a load on ``Function not found``, and the fall back to ``EVALSHA`` on a server that
has no Functions or will not load them. The same verbs answer the same either way
(the lifecycle suites run a third time by ``EVALSHA``: ``evalsha_too``)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from importlib import resources
from typing import Any

import pytest
import redis

from conftest import dump
from echomq import Queue
from echomq.embedded import EmbeddedServer
from echomq.functions import PREFIX, split
from echomq.scripts import all_scripts, script
from echomq.transitions import _READ, TRANSITIONS
from echomq.transport import SyncTransport
from echomq.transport.exchange import _load_libraries, no_functions

LUA = resources.files("echomq") / "lua"


def stats(r: redis.Redis) -> dict[str, int]:
    raw = r.info("commandstats")
    names = {
        "fcall": "fcall",
        "evalsha": "evalsha",
        "fload": "function|load",
        "sload": "script|load",
    }
    return {k: int(raw.get(f"cmdstat_{v}", {}).get("calls", 0)) for k, v in names.items()}


def delta(after: dict[str, int], before: dict[str, int]) -> dict[str, int]:
    return {k: after[k] - before[k] for k in after}


def libraries(r: redis.Redis) -> dict[str, list[str]]:
    """The server's libraries: name -> the flags of its one function."""
    out: dict[str, list[str]] = {}
    for lib in r.execute_command("FUNCTION", "LIST"):
        entry = _as_map(lib)
        fns = entry["functions"]
        assert len(fns) == 1
        fn = _as_map(fns[0])
        assert fn["name"] == entry["library_name"]
        out[entry["library_name"]] = sorted(fn["flags"])
    return out


def _as_map(raw: Any) -> dict[str, Any]:
    """A map reply as redis-py gives it (a dict, or a flat list on older ones)."""
    return dict(raw) if isinstance(raw, dict) else dict(zip(raw[::2], raw[1::2]))


@pytest.fixture()
def fresh(r: redis.Redis) -> Iterator[redis.Redis]:
    """The test server with no library loaded (as a restarted server has none)."""
    r.execute_command("FUNCTION", "FLUSH")
    yield r


# ---------------------------------------------------------------- the libraries


def test_every_script_has_a_library_that_loads_with_its_flags(fresh: redis.Redis) -> None:
    for s in all_scripts():
        assert s.library is not None
        assert fresh.execute_command("FUNCTION", "LOAD", s.library.code) == s.library.name
    loaded = libraries(fresh)
    assert set(loaded) == {s.library.name for s in all_scripts() if s.library}
    for s in all_scripts():
        assert s.library is not None
        flags, _, _, _ = split((LUA / f"{s.name}.lua").read_text(encoding="utf-8"))
        assert loaded[s.library.name] == sorted(flags)
    assert loaded[str(getattr(script("claim").library, "name", ""))] == ["allow-oom"]
    assert loaded[str(getattr(script("counts").library, "name", ""))] == ["no-writes"]
    assert loaded[str(getattr(script("enqueue").library, "name", ""))] == []


def test_a_read_is_flagged_no_writes_and_runs_on_a_full_server() -> None:
    # the one place of a script's flags is its shebang; a read says no-writes, so that
    # both forms serve it when memory is full and on a replica
    for s in all_scripts():
        reads = TRANSITIONS[s.name].why == _READ
        assert ("no-writes" in s.body.splitlines()[0]) == reads, s.name


def test_a_library_defines_its_helpers_once_and_is_named_by_its_code() -> None:
    s = script("complete")
    assert s.library is not None
    name, code = s.library.name, s.library.code
    assert re.fullmatch(rf"{PREFIX}complete_[0-9a-f]{{12}}", name)
    assert code.startswith(f"#!lua name={name}\n")
    head, _, body = code.partition("register{function_name")
    assert "local function tombstone(" in head and "local function tombstone(" in s.body
    assert "local function tombstone(" not in body  # made once, at load
    assert "KEYS, ARGV = keys, args\nB = KEYS[1]\n" in body
    # the standard globals it uses, as locals taken at the first call
    assert "local redis, cjson, string, table, math, tonumber" in head
    assert "if not redis then redis, cjson" in body
    assert "--! include" not in code
    # every script its own name; the same script the same name
    names = [x.library.name for x in all_scripts() if x.library]
    assert len(set(names)) == len(names)
    assert script("complete").library == s.library


def test_a_script_without_a_prelude_has_no_functions_form() -> None:
    with pytest.raises(ValueError, match="local B = KEYS"):
        split("-- a script\nreturn 1\n")


# ---------------------------------------------------------------- FCALL first


def test_fcall_first_load_once_on_function_not_found(fresh: redis.Redis, q: Queue) -> None:
    before = stats(fresh)
    jid = q.enqueue("x")
    after = stats(fresh)
    # one FCALL answered Function not found, one load, the FCALL again; no EVALSHA
    assert delta(after, before) == {"fcall": 2, "fload": 1, "evalsha": 0, "sload": 0}
    lib = script("enqueue").library
    assert lib is not None and lib.name in libraries(fresh)
    q.enqueue("y")
    assert delta(stats(fresh), after) == {"fcall": 1, "fload": 0, "evalsha": 0, "sload": 0}
    assert fresh.zcard(q.keys.pending) == 2 and fresh.hget(q.keys.job(jid), "state") == "pending"


def test_a_batch_loads_each_library_once(fresh: redis.Redis, q: Queue) -> None:
    jid = q.enqueue("x")
    fresh.execute_command("FUNCTION", "FLUSH")
    before = stats(fresh)
    got = q.claim_many(2)
    assert [c.id for c in got] == [jid]
    q.complete(jid, got[0].token)
    after = delta(stats(fresh), before)
    assert after["fload"] == 2 and after["evalsha"] == 0  # claim's and complete's
    assert fresh.zcard(q.keys.active) == 0 and fresh.exists(q.keys.job(jid)) == 0


def test_a_library_another_client_loaded_counts_as_loaded(fresh: redis.Redis) -> None:
    s = script("counts")
    t = SyncTransport(redis.Redis(connection_pool=fresh.connection_pool))
    assert t.run(_load_libraries([s])) is True
    assert t.run(_load_libraries([s])) is True  # 'already exists': taken
    assert list(libraries(fresh)) == [s.library.name if s.library else ""]


def test_no_functions_reads_the_replies_of_servers_without_them() -> None:
    assert no_functions(redis.ResponseError("unknown command 'FCALL', with args beginning with: "))
    assert no_functions(redis.ResponseError("unknown command `FCALL`, with args beginning with:"))
    assert no_functions(
        redis.exceptions.NoPermissionError("this user has no permissions to run the 'fcall' cmd")
    )
    assert not no_functions(redis.ResponseError("Function not found"))
    assert not no_functions(redis.ResponseError("EMQGONE job"))
    assert not no_functions("unknown command 'FCALL'")  # a reply, not an error


# ---------------------------------------------------------------- EVALSHA for good


@pytest.fixture(params=["FCALL", "FUNCTION"])
def crippled(request: pytest.FixtureRequest) -> Iterator[EmbeddedServer]:
    """A private server where FCALL (as on Redis 6) or FUNCTION (no library can be
    loaded) is not a command."""
    with EmbeddedServer(module=False, extra_args=("--rename-command", request.param, "")) as srv:
        yield srv


def test_a_server_without_functions_gets_evalsha_and_the_same_answers(
    crippled: EmbeddedServer, qname: str
) -> None:
    r = redis.Redis.from_url(crippled.url, decode_responses=True)
    q = Queue(qname, url=crippled.url, executor="scripts")
    try:
        assert q.ctx.executor.fcall is True
        jid = q.enqueue({"n": 1})
        assert q.ctx.executor.fcall is False  # decided once, for good
        got = q.claim()
        assert got is not None and got.id == jid
        q.complete(jid, got.token)
        c = q.counts()
        assert (c.pending, c.active, c.completed) == (0, 0, 1)
        raw = r.info("commandstats")
        assert int(raw["cmdstat_evalsha"]["calls"]) >= 4
        assert r.exists(q.keys.job(jid)) == 0 and r.zcard(q.keys.pending) == 0
        after = stats(r)
        q.enqueue("again")
        assert delta(stats(r), after)["evalsha"] == 1  # no FCALL tried any more
    finally:
        q.close()
        r.close()


# ---------------------------------------------------------------- emq functions


def _emq(url: str, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, Any]:
    from echomq.cli.app import main

    code = main(["--url", url, "--json", *args])
    out = capsys.readouterr().out
    return code, json.loads(out) if out.strip() else None


def test_emq_functions_lists_and_prunes_the_old_libraries(
    server: EmbeddedServer, fresh: redis.Redis, q: Queue, capsys: pytest.CaptureFixture[str]
) -> None:
    q.enqueue("x")  # enqueue's library, this version's
    old = "#!lua name=emq_enqueue_000000000000\nredis.register_function('emq_enqueue_000000000000', function() return 1 end)\n"  # noqa: E501
    fresh.execute_command("FUNCTION", "LOAD", old)
    other = "#!lua name=theirs\nredis.register_function('theirs', function() return 1 end)\n"
    fresh.execute_command("FUNCTION", "LOAD", other)  # not echomq's: never touched
    current = str(getattr(script("enqueue").library, "name", ""))
    code, doc = _emq(server.url, capsys, "functions", "list")
    assert code == 0 and doc == {
        "libraries": [
            {"library": "emq_enqueue_000000000000", "current": False},
            {"library": current, "current": True},
        ]
    }
    code, doc = _emq(server.url, capsys, "functions", "prune")  # no terminal, no --yes
    assert code != 0 and set(libraries(fresh)) == {"emq_enqueue_000000000000", current, "theirs"}
    code, doc = _emq(server.url, capsys, "functions", "prune", "--yes")
    assert code == 0 and doc == {"deleted": ["emq_enqueue_000000000000"]}
    assert set(libraries(fresh)) == {current, "theirs"}
    assert q.enqueue("y") and fresh.zcard(q.keys.pending) == 2
    code, doc = _emq(server.url, capsys, "functions", "prune", "--all", "--yes")
    assert code == 0 and doc == {"deleted": [current]} and set(libraries(fresh)) == {"theirs"}
    # a running client loads its library again on its next call
    assert q.enqueue("z") and current in libraries(fresh) and fresh.zcard(q.keys.pending) == 3


def test_a_full_server_refusing_the_load_gets_evalsha(qname: str) -> None:
    # FUNCTION LOAD needs memory, SCRIPT LOAD does not: a queue first met on a full
    # server reads and settles by EVALSHA (its writes are refused as ServerFull either way)
    with EmbeddedServer(module=False) as srv:
        r = redis.Redis.from_url(srv.url, decode_responses=True)
        q = Queue(qname, url=srv.url, executor="scripts")
        try:
            jid = q.enqueue("before")
            r.execute_command("FUNCTION", "FLUSH")
            r.config_set("maxmemory", int(r.info("memory")["used_memory"]) + 100_000)
            r.config_set("maxmemory-policy", "noeviction")
            with pytest.raises(redis.exceptions.OutOfMemoryError):
                for i in range(10_000):
                    r.set(f"fill{i}", "x" * 100)
            before = dump(r, q)
            c = q.counts()
            assert c.pending == 1 and q.ctx.executor.fcall is False
            assert libraries(r) == {} and dump(r, q) == before
            got = q.claim()  # the claim is allowed on a full server (allow-oom)
            assert got is not None and got.id == jid
            q.complete(jid, got.token)
            assert r.exists(q.keys.job(jid)) == 0 and r.zcard(q.keys.active) == 0
        finally:
            q.close()
            r.close()
