"""Hostile input (issue 12, Deliver 2): hypothesis drives every verb of ``Queue``, and
the CLI's numeric arguments, with hostile values mixed into valid ones.

Each call must either raise a typed input error (an ``InvalidArgument`` subclass, which
``InvalidName``, ``InvalidJobId`` and ``InvalidPayload`` are) before any command is
sent, or succeed, or be refused by the server (a ``Refused``) with every key as it was.
Anything else (a raw ``ResponseError``, a ``ScriptError``, a ``TypeError``, an
``OverflowError``, ...) fails the test, and so does a key changed by a refused call.

Commands are counted at the connection class; the keys of the queue are dumped before
and after. Every example starts from a fresh queue holding one job in each state, a
lane and a repeatable, on the shared private server (its own database, so the dumps
only walk this test's keys).
"""

from __future__ import annotations

import inspect
import itertools
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import pytest
import redis
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from echomq import Backoff, Dedup, Flow, InvalidArgument, Queue, Refused, checks
from echomq.cli import app as cli_app
from echomq.cli import exits
from echomq.embedded import EmbeddedServer
from echomq.queue import verb_names
from test_lifecycle import CountingConnection

DB = 9  # this test's database on the shared private server
#: Examples per verb (raise it to search harder: EMQ_HOSTILE_EXAMPLES=500).
EXAMPLES = int(os.environ.get("EMQ_HOSTILE_EXAMPLES", "20"))
_names = itertools.count()


@dataclass(frozen=True)
class Ref:
    """A value known only once the example's queue is seeded (a job id, its token)."""

    name: str


OMIT = object()  # leave the parameter at its default

# ---------------------------------------------------------------- hostile values
HUGE: list[Any] = [
    2**53 + 1,
    -(2**53) - 1,
    2**63,
    2**64,
    -(2**63) - 1,
    2**1100,
    10**4000,  # (past 4300 digits even repr() raises: test_checks.py has those)
]
ODD_NUMBERS: list[Any] = [
    -1,
    0,
    float("nan"),
    float("inf"),
    float("-inf"),
    1e308,
    -1e308,
    1.5,
    -0.0,
    True,
    False,
]
WRONG_TYPES: list[Any] = [None, "5", b"5", bytearray(b"5"), [], {}, (), object(), 1j, Decimal(1)]
ODD_TEXT: list[Any] = [
    "",
    " ",
    "\x00",
    "a\x00b",
    "\ud800",
    "x\udfffy",
    "x" * 100_000,
    "é\U0001f600",
    "JOB",
    "JOB" + "z" * 11,  # base62 past 2**63
    "JOB00000000000\x00",
    "emq:{q}:*",
    "NaN",
    "١٢",  # Arabic-Indic digits: str.isdigit() says yes, a server cursor says no
]
hostile = st.one_of(
    st.sampled_from(HUGE + ODD_NUMBERS + WRONG_TYPES + ODD_TEXT),
    st.integers(),
    st.floats(),
    st.text(max_size=12),
)

_bad_leaf = st.sampled_from([float("nan"), float("inf"), "\ud800", {1}, b"x", object(), 1j])
_good_leaf = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=8),
)
payloads = st.recursive(
    st.one_of(_good_leaf, _good_leaf, _bad_leaf),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.dictionaries(st.one_of(st.text(max_size=4), st.integers()), inner, max_size=3),
    ),
    max_leaves=6,
)


def h(valid: st.SearchStrategy[Any], *, optional: bool = True) -> st.SearchStrategy[Any]:
    """A parameter: mostly valid, often hostile, sometimes left at its default."""
    options = [valid, valid, hostile]
    if optional:
        options.append(st.just(OMIT))
    return st.one_of(*options)


