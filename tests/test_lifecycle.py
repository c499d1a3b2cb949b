"""The job lifecycle on the real private server: every verb's reply and the keys it leaves.

Each refusal is checked against a byte-for-byte dump of the queue's keys taken before
the call. Malformed ids are proved to raise before any I/O by a queue whose URL points
at a port nothing listens on.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import redis

from conftest import claim_records, dump, native, queue_keys, script_calls, tombstones
from echomq import (
    InvalidArgument,
    InvalidJobId,
    InvalidName,
    JobGone,
    Queue,
    StaleToken,
    ids,
    new_id,
)
from echomq.embedded import free_port
from echomq.lifecycle import ENQUEUE_CHUNK
from echomq.results import Counts, JobRow
from echomq.schema import SEQ_SPAN

# run under both executors: the native twins must equal the scripts
pytestmark = [pytest.mark.both_executors, pytest.mark.both_servers, pytest.mark.evalsha_too]

BAD_IDS = [
    "",
    "JOB",
    "job00000000001",
    "XYZ00000000001",
    "JOB0000000001",
    "JOB000000000001",
    "JOB0000000000!",
    "JOB0000000000-",
    "JOBzzzzzzzzzzz",  # base62 value >= 2**63
    "JOB00000000001\n",
]


# ---------------------------------------------------------------- helpers


def server_ms(r: redis.Redis) -> int:
    sec, usec = r.time()
    return int(sec) * 1000 + int(usec) // 1000


def run_score(priority: int, seq: int) -> float:
    """A ready job's score: its priority, then its place in the enqueue sequence."""
    return float(priority * SEQ_SPAN + seq)


#: Every claim stamps its start on the row (the history series reads it at the end):
#: a server time, shown as T.
T = "T"


def row(r: redis.Redis, q: Queue, jid: str) -> dict[str, str]:
    got: dict[str, str] = r.hgetall(q.keys.job(jid))  # type: ignore[assignment]
    for name in ("started_at", "last_started_at"):
        if name in got:
            assert got[name].isdigit() and len(got[name]) == 13, got
            got[name] = T
    return got


def command_calls(r: redis.Redis) -> dict[str, int]:
    """Calls per command, INFO itself left out (reading the stats counts as one)."""
    return {
        k: int(v["calls"]) for k, v in r.info("commandstats").items() if k not in ("cmdstat_info",)
    }


def wait_past(r: redis.Redis, deadline_ms: float) -> None:
    """Sleep until the server clock is past ``deadline_ms`` (leases of ~50 ms)."""
    while server_ms(r) <= deadline_ms:
        time.sleep(0.01)


def expire_leases(r: redis.Redis, q: Queue) -> None:
    top = r.zrange(q.keys.active, -1, -1, withscores=True)
    if top:
        wait_past(r, top[0][1])


class CountingConnection(redis.Connection):
    """A connection that counts its writes: each command, and each pipelined flush, is
    one write followed by its replies, so one round trip. Both paths a runner takes
    (its own line and the client's pool) make their connections from this class."""

    writes = 0

    def send_packed_command(self, command: Any, check_health: bool = True) -> None:
        CountingConnection.writes += 1
        super().send_packed_command(command, check_health)


def counting_client(url: str) -> redis.Redis:
    pool = redis.ConnectionPool.from_url(url, connection_class=CountingConnection)
    return redis.Redis(connection_pool=pool)


@pytest.fixture()
def nowhere(qname: str) -> Iterator[Queue]:
    """A queue whose URL points at a port nothing listens on: any I/O would fail."""
    queue = Queue(qname, url=f"redis://127.0.0.1:{free_port()}/0")
    yield queue
    queue.close()


def claimed(q: Queue, lease_ms: int = 30000) -> Any:
    c = q.claim(lease_ms)
    assert c is not None
    return c


# ---------------------------------------------------------------- enqueue


def test_enqueue_writes_the_row_and_pending(q: Queue, r: redis.Redis) -> None:
    jid = q.enqueue({"a": 1, "s": "é"})
    assert ids.validate(jid) == jid
    assert row(r, q, jid) == {
        "state": "pending",
        "attempts": "0",
        "payload": '{"a":1,"s":"é"}',
        "seq": "0",
    }
    assert r.zrange(q.keys.pending, 0, -1, withscores=True) == [(jid, 0.0)]
    assert r.lrange(q.keys.wake, 0, -1) == ["1"]
    # the enqueue sequence: the last number taken
    assert r.get(q.keys.seq) == "1"
    assert queue_keys(r, q) == {q.keys.job(jid), q.keys.pending, q.keys.wake, q.keys.seq}


def test_enqueue_options_are_stored(q: Queue, r: redis.Redis) -> None:
    jid = q.enqueue([1, 2], name="resize", priority=4, max_attempts=7, backoff="100")
    assert row(r, q, jid) == {
        "state": "pending",
        "attempts": "0",
        "payload": "[1,2]",
        "name": "resize",
        "priority": "4",
        "max_attempts": "7",
        "backoff": "100",
        "seq": "0",
    }
    assert r.zscore(q.keys.pending, jid) == run_score(4, 0)


@pytest.mark.parametrize(
    ("kwargs", "fields"),
    [
        ({"priority": -2}, {"priority": "-2"}),
        ({"backoff": "5"}, {"backoff": "5"}),
        ({"max_attempts": 9, "dedup_id": "d"}, {"max_attempts": "9", "dedup": "d"}),
        ({"name": "n", "job_id": "JOB00000000009"}, {"name": "n"}),
    ],
    ids=["first-option", "last-option", "middle-and-dedup", "given-id"],
)
def test_each_option_lands_alone(
    q: Queue, r: redis.Redis, kwargs: dict[str, Any], fields: dict[str, str]
) -> None:
    # options travel positionally with trailing absent ones left off: each must land
    # in its own field and nothing else may appear
    jid = q.enqueue("p", **kwargs)
    want = {"state": "pending", "attempts": "0", "payload": '"p"', "seq": "0", **fields}
    assert row(r, q, jid) == want
    assert r.zscore(q.keys.pending, jid) == run_score(kwargs.get("priority", 0), 0)


