"""Log lines with their time: ``add_log`` writes the server time of each line to
``emq:{q}:job:<id>:logtimes`` beside ``:logs`` (the seed's list, unchanged), ``keep``
trims both, and every path that deletes a job's logs deletes their times too.

Each test asserts the reply and the keys left; a refusal leaves ``dump`` as it was.
"""

from __future__ import annotations

import pytest
import redis

from conftest import dump, queue_keys
from echomq import AsyncQueue, JobGone, LogEntry, Queue, new_id
from operator_support import LATER_MS, changed, put_job

# run under both executors: the native twins delete rows too (complete, retry's trim)
pytestmark = pytest.mark.both_executors


def server_ms(r: redis.Redis) -> int:
    sec, usec = r.time()
    return int(sec) * 1000 + int(usec) // 1000


def times(r: redis.Redis, q: Queue, jid: str) -> list[int]:
    return [int(t) for t in r.lrange(q.keys.logtimes(jid), 0, -1)]


def no_log_keys(r: redis.Redis, q: Queue) -> None:
    """No ``:logs`` or ``:logtimes`` key is left anywhere under the queue."""
    left = {k for k in queue_keys(r, q) if k.endswith((":logs", ":logtimes"))}
    assert left == set()


# -- add_log writes both lists ----------------------------------------------------------


def test_add_log_writes_the_line_and_its_server_time(q: Queue, r: redis.Redis) -> None:
    jid = q.enqueue("x")
    before = dump(r, q)
    t0 = server_ms(r)
    assert q.add_log(jid, "first") == 1
    assert q.add_log(jid, "second") == 2
    t1 = server_ms(r)
    assert changed(before, dump(r, q)) == {q.keys.logs(jid), q.keys.logtimes(jid)}
    assert r.lrange(q.keys.logs(jid), 0, -1) == ["first", "second"]
    stamps = times(r, q, jid)
    assert len(stamps) == 2
    assert t0 <= stamps[0] <= stamps[1] <= t1  # the server's clock, within the calls
    assert q.get_job_logs(jid) == ["first", "second"]  # the seed's read is unchanged


def test_keep_trims_the_lines_and_their_times_together(q: Queue, r: redis.Redis) -> None:
    jid = q.enqueue("x")
    for i in range(1, 6):
        assert q.add_log(jid, f"line {i}") == i
    stamps = times(r, q, jid)
    assert q.add_log(jid, "line 6", keep=3) == 3
    assert r.lrange(q.keys.logs(jid), 0, -1) == ["line 4", "line 5", "line 6"]
    kept = times(r, q, jid)
    assert len(kept) == 3 and kept[:2] == stamps[3:]
    assert q.add_log(jid, "line 7", keep=1) == 1
    assert r.lrange(q.keys.logs(jid), 0, -1) == ["line 7"]
    assert len(times(r, q, jid)) == 1 and times(r, q, jid)[0] >= kept[-1]


def test_keep_keeps_old_untimed_lines_aligned(q: Queue, r: redis.Redis) -> None:
    """Lines written before times were kept have none: the two lists stay aligned at
    their newest end through a trim."""
    jid = q.enqueue("x")
    r.rpush(q.keys.logs(jid), "old 1", "old 2", "old 3")
    assert q.add_log(jid, "new 1") == 4
    assert q.add_log(jid, "new 2", keep=3) == 3
    assert r.lrange(q.keys.logs(jid), 0, -1) == ["old 3", "new 1", "new 2"]
    assert len(times(r, q, jid)) == 2
    assert q.add_log(jid, "new 3", keep=2) == 2
    assert r.lrange(q.keys.logs(jid), 0, -1) == ["new 2", "new 3"]
    assert len(times(r, q, jid)) == 2


def test_a_refused_add_log_writes_neither_list(q: Queue, r: redis.Redis) -> None:
    put_job(q, "pending")
    ghost = new_id()
    before = dump(r, q)
    with pytest.raises(JobGone):
        q.add_log(ghost, "lost", keep=1)
    assert dump(r, q) == before
    assert not r.exists(q.keys.logs(ghost), q.keys.logtimes(ghost))


# -- get_job_log_entries --------------------------------------------------------------