# ---------------------------------------------------------------- valid values
job_ids = st.sampled_from([Ref("pending"), Ref("active"), Ref("dead"), Ref("scheduled")])
job_ids = st.one_of(job_ids, st.sampled_from([Ref("grouped"), "JOB00000000007"]))
tokens = st.sampled_from([Ref("token"), 1, 2, 99])
pairs = st.lists(st.tuples(h(job_ids, optional=False), h(tokens, optional=False)), max_size=3)
lease = st.one_of(st.integers(1, 120_000), st.just(checks.HORIZON_MS))
waits = st.one_of(st.integers(0, 120_000), st.just(checks.HORIZON_MS))
budgets = st.one_of(st.integers(1, 50), st.just(checks.MAX_BATCH))
counters = st.one_of(st.integers(1, 50), st.just(checks.MAX_COUNT))
counters0 = st.one_of(st.integers(0, 50), st.just(checks.MAX_COUNT))
priorities = st.one_of(st.integers(-5, 5), st.sampled_from([-(2**20), 2**20]))  # the edges
run_ats = st.integers(0, checks.MAX_RUN_AT_MS)
groups = st.sampled_from(["g1", "g2"])
texts = st.text(max_size=20)
names = st.text(min_size=1, max_size=20)
backoffs = st.sampled_from([Backoff.fixed(5), "250", '{"type":"fixed","delay":5}', "1e400"])
crons = st.sampled_from(["*/5 * * * *", "0 0 * * *", "0 0 30 2 *"])
repeat_names = st.sampled_from(["r1", "r2"])
flags = st.booleans()
dedups = st.builds(
    Dedup,
    h(names, optional=False),
    mode=st.sampled_from(["simple", "throttle", "debounce", "keep_last"]),
    ttl_ms=st.one_of(st.none(), lease),
    delay_ms=st.one_of(st.none(), waits),
)


