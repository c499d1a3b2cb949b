"""Typed results, and replies normalised once whatever the client speaks.

``Counts`` carries the pause, ``get_job`` is a frozen ``JobRow``, ``job_state`` a
``JobState``, retry's outcome a ``RetryOutcome``; each round-trips the server's data.
The same verbs through a client that decodes or not, on RESP2 or RESP3, answer alike.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from typing import Any, get_args

import pytest
import redis

from conftest import dump, queue_keys
from echomq import Counts, JobRow, JobState, Queue, RetryOutcome
from echomq.embedded import EmbeddedServer
from echomq.results import JOB_STATES
from operator_support import put_job


def hgetall(r: redis.Redis, key: str) -> dict[str, str]:
    return dict(r.hgetall(key))


def test_counts_carry_the_pause_in_one_call(q: Queue, r: redis.Redis) -> None:
    put_job(q, "pending")
    put_job(q, "scheduled")
    assert q.counts() == Counts(1, 0, 1, 0, 0, 0, paused=False)
    before = dump(r, q)
    q.pause()
    counts = q.counts()
    assert counts.paused is True and counts == Counts(1, 0, 1, 0, 0, 0, True)
    assert counts.as_dict() == {
        "pending": 1, "active": 0, "scheduled": 1, "dead": 0,
        "completed": 0, "failed": 0, "paused": True, "kept": 0,
        "waiting_children": 0,
    }  # fmt: skip
    assert Counts(**counts.as_dict()) == counts  # round trip
    with pytest.raises(dataclasses.FrozenInstanceError):
        counts.pending = 2  # type: ignore[misc]
    q.resume()
    assert q.counts().paused is False
    after = dump(r, q)
    # pause and resume left the backlog as it was; resume woke workers for it, and
    # both are journaled
    assert {k for k in after if after[k] != before.get(k)} == {q.keys.wake, q.keys.audit}
    assert r.llen(q.keys.wake) == 2


@pytest.mark.parametrize("state", JOB_STATES)
def test_job_row_round_trips_the_row(q: Queue, r: redis.Redis, state: str) -> None:
    keep = {"keep_ms": 60_000} if state == "completed" else {}
    jid, token = put_job(q, state, group="g", priority=3, name="nm", payload={"é": [1]}, **keep)
    q.update_progress(jid, 40)
    if state == "active":
        assert token is not None
        q.lock_job(jid, token)
    row = q.get_job(jid)
    assert row is not None
    raw = hgetall(r, q.keys.job(jid))
    assert row.fields() == raw  # every field, as the server holds it
    assert JobRow.from_fields(jid, raw, row.data) == row
    assert row.as_dict() == {**raw, "id": jid, "data": {"é": [1]}}
    assert (row.id, row.state, row.group, row.name, row.priority) == (jid, state, "g", "nm", 3)
    assert row.progress == "40" and row.attempts == int(raw["attempts"])
    assert row.failures == (1 if state == "dead" else 0)
    assert (row.last_error == "boom") is (state == "dead")
    assert q.job_state(jid) == state
    with pytest.raises(dataclasses.FrozenInstanceError):
        row.state = "dead"  # type: ignore[misc]
    assert q.keys.job(jid) in queue_keys(r, q)


def test_a_field_the_row_type_does_not_know_is_kept(q: Queue, r: redis.Redis) -> None:
    jid = q.enqueue("x")
    r.hset(q.keys.job(jid), "added_later", "v")
    row = q.get_job(jid)
    assert row is not None and row.extra == {"added_later": "v"}
    assert row.fields() == hgetall(r, q.keys.job(jid))


def test_job_state_is_the_literal(q: Queue, r: redis.Redis) -> None:
    assert get_args(JobState) == JOB_STATES
    assert JOB_STATES == ("pending", "active", "scheduled", "dead", "completed", "waiting_children")
    jid = q.enqueue("x")
    state: JobState | None = q.job_state(jid)
    assert state == "pending" and r.hget(q.keys.job(jid), "state") == "pending"


def test_retry_answers_an_outcome_enum(q: Queue, r: redis.Redis) -> None:
    jid = q.enqueue("x", max_attempts=2)
    c = q.claim()
    assert c is not None
    first = q.retry(jid, c.token, "once")
    assert first is RetryOutcome.SCHEDULED and first == "scheduled" and str(first) == "scheduled"
    assert json.dumps({"outcome": first}) == '{"outcome": "scheduled"}'
    assert r.zscore(q.keys.schedule, jid) is not None
    q.promote()
    c = q.claim()
    assert c is not None
    assert q.retry(jid, c.token, "twice") is RetryOutcome.DEAD
    assert r.zscore(q.keys.dead, jid) is not None and r.exists(q.keys.schedule) == 0


# ---------------------------------------------------------------- one shape per reply


CLIENTS = {"resp2-bytes": (2, False), "resp2-text": (2, True), "resp3-bytes": (3, False)}
CLIENTS["resp3-text"] = (3, True)


@pytest.fixture(params=sorted(CLIENTS))
def any_client(server: EmbeddedServer, request: pytest.FixtureRequest) -> Iterator[redis.Redis]:
    protocol, decode = CLIENTS[request.param]
    client = redis.Redis.from_url(server.url, protocol=protocol, decode_responses=decode)
    yield client
    client.close()


def exercise(q: Queue) -> dict[str, Any]:
    """Verbs whose raw replies differ by client (text or bytes, RESP2 arrays or RESP3
    maps and doubles), decoded to what each verb returns, ids left out."""
    jid = q.enqueue({"n": "é"}, name="nm", group="g", priority=2)
    q.enqueue("flat")
    assert q.add_log(jid, "line") == 1
    q.repeat("beat", every_ms=60_000, payload={"r": 1})
    q.set_group_limit("g", 3)
    got = q.claim_many(2)
    q.complete(got[0].id, got[0].token)
    row = q.get_job(got[1].id)
    assert row is not None
    return {
        "claimed": sorted(json.dumps([c.payload, c.name, c.group, c.token]) for c in got),
        # its start is a server time: whether it has one is what compares
        "row": dataclasses.replace(row, id="", started_at=bool(row.started_at)),
        "logs": q.get_job_logs(jid) if q.job_state(jid) else None,
        "state": q.job_state(got[1].id),
        "browse": [type(x) for x in q.browse("active")],
        "counts": q.counts(),
        "metrics": q.metrics()["completed"]["count"],
        "repeats": [(x.name, x.every_ms, x.payload, x.count) for x in q.repeats()],
        "groups": q.groups(),
        "extend": q.extend_locks([(got[1].id, got[1].token)], 1000),
        "stalled": q.check_stalled(),
        "paused": q.is_paused(),
    }


def test_every_client_kind_gets_the_same_replies(
    any_client: redis.Redis, make_queue: Any, qname: str, r: redis.Redis
) -> None:
    with Queue(qname, client=any_client) as q:
        seen = exercise(q)
        keys = queue_keys(r, q)
    reference = make_queue(qname + "-ref")
    assert seen == exercise(reference)
    assert seen["browse"] == [str] and seen["metrics"] == 1

    # the same kinds of keys left (ids differ, so compare what follows the row prefix)
    def kinds(base: str, found: set[str]) -> set[str]:
        return {k[len(base) :].split(":")[0] for k in found}

    assert kinds(q.keys.base, keys) == kinds(reference.keys.base, queue_keys(r, reference))