def test_entries_pair_each_line_with_its_time(q: Queue, r: redis.Redis) -> None:
    jid = q.enqueue("x")
    assert q.get_job_log_entries(jid) == []
    q.add_log(jid, "one")
    q.add_log(jid, "two")
    before = dump(r, q)
    stamps = times(r, q, jid)
    assert q.get_job_log_entries(jid) == [LogEntry(stamps[0], "one"), LogEntry(stamps[1], "two")]
    assert dump(r, q) == before  # read-only


def test_entries_align_older_untimed_lines_at_the_newest_end(q: Queue, r: redis.Redis) -> None:
    """Lines written before log times (a raw RPUSH, as an older echomq wrote them) have
    no time; the times belong to the newest lines."""
    jid = q.enqueue("x")
    r.rpush(q.keys.logs(jid), "old 1", "old 2")
    q.add_log(jid, "new 1")
    q.add_log(jid, "new 2")
    stamps = times(r, q, jid)
    got = q.get_job_log_entries(jid)
    assert got == [
        LogEntry(None, "old 1"),
        LogEntry(None, "old 2"),
        LogEntry(stamps[0], "new 1"),
        LogEntry(stamps[1], "new 2"),
    ]
    assert [e.line for e in got] == q.get_job_logs(jid)  # the same lines, in order
    # only untimed lines: every time is None (no :logtimes key at all)
    bare = q.enqueue("y")
    r.rpush(q.keys.logs(bare), "a", "b")
    assert q.get_job_log_entries(bare) == [LogEntry(None, "a"), LogEntry(None, "b")]
    assert not r.exists(q.keys.logtimes(bare))


def test_entries_of_a_missing_job_are_gone(q: Queue, r: redis.Redis) -> None:
    put_job(q, "pending")
    ghost = new_id()
    before = dump(r, q)
    with pytest.raises(JobGone) as err:
        q.get_job_log_entries(ghost)
    assert err.value.reason == "gone" and err.value.job_id == ghost
    assert dump(r, q) == before


async def test_entries_on_the_async_queue(aq: AsyncQueue, r: redis.Redis) -> None:
    jid = await aq.enqueue("x")
    assert await aq.add_log(jid, "line", keep=5) == 1
    (stamp,) = [int(t) for t in r.lrange(aq.keys.logtimes(jid), 0, -1)]
    assert await aq.get_job_log_entries(jid) == [LogEntry(stamp, "line")]
    await aq.remove_job(jid)
    with pytest.raises(JobGone):
        await aq.get_job_log_entries(jid)
    assert not r.exists(aq.keys.logs(jid), aq.keys.logtimes(jid))


def test_the_job_view_carries_the_times_of_its_tail(q: Queue, r: redis.Redis) -> None:
    jid = q.enqueue("x")
    r.rpush(q.keys.logs(jid), "untimed")
    for i in range(4):
        q.add_log(jid, f"line {i}")
    stamps = times(r, q, jid)
    view = q.job_view(jid, log_tail=3)
    assert view is not None
    assert view.logs == ["line 1", "line 2", "line 3"] and view.log_count == 5
    assert view.log_times == stamps[1:]
    whole = q.job_view(jid, log_tail=10)
    assert whole is not None and whole.log_times == [None, *stamps]


# -- every deletion takes the times with the lines --------------------------------------


def _logged(q: Queue, jid: str) -> str:
    q.add_log(jid, "a line")
    return jid


def test_complete_not_kept_deletes_the_times(q: Queue, r: redis.Redis) -> None:
    jid, token = put_job(q, "active")
    _logged(q, jid)
    assert token is not None
    assert r.exists(q.keys.logtimes(jid))
    q.complete(jid, token)
    assert not r.exists(q.keys.job(jid), q.keys.logs(jid), q.keys.logtimes(jid))
    no_log_keys(r, q)


def test_complete_many_deletes_the_times(q: Queue, r: redis.Redis) -> None:
    ids = q.enqueue_many(["a", "b", "c"])
    for jid in ids:
        _logged(q, jid)
    got = q.claim_many(3)
    assert {j.id for j in got} == set(ids)
    assert q.complete_many([(j.id, j.token) for j in got]) == []
    assert not any(r.exists(q.keys.job(j), q.keys.logtimes(j)) for j in ids)
    no_log_keys(r, q)


