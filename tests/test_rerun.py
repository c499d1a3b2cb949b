"""rerun_job: a completed or dead job run again as a new job (a copy, linked both ways,
journaled); refused for a job that has not finished, and for one that is gone."""

from __future__ import annotations

import pytest
import redis

from conftest import dump
from echomq import JobGone, JobNotFinished, Queue
from echomq import ids as ids_mod
from echomq.scripts import script
from operator_support import changed, put_job, ring
from test_lifecycle import run_score

pytestmark = [pytest.mark.both_executors, pytest.mark.both_servers]

GROUPS = [None, "g"]


def test_rerun_of_a_dead_job_enqueues_a_linked_copy(q: Queue, r: redis.Redis) -> None:
    jid = q.enqueue({"n": 1}, name="report", priority=3, max_attempts=1, backoff="5")
    got = q.claim()
    assert got is not None and q.retry(jid, got.token, "boom") == "dead"
    old = r.hgetall(q.keys.job(jid))
    r.delete(q.keys.wake)
    before = dump(r, q)

    copy = q.rerun_job(jid)

    assert copy != jid and ids_mod.validate(copy) == copy
    # the original is as it was but for the link; it stays dead
    assert r.hgetall(q.keys.job(jid)) == {**old, "rerun_as": copy}
    assert r.zscore(q.keys.dead, jid) is not None
    row = r.hgetall(q.keys.job(copy))
    assert row == {
        "state": "pending",
        "attempts": "0",
        "payload": old["payload"],
        "seq": "1",
        "name": "report",
        "priority": "3",
        "max_attempts": "1",
        "backoff": old["backoff"],
        "rerun_of": jid,
    }
    assert r.zrange(q.keys.pending, 0, -1, withscores=True) == [(copy, run_score(3, 1))]
    assert r.llen(q.keys.wake) == 1
    (entry,) = q.audit(1)
    assert (entry.verb, entry.args, entry.outcome, entry.count) == (
        "rerun_job",
        {"job": jid, "copy": copy},
        "ok",
        1,
    )
    assert changed(before, dump(r, q)) == {
        q.keys.job(jid),
        q.keys.job(copy),
        q.keys.pending,
        q.keys.wake,
        q.keys.seq,
        q.keys.audit,
    }
    # the copy runs like any new job, with token 1
    again = q.claim()
    assert again is not None and (again.id, again.token, again.payload) == (copy, 1, {"n": 1})
    assert q.get_job(copy).rerun_of == jid and q.get_job(jid).rerun_as == copy


def test_rerun_of_a_kept_completed_grouped_job_goes_to_its_lane(q: Queue, r: redis.Redis) -> None:
    jid, _ = put_job(q, "completed", group="g", keep_ms=60_000)
    assert r.hget(q.keys.job(jid), "state") == "completed"
    copy = q.rerun_job(jid)
    assert r.zscore(q.keys.completed, jid) is not None  # the original's history stays
    row = r.hgetall(q.keys.job(copy))
    assert row["group"] == "g" and row["keep"] == "60000" and int(row["enqueued_at"]) > 0
    assert row["rerun_of"] == jid and row["state"] == "pending"
    score = run_score(0, int(row["seq"]))
    assert r.zrange(q.keys.lane("g"), 0, -1, withscores=True) == [(copy, score)]
    assert r.zscore(q.keys.gindex, copy) == score
    assert r.sismember(q.keys.groups, "g") and ring(r, q) == ["g"]
    got = q.claim()
    assert got is not None and got.id == copy and got.group == "g"


def test_rerun_on_a_queue_with_a_retention_keeps_the_copy(q: Queue, r: redis.Redis) -> None:
    jid, _ = put_job(q, "dead")  # enqueued before the retention: not kept itself
    assert r.hget(q.keys.job(jid), "keep") is None
    q.set_retention(dead=10)
    copy = q.rerun_job(jid)
    assert r.hget(q.keys.job(copy), "keep") == "0"


