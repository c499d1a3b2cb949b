"""Run order (issue 24, item 2): at equal priority a backlog runs in enqueue order,
whoever chose the id, in the flat set and in a lane; priority still comes first.

A ready job's score is ``priority * 2**32 + seq``, ``seq`` its place in the queue's
enqueue sequence (the key ``seq``, a counter; the row keeps it), so a job that goes back to
pending (reaped, released, promoted) keeps its place, and a reprocessed one takes a
fresh place at the back of its priority.
"""

from __future__ import annotations

import time

import pytest
import redis

from echomq import Queue, ids
from echomq.schema import PRIORITY_MAX
from test_lifecycle import expire_leases, run_score, server_ms

pytestmark = [pytest.mark.both_executors]

# caller-chosen ids on both sides of every minted one: "JOB0000..." sorts before any
# minted id, "JOB1..." / "JOB9..." after
CHOSEN = ["JOB1000000000A", "JOB00000000007", "JOB9zzzzzzzzz1", "JOB00000000003"]


def enqueue_interleaved(q: Queue, group: str | None = None, priority: int = 0) -> list[str]:
    """Minted and chosen ids, one by one and in a batch, in the order they were sent."""
    order: list[str] = []
    for chosen in CHOSEN:
        order.append(q.enqueue("m", group=group, priority=priority))
        order.append(q.enqueue("c", job_id=chosen, group=group, priority=priority))
    order += q.enqueue_many(["b1", "b2"], group=group, priority=priority)
    order.append(q.enqueue("last", job_id="JOB0000000000z", group=group, priority=priority))
    return order


def claim_all(q: Queue) -> list[str]:
    got: list[str] = []
    while (c := q.claim()) is not None:
        got.append(c.id)
    return got


def test_equal_priority_claims_in_enqueue_order_in_the_flat_set(q: Queue) -> None:
    order = enqueue_interleaved(q)
    assert sorted(order) != order  # the id order is not the enqueue order
    assert q.browse("pending", n=20, order="run") == order
    assert claim_all(q) == order


def test_equal_priority_claims_in_enqueue_order_in_a_lane(q: Queue, r: redis.Redis) -> None:
    order = enqueue_interleaved(q, group="g", priority=2)
    assert r.zrange(q.keys.lane("g"), 0, -1) == order
    assert r.zrange(q.keys.gindex, 0, -1) == order  # the lanes' index: the same scores
    assert r.zscore(q.keys.lane("g"), order[-1]) == run_score(2, len(order) - 1)
    assert claim_all(q) == order


def test_priority_comes_first_negative_ones_included(q: Queue) -> None:
    low = q.enqueue("low", priority=5)
    mid_chosen = q.enqueue("mid", priority=0, job_id="JOB9zzzzzzzzz2")
    top = q.enqueue("top", priority=-3)
    mid = q.enqueue("mid", priority=0)
    top_chosen = q.enqueue("top", priority=-3, job_id="JOB9zzzzzzzzz3")
    edge_low = q.enqueue("edge", priority=PRIORITY_MAX)
    edge_top = q.enqueue("edge", priority=-PRIORITY_MAX)
    assert claim_all(q) == [edge_top, top, top_chosen, mid_chosen, mid, low, edge_low]


def test_priority_comes_first_in_a_lane(q: Queue) -> None:
    late = q.enqueue("a", group="g", priority=1)
    first = q.enqueue("b", group="g", priority=-1, job_id="JOB9zzzzzzzzz4")
    second = q.enqueue("c", group="g", priority=-1)
    assert claim_all(q) == [first, second, late]


def test_the_enqueue_sequence_is_one_counter(q: Queue, r: redis.Redis) -> None:
    a = q.enqueue("a")
    b, c = q.enqueue_many(["b", "c"], group="g")
    d = q.enqueue("d", delay_ms=60_000)
    assert [r.hget(q.keys.job(j), "seq") for j in (a, b, c, d)] == ["0", "1", "2", "3"]
    assert r.get(q.keys.seq) == "4"
    # a duplicate writes nothing, the counter included
    assert q.enqueue("again", job_id=a) == a
    assert r.get(q.keys.seq) == "4"


