"""The script registry, the EVALSHA-first runners, batches and the version fence."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator
from importlib import resources
from typing import Any

import pytest
import redis

from conftest import dump, queue_keys
from echomq import (
    AsyncQueue,
    InvalidJobId,
    JobGone,
    Queue,
    ScriptError,
    ServerUnavailable,
    StaleToken,
    VersionMismatch,
    new_id,
)
from echomq.embedded import EmbeddedServer, free_port
from echomq.keyspace import KEYSPACE_VERSION, VERSION_KEY
from echomq.scripts import Batch, Cmd, Eval, Plan, all_scripts, script, splice_lib
from echomq.transport import SyncRunner

LUA = resources.files("echomq") / "lua"


def lua_names() -> list[str]:
    return sorted(p.name[:-4] for p in LUA.iterdir() if p.name.endswith(".lua"))


def stats(r: redis.Redis) -> dict[str, int]:
    raw = r.info("commandstats")
    return {k: int(raw.get(f"cmdstat_{k}", {}).get("calls", 0)) for k in ("evalsha", "eval")} | {
        "load": int(raw.get("cmdstat_script|load", {}).get("calls", 0))
    }


# ---------------------------------------------------------------- the registry


def test_every_script_is_loaded_with_its_local_sha() -> None:
    shipped = all_scripts()
    assert [s.name for s in shipped] == lua_names()
    for s in shipped:
        assert s.sha == hashlib.sha1(s.body.encode()).hexdigest()
        assert script(s.name) is s  # read once per process
        assert "--! include" not in s.body


def test_includes_are_spliced() -> None:
    raw = (LUA / "complete.lua").read_text(encoding="utf-8")
    assert "--! include common" in raw
    body = script("complete").body
    assert "--! include" not in body
    # complete uses these helpers, and give_back needs ring_sync, serveable, push_wake...
    for helper in (
        "now_text",
        "clock_text",
        "delete_row",
        "count_metric",
        "give_back",
        "ring_sync",
        "serveable",
    ):
        assert f"local function {helper}(" in body
    assert "local WAKE_CAP = 64" in body
    # ...and make_ready, lane_grew through release_dedup (a keep_last job held behind
    # the completed one is let go), but not the ones it never calls (zrem_all it does:
    # the batch form's one ZREM)
    for helper in ("make_ready", "lane_grew", "unhold"):
        assert f"local function {helper}(" in body
    for helper in ("slot_back",):
        assert f"local function {helper}(" not in body


def test_a_script_carries_only_the_lib_definitions_it_uses() -> None:
    lib = (
        "local A = 1\n"
        "-- b doubles A\n"
        "local function b() return A * 2 end\n"
        "local function c() return 3 end\n"
        "-- d calls b\n"
        "local function d() return b() end\n"
    )
    assert splice_lib(lib, "return d()") == (
        "local A = 1\n-- b doubles A\nlocal function b() return A * 2 end\n"
        "-- d calls b\nlocal function d() return b() end\n"
    )
    assert splice_lib(lib, "return c()") == "local function c() return 3 end\n"
    assert splice_lib(lib, "return 1") == ""


@pytest.mark.parametrize("name", lua_names())
def test_every_script_has_a_contract_header(name: str) -> None:
    text = (LUA / f"{name}.lua").read_text(encoding="utf-8")
    if text.startswith("#!lua"):  # the server's flags line (allow-oom) comes first
        text = text.split("\n", 1)[1]
    header = []
    for line in text.splitlines():
        if not line.startswith("--"):
            break
        header.append(line)
    head = "\n".join(header)
    assert header and header[0].startswith(f"-- {name}")
    assert "KEYS[1]" in head
    assert re.search(r"^-- Reply", head, re.M), "the header names the reply"
    assert re.search(r"^-- Refusals", head, re.M), "the header names the refusals"
    # every ARGV index the body reads is declared in the header
    body = text[len(head) :]
    for idx in set(re.findall(r"ARGV\[(\d+)\]", body)):
        assert re.search(rf"ARGV(\[{idx}\]|\[\d+\.\.\])", head), f"ARGV[{idx}] undeclared"


@pytest.mark.parametrize("name", lua_names())
def test_every_script_follows_the_one_keys_convention(name: str) -> None:
    # KEYS[1] is the queue base; a verb on one job adds KEYS[2], its row; nothing else.
    # reprocess_job keeps the seed's line (row, dead, pending, base), as its native twin.
    text = (LUA / f"{name}.lua").read_text(encoding="utf-8")
    used = {int(i) for i in re.findall(r"KEYS\[(\d+)\]", text)}
    if name == "reprocess_job":
        assert "KEYS[1]  the row emq:{q}:job:<id>;  KEYS[2] dead;  KEYS[3] pending;" in text
        assert used == {1, 2, 3, 4}
        return
    assert re.search(r"^-- KEYS\[1\]  the queue base emq:\{q\}:", text, re.M)
    assert used <= {1, 2}
    if 2 in used:
        assert "KEYS[2] the row emq:{q}:job:<id>" in text


def test_the_server_agrees_with_the_local_sha(r: redis.Redis) -> None:
    s = script("counts")
    assert r.script_load(s.body) == s.sha


# ---------------------------------------------------------------- EVALSHA first


def test_evalsha_first_reload_once_never_eval(evalsha: None, q: Queue, r: redis.Redis) -> None:
    q.counts()  # fenced and loaded
    r.script_flush()
    before = stats(r)
    q.enqueue("x")
    after = stats(r)
    # one NOSCRIPT evalsha, one load, one retried evalsha; never a body by EVAL
    assert after["evalsha"] - before["evalsha"] == 2
    assert after["load"] - before["load"] == 1
    assert after["eval"] == before["eval"]
    q.enqueue("y")
    again = stats(r)
    assert (again["evalsha"] - after["evalsha"], again["load"] - after["load"]) == (1, 0)
    assert r.script_exists(script("enqueue").sha) == [True]
    assert r.zcard(q.keys.pending) == 2


def test_a_batch_after_flush_reloads_each_script_once(
    evalsha: None, q: Queue, r: redis.Redis
) -> None:
    jid = q.enqueue("x")
    r.script_flush()
    before = stats(r)
    runner = q.runner
    replies = runner.drive(_batch_plan(q, jid))
    after = stats(r)
    assert replies[0] == replies[2] and int(replies[0][0]) == 1  # counts: one pending
    assert replies[1] in ("PONG", b"PONG", True)
    assert type(replies[3]) is JobGone or replies[3] == -1
    assert after["load"] - before["load"] == 2  # counts and complete, once each
    assert after["eval"] == before["eval"]
    assert r.zrange(q.keys.pending, 0, -1) == [jid]


def _batch_plan(q: Queue, jid: str) -> Plan[list[Any]]:
    base = (q.keys.base,)
    gone = new_id()
    return (
        yield Batch(
            (
                Eval(script("counts"), base),
                Cmd(("PING",)),
                Eval(script("counts"), base),
                Eval(script("complete"), (*base, q.keys.job(gone)), (gone, "1")),
            )
        )
    )


def test_batch_maps_each_error_in_place(q: Queue, r: redis.Redis) -> None:
    jid = q.enqueue("x")
    c = q.claim()
    assert c is not None
    before = dump(r, q)

    def plan() -> Plan[list[Any]]:
        return (
            yield Batch(
                (
                    Eval(
                        script("complete"), (q.keys.base, q.keys.job(jid)), (jid, str(c.token + 1))
                    ),
                    Cmd(("HSET", q.keys.base + "nope")),  # a wrong-arity command
                    Cmd(("HGET", q.keys.job(jid), "state")),
                )
            )
        )

    stale, wrong, state = q.runner.drive(plan())
    assert type(stale) is StaleToken
    assert type(wrong) is ScriptError and "wrong number" in str(wrong)
    assert state in ("active", b"active")
    assert dump(r, q) == before


def test_errors_are_thrown_into_the_plan(q: Queue, r: redis.Redis) -> None:
    jid = q.enqueue("x")
    before = dump(r, q)

    def plan() -> Plan[str]:
        try:  # pending, not active: the script refuses with EMQSTALE
            yield Eval(script("complete"), (q.keys.base, q.keys.job(jid)), (jid, "1"))
            first = "not raised"
        except StaleToken as exc:
            first = exc.reason
        try:
            yield Cmd(("NOSUCHCOMMAND",))
        except ScriptError as exc:
            return f"{first}, then {type(exc).__name__}"
        return "not reached"

    assert q.runner.drive(plan()) == "stale, then ScriptError"
    assert dump(r, q) == before


def test_a_plan_that_yields_nothing_sends_nothing() -> None:
    runner = SyncRunner(redis.Redis.from_url(f"redis://127.0.0.1:{free_port()}/0"))

    def plan() -> Plan[int]:
        if False:
            yield Cmd(("PING",))
        return 7

    assert runner.drive(plan()) == 7
    assert runner._fenced is False


def test_no_server_raises_server_unavailable(qname: str) -> None:
    with (
        Queue(qname, url=f"redis://127.0.0.1:{free_port()}/0") as q,
        pytest.raises(ServerUnavailable),
    ):
        q.counts()


async def test_no_server_raises_server_unavailable_async(qname: str) -> None:
    async with AsyncQueue(qname, url=f"redis://127.0.0.1:{free_port()}/0") as aq:
        with pytest.raises(ServerUnavailable):
            await aq.counts()


# ---------------------------------------------------------------- the version fence


@pytest.fixture(scope="module")
def fence_server() -> Iterator[EmbeddedServer]:
    """A server of its own: these tests rewrite ``{emq}:version``."""
    with EmbeddedServer() as srv:
        yield srv


@pytest.fixture()
def fr(fence_server: EmbeddedServer) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(fence_server.url, decode_responses=True)
    client.delete(VERSION_KEY)
    yield client
    client.delete(VERSION_KEY)
    client.close()


def test_the_first_client_sets_the_version(fence_server: EmbeddedServer, fr: redis.Redis) -> None:
    assert fr.get(VERSION_KEY) is None
    with Queue("fence-a", url=fence_server.url) as q:
        assert q.counts().pending == 0
    assert fr.get(VERSION_KEY) == KEYSPACE_VERSION


@pytest.mark.parametrize("found", ["2", "0", "1.0", ""])
def test_a_different_version_is_refused(
    fence_server: EmbeddedServer, fr: redis.Redis, found: str
) -> None:
    fr.set(VERSION_KEY, found)
    with Queue("fence-b", url=fence_server.url) as q:
        with pytest.raises(VersionMismatch):
            q.enqueue("x")
        with pytest.raises(VersionMismatch):
            q.counts()
        # the argument gate still runs first
        with pytest.raises(InvalidJobId):
            q.complete("JOB", 1)
        assert queue_keys(fr, q) == set()
    assert fr.get(VERSION_KEY) == found  # never overwritten


async def test_a_different_version_is_refused_async(
    fence_server: EmbeddedServer, fr: redis.Redis
) -> None:
    fr.set(VERSION_KEY, "999")
    async with AsyncQueue("fence-c", url=fence_server.url) as aq:
        with pytest.raises(VersionMismatch):
            await aq.enqueue("x")
        assert queue_keys(fr, aq) == set()
    fr.set(VERSION_KEY, KEYSPACE_VERSION)
    async with AsyncQueue("fence-c", url=fence_server.url) as aq:
        jid = await aq.enqueue("x")
        assert fr.zrange(aq.keys.pending, 0, -1) == [jid]


def test_the_clock_as_text_is_the_clock_in_ms(r: redis.Redis) -> None:
    # the hot paths write the server time as text built from TIME's digits (seconds,
    # microseconds); it must be now_ms's number exactly, the microseconds zero-padded
    common = (LUA / "lib" / "common.lua").read_text(encoding="utf-8")
    cases = ["0", "5", "999", "1000", "12345", "99999", "100000", "654321", "999999"]
    user = (
        "local out = {}\n"
        "for i, u in ipairs(ARGV) do\n"
        "  out[i] = {ms_text('1733112345', u),\n"
        "    tostring(1733112345 * 1000 + math.floor(tonumber(u) / 1000))}\n"
        "end\n"
        "local a = now_ms(); local n, s = now_text(); local b = now_ms()\n"
        "out[#out + 1] = {tostring(a), s, tostring(n), tostring(b)}\n"
        "return out"
    )
    *rows, (a, s, n, b) = r.eval(splice_lib(common, user) + user, 0, *cases)
    assert [text for text, _ in rows] == [
        "1733112345000", "1733112345000", "1733112345000", "1733112345001",
        "1733112345012", "1733112345099", "1733112345100", "1733112345654",
        "1733112345999",
    ]  # fmt: skip
    assert all(text == number for text, number in rows)
    # and the live clock: the text between two readings of the number (%.14g writes
    # these 13-digit integers exactly)
    assert re.fullmatch(r"[0-9]{13}", s) and s == n and int(a) <= int(s) <= int(b)