def test_a_kept_completion_keeps_the_times_and_its_trim_deletes_them(
    q: Queue, r: redis.Redis
) -> None:
    q.set_retention(completed=1)
    first, t1 = put_job(q, "active")
    _logged(q, first)
    assert t1 is not None
    q.complete(first, t1)
    assert q.job_state(first) == "completed"
    assert r.llen(q.keys.logtimes(first)) == 1  # kept history keeps its log times
    second, t2 = put_job(q, "active")
    _logged(q, second)
    assert t2 is not None
    q.complete(second, t2)  # the completed set holds one: the first job is trimmed
    assert q.job_state(first) is None
    assert not r.exists(q.keys.job(first), q.keys.logs(first), q.keys.logtimes(first))
    assert r.llen(q.keys.logtimes(second)) == 1
    left = {k for k in queue_keys(r, q) if k.endswith(":logtimes")}
    assert left == {q.keys.logtimes(second)}


def test_a_dead_trim_deletes_the_times(q: Queue, r: redis.Redis) -> None:
    q.set_retention(dead=1)
    first, _ = put_job(q, "active")
    _logged(q, first)
    second, _ = put_job(q, "active")
    _logged(q, second)
    # fail both: the second death trims the first from the dead set
    for jid in (first, second):
        token = int(r.hget(q.keys.job(jid), "attempts") or 0)
        assert q.retry(jid, token, "boom") == "dead"
    assert q.job_state(first) is None
    assert not r.exists(q.keys.job(first), q.keys.logs(first), q.keys.logtimes(first))
    assert r.exists(q.keys.logtimes(second))


def test_remove_job_deletes_the_times(q: Queue, r: redis.Redis) -> None:
    jid, _ = put_job(q, "scheduled")
    _logged(q, jid)
    q.remove_job(jid)
    assert not r.exists(q.keys.job(jid), q.keys.logs(jid), q.keys.logtimes(jid))
    no_log_keys(r, q)


def test_remove_jobs_deletes_the_times(q: Queue, r: redis.Redis) -> None:
    ids = [_logged(q, put_job(q, "dead")[0]) for _ in range(2)]
    res = q.remove_jobs("dead")
    assert res.matched == 2
    assert not any(r.exists(q.keys.job(j), q.keys.logtimes(j)) for j in ids)
    no_log_keys(r, q)


def test_drain_deletes_the_times(q: Queue, r: redis.Redis) -> None:
    flat = _logged(q, q.enqueue("flat"))
    laned = _logged(q, q.enqueue("laned", group="g"))
    later = _logged(q, q.enqueue("later", delay_ms=LATER_MS))
    assert q.drain(include_schedule=True) == 3
    for jid in (flat, laned, later):
        assert not r.exists(q.keys.job(jid), q.keys.logs(jid), q.keys.logtimes(jid))
    no_log_keys(r, q)


def test_drain_group_deletes_the_times(q: Queue, r: redis.Redis) -> None:
    laned = _logged(q, q.enqueue("laned", group="g"))
    assert q.drain_group("g") == 1
    assert not r.exists(q.keys.job(laned), q.keys.logtimes(laned))
    no_log_keys(r, q)


def test_obliterate_deletes_the_times(q: Queue, r: redis.Redis) -> None:
    jobs = [
        _logged(q, put_job(q, "dead")[0]),
        _logged(q, put_job(q, "active")[0]),
        _logged(q, q.enqueue("pending")),
        _logged(q, q.enqueue("laned", group="g")),
        _logged(q, q.enqueue("later", delay_ms=LATER_MS)),
    ]
    q.pause()
    while not q.obliterate(force=True):
        pass
    assert not any(r.exists(q.keys.logs(j), q.keys.logtimes(j)) for j in jobs)
    assert queue_keys(r, q) == set()


@pytest.mark.parametrize("state", ["dead", "completed"])
def test_clean_deletes_the_times(q: Queue, r: redis.Redis, state: str) -> None:
    kw = {"keep_ms": LATER_MS} if state == "completed" else {}
    jid, _ = put_job(q, state, **kw)
    _logged(q, jid)
    assert r.exists(q.keys.logtimes(jid))
    settled = r.zscore(q.keys.state_set(state), jid)
    assert settled is not None
    while server_ms(r) <= settled:  # clean takes what settled before now - 0
        pass
    res = q.clean(0, state=state)
    assert res.matched == 1
    assert not r.exists(q.keys.job(jid), q.keys.logs(jid), q.keys.logtimes(jid))
    no_log_keys(r, q)