def hv(valid: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """A field of a value object: mostly valid, often hostile."""
    return st.one_of(valid, valid, hostile)


policies = st.sampled_from(["fail_parent", "ignore", "remove_dependency", "continue"])
_flow_leaf = st.builds(
    Flow,
    queue=hv(st.none()),
    payload=payloads,
    on_fail=hv(policies),
    name=hv(names),
    group=hv(groups),
    priority=hv(priorities),
    max_attempts=hv(counters),
    delay_ms=hv(waits),
    dedup_id=hv(names),
)
flows = st.builds(
    Flow,
    queue=hv(st.none()),
    payload=payloads,
    children=hv(st.lists(st.one_of(_flow_leaf, hostile), max_size=3)),
    priority=hv(priorities),
    keep_ms=hv(waits),
    backoff=hv(backoffs),
)

#: Every verb of the facade: each of its parameters and what to drive it with.
SPECS: dict[str, dict[str, st.SearchStrategy[Any]]] = {
    "enqueue": {
        "payload": payloads,
        "job_id": h(st.sampled_from([Ref("pending"), "JOB00000000042"])),
        "name": h(names),
        "group": h(groups),
        "delay_ms": h(waits),
        "run_at_ms": h(run_ats),
        "priority": h(priorities),
        "max_attempts": h(counters),
        "dedup_id": h(names),
        "backoff": h(backoffs),
        "keep_ms": h(waits),
        "dedup": h(dedups),
    },
    "enqueue_many": {
        "payloads": h(st.lists(payloads, max_size=4), optional=False),
        "name": h(names),
        "group": h(groups),
        "delay_ms": h(waits),
        "priority": h(priorities),
        "max_attempts": h(counters),
        "keep_ms": h(waits),
        "dedup": h(st.one_of(dedups, st.lists(st.one_of(st.none(), dedups), max_size=4))),
    },
    "enqueue_flow": {"flow": h(flows, optional=False)},
    "children_results": {"job_id": h(job_ids, optional=False)},
    "relay_flows": {"budget": h(budgets), "queues": h(st.lists(groups, max_size=2))},
    "claim": {"lease_ms": h(lease)},
    "claim_many": {"count": h(budgets, optional=False), "lease_ms": h(lease), "lock_ms": h(waits)},
    "complete": {
        "job_id": h(job_ids, optional=False),
        "token": h(tokens, optional=False),
        "result": payloads,
    },
    "complete_many": {"pairs": h(pairs, optional=False)},
    "retry": {
        "job_id": h(job_ids, optional=False),
        "token": h(tokens, optional=False),
        "error": h(texts, optional=False),
        "delay_ms": h(waits),
        "max_attempts": h(counters),
    },
    "delay": {
        "job_id": h(job_ids, optional=False),
        "token": h(tokens, optional=False),
        "delay_ms": h(waits, optional=False),
    },
    "extend_lock": {
        "job_id": h(job_ids, optional=False),
        "token": h(tokens, optional=False),
        "lease_ms": h(lease, optional=False),
    },
    "extend_locks": {
        "pairs": h(pairs, optional=False),
        "lease_ms": h(lease, optional=False),
        "lock_ms": h(waits),
    },
    "promote": {"budget": h(budgets)},
    "reap": {"budget": h(budgets)},
    "check_stalled": {"max_stalled": h(counters0), "budget": h(budgets)},
    "release": {"job_id": h(job_ids, optional=False), "token": h(tokens, optional=False)},
    "counts": {},
    "get_job": {"job_id": h(job_ids, optional=False)},
    "job_state": {"job_id": h(job_ids, optional=False)},
    "browse": {
        "state": h(st.sampled_from(checks.STATES), optional=False),
        "n": h(budgets),
        "offset": h(counters0),
        "order": h(st.sampled_from(["newest", "run"])),
    },
    "is_paused": {},
    "metrics": {},
    "pause": {},
    "resume": {},
    "drain": {"include_schedule": h(flags), "budget": h(budgets)},
    "drain_step": {"include_schedule": h(flags), "budget": h(budgets)},
    "obliterate": {
        "force": h(flags),
        "budget": h(budgets),
        "keep_audit": h(flags),
        "sweep": h(flags),
    },
    "audit": {"n": h(budgets)},
    "workers": {"n": h(budgets)},
    "latency": {},
    "cancel_job": {"job_id": h(job_ids, optional=False)},
    **{
        verb: {"name": h(st.sampled_from(["every", "nope", "../x", ""]), optional=False)}
        for verb in ("pause_repeat", "resume_repeat", "run_repeat")
    },
    "set_retention": {
        "completed": h(counters0),
        "completed_age_ms": h(waits),
        "dead": h(counters0),
        "dead_age_ms": h(waits),
    },
    "retention": {},
    "update_data": {"job_id": h(job_ids, optional=False), "payload": payloads},
    "update_progress": {"job_id": h(job_ids, optional=False), "progress": payloads},
    "add_log": {
        "job_id": h(job_ids, optional=False),
        "line": h(texts, optional=False),
        "keep": h(counters0),
    },
    "get_job_logs": {"job_id": h(job_ids, optional=False)},
    "get_job_log_entries": {"job_id": h(job_ids, optional=False)},
    "remove_job": {"job_id": h(job_ids, optional=False), "dedup_id": h(names)},
    "reprocess_job": {"job_id": h(job_ids, optional=False)},
    "rerun_job": {"job_id": h(job_ids, optional=False)},
    "dedup_owner": {"dedup_id": h(names, optional=False)},
    "release_dedup": {"dedup_id": h(names, optional=False)},
    "lock_job": {
        "job_id": h(job_ids, optional=False),
        "token": h(tokens, optional=False),
        "ttl_ms": h(lease),
    },
    "unlock_job": {"job_id": h(job_ids, optional=False), "token": h(tokens, optional=False)},
    "pause_group": {"group": h(groups, optional=False)},
    "resume_group": {"group": h(groups, optional=False)},
    "set_group_limit": {"group": h(groups, optional=False), "limit": h(counters, optional=False)},
    "clear_group_limit": {"group": h(groups, optional=False)},
    "set_group_weight": {
        "group": h(groups, optional=False),
        "weight": h(counters, optional=False),
    },
    # flow control
    "set_rate_limit": {
        "max_jobs": h(st.integers(1, 100_000), optional=False),
        "per_ms": h(st.integers(1, 86_400_000), optional=False),
        "burst": h(st.integers(1, 5)),
    },
    "clear_rate_limit": {},
    "rate_limit": {},
    "set_concurrency": {"n": h(counters, optional=False)},
    "clear_concurrency": {},
    "set_group_rate_limit": {
        "group": h(groups, optional=False),
        "max_jobs": h(st.integers(1, 100_000), optional=False),
        "per_ms": h(st.integers(1, 86_400_000), optional=False),
    },
    "clear_group_rate_limit": {"group": h(groups, optional=False)},
    "set_group_rate_default": {
        "max_jobs": h(st.integers(1, 100_000), optional=False),
        "per_ms": h(st.integers(1, 86_400_000), optional=False),
    },
    "clear_group_rate_default": {},
    "group_rate_limit": {"group": h(groups, optional=False)},
    "limits": {},
    "group_depth": {"group": h(groups, optional=False)},
    "groups": {"page": h(budgets)},
    "drain_group": {"group": h(groups, optional=False), "budget": h(budgets)},
    "reassign": {
        "job_id": h(job_ids, optional=False),
        "group": h(st.one_of(groups, st.none()), optional=False),
    },
    "repeat": {
        "name": h(repeat_names, optional=False),
        "every_ms": h(lease),
        "cron": h(crons),
        "payload": payloads,
        "first_in_ms": h(waits),
        "job_name": h(names),
        "group": h(groups),
        "priority": h(priorities),
        "max_attempts": h(counters),
        "backoff": h(backoffs),
    },
    "reindex": {
        "dry_run": h(flags),
        "cursor": h(
            st.sampled_from(["lanes|0||0", "lanes|0|g1|3", "index|||0", "index|||7", "index|0|g|1"])
        ),
        "scan": h(st.integers(1, 5000)),
        "max_calls": h(counters),
        "progress": h(st.just(print)),
    },
    "cancel_repeat": {"name": h(repeat_names, optional=False)},
    "repeats": {"n": h(budgets)},
    # views for the operator's tools
    "server_time": {},
    "queue_exists": {},
    "job_page": {
        "state": h(st.sampled_from(checks.STATES), optional=False),
        "n": h(st.integers(1, 200)),
        "offset": h(counters0),
        "group": h(groups),
        "order": h(st.sampled_from(["run", "newest", None])),
    },
    "find_jobs": {
        "state": h(st.sampled_from(checks.STATES), optional=False),
        "text": h(names, optional=False),
        "fields": h(st.lists(st.sampled_from(["id", "name", "group", "error", "payload"]))),
        "n": h(st.integers(1, 200)),
        "cursor": h(counters0),
        "budget": h(st.integers(1, 5000)),
        "group": h(groups),
        "order": h(st.sampled_from(["run", "newest", None])),
        "since_ms": h(run_ats),
        "until_ms": h(run_ats),
    },
    "job_view": {"job_id": h(job_ids, optional=False), "log_tail": h(budgets)},
    "groups_page": {
        "cursor": h(st.sampled_from(["0", "1", str(2**64 - 1), "18446744073709551616"])),
        "n": h(st.integers(1, 200)),
    },
    "throughput": {"minutes": h(st.integers(1, 1440))},
    "history": {"span": h(st.sampled_from(["1h", "24h", "7d"]))},
    "busiest_lanes": {
        "span": h(st.sampled_from(["1h", "24h", "7d"])),
        "top": h(st.integers(1, 100)),
    },
    # bulk verbs by filter
    **{
        verb: {
            **(
                {"state": h(st.sampled_from(checks.STATES), optional=False)}
                if verb == "remove_jobs"
                else {}
            ),
            "name": h(names),
            "group": h(groups),
            "error": h(names),
            "since_ms": h(run_ats),
            "until_ms": h(run_ats),
            "dry_run": h(flags),
            "cursor": h(st.sampled_from(["0", "3", "-||0", "0|g1|0"])),
            "scan": h(st.integers(1, 5000)),
            "max_calls": h(counters),
            "progress": h(st.just(print)),
        }
        for verb in ("reprocess_jobs", "remove_jobs", "promote_jobs")
    },
    "promote_job": {"job_id": h(job_ids, optional=False)},
    # flows: the operator plane (no seeded job waits for children: the three verbs on a
    # parent are refused not_waiting, which must change nothing)
    "flow": {
        "job_id": h(job_ids, optional=False),
        "limit": h(st.integers(1, 600)),
        "relay": h(flags),
    },
    "release_parent": {"job_id": h(job_ids, optional=False)},
    "fail_parent": {"job_id": h(job_ids, optional=False), "error": h(texts)},
    "cancel_flow": {"job_id": h(job_ids, optional=False)},
    "sweep_flows": {
        "limit": h(st.integers(1, 1000)),
        "grace_ms": h(waits),
        "budget": h(st.integers(1, 10_000)),
    },
    "flow_impact": {"budget": h(st.integers(1, 2000))},
    "clean": {
        "older_than_ms": h(waits, optional=False),
        "state": h(st.sampled_from(["dead", "completed", "pending"])),
        "dry_run": h(flags),
        "budget": h(st.integers(1, 5000)),
        "progress": h(st.just(print)),
    },
}


def test_every_verb_and_every_parameter_is_driven() -> None:
    # a new verb (or a new parameter) must come with its hostile spec here
    assert sorted(SPECS) == verb_names(Queue)
    for verb, spec in SPECS.items():
        params = list(inspect.signature(getattr(Queue, verb).plan).parameters)[1:]
        assert sorted(spec) == sorted(params), verb


# ---------------------------------------------------------------- the world


@pytest.fixture(scope="module")
def url(server: EmbeddedServer) -> str:
    base = server.url.rsplit("/", 1)[0]
    return f"{base}/{DB}"


@pytest.fixture(scope="module")
def rr(url: str) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(url, decode_responses=True)
    client.flushdb()
    yield client
    client.flushdb()
    client.close()


@pytest.fixture(scope="module")
def counting(url: str) -> Iterator[redis.Redis]:
    pool = redis.ConnectionPool.from_url(url, connection_class=CountingConnection)
    client = redis.Redis(connection_pool=pool)
    yield client
    client.close()


def seed(q: Queue) -> dict[str, Any]:
    """One job in each state, a lane and a repeatable; the refs the strategies name."""
    dead = q.enqueue("dead", max_attempts=1, dedup_id="d1")
    active = q.enqueue("active")
    c = q.claim_many(2)
    assert [x.id for x in c] == [dead, active]
    assert q.retry(dead, c[0].token, "boom") == "dead"
    pending = q.enqueue("pending")
    scheduled = q.enqueue("scheduled", delay_ms=60_000)
    grouped = q.enqueue("grouped", group="g1")
    q.add_log(active, "a line")
    q.repeat("r1", every_ms=60_000)
    return {
        "pending": pending,
        "active": active,
        "dead": dead,
        "scheduled": scheduled,
        "grouped": grouped,
        "token": c[1].token,
    }


def resolve(value: Any, refs: dict[str, Any]) -> Any:
    if isinstance(value, Ref):
        return refs[value.name]
    if isinstance(value, list) and any(isinstance(v, (Ref, tuple)) for v in value):
        return [resolve(v, refs) for v in value]
    if isinstance(value, tuple) and any(isinstance(v, Ref) for v in value):
        return tuple(resolve(v, refs) for v in value)
    return value


def snapshot(r: redis.Redis, q: Queue) -> dict[str, Any]:
    """Every key of the queue with its type, value and ttl presence (as conftest's
    ``dump``, in one pipelined round trip)."""
    keys = sorted(r.scan_iter(match=q.keys.pattern(), count=1000))
    pipe = r.pipeline(transaction=False)
    for key in keys:
        pipe.type(key)
        pipe.dump(key)
        pipe.pttl(key)
    got = pipe.execute()
    return {k: (got[3 * i], got[3 * i + 1], got[3 * i + 2] > 0) for i, k in enumerate(keys)}


def wipe(r: redis.Redis, q: Queue) -> None:
    keys = list(r.scan_iter(match=q.keys.pattern(), count=1000))
    if keys:
        r.delete(*keys)


class World:
    """The example's queue: seeded afresh after a call that succeeded (a refused call
    leaves every key as it was, which :func:`outcome` asserts, so the next example
    can start from the same state)."""

    def __init__(self, verb: str, client: redis.Redis, r: redis.Redis) -> None:
        self.verb, self.client, self.r = verb, client, r
        self.q: Queue | None = None
        self.refs: dict[str, Any] = {}

    def get(self) -> tuple[Queue, dict[str, Any]]:
        if self.q is None:
            self.q = Queue(f"hostile-{self.verb}-{next(_names)}", client=self.client)
            self.refs = seed(self.q)
        return self.q, self.refs

    def spoil(self) -> None:
        if self.q is not None:
            wipe(self.r, self.q)
            self.q = None


def outcome(q: Queue, r: redis.Redis, call: Callable[[], Any]) -> str:
    """Run ``call``; check the law; name what happened."""
    before, writes = snapshot(r, q), CountingConnection.writes
    try:
        call()
    except InvalidArgument:
        assert CountingConnection.writes == writes, "a typed input error after a command"
        assert snapshot(r, q) == before
        return "invalid"
    except Refused:
        assert snapshot(r, q) == before, "a refused call changed a key"
        return "refused"
    # anything else propagates and fails the test
    return "ok"


@pytest.mark.parametrize("verb", sorted(SPECS))
def test_hostile_arguments_raise_typed_before_io_or_succeed(
    verb: str, counting: redis.Redis, rr: redis.Redis
) -> None:
    spec = SPECS[verb]
    seen: set[str] = set()
    world = World(verb, counting, rr)

    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )
    @given(st.fixed_dictionaries(spec))
    def run(drawn: dict[str, Any]) -> None:
        q, refs = world.get()
        kwargs = {k: resolve(v, refs) for k, v in drawn.items() if v is not OMIT}
        result = "raised"
        try:
            result = outcome(q, rr, lambda: getattr(q, verb)(**kwargs))
        finally:
            seen.add(result)
            if result not in ("invalid", "refused"):
                world.spoil()

    try:
        run()
    finally:
        world.spoil()
    if spec:
        assert "invalid" in seen, f"{verb}: no hostile value was refused"


