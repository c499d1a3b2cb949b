"""The native module and executor: the seed's EMQ.REPROCESS line, the claim with the
pause folded in, key specs, replication of effects, and choosing an executor.

Every test asserts the reply and the keys the call left.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from click.testing import CliRunner
from redis.asyncio.cluster import RedisCluster as AsyncRedisCluster
from redis.cluster import RedisCluster

from cluster_support import LocalCluster
from conftest import _built, dump, script_calls
from echomq import AsyncQueue, Queue, Worker
from echomq.cli import cli
from echomq.embedded import EmbeddedServer
from echomq.errors import InvalidArgument, JobGone, JobNotDead
from echomq.native import TWINS, NativeUnavailable
from echomq.scripts import Eval, all_scripts, script
from test_lifecycle import run_score
from worker_support import FAST, running, wait_until

pytestmark = pytest.mark.skipif(_built is None, reason="the echomq native module is not built")


@pytest.fixture(scope="module")
def native_cluster() -> Iterator[LocalCluster]:
    """Three primaries (no replicas) that load the module."""
    made = LocalCluster(replicas=0, module=str(_built)).start()
    try:
        yield made
    finally:
        made.stop()


@pytest.fixture(scope="module")
def bare() -> Iterator[EmbeddedServer]:
    """A server without the module."""
    with EmbeddedServer(module=False) as srv:
        yield srv


def calls(r: redis.Redis, name: str) -> int:
    """How many times the server ran the command ``name`` (INFO commandstats)."""
    stats = r.info("commandstats")
    return int(stats.get(f"cmdstat_{name}", {}).get("calls", 0))


def dead_job(q: Queue, group: str | None = None) -> str:
    jid = q.enqueue({"x": 1}, group=group, max_attempts=1)
    got = q.claim()
    assert got is not None and got.id == jid
    assert q.retry(jid, got.token, "boom") == "dead"
    return jid


def reprocess_line(q: Queue, jid: str) -> tuple[Any, ...]:
    """The seed's native line: EMQ.REPROCESS 4 <row> <dead> <pending> <base> <id>."""
    k = q.keys
    return ("EMQ.REPROCESS", 4, k.job(jid), k.dead, k.pending, k.base, jid)


def test_module_is_loaded_with_key_specs(server: EmbeddedServer, r: redis.Redis) -> None:
    assert server.module_path == str(_built)
    names = [m["name"] for m in r.execute_command("MODULE", "LIST")]
    assert "echomq" in names
    keys = r.command_getkeys(*reprocess_line(Queue("kq"), "JOB00000000001"))
    assert keys == ["emq:{kq}:job:JOB00000000001", "emq:{kq}:dead", "emq:{kq}:pending", "emq:{kq}:"]
    got = r.command_getkeys("EMQ.CLAIM", 1, "emq:{kq}:", 1000, 1, "f", 0)
    assert got == ["emq:{kq}:"]


def test_every_twin_names_a_shipped_script() -> None:
    assert set(TWINS) <= {s.name for s in all_scripts()}
    assert set(TWINS.values()) == {
        "EMQ.REPROCESS",
        "EMQ.CLAIM",
        "EMQ.COMPLETE",
        "EMQ.RETRY",
        "EMQ.EXTEND",
        "EMQ.ENQUEUE",
    }


def test_reprocess_native_line_moves_a_dead_job(
    make_queue: Any, qname: str, r: redis.Redis
) -> None:
    q = make_queue(qname, executor="scripts")
    jid = dead_job(q)
    assert r.execute_command(*reprocess_line(q, jid)) == 1
    # a fresh place in the enqueue sequence: its enqueue took 0, the reprocess 1
    assert r.zscore(q.keys.pending, jid) == run_score(0, 1)
    assert r.zcard(q.keys.dead) == 0
    row = r.hgetall(q.keys.job(jid))
    assert row["state"] == "pending" and "last_error" not in row and row["seq"] == "1"
    assert row["attempts"] == "1" and row["failures"] == "1"
    assert r.lrange(q.keys.base + "wake", 0, -1)[-1] == "1"


def test_reprocess_native_refusals_write_nothing(
    make_queue: Any, qname: str, r: redis.Redis
) -> None:
    q = make_queue(qname, executor="scripts")
    live = q.enqueue({"x": 1})
    before = dump(r, q)
    with pytest.raises(redis.ResponseError, match=r"^EMQSTATE not dead$"):
        r.execute_command(*reprocess_line(q, live))
    assert r.execute_command(*reprocess_line(q, "JOB00000000009")) == -1
    assert dump(r, q) == before


