"""One refusal translation: the code table, the runner's hook, the job id on every refusal.

The scripts answer refusals as the seed states them (``-1`` for a missing row, error
replies coded ``EMQSTATE ...``/``EMQSTALE``/``EMQLOCK``); the runner turns each into
its class through ``errors.REPLY_CODES`` (by exact code) and attaches the op's job id.
Every live test asserts the refusal, its job id, and that no key changed.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from importlib import resources
from typing import Any

import pytest
import redis

from conftest import dump
from echomq import (
    EchoMQError,
    JobGone,
    JobLocked,
    JobNotActive,
    JobNotDead,
    JobNotPending,
    Queue,
    QueueHasActiveJobs,
    QueueNotPaused,
    Refused,
    ScriptError,
    StaleToken,
    new_id,
)
from echomq.errors import BY_REASON, GONE, REASONS, REPLY_CODES
from echomq.replies import outcome
from echomq.scripts import Batch, Cmd, Eval, Plan, script
from operator_support import put_job

LUA = resources.files("echomq") / "lua"
JOB = "JOB0ST4LqsNJcO"


def lua_sources() -> str:
    paths = [p for p in LUA.iterdir() if p.name.endswith(".lua")]
    paths += [p for p in (LUA / "lib").iterdir() if p.name.endswith(".lua")]
    return "\n".join(p.read_text(encoding="utf-8") for p in paths)


# ---------------------------------------------------------------- the table


#: Codes of the server's own error replies the table maps (not a script's).
SERVER_CODES = {"OOM"}  # a write refused over maxmemory (noeviction)


def test_every_code_is_answered_by_a_script() -> None:
    """No dead entries: each code of the table is one some script replies with (or the
    server's own)."""
    replied = set(re.findall(r"error_reply\('([A-Z]+(?: [a-z][a-z ]*[a-z])?)", lua_sources()))
    for code in REPLY_CODES.keys() - SERVER_CODES:
        assert any(r == code or r.split(" ", 1)[0] == code for r in replied), code
    # and each refusal a script answers is in the table
    for r in replied:
        assert r in REPLY_CODES or r.split(" ", 1)[0] in REPLY_CODES, r


@pytest.mark.parametrize(("code", "cls"), sorted(REPLY_CODES.items()))
def test_each_code_maps_to_its_class_with_the_job_id(code: str, cls: type[EchoMQError]) -> None:
    message = code if " " in code else f"{code} token 3 is not current"
    op = Eval(script("complete"), ("b", "r"), (JOB, "1"), job=JOB)
    got = outcome(op, redis.ResponseError(message))
    assert type(got) is cls and str(got) == message
    # an op that names no job: the same class, no id
    bare = outcome(Eval(script("counts"), ("b",)), redis.ResponseError(message))
    assert type(bare) is cls
    if issubclass(cls, Refused):  # a refusal names its job; an input error (EMQARG) not
        assert got.job_id == JOB and bare.job_id is None


def test_every_reason_has_its_class() -> None:
    assert sorted(BY_REASON) == sorted(REASONS)
    assert all(cls.reason == reason for reason, cls in BY_REASON.items())


def test_minus_one_is_job_gone_only_for_an_op_on_a_job() -> None:
    got = outcome(Eval(script("complete"), ("b", "r"), (JOB, "1"), job=JOB), GONE)
    assert type(got) is JobGone and got.job_id == JOB and got.reason == "gone"
    assert outcome(Eval(script("counts"), ("b",)), -1) == -1
    assert outcome(Cmd(("GET", "k")), -1) == -1


def test_an_error_that_is_no_refusal_is_a_script_error() -> None:
    for message in ("ERR wrong number of arguments", "EMQSTATE not dead yet", "EMQGONE x"):
        got = outcome(Eval(script("complete"), ("b", "r"), job=JOB), redis.ResponseError(message))
        assert type(got) is ScriptError and str(got) == message


# ---------------------------------------------------------------- live refusals


def _refuse(q: Queue, r: redis.Redis, call: Callable[[], Any], cls: type[Refused]) -> Refused:
    before = dump(r, q)
    with pytest.raises(cls) as info:
        call()
    assert dump(r, q) == before, "a refusal changes nothing"
    return info.value


def test_job_gone_carries_the_id_from_every_verb_on_a_job(q: Queue, r: redis.Redis) -> None:
    put_job(q, "pending")  # the queue has keys, so "nothing changed" means something
    ghost = new_id()
    calls: list[Callable[[], Any]] = [
        lambda: q.update_data(ghost, 1),
        lambda: q.update_progress(ghost, 1),
        lambda: q.add_log(ghost, "x"),
        lambda: q.get_job_logs(ghost),
        lambda: q.get_job_log_entries(ghost),
        lambda: q.remove_job(ghost),
        lambda: q.reprocess_job(ghost),
        lambda: q.cancel_job(ghost),
        lambda: q.lock_job(ghost, 1),
        lambda: q.unlock_job(ghost, 1),
        lambda: q.reassign(ghost, "g"),
        lambda: q.complete(ghost, 1),
        lambda: q.retry(ghost, 1, "e"),
        lambda: q.delay(ghost, 1, 10),
        lambda: q.release(ghost, 1),
        lambda: q.extend_lock(ghost, 1, 1000),
    ]
    for call in calls:
        exc = _refuse(q, r, call, JobGone)
        assert exc.job_id == ghost and exc.reason == "gone"


def test_error_refusals_carry_the_job_id(q: Queue, r: redis.Redis) -> None:
    active, token = put_job(q, "active")
    assert token is not None
    stale = _refuse(q, r, lambda: q.complete(active, token + 1), StaleToken)
    assert stale.job_id == active and stale.reason == "stale"
    assert (
        _refuse(q, r, lambda: q.extend_lock(active, token + 1, 1000), StaleToken).job_id == active
    )
    not_pending = _refuse(q, r, lambda: q.reassign(active, "g"), JobNotPending)
    assert not_pending.job_id == active and not_pending.reason == "not_pending"
    pending, _ = put_job(q, "pending")
    not_active = _refuse(q, r, lambda: q.cancel_job(pending), JobNotActive)
    assert not_active.job_id == pending and not_active.reason == "not_active"
    not_dead = _refuse(q, r, lambda: q.reprocess_job(active), JobNotDead)
    assert not_dead.job_id == active and not_dead.reason == "not_dead"
    q.lock_job(active, token)
    locked = _refuse(q, r, lambda: q.remove_job(active), JobLocked)
    assert locked.job_id == active and locked.reason == "locked"
    assert _refuse(q, r, lambda: q.unlock_job(active, token + 1), StaleToken).job_id == active
    assert r.exists(q.keys.lock(active)) and r.zscore(q.keys.active, active) is not None


def test_queue_refusals_name_no_job(q: Queue, r: redis.Redis) -> None:
    put_job(q, "active")
    not_paused = _refuse(q, r, lambda: q.obliterate(), QueueNotPaused)
    assert not_paused.job_id is None and not_paused.reason == "not_paused"
    q.pause()
    busy = _refuse(q, r, lambda: q.obliterate(), QueueHasActiveJobs)
    assert busy.job_id is None and busy.reason == "active"


def test_a_batch_keeps_each_refusal_in_place_with_its_job(q: Queue, r: redis.Redis) -> None:
    active, token = put_job(q, "active")
    assert token is not None
    ghost = new_id()
    done = script("complete")

    def plan() -> Plan[list[Any]]:
        return (
            yield Batch(
                (
                    Eval(done, (q.keys.base, q.keys.job(ghost)), (ghost, "1"), job=ghost),
                    Eval(done, (q.keys.base, q.keys.job(active)), (active, "99"), job=active),
                    Cmd(("HGET", q.keys.job(active), "state")),
                )
            )
        )

    before = dump(r, q)
    gone, stale, state = q.runner.drive(plan())
    assert type(gone) is JobGone and gone.job_id == ghost
    assert type(stale) is StaleToken and stale.job_id == active
    assert state == "active"
    assert dump(r, q) == before
    # the verb over the same batch answers the ids it did not settle
    assert q.complete_many([(ghost, 1), (active, token + 1)]) == [ghost, active]
    assert dump(r, q) == before
