"""The audit journal: one entry per operator verb that changed something, written by
the verb's own script after its last check, with the caller's actor."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable

import pytest
import redis

from conftest import dump
from echomq import AsyncQueue, JobGone, JobLocked, JobNotDead, Queue, QueueNotPaused
from echomq.embedded import EmbeddedServer
from echomq.journal import AuditEntry, default_actor
from echomq.scripts import script
from operator_support import put_job

pytestmark = pytest.mark.both_servers


def entries(r: redis.Redis, q: Queue) -> list[dict[str, str]]:
    """The raw journal, oldest first."""
    return [f for _, f in r.xrange(q.keys.audit)]


def test_every_operator_verb_journals_one_entry_with_the_actor(
    make_queue: Callable[..., Queue], qname: str, r: redis.Redis
) -> None:
    q = make_queue(qname, actor="alice")
    dead, _ = put_job(q, "dead")
    dead_g, _ = put_job(q, "dead", group="g")
    pend, _ = put_job(q, "pending")
    lane, _ = put_job(q, "pending", group="h")
    before = len(entries(r, q))
    assert before == 0  # building the states journals nothing: the lifecycle is not audited
    q.pause()
    q.resume()
    q.update_data(pend, {"x": 1})
    q.update_progress(pend, 50)  # worker-facing: not journaled
    q.add_log(pend, "line")  # worker-facing: not journaled
    q.reprocess_job(dead)
    q.remove_job(dead_g)
    q.pause_group("g")
    q.resume_group("g")
    q.set_group_limit("g", 3)
    q.clear_group_limit("g")
    q.set_group_weight("g", 2)
    q.reassign(lane, "g")
    q.repeat("tick", every_ms=60000, payload=1)
    q.cancel_repeat("tick")
    q.drain_group("g")
    assert q.drain() == 2
    got = entries(r, q)
    assert [e["verb"] for e in got] == [
        "pause", "resume", "update_data", "reprocess_job", "remove_job", "pause_group",
        "resume_group", "set_group_limit", "clear_group_limit", "set_group_weight",
        "reassign", "repeat", "cancel_repeat", "drain_group", "drain",
    ]  # fmt: skip
    assert {e["actor"] for e in got} == {"alice"}
    assert {**got[2], "args": json.loads(got[2]["args"])} == {
        "verb": "update_data",
        "args": {"job": pend, "bytes": 7},  # the payload's size, not the payload
        "outcome": "ok",
        "count": "1",
        "actor": "alice",
        "req": got[2]["req"],  # the call's request id (a re-send journals once)
    }
    assert len(got[2]["req"]) == 16 and "req" not in got[0]
    assert json.loads(got[-1]["args"]) == {"include_schedule": False, "budget": 1000}
    assert got[-1]["count"] == "2" and got[-1]["outcome"] == "done"
    assert json.loads(got[-2]["args"]) == {"group": "g", "budget": 1000}
    # q.audit reads them back newest first, decoded
    back = q.audit(3)
    assert [e.verb for e in back] == ["drain", "drain_group", "cancel_repeat"]
    assert isinstance(back[0], AuditEntry) and back[0].count == 2 and back[0].actor == "alice"
    ids = [i for i, _ in r.xrevrange(q.keys.audit, count=3)]
    assert [e.id for e in back] == ids
    assert back[0].time_ms == int(ids[0].split("-")[0])


def test_a_refused_or_idle_call_journals_nothing(q: Queue, r: redis.Redis) -> None:
    act, _ = put_job(q, "active")
    pend, _ = put_job(q, "pending")
    q.lock_job(act, 1)
    before = dump(r, q)
    with pytest.raises(JobNotDead):
        q.reprocess_job(pend)
    with pytest.raises(JobLocked):
        q.remove_job(act)
    with pytest.raises(JobGone):
        q.update_data("JOB00000000001", 1)
    with pytest.raises(QueueNotPaused):
        q.obliterate()
    q.resume()  # running already: nothing changes
    assert q.cancel_repeat("none") is False
    assert q.drain_group("empty") == 0
    assert dump(r, q) == before
    assert not r.exists(q.keys.audit)


def test_the_default_actor_is_user_at_host_and_pid(q: Queue, r: redis.Redis) -> None:
    assert q.actor == default_actor()
    assert default_actor().endswith(":" + str(__import__("os").getpid()))
    q.pause()
    assert q.audit(1)[0].actor == default_actor()


def test_the_seed_line_without_an_actor_still_works(q: Queue, r: redis.Redis) -> None:
    jid, _ = put_job(q, "dead")
    k = q.keys
    s = script("reprocess_job")
    r.script_load(s.body)
    assert r.evalsha(s.sha, 4, k.job(jid), k.dead, k.pending, k.base, jid) == 1
    assert entries(r, q) == [
        {"verb": "reprocess_job", "args": '{"job":"' + jid + '"}', "outcome": "ok",
         "count": "1", "actor": ""}
    ]  # fmt: skip


def test_obliterate_journals_each_call_and_keep_audit_keeps_the_journal(
    make_queue: Callable[..., Queue], qname: str, r: redis.Redis
) -> None:
    q = make_queue(qname, actor="bob")
    for _ in range(5):
        put_job(q, "pending")
    q.pause()
    assert q.obliterate(budget=3) is False
    assert [e.verb for e in q.audit()] == ["obliterate", "pause"]
    assert q.audit(1)[0].count == 3 and q.audit(1)[0].outcome == "more"
    assert q.obliterate(budget=3, keep_audit=True) is True
    assert set(r.scan_iter(match=q.keys.pattern())) == {q.keys.audit}
    last = q.audit(1)[0]
    assert (last.verb, last.outcome, last.count, last.actor) == ("obliterate", "gone", 2, "bob")
    assert last.args == {"force": False, "budget": 3}
    # by default the journal goes with the queue
    q.pause()
    assert q.obliterate() is True
    assert set(r.scan_iter(match=q.keys.pattern())) == set()


async def test_the_async_queue_journals_and_reads_the_same(
    server: EmbeddedServer, qname: str, r: redis.Redis
) -> None:
    async with AsyncQueue(qname, url=server.url, actor="carol") as aq:
        await aq.pause()
        got = await aq.audit(5)
    assert [(e.verb, e.actor) for e in got] == [("pause", "carol")]


def test_emq_audit_names_the_cli_user(server: EmbeddedServer, q: Queue, r: redis.Redis) -> None:
    def emq(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "echomq.cli", "--url", server.url, *args],
            capture_output=True,
            text=True,
            timeout=60,
        )

    assert emq("pause", q.name, "--create").returncode == 0  # a new queue: --create
    p = emq("--json", "audit", q.name)
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    [entry] = doc["entries"]
    assert entry["verb"] == "pause" and "@" in entry["actor"] and ":" not in entry["actor"]
    text = emq("audit", q.name).stdout
    assert "pause" in text and entry["actor"] in text
    typo = emq("audit", q.name + "x")
    assert typo.returncode == 8 and f"(did you mean {q.name}?)" in typo.stderr