def test_reprocess_native_grouped_row_returns_to_its_lane_and_the_ring(
    make_queue: Any, qname: str, r: redis.Redis
) -> None:
    q = make_queue(qname, executor="native")
    jid = dead_job(q, group="g1")
    assert r.lrange(q.keys.base + "ring", 0, -1) == []
    assert q.reprocess_job(jid) is None
    assert r.zscore(q.keys.base + "g:g1:pending", jid) == run_score(0, 1)
    assert r.lrange(q.keys.base + "ring", 0, -1) == ["g1"]
    assert r.sismember(q.keys.base + "groups", "g1")
    assert r.zcard(q.keys.pending) == 0
    got = q.claim()
    assert got is not None and (got.id, got.token, got.group) == (jid, 2, "g1")


def test_reprocess_native_typed_refusals(make_queue: Any, qname: str, r: redis.Redis) -> None:
    q = make_queue(qname, executor="native")
    live = q.enqueue({"x": 1})
    before = dump(r, q)
    with pytest.raises(JobNotDead):
        q.reprocess_job(live)
    with pytest.raises(JobGone):
        q.reprocess_job("JOB00000000009")
    assert dump(r, q) == before


def test_native_claim_on_a_paused_queue_is_one_round_trip(
    make_queue: Any, qname: str, r: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    q = make_queue(qname, executor="native")
    jid = q.enqueue({"x": 1})
    q.pause()
    sent: list[tuple[Any, ...]] = []
    real = q.runner.transport.send
    monkeypatch.setattr(q.runner.transport, "send", lambda req: sent.extend(req.cmds) or real(req))
    before = dump(r, q)
    assert q.claim() is None
    assert [c[0] for c in sent] == ["EMQ.CLAIM"]
    assert dump(r, q) == before
    q.resume()
    sent.clear()
    got = q.claim()
    assert got is not None and got.id == jid and [c[0] for c in sent] == ["EMQ.CLAIM"]
    assert r.zscore(q.keys.active, jid) is not None


def test_scripts_executor_sends_the_script(make_queue: Any, qname: str, r: redis.Redis) -> None:
    q = make_queue(qname, executor="scripts")
    q.counts()  # fenced, and the Functions library of a script loaded once
    native_before, script_before = calls(r, "emq.enqueue"), script_calls(r)
    eval_before = calls(r, "evalsha")
    jid = q.enqueue({"x": 1})
    assert calls(r, "emq.enqueue") == native_before
    # one FCALL (a load of the library first: not found, loaded, again) and no EVALSHA
    assert script_calls(r) - script_before in (1, 2) and calls(r, "evalsha") == eval_before
    assert r.zscore(q.keys.pending, jid) == 0


def test_auto_uses_the_module_when_the_server_has_it(
    server: EmbeddedServer, qname: str, r: redis.Redis
) -> None:
    with Queue(qname, url=server.url, executor="auto") as q:
        before = calls(r, "emq.enqueue")
        jid = q.enqueue({"x": 1})
        assert q.ctx.executor.native is True and calls(r, "emq.enqueue") == before + 1
        assert r.hget(q.keys.job(jid), "state") == "pending"


def test_auto_falls_back_to_scripts_without_the_module(bare: EmbeddedServer, qname: str) -> None:
    rb = redis.Redis.from_url(bare.url, decode_responses=True)
    with Queue(qname, url=bare.url, executor="auto") as q:
        jid = q.enqueue({"x": 1})
        assert q.ctx.executor.native is False
        got = q.claim()
        assert got is not None and got.id == jid
        assert rb.zscore(q.keys.active, jid) is not None
    rb.close()


def test_native_refuses_a_server_without_the_module(bare: EmbeddedServer, qname: str) -> None:
    rb = redis.Redis.from_url(bare.url, decode_responses=True)
    with Queue(qname, url=bare.url, executor="native") as q, pytest.raises(NativeUnavailable):
        q.enqueue({"x": 1})
    assert list(rb.scan_iter(match=f"emq:{{{qname}}}:*")) == []
    rb.close()


def test_executor_choice_is_checked_and_read_from_the_environment(
    server: EmbeddedServer, qname: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(InvalidArgument):
        Queue(qname, url=server.url, executor="fast")
    monkeypatch.setenv("EMQ_EXECUTOR", "native")
    with Queue(qname, url=server.url) as q:
        assert q.ctx.executor.choice == "native"
    monkeypatch.setenv("EMQ_EXECUTOR", "bogus")
    with pytest.raises(InvalidArgument):
        Queue(qname, url=server.url)


async def test_async_queue_runs_native(server: EmbeddedServer, qname: str, r: redis.Redis) -> None:
    async with AsyncQueue(qname, url=server.url, executor="native") as aq:
        before = calls(r, "emq.claim")
        jid = await aq.enqueue({"x": 1}, group="g")
        got = await aq.claim()
        assert got is not None and (got.id, got.group, got.token) == (jid, "g", 1)
        assert calls(r, "emq.claim") == before + 1
        await aq.complete(jid, got.token)
        assert r.exists(aq.keys.job(jid)) == 0
        assert r.hget(aq.keys.base + "metrics:completed", "count") == "1"


def test_worker_serves_with_native_commands(
    server: EmbeddedServer, qname: str, r: redis.Redis
) -> None:
    q = Queue(qname, url=server.url, executor="native")
    jids = [q.enqueue({"n": i}, group="g" if i % 2 else None) for i in range(20)]
    seen: list[int] = []
    before = calls(r, "emq.claim"), calls(r, "emq.complete")
    with running(
        Worker(qname, lambda job: seen.append(job.data["n"]), url=server.url, executor="native")
    ):
        wait_until(lambda: len(seen) == 20 and r.zcard(q.keys.active) == 0, timeout=20)
        late = q.enqueue({"n": 20})  # a wake token reaches the idle worker
        wait_until(lambda: len(seen) == 21 and r.exists(q.keys.job(late)) == 0, timeout=20)
    assert sorted(seen) == list(range(21))
    assert calls(r, "emq.claim") > before[0] and calls(r, "emq.complete") > before[1]
    assert all(r.exists(q.keys.job(j)) == 0 for j in jids)
    assert r.zcard(q.keys.active) == 0 and r.zcard(q.keys.pending) == 0
    assert r.hget(q.keys.base + "metrics:completed", "count") == "21"
    q.close()


@pytest.mark.slow  # a primary and a replica of its own
def test_effects_replicate_to_a_replica_without_the_module(qname: str) -> None:
    with EmbeddedServer(extra_args=("--repl-diskless-sync-delay", "0")) as primary:
        assert primary.module_path is not None
        with EmbeddedServer(
            module=False, extra_args=("--replicaof", "127.0.0.1", str(primary.port))
        ) as replica:
            rp = redis.Redis.from_url(primary.url)
            rr = redis.Redis.from_url(replica.url)
            deadline = time.monotonic() + 10
            while rr.info("replication").get("master_link_status") != "up":
                assert time.monotonic() < deadline, "the replica did not sync"
                time.sleep(0.05)
            # the events reach a replica's subscribers as a primary's (PUBLISH propagates)
            subs = [x.pubsub(ignore_subscribe_messages=True) for x in (rp, rr)]
            q = Queue(qname, url=primary.url, executor="native", max_attempts=1)
            for sub in subs:
                sub.subscribe(q.keys.events)
            a = q.enqueue({"a": 1}, dedup_id="d")
            b = q.enqueue({"b": 1}, group="g", delay_ms=0)
            c = q.enqueue({"c": 1}, delay_ms=60_000)
            got = q.claim_many(5, lock_ms=5000)
            assert sorted(j.id for j in got) == sorted([a, b])
            assert q.extend_locks([(j.id, j.token) for j in got], 90_000, lock_ms=8000) == []
            assert q.retry(a, 1, "boom") == "dead"
            q.reprocess_job(a)
            q.complete(b, 1)
            # a kept job: its timeline and a result too long for a listpack (the row's
            # encoding must match the replica's, which runs a real HSET)
            k = q.enqueue({"k": 1}, keep_ms=60_000)
            got = q.claim_many(5)
            assert [j.id for j in got] == [a, k]
            q.complete(a, got[0].token)
            q.complete(k, got[1].token, result="r" * 200)
            assert rp.object("encoding", q.keys.job(k)) == b"hashtable"
            assert rp.execute_command("WAIT", 1, 5000) == 1
            heard: list[list[bytes]] = [[], []]
            deadline, quiet = time.monotonic() + 5, 0
            while quiet < 5:  # until both have been silent for five reads in a row
                assert time.monotonic() < deadline, heard
                quiet += 1
                for sub, into in zip(subs, heard):
                    m = sub.get_message(timeout=0.05)
                    if m:
                        into.append(m["data"])
                        quiet = 0
            assert len(heard[0]) >= 12 and heard[0] == heard[1]
            for sub in subs:
                sub.close()
            keys = sorted(rp.scan_iter(match=q.keys.pattern()))
            assert keys and keys == sorted(rr.scan_iter(match=q.keys.pattern()))
            for k in keys:  # byte for byte, server times included
                if rp.object("encoding", k) == b"hashtable":
                    # a hashtable's order follows each server's own hash seed
                    assert rp.hgetall(k) == rr.hgetall(k), k
                    assert rr.object("encoding", k) == b"hashtable", k
                    continue
                assert rp.dump(k) == rr.dump(k), k
                assert (rp.pttl(k) > 0) == (rr.pttl(k) > 0), k
            assert rr.zscore(q.keys.schedule, c) == rp.zscore(q.keys.schedule, c)
            q.close()
            rp.close()
            rr.close()


def test_cli_executor_option(server: EmbeddedServer, qname: str, r: redis.Redis) -> None:
    with Queue(qname, url=server.url, executor="scripts") as q:
        jid = dead_job(q)
    before = calls(r, "emq.reprocess")
    res = CliRunner().invoke(
        cli, ["--url", server.url, "--executor", "native", "job", "reprocess", qname, jid]
    )
    assert res.exit_code == 0, res.output
    assert calls(r, "emq.reprocess") == before + 1
    assert r.zscore(f"emq:{{{qname}}}:pending", jid) == run_score(0, 1)


def test_bad_executor_on_the_cli_is_a_usage_error(
    server: EmbeddedServer, qname: str, r: redis.Redis
) -> None:
    args = ["--url", server.url, "--executor", "fast", "job", "reprocess", qname, "JOB00000000001"]
    res = CliRunner().invoke(cli, args)
    assert res.exit_code == 2 and "fast" in res.output
    assert list(r.scan_iter(match=f"emq:{{{qname}}}:*")) == []


RAW_ENQUEUE = [
    ("x", "2"),  # n not a number
    ("3", "2", "JOB00000000001", "{}"),  # fewer than n jobs' arguments
    ("1", "3", "JOB00000000001", "{}"),  # w neither 2 nor 4
    ("1", "2", "JOB00000000001", "{}", "nan"),  # priority
    ("1", "2", "JOB00000000001", "{}", "", "", "", "inf"),  # max_attempts
    ("1", "2", "JOB00000000001", "{}", "", "", "", "", "-inf"),  # delay_ms
    ("1", "2", "JOB00000000001", "{}", "", "", "", "", "", "abc"),  # run_at_ms
    ("1", "4", "JOB00000000001", "{}", "", "1", "1.5", "n", "g", "2", "", "", "b"),
    ("2", "2", "JOB00000000001", "{}", "JOB00000000002", "[]", "", "", "", "", "", "", "", "t-1"),
]


@pytest.mark.parametrize("args", RAW_ENQUEUE)
def test_enqueue_wire_arguments_refused_alike(
    make_queue: Any, qname: str, r: redis.Redis, args: tuple[str, ...]
) -> None:
    """The same raw KEYS/ARGV (past the client's checks) give the same reply and keys."""
    qs = make_queue(qname + "s", executor="scripts")
    qn = make_queue(qname + "n", executor="native")
    results = []
    for q in (qs, qn):
        op = Eval(script("enqueue"), (q.keys.base,), args)
        q.runner.fence()
        try:
            results.append(("ok", q.runner.execute(op)))
        except Exception as exc:
            results.append(("refused", type(exc).__name__, str(exc)))
    assert results[0] == results[1]
    assert results[0][0] == ("ok" if args in RAW_ENQUEUE[-2:] else "refused"), results[0]
    # the trace option lands in each row (the keys compared below include the rows)
    rows = [
        {
            k.split(":", 2)[2]: r.hgetall(k) if r.type(k) == "hash" else r.type(k)
            for k in r.scan_iter(match=q.keys.pattern())
        }
        for q in (qs, qn)
    ]
    assert rows[0] == rows[1]
    if args is RAW_ENQUEUE[-1]:
        assert rows[1]["job:JOB00000000002"]["trace"] == "t-1"


def test_every_module_call_passes_what_its_format_names() -> None:
    """The format of RedisModule_Call and RedisModule_Replicate is not checked by the
    compiler: count its arguments (b: pointer and length, c: C string, v: array and
    count, s/l: one each; the modifiers ! and A take none)."""
    native_dir = Path(__file__).resolve().parents[1] / "native"
    src = "\n".join(p.read_text() for p in sorted(native_dir.glob("*.[ch]")))
    calls = replicated = 0
    for m in re.finditer(r'RedisModule_(?:Call|Replicate)\(\s*[^,]+,\s*"[^"]+",\s*"([^"]*)"', src):
        depth, end = 0, m.start()
        for end in range(src.index("(", m.start()), len(src)):
            depth += {"(": 1, ")": -1}.get(src[end], 0)
            if depth == 0:
                break
        inner, parts, depth, cur = src[src.index("(", m.start()) + 1 : end], [], 0, ""
        for ch in inner:
            depth += {"(": 1, "[": 1, ")": -1, "]": -1}.get(ch, 0)
            if ch == "," and depth == 0:
                parts.append(cur)
                cur = ""
            else:
                cur += ch
        parts.append(cur)
        need = sum({"b": 2, "c": 1, "v": 2, "s": 1, "l": 1, "!": 0, "A": 0}[c] for c in m.group(1))
        assert need == len(parts) - 3, src[m.start() : end + 1]
        calls += 1
        replicated += src.startswith("RedisModule_Replicate", m.start())
    assert calls > 50 and replicated >= 4


@pytest.mark.cluster
@pytest.mark.slow
def test_native_events_on_a_cluster_are_sharded(native_cluster: LocalCluster) -> None:
    """On a cluster the scripts publish with SPUBLISH, and so do the native twins: a
    sharded subscriber hears every transition's event, in order."""
    cluster = native_cluster.nodes
    rc = RedisCluster(host="127.0.0.1", port=cluster[0].port, decode_responses=True)
    q = Queue("nevents", client=rc, executor="native")
    with q.events() as stream:
        a = q.enqueue({"a": 1})
        got = q.claim()
        assert got is not None and got.id == a
        q.complete(a, got.token)
        heard = [stream.get(timeout=5) for _ in range(3)]
    assert q.ctx.executor.native is True
    assert [(e.name, e.job) for e in heard if e] == [
        ("enqueued", a),
        ("active", a),
        ("completed", a),
    ]
    nodes = [redis.Redis(port=n.port, decode_responses=True) for n in cluster]
    assert sum(calls(r, "spublish") for r in nodes) >= 3
    assert sum(calls(r, "publish") for r in nodes) == 0
    for r in nodes:
        r.close()
    q.close()
    rc.close()


@pytest.mark.cluster
@pytest.mark.slow
def test_a_worker_serves_a_cluster_with_native_commands(native_cluster: LocalCluster) -> None:
    """An asyncio cluster client cannot route a keyless MODULE LIST: ``native`` is then
    taken at its word (the nodes have the module) and the worker runs on EMQ.* commands."""
    cluster = native_cluster.nodes
    assert all(n.module_path for n in cluster)
    rc = RedisCluster(host="127.0.0.1", port=cluster[0].port, decode_responses=True)
    q = Queue("nworked", client=rc, executor="native")
    q.enqueue_many(range(10))
    q.enqueue_many(range(10, 15), group="tenant")
    nodes = [redis.Redis(port=n.port, decode_responses=True) for n in cluster]
    before = sum(calls(r, "emq.claim") for r in nodes)
    seen: list[int] = []
    aq = AsyncQueue(
        "nworked",
        client=AsyncRedisCluster(host="127.0.0.1", port=cluster[0].port),
        executor="native",
    )
    with running(Worker(aq, lambda job: seen.append(job.data), config=FAST)):
        wait_until(lambda: q.counts().completed == 15)
    assert sorted(seen) == list(range(15)) and aq.ctx.executor.native is True
    assert sum(calls(r, "emq.claim") for r in nodes) > before
    assert q.counts().pending == 0 == q.counts().active
    q.pause()
    while not q.obliterate(force=True):
        pass
    assert list(rc.scan_iter(match=q.keys.pattern())) == []
    for r in nodes:
        r.close()
    rc.close()