def test_grouped_enqueue_goes_to_its_lane(q: Queue, r: redis.Redis) -> None:
    one = q.enqueue("a", group="g1", priority=1)
    many = q.enqueue_many(["b", "c"], group="g1")
    later = q.enqueue("d", group="g1", delay_ms=60_000)
    lane = q.keys.lane("g1")
    # priority first, then the enqueue order: one took seq 0, the batch 1 and 2
    assert r.zrange(lane, 0, -1, withscores=True) == [
        (many[0], run_score(0, 1)),
        (many[1], run_score(0, 2)),
        (one, run_score(1, 0)),
    ]
    assert r.exists(q.keys.pending) == 0
    assert r.smembers(q.keys.groups) == {"g1"} and r.lrange(q.keys.ring, 0, -1) == ["g1"]
    assert row(r, q, later) == {
        "state": "scheduled",
        "attempts": "0",
        "payload": '"d"',
        "group": "g1",
        "seq": "3",  # taken at enqueue: its place when it is due
    }
    assert r.zcard(q.keys.schedule) == 1
    assert q.counts().pending == 3


def test_enqueue_with_custom_serializer(make_queue: Callable[..., Queue], qname: str, r) -> None:
    class Upper:
        def dumps(self, value: Any) -> str:
            return str(value).upper()

        def loads(self, text: str) -> Any:
            return text.lower()

    q = make_queue(qname, serializer=Upper())
    jid = q.enqueue("hello")
    assert r.hget(q.keys.job(jid), "payload") == "HELLO"
    assert claimed(q).payload == "hello"


def test_priority_lower_first_then_mint_order(q: Queue) -> None:
    j5 = q.enqueue("p5", priority=5)
    a0 = q.enqueue("a0")
    neg = q.enqueue("neg", priority=-3)
    b0 = q.enqueue("b0")
    order = [claimed(q).id for _ in range(4)]
    assert order == [neg, a0, b0, j5]
    assert q.claim() is None


def test_given_job_id_and_its_duplicate(q: Queue, r: redis.Redis) -> None:
    jid = new_id()
    assert q.enqueue({"v": 1}, job_id=jid) == jid
    assert row(r, q, jid)["payload"] == '{"v":1}'
    before = dump(r, q)
    assert q.enqueue({"v": 2}, job_id=jid, name="other", delay_ms=10) == jid
    assert dump(r, q) == before  # nothing written: payload kept, no second wake token


def test_duplicate_job_id_of_an_active_job_writes_nothing(q: Queue, r: redis.Redis) -> None:
    jid = q.enqueue("x", job_id=new_id())
    claimed(q)
    before = dump(r, q)
    assert q.enqueue("y", job_id=jid) == jid
    assert dump(r, q) == before


def test_held_dedup_id_returns_the_holder_and_writes_nothing(q: Queue, r: redis.Redis) -> None:
    holder = q.enqueue({"n": 1}, dedup_id="order-7")
    assert r.get(q.keys.dedup("order-7")) == holder
    assert row(r, q, holder)["dedup"] == "order-7"
    before = dump(r, q)
    assert q.enqueue({"n": 2}, dedup_id="order-7") == holder
    assert q.enqueue({"n": 3}, dedup_id="order-7", job_id=new_id()) == holder
    assert q.enqueue_many([]) == []
    assert dump(r, q) == before
    # completing the holder releases the key: the next enqueue is a new job
    c = claimed(q)
    q.complete(c.id, c.token)
    assert r.exists(q.keys.dedup("order-7")) == 0
    fresh = q.enqueue({"n": 4}, dedup_id="order-7")
    assert fresh != holder
    assert r.get(q.keys.dedup("order-7")) == fresh


def test_delay_ms_schedules_on_the_server_clock(q: Queue, r: redis.Redis) -> None:
    lo = server_ms(r)
    jid = q.enqueue("later", delay_ms=60_000)
    hi = server_ms(r)
    due = r.zscore(q.keys.schedule, jid)
    assert due is not None and lo + 60_000 <= due <= hi + 60_000
    assert row(r, q, jid)["state"] == "scheduled"
    # no wake token: nothing is ready (seq: the enqueue sequence, taken at enqueue)
    assert queue_keys(r, q) == {q.keys.job(jid), q.keys.schedule, q.keys.seq}
    assert q.promote() == 0
    assert q.claim() is None


def test_zero_delay_is_ready_now(q: Queue, r: redis.Redis) -> None:
    jid = q.enqueue("now", delay_ms=0)
    assert r.zscore(q.keys.pending, jid) == 0.0
    assert row(r, q, jid)["state"] == "pending"


def test_run_at_ms_is_the_exact_due_time(q: Queue, r: redis.Redis) -> None:
    at = server_ms(r) + 3_600_000
    jid = q.enqueue("at", run_at_ms=at)
    assert r.zscore(q.keys.schedule, jid) == at
    assert row(r, q, jid)["state"] == "scheduled"
    assert q.job_state(jid) == "scheduled"


def test_run_at_in_the_past_waits_for_promote(q: Queue, r: redis.Redis) -> None:
    jid = q.enqueue("past", run_at_ms=server_ms(r) - 1000, priority=2)
    assert q.claim() is None
    assert q.promote() == 1
    assert r.zscore(q.keys.pending, jid) == run_score(2, 0)
    assert r.zcard(q.keys.schedule) == 0
    assert claimed(q).id == jid


