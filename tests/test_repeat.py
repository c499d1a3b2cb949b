"""Repeatables: the registry, firing once per slot, no replay of missed runs, cron,
and two workers sharing a cadence."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
import redis

from conftest import dump
from echomq import (
    AsyncQueue,
    Backoff,
    InvalidArgument,
    InvalidName,
    JobContext,
    Queue,
    Repeatable,
    Worker,
    new_id,
)
from echomq.context import Context
from echomq.repeat import fire_due, next_cron_ms
from echomq.scripts import Eval, Plan, script
from test_lifecycle import run_score
from worker_support import FAST, running, server_ms, wait_until

pytestmark = pytest.mark.both_servers


def fire(q: Queue, budget: int = 50) -> list[str]:
    return q.runner.drive(fire_due(q.ctx, budget))


def fire_slot(ctx: Context, name: str, slot: int) -> Plan[Any]:
    """The fire script, run by hand for a given expected slot."""
    args = (name, str(slot), "", new_id())
    return (yield Eval(script("fire_due"), (ctx.keys.base,), args))


def test_every_registers_record_and_schedule(q: Queue, r: redis.Redis) -> None:
    before = server_ms(r)
    nxt = q.repeat("tick", every_ms=5000, payload={"a": 1}, first_in_ms=1000, priority=2)
    assert before + 1000 <= nxt <= server_ms(r) + 1000
    assert r.zscore(q.keys.repeat, "tick") == nxt
    assert r.hgetall(q.keys.repeat_record("tick")) == {
        "kind": "every",
        "spec": "5000",
        "payload": '{"a":1}',
        "count": "0",
        "priority": "2",
    }
    assert q.repeats() == [
        Repeatable("tick", 5000, None, nxt, {"a": 1}, "tick", None, 2, None, None, 0, None)
    ]


def test_registering_again_keeps_the_next_run_unless_the_cadence_changed(
    q: Queue, r: redis.Redis
) -> None:
    first = q.repeat("tick", every_ms=60_000, payload=1, first_in_ms=30_000)
    again = q.repeat("tick", every_ms=60_000, payload=2, first_in_ms=0)
    assert again == first  # same cadence: the schedule is kept, the template replaced
    assert r.hget(q.keys.repeat_record("tick"), "payload") == "2"
    changed = q.repeat("tick", every_ms=1000, payload=2, first_in_ms=0)
    assert changed < first  # a new cadence starts over
    assert r.hget(q.keys.repeat_record("tick"), "spec") == "1000"


def test_cancel_removes_the_registry_entry_and_a_miss_changes_nothing(
    q: Queue, r: redis.Redis
) -> None:
    q.repeat("tick", every_ms=1000)
    q.repeat("other", every_ms=1000)
    assert q.cancel_repeat("tick") is True
    assert not r.exists(q.keys.repeat_record("tick"))
    assert r.zrange(q.keys.repeat, 0, -1) == ["other"]
    before = dump(r, q)
    assert q.cancel_repeat("tick") is False
    assert dump(r, q) == before


def test_bad_arguments_raise_before_any_io(q: Queue, r: redis.Redis) -> None:
    before = dump(r, q)
    with pytest.raises(InvalidArgument):
        q.repeat("x", payload=1)  # neither cadence
    with pytest.raises(InvalidArgument):
        q.repeat("x", every_ms=10, cron="* * * * *")
    with pytest.raises(InvalidArgument):
        q.repeat("x", cron="not a cron")
    with pytest.raises(InvalidArgument):
        q.repeat("x", every_ms=0)
    with pytest.raises(InvalidName):
        q.repeat("bad name", every_ms=10)
    with pytest.raises(InvalidName):
        q.repeat("x", every_ms=10, group="bad group")
    with pytest.raises(InvalidName):
        q.cancel_repeat("bad name")
    assert dump(r, q) == before == {}


def test_a_due_repeatable_fires_one_fresh_job_and_moves_to_the_next_slot(
    q: Queue, r: redis.Redis
) -> None:
    policy = Backoff.fixed(10)
    q.repeat("tick", every_ms=100_000, payload={"k": 1}, job_name="ticker", max_attempts=5,
             backoff=policy)  # fmt: skip
    slot = int(r.zscore(q.keys.repeat, "tick"))
    made = fire(q)
    assert len(made) == 1
    assert r.hgetall(q.keys.job(made[0])) == {
        "state": "pending",
        "attempts": "0",
        "payload": '{"k":1}',
        "name": "ticker",
        "repeat": "tick",
        "max_attempts": "5",
        "backoff": policy.spec(),
        "seq": "0",  # each occurrence a fresh place in the enqueue sequence
    }
    assert r.zscore(q.keys.pending, made[0]) == 0
    assert int(r.zscore(q.keys.repeat, "tick")) == slot + 100_000
    assert r.hget(q.keys.repeat_record("tick"), "count") == "1"
    assert r.hget(q.keys.repeat_record("tick"), "last") == str(slot)
    before = dump(r, q)
    assert fire(q) == []  # not due again yet: nothing written
    assert dump(r, q) == before


def test_missed_runs_are_not_replayed(q: Queue, r: redis.Redis) -> None:
    q.repeat("tick", every_ms=1000)
    long_ago = int(r.zscore(q.keys.repeat, "tick")) - 3_600_500  # an hour of missed slots
    r.zadd(q.keys.repeat, {"tick": long_ago})
    made = fire(q)
    now = server_ms(r)
    assert len(made) == 1  # one occurrence, not 3600
    nxt = int(r.zscore(q.keys.repeat, "tick"))
    assert now < nxt <= now + 1000 and (nxt - long_ago) % 1000 == 0  # the cadence's next slot
    assert q.counts().pending == 1


def test_the_fire_script_refuses_a_slot_that_is_not_current(q: Queue, r: redis.Redis) -> None:
    q.repeat("tick", every_ms=1000)
    slot = int(r.zscore(q.keys.repeat, "tick"))
    r.zadd(q.keys.repeat, {"tick": slot - 5000})
    before = dump(r, q)
    # a second worker that read the old score (or fired already) gets 0, writes nothing
    reply = q.runner.drive(fire_slot(q.ctx, "tick", slot))
    assert reply == 0
    assert dump(r, q) == before


def test_cron_slots_come_from_croniter_on_the_server_clock(q: Queue, r: redis.Redis) -> None:
    now = server_ms(r)
    nxt = q.repeat("nightly", cron="0 3 * * *", payload="backup")
    assert now < nxt <= now + 86_400_000 and nxt % 86_400_000 == 3 * 3_600_000  # 03:00 UTC
    [rep] = q.repeats()
    assert (rep.cron, rep.every_ms, rep.payload) == ("0 3 * * *", None, "backup")
    r.zadd(q.keys.repeat, {"nightly": now - 10 * 86_400_000})  # ten nights missed
    assert len(fire(q)) == 1
    after = int(r.zscore(q.keys.repeat, "nightly"))
    assert after == next_cron_ms("0 3 * * *", server_ms(r)) and after > now


def test_a_grouped_template_lands_in_its_lane(q: Queue, r: redis.Redis) -> None:
    q.repeat("tick", every_ms=1000, group="g", priority=3)
    [jid] = fire(q)
    assert r.zscore(q.keys.lane("g"), jid) == run_score(3, 0)
    assert r.sismember(q.keys.groups, "g") and "g" in r.lrange(q.keys.ring, 0, -1)
    assert r.hget(q.keys.job(jid), "group") == "g"


def test_two_workers_fire_each_slot_once_on_cadence(q: Queue, r: redis.Redis) -> None:
    handled: list[tuple[str, Any]] = []

    async def handle(job: JobContext) -> None:
        handled.append((job.id, job.data))

    with q.events() as stream:
        q.repeat("tick", every_ms=100, payload="beat", first_in_ms=0)
        with running(Worker(q, handle, config=FAST)), running(Worker(q, handle, config=FAST)):
            wait_until(lambda: q.counts().completed >= 5)
            q.cancel_repeat("tick")
        fired: list[tuple[str, int]] = []
        while (event := stream.get(timeout=0.2)) is not None:
            if event.name == "enqueued" and event.get("repeat") == "tick":
                fired.append((str(event.job), int(event.get("slot"))))
    slots = [slot for _, slot in fired]
    assert len(slots) >= 5 and len(set(slots)) == len(slots)  # never twice for one slot
    gaps = {b - a for a, b in itertools.pairwise(slots)}
    assert all(g > 0 and g % 100 == 0 for g in gaps)  # on the cadence, in order
    assert sorted(jid for jid, _ in handled) == sorted(jid for jid, _ in fired)
    assert {data for _, data in handled} == {"beat"}
    assert q.counts().completed == len(fired)


async def test_async_facade_has_the_repeat_verbs(aq: AsyncQueue, r: redis.Redis) -> None:
    nxt = await aq.repeat("tick", every_ms=1000)
    assert [x.name for x in await aq.repeats()] == ["tick"]
    assert (await aq.repeats())[0].next_run_ms == nxt
    assert await aq.cancel_repeat("tick") is True
    assert await aq.repeats() == []