# ---------------------------------------------------------------- the CLI

numeric_text = st.one_of(
    st.sampled_from(
        [
            "-1",
            "0",
            "1",
            str(2**53 + 1),
            str(2**63),
            str(2**1100),
            "9" * 5000,
            "1e400",
            "nan",
            "inf",
            "-inf",
            "1.5",
            "",
            "0x10",
            " 5",
            "\x00",
            "١٢",
        ]
    ),
    st.integers().map(str),
)
hostile_json = st.sampled_from(
    ["NaN", "[Infinity]", '"\\ud800"', '{"a": -Infinity}', "[1e400]", "{", '"ok"', "null"]
)

#: The CLI commands that take numbers (and one JSON payload), with ``{}`` for the value.
CLI_CASES = [
    ("enqueue", "{q}", '"x"', "--priority", "{}"),
    ("enqueue", "{q}", '"x"', "--delay-ms", "{}"),
    ("enqueue", "{q}", '"x"', "--max-attempts", "{}"),
    ("jobs", "{q}", "pending", "--limit", "{}"),
    ("jobs", "{q}", "pending", "--offset", "{}"),
    ("obliterate", "{q}", "--yes", "--budget", "{}"),
    ("group", "limit", "{q}", "g1", "{}"),
    ("group", "weight", "{q}", "g1", "{}"),
    ("repeat", "add", "{q}", "r9", "--every-ms", "{}"),
    ("repeat", "add", "{q}", "r9", "--every-ms", "1000", "--first-in-ms", "{}"),
    ("repeat", "add", "{q}", "r9", "--every-ms", "1000", "--priority", "{}"),
    ("repeat", "add", "{q}", "r9", "--every-ms", "1000", "--max-attempts", "{}"),
    ("repeat", "list", "{q}", "--limit", "{}"),
    ("job", "log", "{q}", "{active}", "line", "--keep", "{}"),
    ("queues", "--scan-limit", "{}"),
]
JSON_CASES = [
    ("enqueue", "{q}", "{}"),
    ("job", "data", "{q}", "{active}", "{}"),
    ("repeat", "add", "{q}", "r9", "--every-ms", "1000", "--payload", "{}"),
]
TYPED_EXITS = {exits.OK, exits.USAGE, exits.MALFORMED, *exits.REFUSED.values()}