@pytest.mark.parametrize(
    ("kwargs", "exc"),
    [
        ({"job_id": "JOB123"}, InvalidJobId),
        ({"job_id": "JOBzzzzzzzzzzz"}, InvalidJobId),
        ({"name": ""}, InvalidArgument),
        ({"name": "n" * 257}, InvalidArgument),
        ({"group": "bad group"}, InvalidName),
        ({"dedup_id": ""}, InvalidName),
        ({"dedup_id": "d" * 257}, InvalidName),
        ({"priority": 1.5}, InvalidArgument),
        ({"priority": True}, InvalidArgument),
        ({"delay_ms": -1}, InvalidArgument),
        ({"run_at_ms": -5}, InvalidArgument),
        ({"max_attempts": 0}, InvalidArgument),
    ],
)
def test_enqueue_gates_before_any_io(nowhere: Queue, kwargs: dict[str, Any], exc: type) -> None:
    with pytest.raises(exc):
        nowhere.enqueue("x", **kwargs)


@pytest.mark.single_node("counts the round trips of one plain connection")
def test_enqueue_is_one_round_trip(server, qname: str, r: redis.Redis) -> None:
    client = counting_client(server.url)
    q = Queue(qname, client=client)
    q.counts()  # the version fence is paid once per runner
    start, calls = CountingConnection.writes, script_calls(r)
    q.enqueue({"x": 1}, dedup_id="d", priority=1, delay_ms=5)
    assert CountingConnection.writes - start == 1
    assert script_calls(r) - calls == 1
    client.close()


# ---------------------------------------------------------------- enqueue_many


@pytest.mark.single_node("counts the round trips of one plain connection")
def test_enqueue_many_in_one_round_trip(server, qname: str, r: redis.Redis) -> None:
    client = counting_client(server.url)
    q = Queue(qname, client=client)
    q.counts()
    n = 2 * ENQUEUE_CHUNK + 7
    start, calls = CountingConnection.writes, script_calls(r)
    got = q.enqueue_many({"i": i} for i in range(n))
    assert CountingConnection.writes - start == 1  # one pipelined write
    assert script_calls(r) - calls == 3  # three script calls of <= ENQUEUE_CHUNK jobs
    assert len(got) == n and len(set(got)) == n
    assert got == sorted(got)  # minted in order
    assert r.zcard(q.keys.pending) == n
    assert r.zrange(q.keys.pending, 0, -1) == got  # enqueue order (seq 0, 1, ...)
    assert row(r, q, got[0]) == {
        "state": "pending",
        "attempts": "0",
        "payload": '{"i":0}',
        "seq": "0",
    }
    assert row(r, q, got[-1])["payload"] == f'{{"i":{n - 1}}}'
    assert r.llen(q.keys.wake) == 64  # capped
    assert len(queue_keys(r, q)) == n + 3  # rows, pending, wake, seq
    client.close()


def test_enqueue_many_options(q: Queue, r: redis.Redis) -> None:
    lo = server_ms(r)
    got = q.enqueue_many(["a", "b"], name="n", priority=3, max_attempts=2, delay_ms=30_000)
    hi = server_ms(r)
    for jid in got:
        assert row(r, q, jid) == {
            "state": "scheduled",
            "attempts": "0",
            "payload": row(r, q, jid)["payload"],
            "name": "n",
            "priority": "3",
            "max_attempts": "2",
            "seq": str(got.index(jid)),
        }
        due = r.zscore(q.keys.schedule, jid)
        assert due is not None and lo + 30_000 <= due <= hi + 30_000
    assert [row(r, q, j)["payload"] for j in got] == ['"a"', '"b"']
    assert r.exists(q.keys.pending) == 0


def test_enqueue_many_empty_and_bad_options_do_no_io(nowhere: Queue) -> None:
    assert nowhere.enqueue_many([]) == []
    with pytest.raises(InvalidArgument):
        nowhere.enqueue_many([1, 2], priority="high")  # type: ignore[arg-type]
    with pytest.raises(InvalidName):
        nowhere.enqueue_many([1], group="no good")


# ---------------------------------------------------------------- the enqueue script's contract


def run_enqueue_script(q: Queue, args: list[str]) -> Any:
    from echomq.scripts import Eval, script

    def plan() -> Any:
        return (yield Eval(script("enqueue"), (q.keys.base,), args))

    return q.runner.drive(plan())


def test_script_long_form_many_jobs_keeps_each_dedup_to_its_own_row(
    q: Queue, r: redis.Redis
) -> None:
    a, b, c = ids.new_ids(3)
    held = q.enqueue("held", dedup_id="taken")
    reply = run_enqueue_script(
        q,
        ["3", "4", a, '"a"', "d-a", "0", b, '"b"', "", "0", c, '"c"', "taken", "0", "", "nm"],
    )
    assert reply == [a, b, held]  # the runner hands text, whatever the client decodes
    assert row(r, q, a) == {
        "state": "pending",
        "attempts": "0",
        "payload": '"a"',
        "name": "nm",
        "dedup": "d-a",
        "seq": "1",  # after held's 0
    }
    assert row(r, q, b) == {
        "state": "pending",
        "attempts": "0",
        "payload": '"b"',
        "name": "nm",
        "seq": "2",
    }
    assert r.exists(q.keys.job(c)) == 0
    assert r.get(q.keys.dedup("d-a")) == a
    assert r.zrange(q.keys.pending, 0, -1) == [held, a, b]  # enqueue order