def test_rerun_carries_no_dedup_id(q: Queue, r: redis.Redis) -> None:
    jid, _ = put_job(q, "dead", dedup_id="once")
    holder = r.get(q.keys.dedup("once"))
    before = dump(r, q)
    copy = q.rerun_job(jid)
    row = r.hgetall(q.keys.job(copy))
    assert "dedup" not in row and "dedup_mode" not in row
    assert r.get(q.keys.dedup("once")) == holder
    assert q.keys.dedup("once") not in changed(before, dump(r, q))


def test_rerun_twice_makes_two_copies_and_links_the_newest(q: Queue, r: redis.Redis) -> None:
    jid, _ = put_job(q, "dead")
    first = q.rerun_job(jid)
    second = q.rerun_job(jid)
    assert first != second
    assert r.hget(q.keys.job(jid), "rerun_as") == second
    assert r.hget(q.keys.job(first), "rerun_of") == jid
    assert r.hget(q.keys.job(second), "rerun_of") == jid
    assert r.zcard(q.keys.pending) == 2


def test_rerun_on_a_paused_queue_waits(q: Queue, r: redis.Redis) -> None:
    jid, _ = put_job(q, "dead")
    q.pause()
    copy = q.rerun_job(jid)
    assert r.zscore(q.keys.pending, copy) is not None
    assert q.claim() is None
    q.resume()
    got = q.claim()
    assert got is not None and got.id == copy


@pytest.mark.parametrize("group", GROUPS)
@pytest.mark.parametrize("state", ["pending", "active", "scheduled"])
def test_rerun_refuses_a_job_that_has_not_finished(
    q: Queue, r: redis.Redis, state: str, group: str | None
) -> None:
    jid, _ = put_job(q, state, group=group)
    before = dump(r, q)
    with pytest.raises(JobNotFinished) as err:
        q.rerun_job(jid)
    assert err.value.reason == "not_finished" and err.value.job_id == jid
    assert dump(r, q) == before


def test_rerun_of_a_gone_job_is_refused(q: Queue, r: redis.Redis) -> None:
    put_job(q, "dead")
    ghost = ids_mod.new_id()
    before = dump(r, q)
    with pytest.raises(JobGone):
        q.rerun_job(ghost)
    assert dump(r, q) == before


def test_rerun_of_a_completed_job_without_history_is_gone(q: Queue, r: redis.Redis) -> None:
    jid = q.enqueue("x")
    got = q.claim()
    assert got is not None
    q.complete(jid, got.token)
    before = dump(r, q)
    with pytest.raises(JobGone):
        q.rerun_job(jid)
    assert dump(r, q) == before


def test_a_resent_rerun_answers_the_same_copy_and_writes_nothing(q: Queue, r: redis.Redis) -> None:
    jid, _ = put_job(q, "dead")
    s = script("rerun_job")
    r.script_load(s.body)
    copy = ids_mod.new_id()
    k = q.keys
    assert r.evalsha(s.sha, 2, k.base, k.job(jid), jid, copy, "me") == copy
    before = dump(r, q)
    # the transport's re-send after a lost reply: same arguments, same answer
    assert r.evalsha(s.sha, 2, k.base, k.job(jid), jid, copy, "me") == copy
    assert dump(r, q) == before
    assert [e.verb for e in q.audit(10)] == ["rerun_job"]


def test_a_copy_id_that_has_a_row_is_refused(q: Queue, r: redis.Redis) -> None:
    jid, _ = put_job(q, "dead")
    taken = q.enqueue("other")
    s = script("rerun_job")
    r.script_load(s.body)
    before = dump(r, q)
    with pytest.raises(redis.ResponseError, match="EMQARG"):
        r.evalsha(s.sha, 2, q.keys.base, q.keys.job(jid), jid, taken, "")
    assert dump(r, q) == before
