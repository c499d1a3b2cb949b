"""The keyspace: every key under the queue base, one cluster slot, gates before I/O."""

from __future__ import annotations

import string

import pytest
import redis
from hypothesis import given
from hypothesis import strategies as st
from redis.crc import key_slot

from echomq import Queue, ids
from echomq.errors import InvalidJobId, InvalidName
from echomq.keyspace import (
    KEYSPACE_VERSION,
    META_PATTERN,
    VERSION_KEY,
    Keyspace,
    check_dedup,
    check_name,
    queue_of_meta,
)

NAME_CHARS = string.ascii_letters + string.digits + "._-"
good_names = st.text(alphabet=NAME_CHARS, min_size=1, max_size=128).filter(
    lambda s: s not in (".", "..")  # path segments a browser resolves away: refused
)


def every_key(ks: Keyspace) -> list[str]:
    jid = ids.new_id()
    fixed = [getattr(ks, a) for a in Keyspace.__slots__ if a not in ("name", "base")]
    return [
        *fixed,
        ks.job(jid),
        ks.logs(jid),
        ks.lock(jid),
        ks.dedup("order-42"),
        ks.dedup("{weird}:dedup with spaces"),
        ks.lane("g1"),
        ks.repeat_record("nightly"),
    ]


@given(good_names)
def test_every_key_lives_under_the_base_on_one_slot(name: str) -> None:
    ks = Keyspace(name)
    assert ks.base == "emq:{" + name + "}:"
    keys = every_key(ks)
    assert all(k.startswith(ks.base) for k in keys)
    slot = key_slot(ks.base.encode())
    assert {key_slot(k.encode()) for k in keys} == {slot}
    assert slot == key_slot(name.encode())


def test_documented_key_names() -> None:
    ks = Keyspace("orders")
    jid = "JOB00000000001"
    assert ks.pending == "emq:{orders}:pending"
    assert ks.active == "emq:{orders}:active"
    assert ks.schedule == "emq:{orders}:schedule"
    assert ks.dead == "emq:{orders}:dead"
    assert ks.meta == "emq:{orders}:meta"
    assert ks.events == "emq:{orders}:events"
    assert ks.wake == "emq:{orders}:wake"
    assert ks.metrics_completed == "emq:{orders}:metrics:completed"
    assert ks.metrics_failed == "emq:{orders}:metrics:failed"
    assert ks.job(jid) == "emq:{orders}:job:JOB00000000001"
    assert ks.logs(jid) == "emq:{orders}:job:JOB00000000001:logs"
    assert ks.lock(jid) == "emq:{orders}:job:JOB00000000001:lock"
    assert ks.dedup("d1") == "emq:{orders}:de:d1"
    assert ks.lane("g") == "emq:{orders}:g:g:pending"
    assert ks.repeat_record("r") == "emq:{orders}:repeat:r"
    assert ks.pattern() == "emq:{orders}:*"
    assert VERSION_KEY == "{emq}:version" and KEYSPACE_VERSION == "1"


@given(good_names)
def test_good_names_pass(name: str) -> None:
    assert check_name(name) == name
    assert Keyspace(name).name == name


@pytest.mark.parametrize(
    "bad",
    ["", "a" * 129, "a b", "a:b", "a{b", "a}b", "a*", "é", "a/b", "a\n", None, 5, b"q"],
)
def test_bad_names_are_refused(bad: object) -> None:
    with pytest.raises(InvalidName):
        check_name(bad)  # type: ignore[arg-type]
    with pytest.raises(InvalidName):
        Keyspace(bad)  # type: ignore[arg-type]
    with pytest.raises(InvalidName):
        Keyspace("ok").lane(bad)  # type: ignore[arg-type]
    with pytest.raises(InvalidName):
        Keyspace("ok").repeat_record(bad)  # type: ignore[arg-type]


@given(st.text(min_size=1).filter(lambda s: any(c not in NAME_CHARS for c in s)))
def test_any_name_outside_the_alphabet_is_refused(bad: str) -> None:
    with pytest.raises(InvalidName):
        check_name(bad)


@pytest.mark.parametrize("bad", ["", "x" * 257, None, 3])
def test_bad_dedup_ids_are_refused(bad: object) -> None:
    with pytest.raises(InvalidName):
        check_dedup(bad)  # type: ignore[arg-type]
    with pytest.raises(InvalidName):
        Keyspace("ok").dedup(bad)  # type: ignore[arg-type]


def test_dedup_ids_up_to_256_chars_pass() -> None:
    assert check_dedup("x" * 256) == "x" * 256


@pytest.mark.parametrize(
    "bad", ["", "JOB", "job00000000001", "JOB0000000000", "JOB000000000001", "JOBzzzzzzzzzzz"]
)
def test_job_keys_gate_the_id(bad: str) -> None:
    ks = Keyspace("ok")
    for build in (ks.job, ks.logs, ks.lock):
        with pytest.raises(InvalidJobId):
            build(bad)


def test_state_sets() -> None:
    ks = Keyspace("s")
    assert ks.state_set("pending") == ks.pending
    assert ks.state_set("active") == ks.active
    assert ks.state_set("scheduled") == ks.schedule
    assert ks.state_set("dead") == ks.dead
    assert ks.state_set("completed") == ks.completed  # the kept history (issue 13)
    with pytest.raises(InvalidName):
        ks.state_set("finished")


def test_queue_of_meta() -> None:
    assert queue_of_meta(Keyspace("a.b-c_9").meta) == "a.b-c_9"
    assert queue_of_meta("emq:{a}:pending") is None
    assert queue_of_meta("emq:{a b}:meta") is None
    assert META_PATTERN == "emq:{*}:meta"


def test_a_bad_queue_name_fails_before_any_connection() -> None:
    # nothing listens on port 1: constructing must fail on the name, not the socket
    with pytest.raises(InvalidName):
        Queue("no good", url="redis://127.0.0.1:1/0")


def test_pattern_matches_exactly_the_queue_keys_on_the_server(
    q: Queue, r: redis.Redis, make_queue
) -> None:
    # a neighbour whose name extends ours must not be matched by our pattern
    other = make_queue(q.name + "x")
    other.enqueue(1)
    jid = q.enqueue({"a": 1}, dedup_id="d")
    got = set(r.scan_iter(match=q.keys.pattern()))
    assert got == {q.keys.job(jid), q.keys.pending, q.keys.wake, q.keys.dedup("d"), q.keys.seq}
    assert all(k.startswith(q.keys.base) for k in got)
