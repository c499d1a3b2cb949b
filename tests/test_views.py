"""The operator's read verbs (``echomq.views``): orders, bounds, search, one job.

Each test reads a real queue and checks the reply and that nothing changed (a view
never writes). The bound is checked by what a call sends: a page of one sorted set by
rank, rows of the page, never a lane it was not asked for.
"""

from __future__ import annotations

from typing import Any

import pytest
import redis

from conftest import dump
from echomq import AsyncQueue, Queue, ids
from echomq.errors import InvalidArgument, InvalidJobId, InvalidName
from echomq.keyspace import check_name
from echomq.views import MAX_PAGE, LenientJson, to_json
from worker_support import server_ms


def dead(q: Queue, error: str, **kw: Any) -> str:
    jid = q.enqueue({"d": 1}, max_attempts=1, priority=-(10**6), **kw)
    got = q.claim()
    assert got is not None and got.id == jid
    assert q.retry(jid, got.token, error) == "dead"
    return jid


def test_pending_in_run_order(q: Queue, r: redis.Redis) -> None:
    a = q.enqueue({"n": 1}, priority=5)
    b = q.enqueue({"n": 2})
    c = q.enqueue({"n": 3}, priority=-1)
    d = q.enqueue({"n": 4})
    lane = q.enqueue({"n": 5}, group="g")
    before = dump(r, q)
    page = q.job_page("pending", 10)
    # lowest priority first, then mint order: the order claims take them
    assert [j.id for j in page.jobs] == [c, b, d, a] and page.order == "run"
    assert page.total == 4 and page.group is None
    assert [j.priority for j in page.jobs] == [-1, 0, 0, 5] and page.jobs[0].score == -1
    assert dump(r, q) == before
    assert lane not in [j.id for j in page.jobs]


def test_a_page_writes_nothing(q: Queue, r: redis.Redis) -> None:
    for i in range(5):
        q.enqueue({"i": i}, name=f"n{i}")
    q.enqueue({"x": 1}, delay_ms=60000)
    dead(q, "boom")
    before = dump(r, q)
    for state in ("pending", "active", "scheduled", "dead"):
        q.job_page(state, 3, 1)
        q.find_jobs(state, "n", budget=2)
    q.groups_page()
    q.throughput(5)
    assert dump(r, q) == before


def test_lane_paged_alone(q: Queue) -> None:
    flat = q.enqueue({"f": 1})
    one = q.enqueue({"g": 1}, group="g1")
    two = q.enqueue({"g": 2}, group="g1", priority=-3)
    q.enqueue({"g": 3}, group="g2")
    assert [j.id for j in q.job_page("pending").jobs] == [flat]
    lane = q.job_page("pending", group="g1")
    assert [j.id for j in lane.jobs] == [two, one] and lane.total == 2 and lane.group == "g1"
    assert lane.jobs[0].group == "g1"
    with pytest.raises(InvalidArgument):
        q.job_page("dead", group="g1")
    with pytest.raises(InvalidName):
        q.job_page("pending", group="bad name")


def test_scheduled_soonest_first_dead_newest_first(q: Queue) -> None:
    late = q.enqueue({"s": 1}, delay_ms=90000)
    soon = q.enqueue({"s": 2}, delay_ms=30000)
    mid = q.enqueue({"s": 3}, delay_ms=60000)
    page = q.job_page("scheduled")
    assert [j.id for j in page.jobs] == [soon, mid, late] and page.order == "soonest"
    assert page.jobs[0].score is not None and page.jobs[0].score < page.jobs[1].score  # type: ignore[operator]
    first = dead(q, "one")
    second = dead(q, "two")
    died = q.job_page("dead")
    assert died.order == "newest" and {j.id for j in died.jobs} == {first, second}
    scores = [j.score or 0 for j in died.jobs]
    assert scores == sorted(scores, reverse=True)
    assert died.jobs[0].last_error in ("one", "two") and died.jobs[0].failures == 1