def test_a_reaped_job_goes_back_to_its_old_place(q: Queue, r: redis.Redis) -> None:
    a = q.enqueue("a", job_id="JOB9zzzzzzzzz5")
    b = q.enqueue("b")
    c = q.claim(lease_ms=50)
    assert c is not None and c.id == a
    later = q.enqueue("later")
    expire_leases(r, q)
    assert q.reap() == 1
    assert r.zscore(q.keys.pending, a) == run_score(0, 0)
    assert claim_all(q) == [a, b, later]


def test_a_released_job_goes_back_to_its_old_place_in_its_lane(q: Queue) -> None:
    a = q.enqueue("a", group="g", job_id="JOB9zzzzzzzzz6")
    b = q.enqueue("b", group="g")
    c = q.claim()
    assert c is not None and c.id == a
    later = q.enqueue("later", group="g")
    q.release(a, c.token)
    assert claim_all(q) == [a, b, later]


def test_a_stalled_job_goes_back_to_its_old_place(q: Queue, r: redis.Redis) -> None:
    a = q.enqueue("a", job_id="JOB9zzzzzzzzz7")
    b = q.enqueue("b")
    c = q.claim(lease_ms=50)
    assert c is not None and c.id == a
    later = q.enqueue("later")
    expire_leases(r, q)
    assert q.check_stalled(max_stalled=5) == ([a], [])
    assert claim_all(q) == [a, b, later]


def test_a_delayed_job_keeps_the_place_its_enqueue_gave_it(q: Queue, r: redis.Redis) -> None:
    # the seq is taken at enqueue: when due, the job runs ahead of those enqueued after it
    due = q.enqueue("due", run_at_ms=server_ms(r) - 1000, job_id="JOB9zzzzzzzzz8")
    after = q.enqueue("after")
    assert r.hget(q.keys.job(due), "seq") == "0"
    assert q.promote() == 1
    assert claim_all(q) == [due, after]
    # promote_job and promote_jobs alike
    held = q.enqueue("held", delay_ms=600_000)
    behind = q.enqueue("behind")
    q.promote_job(held)
    assert claim_all(q) == [held, behind]


def test_a_reprocessed_job_goes_to_the_back_of_its_priority(q: Queue, r: redis.Redis) -> None:
    dead = q.enqueue("dead", max_attempts=1, job_id="JOB00000000001")
    c = q.claim()
    assert c is not None and q.retry(dead, c.token, "boom") == "dead"
    waiting = q.enqueue("waiting")
    q.reprocess_job(dead)
    assert r.hget(q.keys.job(dead), "seq") == "2"  # a fresh place, as a new arrival
    assert claim_all(q) == [waiting, dead]


def test_bulk_reprocess_gives_fresh_places_in_the_order_of_death(q: Queue, r: redis.Redis) -> None:
    first, second = "JOB9zzzzzzzzz9", "JOB00000000002"
    for jid in (first, second):
        q.enqueue("x", max_attempts=1, job_id=jid)
        c = q.claim()
        assert c is not None and q.retry(jid, c.token, "boom") == "dead"
        # dead is scored by the death's server ms: two deaths in one ms tie and go by
        # the id's bytes (the second id sorts first), so they die in distinct ms
        time.sleep(0.005)
    waiting = q.enqueue("waiting")
    assert q.reprocess_jobs().matched == 2
    assert r.get(q.keys.seq) == "5"  # one take of two for the step
    assert claim_all(q) == [waiting, first, second]


def test_a_row_without_seq_reads_seq_zero(q: Queue, r: redis.Redis) -> None:
    # a row an older version wrote: back in pending at its priority, seq 0
    a = q.enqueue("a", priority=1)
    c = q.claim()
    assert c is not None
    r.hdel(q.keys.job(a), "seq")
    q.release(a, c.token)
    assert r.zscore(q.keys.pending, a) == run_score(1, 0)


def test_reads_show_the_priority_not_the_score(q: Queue) -> None:
    a = q.enqueue("a", priority=-7)
    b = q.enqueue("b", priority=3, group="g")
    page = q.job_page("pending", n=10)
    assert [(j.id, j.priority, j.score) for j in page.jobs] == [(a, -7, -7)]
    lane = q.job_page("pending", n=10, group="g")
    assert [(j.id, j.priority, j.score) for j in lane.jobs] == [(b, 3, 3)]
    for jid, prio in ((a, -7), (b, 3)):
        view = q.job_view(jid)
        assert view is not None and view.score == prio


def test_ids_still_validate() -> None:
    for jid in CHOSEN:
        assert ids.validate(jid) == jid
