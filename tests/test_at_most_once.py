"""The transitions made safe to send twice, on the server (the wire contract of
CONTRACTS.md): the settled tombstone and the claim request id. Then the same through
a lost reply (the fault proxy), where the transport sends them again.

Each test checks the reply and the keys left; a repeat that must change nothing is
checked against a byte-for-byte dump.
"""

from __future__ import annotations

import pytest
import redis

from conftest import claim_records, dump
from echomq import JobGone, Queue, new_id
from echomq.lifecycle import claim_op
from echomq.scripts import Eval, script
from faults.proxy import FaultProxy

SETTLED_MS = 60_000


def text(reply: list[object]) -> list[object]:
    """A claim reply with its byte strings decoded (the queue's client does not)."""
    return [x.decode() if isinstance(x, bytes) else x for x in reply]


def server_ms(r: redis.Redis) -> int:
    s, us = r.time()
    return s * 1000 + us // 1000


# ---------------------------------------------------------------- the settled tombstone


def test_enqueue_of_a_just_completed_id_is_a_duplicate(q: Queue, r: redis.Redis) -> None:
    jid = q.enqueue({"a": 1}, job_id=new_id())
    c = q.claim()
    assert c is not None and c.id == jid
    q.complete(c.id, c.token)
    assert r.zscore(q.keys.settled, jid) is not None
    before = dump(r, q)
    assert q.enqueue({"a": 2}, job_id=jid) == jid  # duplicate: nothing written
    assert dump(r, q) == before
    assert r.exists(q.keys.job(jid)) == 0 and r.zcard(q.keys.pending) == 0