def test_page_bounds_are_checked_before_io(q: Queue) -> None:
    for bad in (0, MAX_PAGE + 1, -1):
        with pytest.raises(InvalidArgument):
            q.job_page("pending", bad)
    with pytest.raises(InvalidArgument):
        q.job_page("done")
    with pytest.raises(InvalidArgument):
        q.job_page("pending", 5, -1)


def test_find_is_bounded_and_resumable(q: Queue, r: redis.Redis) -> None:
    ids = [
        q.enqueue({"to": f"user{i}@example.com"}, name="send" if i % 3 else "digest")
        for i in range(10)
    ]
    before = dump(r, q)
    step = q.find_jobs("pending", "DIGEST", fields=["name"], budget=4)
    # four examined (ranks 0..3), matches among them only, a cursor to go on
    assert step.scanned == 4 and step.cursor == 4
    assert [j.id for j in step.jobs] == [ids[0], ids[3]]
    rest = q.find_jobs("pending", "digest", fields=["name"], budget=100, cursor=step.cursor)
    assert [j.id for j in rest.jobs] == [ids[6], ids[9]] and rest.cursor is None
    assert [j.id for j in q.find_jobs("pending", "user7@", fields=["payload"]).jobs] == [ids[7]]
    assert q.find_jobs("pending", "user7@", fields=["name"]).jobs == []
    assert [j.id for j in q.find_jobs("pending", ids[5][-6:], fields=["id"]).jobs] == [ids[5]]
    few = q.find_jobs("pending", "send", n=2)
    assert len(few.jobs) == 2 and few.cursor is not None  # stopped at n, can go on
    assert dump(r, q) == before
    for kw in ({"budget": 0}, {"budget": 10**6}, {"fields": ["secret"]}, {"n": 0}):
        with pytest.raises(InvalidArgument):
            q.find_jobs("pending", "x", **kw)
    with pytest.raises(InvalidArgument):
        q.find_jobs("pending", "")


def test_find_on_pending_walks_the_flat_set_then_every_lane(q: Queue, r: redis.Redis) -> None:
    flat = [q.enqueue({"n": i}, name="flat") for i in range(3)]
    laned = [q.enqueue({"n": i}, name=f"lane{i % 3}", group=f"g{i % 3}") for i in range(6)]
    before = dump(r, q)
    # the lane's jobs are found from the pending tab, not only with group=
    step = q.find_jobs("pending", "lane1", fields=["name"], budget=4)
    assert step.scanned == 4 and step.cursor == 4 and step.total == 9
    assert step.jobs == []  # the flat set (3) and the first lane job in the index
    rest = q.find_jobs("pending", "lane1", fields=["name"], budget=4, cursor=step.cursor)
    again = q.find_jobs("pending", "lane1", fields=["name"], budget=4, cursor=rest.cursor)
    assert rest.cursor == 8 and again.cursor is None and again.scanned == 1
    assert {j.id for j in rest.jobs + again.jobs} == {laned[1], laned[4]}
    assert all(j.group == "g1" for j in rest.jobs + again.jobs)
    # one step over everything: every pending job examined, then (only then) no cursor
    whole = q.find_jobs("pending", "", since_ms=0, budget=100)
    assert whole.scanned == 9 and whole.total == 9 and whole.cursor is None
    assert {j.id for j in whole.jobs} == set(flat + laned)
    # a lane alone still pages that lane, with its own total
    lane = q.find_jobs("pending", "lane", fields=["name"], group="g2")
    assert [j.id for j in lane.jobs] == [laned[2], laned[5]] and lane.total == 2
    assert dump(r, q) == before


def test_find_in_errors(q: Queue) -> None:
    hit = dead(q, "HTTPError: 404 Not Found [/v1/charges]")
    dead(q, "TimeoutError")
    found = q.find_jobs("dead", "/v1/charges", fields=["error"])
    assert [j.id for j in found.jobs] == [hit]