def test_script_short_form_past_the_unpack_limit(q: Queue, r: redis.Redis) -> None:
    # more jobs in one call than the client ever sends: the ZADD is sliced
    n = 4501  # past Lua's unpack limit of about 8000 values
    minted = ids.new_ids(n)
    args = [str(n), "2"]
    for i, j in enumerate(minted):
        args += [j, str(i)]
    assert run_enqueue_script(q, [*args, "7"]) == n
    assert r.zrange(q.keys.pending, 0, -1, withscores=True) == [
        (j, run_score(7, i)) for i, j in enumerate(minted)
    ]
    assert row(r, q, minted[-1])["payload"] == str(n - 1)


# ---------------------------------------------------------------- claim


def test_claim_leases_the_head(q: Queue, r: redis.Redis) -> None:
    jid = q.enqueue({"k": "v"}, name="job-name")
    lo = server_ms(r)
    c = q.claim(lease_ms=20_000)
    hi = server_ms(r)
    assert c is not None
    assert (c.id, c.payload, c.token, c.name, c.group) == (jid, {"k": "v"}, 1, "job-name", None)
    assert row(r, q, jid) == {
        "state": "active",
        "attempts": "1",
        "payload": '{"k":"v"}',
        "name": "job-name",
        "seq": "0",
        "started_at": T,
    }
    assert lo <= int(r.hget(q.keys.job(jid), "started_at") or 0) <= hi
    deadline = r.zscore(q.keys.active, jid)
    assert deadline is not None and lo + 20_000 <= deadline <= hi + 20_000
    assert r.exists(q.keys.pending, q.keys.lock(jid)) == 0
    if not native(q):
        (record,) = claim_records(r, q)  # what a re-sent claim would answer
        assert r.get(record) == jid and 0 < r.pttl(record) <= 60_000
    assert queue_keys(r, q) == {q.keys.job(jid), q.keys.active, q.keys.wake, q.keys.seq}


def test_claim_on_an_empty_queue(q: Queue, r: redis.Redis) -> None:
    assert q.claim() is None
    assert q.claim_many(5) == []
    assert queue_keys(r, q) == set()


def test_pause_gate_answers_none_and_leaves_pending_untouched(q: Queue, r: redis.Redis) -> None:
    got = q.enqueue_many(["a", "b", "c"])
    r.hset(q.keys.meta, "paused", "1")
    assert q.is_paused() is True
    before, calls = dump(r, q), script_calls(r)
    assert q.claim() is None
    assert q.claim_many(3) == []
    assert script_calls(r) == calls  # the claim script never ran
    assert dump(r, q) == before
    r.hdel(q.keys.meta, "paused")
    assert q.is_paused() is False
    assert claimed(q).id == got[0]


def test_claim_many_with_lock(q: Queue, r: redis.Redis) -> None:
    got = q.enqueue_many(range(5))
    cs = q.claim_many(3, 10_000, lock_ms=5_000)
    assert [c.id for c in cs] == got[:3]
    assert [c.payload for c in cs] == [0, 1, 2]
    assert all(c.token == 1 for c in cs)
    for c in cs:
        assert r.get(q.keys.lock(c.id)) == "1"
        assert 0 < r.pttl(q.keys.lock(c.id)) <= 5_000
        assert row(r, q, c.id)["state"] == "active"
    assert r.zrange(q.keys.pending, 0, -1) == got[3:]
    rest = q.claim_many(10)
    assert [c.id for c in rest] == got[3:]
    assert all(r.exists(q.keys.lock(c.id)) == 0 for c in rest)
    assert r.zcard(q.keys.active) == 5 and r.exists(q.keys.pending) == 0


@pytest.mark.parametrize(
    "call",
    [
        lambda q: q.claim(0),
        lambda q: q.claim(-5),
        lambda q: q.claim_many(0),
        lambda q: q.claim_many(1, 0),
        lambda q: q.claim_many(1, 10, lock_ms=-1),
    ],
    ids=[f"g{i}" for i in range(5)],
)
def test_claim_gates_before_any_io(nowhere: Queue, call: Callable[[Queue], Any]) -> None:
    with pytest.raises(InvalidArgument):
        call(nowhere)


# ---------------------------------------------------------------- complete