def resent_enqueue(q: Queue, *jobs: str) -> Eval:
    """The short form (minted ids) as the transport re-sends it: the `resent` option."""
    args = (str(len(jobs) // 2), "2", *jobs, *[""] * 9, "1")
    return Eval(script("enqueue"), (q.keys.base,), args)


def test_a_resent_enqueue_many_skips_settled_and_live_ids(q: Queue, r: redis.Redis) -> None:
    # the short form counts only what it wrote: a settled id and a live one are skipped
    jid, live = new_id(), new_id()
    q.enqueue("x", job_id=jid)
    q.remove_job(jid)
    q.enqueue("live", job_id=live)
    other = new_id()
    reply = q.runner.execute(resent_enqueue(q, jid, '"y"', live, '"w"', other, '"z"'))
    assert reply == 1
    assert r.zrange(q.keys.pending, 0, -1) == sorted([live, other])
    assert r.exists(q.keys.job(jid)) == 0
    assert r.hget(q.keys.job(live), "payload") == '"live"'


def test_a_first_send_of_minted_ids_reads_no_tombstone(q: Queue, r: redis.Redis) -> None:
    # a minted id is fresh: the first send writes it without looking (the reads are the
    # re-send's); the script is the one place that decides, so it is checked here
    jid = new_id()
    q.enqueue("x", job_id=jid)
    q.remove_job(jid)
    first = Eval(script("enqueue"), (q.keys.base,), ("1", "2", jid, '"y"'))
    assert q.runner.execute(first) == 1
    assert r.hget(q.keys.job(jid), "payload") == '"y"'


def ending_in(digits: str) -> str:
    """A fresh job id whose last base62 digit is one of ``digits``."""
    while not (jid := new_id()).endswith(tuple(digits)):
        pass
    return jid


@pytest.mark.both_executors
@pytest.mark.parametrize("last", ["0", "7", "8", "9", "a", "Z"])
def test_an_expired_tombstone_lets_the_id_back_and_is_trimmed(
    q: Queue, r: redis.Redis, last: str
) -> None:
    # every settled call trims the expired tombstones from the oldest end, 2n + 8 of
    # them, whatever its ids look like (they once trimmed only by ids ending in 0-7)
    back = ending_in(last)
    old = [back] + [new_id() for _ in range(40)]
    long_ago = server_ms(r) - SETTLED_MS - 1000
    r.zadd(q.keys.settled, {j: long_ago for j in old})
    assert q.enqueue("back", job_id=back) == back  # expired: a new job
    assert r.hget(q.keys.job(back), "payload") == '"back"'
    c = q.claim()
    assert c is not None and c.id == back
    q.complete(c.id, c.token)
    # the completion renewed its tombstone and trimmed the 10 oldest expired ones
    left = r.zrange(q.keys.settled, 0, -1, withscores=True)
    assert len(left) == 31 and left[-1][0] == back
    assert [s for _, s in left[:-1]] == [long_ago] * 30


@pytest.mark.both_executors
def test_tombstones_of_chosen_ids_stay_within_their_window(q: Queue, r: redis.Redis) -> None:
    """Caller-chosen ids ending in letters (once never trimmed): the index holds only
    the tombstones of its last minute, plus one trim step."""
    long_ago = server_ms(r) - SETTLED_MS - 1000
    r.zadd(q.keys.settled, {f"JOB000000{i:04d}z": long_ago for i in range(200)})
    for i in range(30):
        jid = q.enqueue(i, job_id=f"JOB0000000{i:03d}Z")
        c = q.claim()
        assert c is not None and c.id == jid
        q.complete(c.id, c.token)
    # 30 completions trimmed 30 x 10 = 300 >= 200 expired; the 30 fresh ones stay
    left = r.zrange(q.keys.settled, 0, -1)
    assert sorted(left) == sorted(f"JOB0000000{i:03d}Z" for i in range(30))


def test_drain_and_obliterate_delete_the_tombstones(q: Queue, r: redis.Redis) -> None:
    jid = q.enqueue("x")
    q.remove_job(jid)
    assert r.exists(q.keys.settled) == 1
    q.enqueue("y")
    assert q.drain() == 1
    assert r.exists(q.keys.settled) == 0
    jid = q.enqueue("z")
    q.remove_job(jid)
    q.pause()
    while not q.obliterate():
        pass
    assert r.exists(q.keys.settled) == 0
    assert set(r.scan_iter(match=q.keys.pattern())) <= {q.keys.audit}


# ---------------------------------------------------------------- the claim request id


def claim_call(q: Queue, rid: str, count: int = 2, *, resent: bool = False) -> Eval:
    args = ("30000", str(count), "f", "0", rid) + (("1",) if resent else ())
    return Eval(script("claim"), (q.keys.base,), args)


def test_a_repeated_claim_request_answers_the_same_jobs(q: Queue, r: redis.Redis) -> None:
    a, b, c = q.enqueue("a"), q.enqueue("b"), q.enqueue("c")
    first = text(q.runner.execute(claim_call(q, "req-1")))
    assert first[0::5] == [a, b] and first[2::5] == [1, 1]
    assert r.get(q.keys.claim_request("req-1")) == f"{a} {b}"
    assert 0 < r.pttl(q.keys.claim_request("req-1")) <= 60_000
    assert r.zscore(q.keys.claimreqs, "req-1") is not None  # obliterate finds it there
    q.complete(a, 1)
    before = dump(r, q)
    again = text(q.runner.execute(claim_call(q, "req-1", resent=True)))
    # b is still active (a settled): only b, same shape and token, nothing new leased
    assert again == first[5:]
    assert dump(r, q) == before
    assert r.zrange(q.keys.pending, 0, -1) == [c]


def test_a_resent_claim_without_a_record_claims(q: Queue, r: redis.Redis) -> None:
    # the first send never reached the server: the re-send finds no record and claims
    a = q.enqueue("a")
    got = text(q.runner.execute(claim_call(q, "req-lost", resent=True)))
    assert got[0::5] == [a] and r.get(q.keys.claim_request("req-lost")) == a


def test_a_claim_that_got_nothing_leaves_no_record(q: Queue, r: redis.Redis) -> None:
    assert q.runner.execute(claim_call(q, "req-empty")) == []
    assert r.exists(q.keys.claim_request("req-empty")) == 0
    assert claim_records(r, q) == set()


def test_a_claim_without_a_request_id_claims_as_before(q: Queue, r: redis.Redis) -> None:
    a = q.enqueue("a")
    got = text(q.runner.execute(claim_call(q, "")))
    assert got[0] == a
    assert claim_records(r, q) == set()
    assert r.zrange(q.keys.active, 0, -1) == [a]


# ---------------------------------------------------------------- through a lost reply


def test_a_claim_whose_reply_is_lost_is_resent_and_leases_nothing_more(
    pq: Queue, proxy: FaultProxy, r: redis.Redis
) -> None:
    ids = [pq.enqueue(i) for i in range(4)]
    pq.is_paused()  # warm: the gate read goes first in the claim
    proxy.drop_replies(1)
    got = pq.claim_many(2)
    assert proxy.replies_dropped == 1
    # the gate read's or the claim's reply was lost; either way one lease of two jobs
    assert [c.id for c in got] == ids[:2] and [c.token for c in got] == [1, 1]
    assert r.zrange(pq.keys.active, 0, -1) == ids[:2]
    assert r.zrange(pq.keys.pending, 0, -1) == ids[2:]
    assert [r.hget(pq.keys.job(j), "attempts") for j in ids] == ["1", "1", "0", "0"]


def test_a_complete_whose_reply_is_lost_answers_job_gone(
    pq: Queue, proxy: FaultProxy, r: redis.Redis
) -> None:
    jid = pq.enqueue("x")
    c = pq.claim()
    assert c is not None
    proxy.drop_replies(1)
    with pytest.raises(JobGone):  # the re-send found the row gone: it was settled
        pq.complete(c.id, c.token)
    assert r.exists(pq.keys.job(jid)) == 0
    assert r.hget(pq.keys.metrics_completed, "count") == "1"  # counted once
    assert r.zscore(pq.keys.settled, jid) is not None


def test_an_enqueue_whose_reply_is_lost_is_resent_and_writes_once(
    pq: Queue, proxy: FaultProxy, r: redis.Redis
) -> None:
    pq.is_paused()  # warm: connect and fence before the drop
    with r.pubsub(ignore_subscribe_messages=True) as sub:
        sub.subscribe(pq.keys.events)
        proxy.drop_replies(1)
        jid = pq.enqueue("x")
        assert proxy.replies_dropped == 1
        # the re-send (its `resent` option set) found the row: one job, one event
        assert r.zrange(pq.keys.pending, 0, -1) == [jid]
        r.publish(pq.keys.events, "END")  # read up to a marker: no idle timeouts
        events = []
        while (m := sub.get_message(timeout=5)) is None or m["data"] != "END":
            if m is not None:
                events.append(m["data"])
    assert events == [f'{{"event":"enqueued","job":"{jid}"}}']


def test_a_claim_script_whose_reply_is_lost_is_resent_marked(
    pq: Queue, proxy: FaultProxy, r: redis.Redis
) -> None:
    # the claim call alone (no gate read before it): its own reply is the one lost
    ids = [pq.enqueue(i) for i in range(4)]
    op = claim_op(pq.ctx, 2, 30_000, 0)
    assert op.again == (*op.args, "1")
    proxy.drop_replies(1)
    got = text(pq.runner.execute(op))
    assert proxy.replies_dropped == 1
    # the re-send read the first run's record: the same two jobs, nothing more leased
    assert got[0::5] == ids[:2] and got[2::5] == [1, 1]
    assert r.zrange(pq.keys.active, 0, -1) == ids[:2]
    assert r.zrange(pq.keys.pending, 0, -1) == ids[2:]


@pytest.mark.both_executors
@pytest.mark.parametrize("rid", ["0abc", "9abc", "zz"])
def test_a_claim_record_trims_the_index_from_its_oldest_end(
    q: Queue, r: redis.Redis, rid: str
) -> None:
    # every claim that records trims up to 8 expired index entries, whatever its rid
    old = server_ms(r) - 1000
    r.zadd(q.keys.claimreqs, {f"old{i:02d}": old for i in range(40)})
    q.enqueue("a")
    q.runner.execute(claim_call(q, rid, 1))
    assert r.zscore(q.keys.claimreqs, rid) is not None
    left = r.zrange(q.keys.claimreqs, 0, -1)
    assert len(left) == 33 and left[:-1] == [f"old{i:02d}" for i in range(8, 40)]