def test_job_view_in_one_round_trip(q: Queue, r: redis.Redis) -> None:
    jid = dead(q, "boom", name="send")
    for i in range(5):
        q.add_log(jid, f"line {i}")
    before = dump(r, q)
    view = q.job_view(jid, log_tail=3)
    assert view is not None
    assert view.row["state"] == "dead" and view.row["data"] == {"d": 1}
    assert view.logs == ["line 2", "line 3", "line 4"] and view.log_count == 5
    assert view.score == int(r.zscore(q.keys.dead, jid) or 0) and view.locked is False
    assert view.now_ms >= view.score
    assert dump(r, q) == before
    lane = q.enqueue({"g": 1}, group="g", priority=4)
    lview = q.job_view(lane)
    assert lview is not None and lview.score == 4  # in a lane: its priority
    assert q.job_view("JOB00000000001") is None
    with pytest.raises(InvalidJobId):
        q.job_view("JOB-nope")
    assert q.job_state(jid) == "dead" and q.get_job_logs(jid)[-1] == "line 4"


def test_groups_page_walks_every_group(q: Queue) -> None:
    names = {f"t{i:03d}" for i in range(120)}
    for g in names:
        q.enqueue({"g": g}, group=g)
    seen: list[str] = []
    cursor, calls = "0", 0
    while True:
        page = q.groups_page(cursor, 25)
        calls += 1
        seen += [g.name for g in page.groups]
        assert len(page.groups) <= 60  # about a page, never all
        cursor = page.cursor
        if cursor == "0":
            break
    assert set(seen) == names and calls >= 2
    with pytest.raises(InvalidArgument):
        q.groups_page("x")


def test_throughput_window(q: Queue, r: redis.Redis) -> None:
    for _ in range(2):
        q.enqueue({"n": 1})
    for got in q.claim_many(2):
        q.complete(got.id, got.token)
    dead(q, "boom")
    t = q.throughput(5)
    assert t.minutes == 5 and len(t.completed.series) == 5 and len(t.failed.series) == 5
    assert t.completed.total == 2 and sum(t.completed.series) == 2
    assert t.failed.total == 1
    with pytest.raises(InvalidArgument):
        q.throughput(0)


def test_queue_exists(make_queue: Any, qname: str) -> None:
    q = make_queue(qname)
    assert q.queue_exists() is False  # a mistyped name
    q.pause()
    assert q.queue_exists() is True
    other = make_queue(qname + "-x")
    other.enqueue({"x": 1}, delay_ms=60000)
    assert other.queue_exists() is True


def test_latency_is_the_age_of_the_oldest_head(q: Queue, r: redis.Redis) -> None:
    assert q.latency() is None
    now = server_ms(r)
    old = ids.encode((now - 60_000 - ids.EPOCH_MS) << (ids.NODE_BITS + ids.SEQ_BITS))
    q.enqueue("new")
    assert 0 <= q.latency() < 60_000  # type: ignore[operator]
    q.enqueue("old", job_id=old, group="g")  # the lanes' head is older
    assert 60_000 <= q.latency() < 120_000  # type: ignore[operator]
    q.drain()
    assert q.latency() is None


def test_dot_names_are_refused() -> None:
    for name in (".", ".."):
        with pytest.raises(InvalidName):
            check_name(name)
        with pytest.raises(InvalidName):
            Queue(name, url="redis://127.0.0.1:1/0")
    assert check_name("...") == "..." and check_name(".a") == ".a"


async def test_async_facade(aq: AsyncQueue) -> None:
    jid = await aq.enqueue({"a": 1}, name="x")
    page = await aq.job_page("pending")
    assert [j.id for j in page.jobs] == [jid]
    view = await aq.job_view(jid)
    assert view is not None and view.row["name"] == "x"
    assert isinstance(await aq.server_time(), int)


def test_codec() -> None:
    assert LenientJson().loads("not json") == "not json"
    assert LenientJson().loads('{"a":1}') == {"a": 1}
    assert LenientJson().dumps({"a": "é"}) == '{"a":"é"}'
    from echomq.views import JobLine

    line = JobLine("JOB00000000001", "dead", None, None, 0, 1, 1, None, "x", 5)
    assert to_json({"jobs": [line], "s": {1}}) == (
        '{"jobs":[{"id":"JOB00000000001","state":"dead","name":null,"group":null,'
        '"priority":0,"attempts":1,"failures":1,"progress":null,"last_error":"x","score":5}],'
        '"s":[1]}'
    )
