"""Dedup modes on the real private server: simple, throttle, debounce and keep_last; the
key released by every ending of its job, a stale key taken over, the owner read and the
operator's release. Run under both executors (the native enqueue must equal the
script); each test asserts the reply and the keys left.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
import redis

from conftest import dump, queue_keys
from echomq import Dedup, DedupOwner, InvalidArgument, InvalidName, Queue, Worker
from echomq.schema import DEDUP_HOLD
from worker_support import FAST, running, wait_until

pytestmark = [pytest.mark.both_executors, pytest.mark.both_servers]


def row(r: redis.Redis, q: Queue, jid: str) -> dict[str, str]:
    return r.hgetall(q.keys.job(jid))  # type: ignore[return-value]


def payload(r: redis.Redis, q: Queue, jid: str) -> Any:
    return json.loads(row(r, q, jid)["payload"])


def run_one(q: Queue) -> str:
    """Claim the next job and complete it; its id."""
    c = q.claim()
    assert c is not None
    q.complete(c.id, c.token)
    return c.id


# ---------------------------------------------------------------- simple


def test_simple_holds_while_the_owner_lives_and_every_ending_releases(
    q: Queue, r: redis.Redis
) -> None:
    a = q.enqueue({"n": 1}, dedup=Dedup("s"))
    assert q.enqueue({"n": 2}, dedup_id="s") == a
    assert q.enqueue({"n": 3}, dedup=Dedup("s", mode="simple")) == a
    assert q.counts().pending == 1 and payload(r, q, a) == {"n": 1}
    assert "dedup_mode" not in row(r, q, a)  # simple: the row as before
    assert q.dedup_owner("s") == DedupOwner(a, "pending", "simple", None)
    run_one(q)
    assert r.exists(q.keys.dedup("s")) == 0 and q.dedup_owner("s") is None
    # dead is an ending too
    b = q.enqueue({"n": 4}, dedup_id="s", max_attempts=1)
    c = q.claim()
    assert c is not None and c.id == b
    assert q.retry(b, c.token, "boom") == "dead"
    assert r.exists(q.keys.dedup("s")) == 0
    assert q.enqueue({"n": 5}, dedup_id="s") not in (a, b)


def test_a_stale_key_is_free_and_taken_over(q: Queue, r: redis.Redis) -> None:
    a = q.enqueue({"n": 1}, dedup_id="x")
    # a key left behind by a job that is gone (as the upstream's bug left them)
    r.delete(q.keys.job(a))
    r.zrem(q.keys.pending, a)
    assert q.dedup_owner("x") is None
    assert r.get(q.keys.dedup("x")) == a  # a read writes nothing
    b = q.enqueue({"n": 2}, dedup_id="x")
    assert b != a and r.get(q.keys.dedup("x")) == b
    assert q.dedup_owner("x") == DedupOwner(b, "pending", "simple", None)


def test_remove_drain_and_obliterate_release(q: Queue, r: redis.Redis) -> None:
    a = q.enqueue(1, dedup_id="rm")
    q.remove_job(a)
    assert r.exists(q.keys.dedup("rm")) == 0
    q.enqueue(2, dedup_id="dr")
    q.enqueue(3, dedup=Dedup("t", mode="throttle", ttl_ms=60_000))
    assert q.drain() == 2
    assert r.exists(q.keys.dedup("dr")) == 0
    assert r.exists(q.keys.dedup("t")) == 1  # a throttle window outlives its job
    q.enqueue(4, dedup=Dedup("k", mode="keep_last"))
    q.pause()
    while not q.obliterate(force=True):
        pass
    assert queue_keys(r, q) == set()


# ---------------------------------------------------------------- throttle


def test_throttle_is_one_job_per_window_even_after_it_ended(q: Queue, r: redis.Redis) -> None:
    spec = Dedup("t", mode="throttle", ttl_ms=400)
    a = q.enqueue({"n": 1}, dedup=spec)
    assert row(r, q, a)["dedup_mode"] == "throttle"
    assert 0 < r.pttl(q.keys.dedup("t")) <= 400
    assert r.zscore(q.keys.dedups, "t") is not None
    run_one(q)
    assert q.enqueue({"n": 2}, dedup=spec) == a  # ended, but the window holds
    owner = q.dedup_owner("t")
    assert owner is not None and owner.job_id == a and owner.state is None
    assert owner.mode == "throttle" and owner.window_ms is not None
    assert q.counts().pending == 0
    time.sleep(0.5)
    q.enqueue({"n": 0}, dedup=Dedup("other", mode="throttle", ttl_ms=60_000))
    assert r.zscore(q.keys.dedups, "t") is None  # a window over leaves the index
    b = q.enqueue({"n": 3}, dedup=spec)
    assert b != a and q.counts().pending == 2


# ---------------------------------------------------------------- debounce


def test_debounce_replaces_the_waiting_payload_and_pushes_its_delay(
    q: Queue, r: redis.Redis
) -> None:
    spec = Dedup("d", mode="debounce", delay_ms=60_000)
    a = q.enqueue({"n": 1}, dedup=spec)
    due = r.zscore(q.keys.schedule, a)
    assert due is not None
    time.sleep(0.01)
    assert q.enqueue({"n": 2}, dedup=spec) == a
    assert q.enqueue({"n": 3}, dedup=spec) == a
    assert payload(r, q, a) == {"n": 3}
    later = r.zscore(q.keys.schedule, a)
    assert later is not None and later > due
    assert q.counts().scheduled == 1
    assert row(r, q, a)["dedup_mode"] == "debounce"


def test_debounce_after_the_owner_started_makes_a_new_job(q: Queue, r: redis.Redis) -> None:
    a = q.enqueue({"n": 1}, dedup=Dedup("d", mode="debounce", delay_ms=1))
    time.sleep(0.01)
    q.promote()
    c = q.claim()
    assert c is not None and c.id == a
    b = q.enqueue({"n": 2}, dedup=Dedup("d", mode="debounce", delay_ms=60_000))
    assert b != a and r.get(q.keys.dedup("d")) == b
    q.complete(a, c.token)  # the old owner's ending leaves the new owner's key
    assert r.get(q.keys.dedup("d")) == b


def test_debounce_burst_in_one_call_is_one_job(q: Queue, r: redis.Redis) -> None:
    ids = q.enqueue_many(
        [{"n": i} for i in range(1000)], dedup=Dedup("b", mode="debounce", delay_ms=50)
    )
    assert len(set(ids)) == 1
    assert q.counts().scheduled == 1
    assert payload(r, q, ids[0]) == {"n": 999}


# ---------------------------------------------------------------- keep_last


def test_keep_last_one_waits_behind_the_running_owner(q: Queue, r: redis.Redis) -> None:
    spec = Dedup("k", mode="keep_last")
    a = q.enqueue({"n": 1}, dedup=spec)
    assert q.enqueue({"n": 2}, dedup=spec) == a  # waiting: newest payload wins
    assert payload(r, q, a) == {"n": 2}
    c = q.claim()
    assert c is not None and c.id == a and c.payload == {"n": 2}
    b = q.enqueue({"n": 3}, dedup=spec)
    assert b != a
    assert r.zscore(q.keys.schedule, b) == float(DEDUP_HOLD)
    assert row(r, q, b)["dedup_behind"] == a and row(r, q, b)["state"] == "scheduled"
    assert q.enqueue({"n": 4}, dedup=spec) == b
    assert payload(r, q, b) == {"n": 4}
    assert q.claim() is None  # held: nothing runs beside the owner
    q.complete(a, c.token)
    assert r.zscore(q.keys.pending, b) is not None
    assert "dedup_behind" not in row(r, q, b)
    assert r.get(q.keys.dedup("k")) == b
    nxt = q.claim()
    assert nxt is not None and nxt.id == b and nxt.payload == {"n": 4}


def test_keep_last_held_job_whose_owner_is_gone_is_let_go(q: Queue, r: redis.Redis) -> None:
    spec = Dedup("k", mode="keep_last")
    a = q.enqueue(1, dedup=spec)
    c = q.claim()
    assert c is not None
    b = q.enqueue(2, dedup=spec)
    r.delete(q.keys.job(a))  # the owner vanished without its ending
    r.zrem(q.keys.active, a)
    assert q.enqueue(3, dedup=spec) == b
    assert r.zscore(q.keys.pending, b) is not None
    assert payload(r, q, b) == 3


# ---------------------------------------------------------------- the operator's verbs


def test_release_dedup_frees_any_key_and_journals(q: Queue, r: redis.Redis) -> None:
    a = q.enqueue(1, dedup=Dedup("t", mode="throttle", ttl_ms=60_000))
    assert q.release_dedup("t") == a
    assert r.exists(q.keys.dedup("t")) == 0 and r.zscore(q.keys.dedups, "t") is None
    assert q.release_dedup("t") is None
    entries = [e for e in q.audit() if e.verb == "release_dedup"]
    assert [e.outcome for e in entries][:2] in (["free", "ok"], ["ok", "free"])
    assert q.enqueue(2, dedup=Dedup("t", mode="throttle", ttl_ms=60_000)) != a


def test_release_dedup_lets_a_held_job_go(q: Queue, r: redis.Redis) -> None:
    spec = Dedup("k", mode="keep_last")
    q.enqueue(1, dedup=spec)
    assert q.claim() is not None
    b = q.enqueue(2, dedup=spec)
    assert q.release_dedup("k") == b
    assert r.zscore(q.keys.pending, b) is not None and r.exists(q.keys.dedup("k")) == 0


@pytest.mark.parametrize(
    "kwargs",
    [
        {"dedup": Dedup("x", mode="throttle")},
        {"dedup": Dedup("x", mode="simple", ttl_ms=5)},
        {"dedup": Dedup("x", mode="debounce")},
        {"dedup": Dedup("x", mode="debounce", delay_ms=5), "run_at_ms": 1},
        {"dedup": Dedup("x", mode="bogus")},  # type: ignore[arg-type]
        {"dedup": Dedup("x", delay_ms=5), "delay_ms": 6},
        {"dedup": Dedup("x"), "dedup_id": "x"},
        {"dedup": Dedup("")},
    ],
)
def test_bad_dedup_arguments_send_nothing(q: Queue, r: redis.Redis, kwargs: Any) -> None:
    before = dump(r, q)
    with pytest.raises((InvalidArgument, InvalidName)):
        q.enqueue(1, **kwargs)
    assert dump(r, q) == before


def test_script_refuses_a_bad_mode_and_writes_nothing(q: Queue, r: redis.Redis) -> None:
    before = dump(r, q)
    args = ["1", "4", "JOB00000000001", "1", "x", "0"] + [""] * 10
    for mode, ttl in (("bogus", ""), ("throttle", ""), ("throttle", "-1")):
        with pytest.raises(InvalidArgument, match="EMQARG"):
            q.runner.drive(_raw_enqueue(q, [*args, mode, ttl]))
    assert dump(r, q) == before


def _raw_enqueue(q: Queue, args: list[str]) -> Any:
    from echomq.scripts import Eval, script

    return (yield Eval(script("enqueue"), (q.keys.base,), args))


# ---------------------------------------------------------------- a burst, run by a worker


def test_debounce_burst_of_1000_from_four_clients_runs_the_handler_once(
    make_queue: Callable[..., Queue], qname: str, r: redis.Redis
) -> None:
    spec = Dedup("index", mode="debounce", delay_ms=1000)
    clients = [make_queue(qname) for _ in range(4)]
    seen: list[Any] = []

    def handle(job: Any) -> None:
        seen.append(job.data)

    def produce(k: int, q: Queue) -> None:
        for i in range(250):
            q.enqueue({"k": k, "i": i}, dedup=spec)

    with running(Worker(clients[0], handle, config=FAST)):
        threads = [threading.Thread(target=produce, args=(k, q)) for k, q in enumerate(clients)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert clients[0].counts().scheduled == 1
        wait_until(lambda: seen, timeout=15)
        wait_until(lambda: r.exists(clients[0].keys.dedup("index")) == 0)
        time.sleep(0.3)  # nothing else comes
    assert len(seen) == 1 and seen[0]["i"] == 249  # one run, a client's last payload
    counts = clients[0].counts()
    assert (counts.pending, counts.scheduled, counts.active) == (0, 0, 0)