def test_complete_deletes_the_row_and_counts(q: Queue, r: redis.Redis) -> None:
    jid = q.enqueue("x", dedup_id="once")
    c = q.claim_many(1, lock_ms=10_000)[0]
    r.rpush(q.keys.logs(jid), "line")
    lo = server_ms(r)
    assert q.complete(c.id, c.token) is None
    hi = server_ms(r)
    assert r.exists(q.keys.job(jid), q.keys.logs(jid), q.keys.lock(jid)) == 0
    assert r.exists(q.keys.active, q.keys.dedup("once")) == 0
    # the all-time total; the minute's count is in the history series' hour key
    assert r.hgetall(q.keys.metrics_completed) == {"count": "1"}
    hours = {q.keys.hist(lo // 3_600_000), q.keys.hist(hi // 3_600_000)}
    (hour,) = {k for k in queue_keys(r, q) if k.startswith(q.keys.base + "hist:")}
    assert hour in hours
    assert sum(q.history("1h").completed) == 1
    # the settled tombstone: a re-sent enqueue of this id answers duplicate for 60 s
    tomb = r.zscore(q.keys.settled, jid)
    assert native(q) or (tomb is not None and lo <= tomb <= hi)
    assert len(claim_records(r, q)) == (0 if native(q) else 1)
    assert queue_keys(r, q) == {
        q.keys.wake,
        q.keys.metrics_completed,
        q.keys.seq,
        hour,
        *tombstones(q),
    }
    assert q.job_state(jid) is None and q.get_job(jid) is None


def test_complete_refusals_change_nothing(q: Queue, r: redis.Redis) -> None:
    pending = q.enqueue("p")
    active = q.enqueue("a", priority=-1)
    c = claimed(q)
    assert c.id == active
    before = dump(r, q)
    with pytest.raises(StaleToken):
        q.complete(active, c.token + 1)
    with pytest.raises(StaleToken):
        q.complete(pending, 1)  # exists but not active
    with pytest.raises(JobGone):
        q.complete(new_id(), 1)
    assert dump(r, q) == before


def test_complete_many(q: Queue, r: redis.Redis) -> None:
    got = q.enqueue_many(range(4))
    cs = q.claim_many(4)
    gone = new_id()
    pairs = [(cs[0].id, cs[0].token), (cs[1].id, 99), (gone, 1), (cs[2].id, cs[2].token)]
    assert q.complete_many(pairs) == [cs[1].id, gone]
    assert r.zrange(q.keys.active, 0, -1) == sorted([got[1], got[3]])
    assert r.hget(q.keys.metrics_completed, "count") == "2"
    assert r.exists(q.keys.job(got[0]), q.keys.job(got[2])) == 0
    assert q.complete_many([]) == []


def test_complete_many_settles_a_job_named_twice_once(q: Queue, r: redis.Redis) -> None:
    a, b = q.enqueue_many(["a", "b"])
    ca, cb = q.claim_many(2)
    # a stale triple takes nothing, the first good one settles a, the next is gone: the
    # answer names a (not done, each time it came), and a is settled once
    pairs = [(a, 99), (a, ca.token), (a, ca.token), (b, cb.token)]
    assert q.complete_many(pairs) == [a, a, a]
    assert r.exists(q.keys.job(a), q.keys.job(b), q.keys.active) == 0
    assert r.hget(q.keys.metrics_completed, "count") == "2"
    assert sorted(r.zrange(q.keys.settled, 0, -1)) == sorted([a, b])


# ---------------------------------------------------------------- retry


def test_retry_schedules_and_records(q: Queue, r: redis.Redis) -> None:
    jid = q.enqueue("x")
    c = q.claim_many(1, lock_ms=10_000)[0]
    lo = server_ms(r)
    assert q.retry(jid, c.token, "boom: it broke", delay_ms=45_000) == "scheduled"
    hi = server_ms(r)
    assert row(r, q, jid) == {
        "state": "scheduled",
        "attempts": "1",
        "payload": '"x"',
        "failures": "1",
        "last_error": "boom: it broke",
        "seq": "0",
        "started_at": T,
    }
    due = r.zscore(q.keys.schedule, jid)
    assert due is not None and lo + 45_000 <= due <= hi + 45_000
    assert r.exists(q.keys.active, q.keys.lock(jid), q.keys.metrics_failed) == 0


def test_retry_until_dead(q: Queue, r: redis.Redis) -> None:
    jid = q.enqueue("x", max_attempts=2)
    c1 = claimed(q)
    assert q.retry(jid, c1.token, "first") == "scheduled"
    assert q.promote() == 1
    c2 = claimed(q)
    assert c2.token == 2
    lo = server_ms(r)
    assert q.retry(jid, c2.token, "second") == "dead"
    hi = server_ms(r)
    assert row(r, q, jid) == {
        "state": "dead",
        "attempts": "2",
        "payload": '"x"',
        "max_attempts": "2",
        "failures": "2",
        "last_error": "second",
        "seq": "0",
        "started_at": T,
        "last_started_at": T,
    }
    died = r.zscore(q.keys.dead, jid)
    assert died is not None and lo <= died <= hi
    assert r.exists(q.keys.active, q.keys.schedule) == 0
    # the all-time total; the minute's dead count is in the history series
    assert r.hgetall(q.keys.metrics_failed) == {"count": "1"}
    assert q.metrics()["failed"]["count"] == 1
    assert sum(q.history("1h").dead) == 1


def test_retry_max_attempts_override_and_queue_default(
    make_queue: Callable[..., Queue], qname: str, r: redis.Redis
) -> None:
    q = make_queue(qname, max_attempts=1)
    a = q.enqueue("a")
    ca = claimed(q)
    assert q.retry(a, ca.token, "e") == "dead"  # queue default of 1
    b = q.enqueue("b", max_attempts=5)
    cb = claimed(q)
    assert q.retry(b, cb.token, "e", max_attempts=1) == "dead"  # call overrides row
    d = q.enqueue("d", max_attempts=1)
    cd = claimed(q)
    assert q.retry(d, cd.token, "e", max_attempts=3) == "scheduled"
    assert r.zrange(q.keys.dead, 0, -1) == sorted([a, b])
    assert r.hget(q.keys.metrics_failed, "count") == "2"


def test_retry_refusals_change_nothing(q: Queue, r: redis.Redis) -> None:
    jid = q.enqueue("x")
    c = claimed(q)
    before = dump(r, q)
    with pytest.raises(StaleToken):
        q.retry(jid, c.token + 1, "e")
    with pytest.raises(JobGone):
        q.retry(new_id(), 1, "e")
    assert dump(r, q) == before
    q.retry(jid, c.token, "e")  # the real token still works
    before = dump(r, q)
    with pytest.raises(StaleToken):
        q.retry(jid, c.token, "again")  # scheduled now, not active
    assert dump(r, q) == before


# ---------------------------------------------------------------- delay


def test_delay_parks_without_a_failure(q: Queue, r: redis.Redis) -> None:
    jid = q.enqueue("x")
    c = q.claim_many(1, lock_ms=10_000)[0]
    lo = server_ms(r)
    due = q.delay(jid, c.token, 30_000)
    hi = server_ms(r)
    assert lo + 30_000 <= due <= hi + 30_000
    assert r.zscore(q.keys.schedule, jid) == due
    assert row(r, q, jid) == {
        "state": "scheduled",
        "attempts": "1",
        "payload": '"x"',
        "seq": "0",
        "started_at": T,
    }
    assert r.exists(q.keys.active, q.keys.lock(jid)) == 0
    before = dump(r, q)
    with pytest.raises(StaleToken):
        q.delay(jid, c.token, 10)
    with pytest.raises(JobGone):
        q.delay(new_id(), 1, 10)
    assert dump(r, q) == before


# ---------------------------------------------------------------- extend


def test_extend_lock_moves_the_deadline(q: Queue, r: redis.Redis) -> None:
    jid = q.enqueue("x")
    c = claimed(q, lease_ms=1_000)
    old = r.zscore(q.keys.active, jid)
    lo = server_ms(r)
    assert q.extend_lock(jid, c.token, 90_000) is None
    hi = server_ms(r)
    new = r.zscore(q.keys.active, jid)
    assert old is not None and new is not None and new > old
    assert lo + 90_000 <= new <= hi + 90_000
    before = dump(r, q)
    with pytest.raises(StaleToken):
        q.extend_lock(jid, c.token + 1, 90_000)
    with pytest.raises(JobGone):
        q.extend_lock(new_id(), 1, 90_000)
    assert dump(r, q) == before


def test_extend_lock_refuses_a_job_no_longer_active(q: Queue, r: redis.Redis) -> None:
    jid = q.enqueue("x")
    c = claimed(q)
    q.delay(jid, c.token, 60_000)
    before = dump(r, q)
    with pytest.raises(StaleToken):
        q.extend_lock(jid, c.token, 1000)
    assert dump(r, q) == before  # ZADD XX never re-adds it to active


def test_extend_locks_returns_the_ids_not_extended(q: Queue, r: redis.Redis) -> None:
    q.enqueue_many(range(3))
    a, b, c = q.claim_many(3, 1_000, lock_ms=1_000)
    gone = new_id()
    old_b = r.zscore(q.keys.active, b.id)
    missed = q.extend_locks(
        [(a.id, a.token), (b.id, b.token + 1), (gone, 1), (c.id, c.token)], 60_000, lock_ms=60_000
    )
    assert missed == [b.id, gone]
    for job in (a, c):
        deadline = r.zscore(q.keys.active, job.id)
        assert deadline is not None and deadline > server_ms(r) + 30_000
        assert r.pttl(q.keys.lock(job.id)) > 30_000
    assert r.zscore(q.keys.active, b.id) == old_b
    assert r.pttl(q.keys.lock(b.id)) <= 1_000
    assert r.exists(q.keys.job(gone)) == 0
    assert q.extend_locks([], 1000) == []


# ---------------------------------------------------------------- promote / reap / stalled


def test_promote_is_bounded(q: Queue, r: redis.Redis) -> None:
    past = server_ms(r) - 1_000
    due = [q.enqueue(i, run_at_ms=past + i, priority=i % 2) for i in range(5)]
    future = q.enqueue("f", delay_ms=600_000)
    assert q.promote(budget=2) == 2  # a full budget: call again
    assert q.promote(budget=2) == 2
    assert q.promote(budget=2) == 1  # below budget: done
    assert q.promote(budget=2) == 0
    assert r.zrange(q.keys.schedule, 0, -1) == [future]
    # each keeps the place its enqueue gave it (seq i)
    assert {j: r.zscore(q.keys.pending, j) for j in due} == {
        j: run_score(i % 2, i) for i, j in enumerate(due)
    }
    assert all(row(r, q, j)["state"] == "pending" for j in due)
    assert row(r, q, future)["state"] == "scheduled"
    assert r.llen(q.keys.wake) == 5


def test_reap_returns_expired_leases(q: Queue, r: redis.Redis) -> None:
    got = q.enqueue_many(range(3))
    q.enqueue("kept")
    q.claim_many(3, 50, lock_ms=60_000)
    keeper = claimed(q, lease_ms=60_000)
    wait_past(r, max(r.zscore(q.keys.active, j) or 0 for j in got))  # the keeper's lease runs on
    assert q.reap(budget=2) == 2
    assert q.reap(budget=2) == 1
    assert q.reap(budget=2) == 0
    assert r.zrange(q.keys.active, 0, -1) == [keeper.id]
    assert r.zrange(q.keys.pending, 0, -1) == got
    for j in got:
        assert row(r, q, j) == {
            "state": "pending",
            "attempts": "1",
            "payload": row(r, q, j)["payload"],
            "seq": str(got.index(j)),
            "started_at": T,
        }
        assert r.exists(q.keys.lock(j)) == 0
    assert [c.token for c in q.claim_many(3)] == [2, 2, 2]


def test_stale_token_after_reap_and_reclaim(q: Queue, r: redis.Redis) -> None:
    jid = q.enqueue("x")
    first = claimed(q, lease_ms=50)
    expire_leases(r, q)
    assert q.reap() == 1
    second = claimed(q)
    assert (second.id, second.token) == (jid, first.token + 1)
    before = dump(r, q)
    for refused in (
        lambda: q.complete(jid, first.token),
        lambda: q.retry(jid, first.token, "late"),
        lambda: q.delay(jid, first.token, 10),
        lambda: q.extend_lock(jid, first.token, 1000),
    ):
        with pytest.raises(StaleToken):
            refused()
    assert q.extend_locks([(jid, first.token)], 1000) == [jid]
    assert q.complete_many([(jid, first.token)]) == [jid]
    assert dump(r, q) == before
    q.complete(jid, second.token)
    assert r.exists(q.keys.job(jid), q.keys.active) == 0


def test_check_stalled_counts_then_dead_letters(q: Queue, r: redis.Redis) -> None:
    jid = q.enqueue("x")
    claimed(q, lease_ms=50)
    expire_leases(r, q)
    assert q.check_stalled(max_stalled=1) == ([jid], [])
    assert row(r, q, jid)["stalled"] == "1" and row(r, q, jid)["state"] == "pending"
    assert r.zrange(q.keys.pending, 0, -1) == [jid]
    claimed(q, lease_ms=50)
    expire_leases(r, q)
    lo = server_ms(r)
    assert q.check_stalled(max_stalled=1) == ([], [jid])
    hi = server_ms(r)
    assert row(r, q, jid) == {
        "state": "dead",
        "attempts": "2",
        "payload": '"x"',
        "stalled": "2",
        "last_error": "stalled: lease expired 2 times",
        "seq": "0",
        "started_at": T,
        "last_started_at": T,
    }
    died = r.zscore(q.keys.dead, jid)
    assert died is not None and lo - 1000 <= died <= hi
    assert r.exists(q.keys.active, q.keys.pending) == 0
    assert r.hget(q.keys.metrics_failed, "count") == "1"


def test_check_stalled_is_bounded(q: Queue, r: redis.Redis) -> None:
    got = q.enqueue_many(range(3))
    q.claim_many(3, 50)
    expire_leases(r, q)
    back1, dead1 = q.check_stalled(budget=2)
    back2, dead2 = q.check_stalled(budget=2)
    assert (len(back1), dead1, len(back2), dead2) == (2, [], 1, [])
    assert sorted(back1 + back2) == got
    assert q.check_stalled(budget=2) == ([], [])
    assert r.zrange(q.keys.pending, 0, -1) == got


@pytest.mark.parametrize(
    "call",
    [
        lambda q: q.promote(0),
        lambda q: q.reap(0),
        lambda q: q.check_stalled(budget=0),
        lambda q: q.check_stalled(max_stalled=-1),
        lambda q: q.browse("pending", 0),
        lambda q: q.browse("pending", 5, -1),
        lambda q: q.browse("finished"),
        lambda q: q.extend_locks([("JOB00000000001", 1)], 0),
        lambda q: q.retry("JOB00000000001", 1, "e", delay_ms=-1),
        lambda q: q.retry("JOB00000000001", 1, "e", max_attempts=0),
        lambda q: q.delay("JOB00000000001", 1, -1),
        lambda q: q.complete("JOB00000000001", 0),
    ],
    ids=[f"a{i}" for i in range(12)],
)
def test_bad_arguments_raise_before_any_io(nowhere: Queue, call: Callable[[Queue], Any]) -> None:
    with pytest.raises(InvalidArgument):
        call(nowhere)


# ---------------------------------------------------------------- reads


def test_counts_of_every_state(q: Queue, r: redis.Redis) -> None:
    assert q.counts() == Counts(0, 0, 0, 0, 0, 0, paused=False)
    q.enqueue_many(range(6))
    q.enqueue_many(["later", "later"], delay_ms=600_000)
    done, failing, running = q.claim_many(3)
    q.complete(done.id, done.token)
    q.retry(failing.id, failing.token, "e", max_attempts=1)
    r.hset(q.keys.meta, "paused", "1")
    assert q.counts() == Counts(
        pending=3, active=1, scheduled=2, dead=1, completed=1, failed=1, paused=True
    )
    assert running.id in r.zrange(q.keys.active, 0, -1)
    q.enqueue("laned", group="g")
    assert q.counts().pending == 4  # lanes count as pending


def test_get_job_and_job_state(q: Queue, r: redis.Redis) -> None:
    jid = q.enqueue({"a": [1, 2]}, name="nm", max_attempts=4)
    assert q.get_job(jid) == JobRow(
        id=jid,
        state="pending",
        attempts=0,
        payload='{"a":[1,2]}',
        data={"a": [1, 2]},
        name="nm",
        max_attempts=4,
        seq=0,
    )
    assert q.job_state(jid) == "pending"
    c = claimed(q)
    assert q.job_state(jid) == "active"
    q.retry(jid, c.token, "e", delay_ms=60_000)
    assert q.job_state(jid) == "scheduled"
    row = q.get_job(jid)
    assert row is not None and row.last_error == "e" and row.state == "scheduled"
    ghost = new_id()
    assert q.get_job(ghost) is None and q.job_state(ghost) is None
    assert len(claim_records(r, q)) == (0 if native(q) else 1)
    assert queue_keys(r, q) == {q.keys.job(jid), q.keys.schedule, q.keys.wake, q.keys.seq}


def test_browse_newest_first_with_offset(q: Queue, r: redis.Redis) -> None:
    got = q.enqueue_many(range(5))
    newest = list(reversed(got))
    assert q.browse("pending") == newest
    assert q.browse("pending", 2) == newest[:2]
    assert q.browse("pending", 2, 2) == newest[2:4]
    assert q.browse("pending", 10, 4) == newest[4:]
    assert q.browse("pending", 10, 5) == []
    base = server_ms(r) + 600_000
    later = [q.enqueue(i, run_at_ms=base + i) for i in range(3)]
    assert q.browse("scheduled") == list(reversed(later))
    assert q.browse("dead") == [] and q.browse("active") == []
    cs = q.claim_many(2, 10_000)
    for c in cs:
        q.retry(c.id, c.token, "e", max_attempts=1)
    assert set(q.browse("dead")) == {c.id for c in cs}


def test_browse_pending_merges_the_lanes(q: Queue, r: redis.Redis) -> None:
    flat0 = q.enqueue("f0")
    g1 = q.enqueue("g1", group="ga")
    flat5 = q.enqueue("f5", priority=5)
    g2 = q.enqueue("g2", group="gb", priority=5)
    g3 = q.enqueue("g3", group="ga", priority=-1)
    # score (priority) descending, then id descending: the newest of equals first
    order = [g2, flat5, g1, flat0, g3]
    assert q.browse("pending") == order
    assert q.browse("pending", 2, 1) == order[1:3]
    assert q.browse("pending", 10, 4) == order[4:]
    assert q.counts().pending == 5
    assert r.zcard(q.keys.pending) == 2


def test_is_paused_reads_the_meta_field(q: Queue, r: redis.Redis) -> None:
    assert q.is_paused() is False
    r.hset(q.keys.meta, "paused", "1")
    assert q.is_paused() is True
    assert queue_keys(r, q) == {q.keys.meta}


def test_metrics(q: Queue, r: redis.Redis) -> None:
    assert q.metrics() == {"completed": {}, "failed": {}}
    q.enqueue_many(range(3))
    a, b, c = q.claim_many(3)
    lo = server_ms(r) // 60000
    q.complete(a.id, a.token)
    q.complete(b.id, b.token)
    q.retry(c.id, c.token, "e", max_attempts=1)
    hi = server_ms(r) // 60000
    m = q.metrics()
    # the totals; the minutes are in the history series
    assert m == {"completed": {"count": 2}, "failed": {"count": 1}}
    assert m["completed"] == {k: int(v) for k, v in r.hgetall(q.keys.metrics_completed).items()}
    hist = q.history("1h")
    assert (sum(hist.completed), sum(hist.dead)) == (2, 1)
    assert hist.end_minute in (lo, hi)


# ---------------------------------------------------------------- malformed ids: no I/O


ID_VERBS: list[Callable[[Queue, str], Any]] = [
    lambda q, j: q.enqueue("x", job_id=j),
    lambda q, j: q.complete(j, 1),
    lambda q, j: q.complete_many([(j, 1)]),
    lambda q, j: q.retry(j, 1, "e"),
    lambda q, j: q.delay(j, 1, 10),
    lambda q, j: q.extend_lock(j, 1, 1000),
    lambda q, j: q.extend_locks([(j, 1)], 1000),
    lambda q, j: q.get_job(j),
    lambda q, j: q.job_state(j),
]


@pytest.mark.parametrize("bad", BAD_IDS, ids=[f"id{i}" for i in range(len(BAD_IDS))])
def test_malformed_ids_raise_before_any_io(nowhere: Queue, bad: str) -> None:
    for verb in ID_VERBS:
        with pytest.raises(InvalidJobId):
            verb(nowhere, bad)


def test_malformed_ids_send_nothing_to_a_live_server(q: Queue, r: redis.Redis) -> None:
    q.enqueue("x")
    claimed(q)
    q.enqueue("y")
    before, calls = dump(r, q), command_calls(r)
    for verb in ID_VERBS:
        for bad in BAD_IDS:
            with pytest.raises(InvalidJobId):
                verb(q, bad)
        # a good id mixed with a bad one in a bulk call is refused whole
        with pytest.raises(InvalidJobId):
            q.complete_many([(new_id(), 1), ("JOB", 1)])
    assert command_calls(r) == calls
    assert dump(r, q) == before


# ---------------------------------------------------------------- concurrency


def test_two_claimers_never_share_a_job(
    make_queue: Callable[..., Queue], qname: str, r: redis.Redis
) -> None:
    n = 3000
    producer = make_queue(qname)
    enqueued = producer.enqueue_many(range(n))
    claimers = [make_queue(qname), make_queue(qname)]
    assert claimers[0].client is not claimers[1].client
    seen: list[list[tuple[str, int]]] = [[], []]
    start = threading.Barrier(2)
    failures: list[BaseException] = []

    def work(i: int) -> None:
        try:
            start.wait()
            queue = claimers[i]
            while True:
                c = queue.claim(600_000)
                if c is None:
                    return
                seen[i].append((c.id, c.token))
        except BaseException as exc:  # surfaced below
            failures.append(exc)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not failures
    a, b = ({j for j, _ in s} for s in seen)
    assert len(a) == len(seen[0]) and len(b) == len(seen[1])  # no job twice to one claimer
    assert not a & b  # none to both
    assert a | b == set(enqueued)  # every job exactly once
    assert a and b  # both really took part
    assert all(tok == 1 for s in seen for _, tok in s)
    assert r.zcard(producer.keys.active) == n and r.exists(producer.keys.pending) == 0
    assert producer.complete_many([p for s in seen for p in s]) == []
    assert r.exists(producer.keys.active) == 0
    assert r.hget(producer.keys.metrics_completed, "count") == str(n)


# ---------------------------------------------------------------- SCRIPT FLUSH


def test_verbs_survive_script_flush(q: Queue, r: redis.Redis) -> None:
    jid = q.enqueue("before")
    r.script_flush()
    c = claimed(q)
    assert c.id == jid
    r.script_flush()
    q.complete(c.id, c.token)
    r.script_flush()
    got = q.enqueue_many(range(ENQUEUE_CHUNK + 3))  # NOSCRIPT inside the pipeline
    assert len(got) == ENQUEUE_CHUNK + 3 and r.zcard(q.keys.pending) == ENQUEUE_CHUNK + 3
    assert len(set(got)) == len(got) and got == sorted(got)
    r.script_flush()
    cs = q.claim_many(2)
    r.script_flush()
    assert q.complete_many([(x.id, x.token) for x in cs]) == []  # pipelined again
    r.script_flush()
    assert q.counts().completed == 3
    assert r.hget(q.keys.metrics_completed, "count") == "3"