def test_cli_numbers_and_payloads_are_refused_typed_or_succeed(
    url: str, counting: redis.Redis, rr: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the CLI's one client counts its writes too
    monkeypatch.setattr(cli_app.Env, "client", property(lambda self: counting))
    runner = CliRunner()

    @settings(
        max_examples=3 * EXAMPLES,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )
    @given(
        st.one_of(
            st.tuples(st.sampled_from(CLI_CASES), numeric_text),
            st.tuples(st.sampled_from(JSON_CASES), hostile_json),
        )
    )
    def run(case: tuple[tuple[str, ...], str]) -> None:
        template, value = case
        q = Queue(f"hostile-cli-{next(_names)}", client=counting)
        try:
            refs = seed(q)
            argv = [
                a.format(value, q=q.name, active=refs["active"]) if "{" in a else a
                for a in template
            ]
            before, writes = snapshot(rr, q), CountingConnection.writes
            res = runner.invoke(cli_app.cli, ["--url", url, *argv])
            assert res.exception is None or isinstance(res.exception, SystemExit), (
                argv,
                res.exception,
            )
            assert "Traceback" not in res.stderr
            assert res.exit_code in TYPED_EXITS, (argv, res.exit_code, res.stderr)
            if res.exit_code in (exits.USAGE, exits.MALFORMED):
                assert CountingConnection.writes == writes, (argv, "sent before refusing")
            if res.exit_code != exits.OK:
                assert snapshot(rr, q) == before, argv
        finally:
            wipe(rr, q)

    run()
