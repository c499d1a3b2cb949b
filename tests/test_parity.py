"""The sync and async facades agree (parity) (issue 11, Deliver 6): one suite, run through both.

``Queue`` and ``AsyncQueue`` share their plans, but the runners, the event streams, the
constructors and the worker's two entry points are written twice. Each scenario below
is written once against a :class:`Facade`, and the parametrized ``facade`` fixture hands it
a ``Queue`` and an ``AsyncQueue``, each made from a URL and around a client of the
caller's (one decoding replies to ``str``, one speaking RESP3). Every scenario asserts
its replies and the keys it leaves; and each records a transcript (every reply, or the
typed error, and the keys left, with the queue name, job ids and server times
normalised), so every later facade to run a scenario must produce exactly the first
one's transcript. The events scenario runs both event streams; the worker scenario both
entry points (``Worker(queue).run()`` and ``await Worker(aqueue).arun()``).

``test_every_verb_has_a_parity_scenario`` enumerates the facade's verbs: a new verb with
no scenario here fails it.
"""

from __future__ import annotations

import asyncio
import dataclasses
import enum
import inspect
import re
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
import redis
import redis.asyncio

from conftest import hour_lanes
from echomq import AsyncQueue, Backoff, Dedup, EchoMQError, Flow, Queue, Refused, Worker
from echomq.embedded import EmbeddedServer
from echomq.queue import verb_names
from echomq.schema import HIST_AT, HIST_SLOT_BITS, HIST_TYPE

# ---------------------------------------------------------------- normalising

_ID = re.compile(r"JOB[0-9A-Za-z]{11}")
_NUMBER = re.compile(r"-?\d+(\.\d+)?")
#: Anything at least this large is a server time (ms, or a minute bucket), not a count.
_TIME = 10**7


class Norm:
    """Maps one facade's queue name, job ids (in order of first sight) and server times
    to stable placeholders, so two facades' transcripts compare equal."""

    def __init__(self, queue: str) -> None:
        self.queue = queue
        self.ids: dict[str, str] = {}

    def _id(self, m: re.Match[str]) -> str:
        return self.ids.setdefault(m.group(), f"J{len(self.ids) + 1}")

    def text(self, value: str) -> str:
        value = _ID.sub(self._id, value.replace(self.queue, "Q"))
        if _NUMBER.fullmatch(value) and abs(float(value)) >= _TIME:
            return "T"
        return value

    def __call__(self, value: Any) -> Any:
        if isinstance(value, bytes):
            value = value.decode()
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, bool) or value is None:
            return value
        if isinstance(value, (int, float)):
            return "T" if abs(value) >= _TIME else value
        if isinstance(value, enum.Enum):
            return self(value.value)
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            return (type(value).__name__, self(dataclasses.asdict(value)))
        if isinstance(value, dict):
            out: dict[Any, Any] = {}
            for k, v in value.items():
                nk, nv = self(k), self(v)
                if nk == "T" and nk in out:  # per-minute buckets: a minute may turn
                    nv = _add(out[nk], nv)
                out[nk] = nv
            return out
        if isinstance(value, (list, tuple)):
            return [self(v) for v in value]
        if isinstance(value, BaseException):
            return ("raised", type(value).__name__, getattr(value, "reason", None))
        return repr(value)


def _add(a: Any, b: Any) -> Any:
    """Two per-minute counts as one (text stays text, as a row's fields are)."""
    try:
        total = int(a) + int(b)
    except (TypeError, ValueError):
        return (a, b)
    return str(total) if isinstance(a, str) else total


def hist_counts(r: redis.Redis, key: str) -> list[int]:
    """An hour's history key as its completed and dead counts, summed over its minutes."""
    ops: list[Any] = []
    for slot in range(60):
        at = slot * HIST_SLOT_BITS
        ops += ["GET", HIST_TYPE["completed"], at, "GET", HIST_TYPE["dead"], at + HIST_AT["dead"]]
    raw = [int(v) for v in r.execute_command("BITFIELD_RO", key, *ops)]
    # and the busiest lanes' table: each lane's hash, ended and dead (wait and run are
    # timing), in slot order
    lanes = [v for slot in hour_lanes(r, key) for v in slot[:3]]
    return [sum(raw[0::2]), sum(raw[1::2]), *lanes]


def keys_left(r: redis.Redis, q: Queue | AsyncQueue, norm: Norm) -> dict[str, Any]:
    """Every key of the queue with its type, its value (read by type) and whether it has a
    ttl, normalised."""
    out: dict[str, Any] = {}
    keys = sorted(r.scan_iter(match=q.keys.pattern(), count=1000))
    # a claim record's name is a random request id: name it by the ids it holds (job
    # ids run in mint order in both facades), after every other key
    records = sorted((r.get(k) or "", k) for k in keys if ":claimreq:" in k)
    for _, key in records:
        keys.remove(key)
    for key in keys:
        kind = r.type(key)
        value: Any
        if key.startswith(q.keys.base + "hist:"):
            # the history series (binary): the hour's counts per minute compare; the wait
            # and run sums are timing, and the hour is named by what it is
            hist = hist_counts(r, key)
            name = q.keys.base + "hist:H"
            prev = out.get(norm(name))
            if prev:  # the two facades' runs may straddle an hour
                hist = [a + b for a, b in zip(prev[1], hist)]
            out[norm(name)] = ("string", hist, r.pttl(key) > 0)
            continue
        if kind == "string":
            value = r.get(key)
        elif kind == "hash":
            value = r.hgetall(key)
        elif kind == "list":
            value = r.lrange(key, 0, -1)
        elif kind == "set":
            value = sorted(r.smembers(key))  # type: ignore[arg-type]
        elif kind == "zset" and key == q.keys.claimreqs:
            value = r.zcard(key)  # random request ids: how many is what compares
        elif kind == "zset":
            value = r.zrange(key, 0, -1, withscores=True)
        elif kind == "stream":
            # an entry's request id (`req`) is random: whether it has one is what compares
            value = [
                {k: ("R" if k == "req" else v) for k, v in fields.items()}
                for _, fields in r.xrange(key)  # type: ignore[union-attr]
            ]
        else:
            value = kind
        normed = norm(value)
        if kind == "set":
            normed = sorted(normed)
        out[norm(key)] = (kind, normed, r.pttl(key) > 0)
    for ids, key in records:
        out[norm(q.keys.base) + "claimreq:" + norm(ids)] = ("string", norm(ids), r.pttl(key) > 0)
    return out


# ---------------------------------------------------------------- the facade


class Facade:
    """One facade, driven the same way whichever it is.

    ``await facade("verb", ...)`` calls the verb (awaiting it on an ``AsyncQueue``) and
    records the reply in the transcript; ``await facade.outcome("verb", ...)`` records a
    typed error instead of raising it.
    """

    def __init__(self, kind: str, q: Queue | AsyncQueue, r: redis.Redis) -> None:
        self.kind, self.q, self.r = kind, q, r
        self.norm = Norm(q.name)
        self.transcript: list[Any] = []
        self.called: set[str] = set()

    @property
    def name(self) -> str:
        return self.q.name

    async def _call(self, verb: str, *args: Any, **kwargs: Any) -> Any:
        self.called.add(verb)
        out = getattr(self.q, verb)(*args, **kwargs)
        if isinstance(self.q, AsyncQueue):
            assert inspect.isawaitable(out), verb
            out = await out
        else:
            assert not inspect.isawaitable(out), verb
        return out

    async def __call__(self, verb: str, *args: Any, **kwargs: Any) -> Any:
        out = await self._call(verb, *args, **kwargs)
        self.transcript.append((verb, self.norm(out)))
        return out

    async def outcome(self, verb: str, *args: Any, **kwargs: Any) -> Any:
        """The reply, or the typed error raised (which must leave every key as it was)."""
        before = keys_left(self.r, self.q, Norm(self.q.name))
        try:
            out = await self._call(verb, *args, **kwargs)
        except EchoMQError as exc:
            assert keys_left(self.r, self.q, Norm(self.q.name)) == before, verb
            self.transcript.append((verb, self.norm(exc)))
            return exc
        self.transcript.append((verb, self.norm(out)))
        return out

    def keys(self, timing: tuple[str, ...] = ()) -> dict[str, Any]:
        """The normalised keys left, recorded in the transcript, less the keys named in
        ``timing`` (relative to the base) whose content depends on timing alone."""
        left = keys_left(self.r, self.q, self.norm)
        for name in timing:  # a name ending in ':' drops every key it starts
            for k in [k for k in left if k == "emq:{Q}:" + name]:
                left.pop(k)
            if name.endswith(":"):
                for k in [k for k in left if k.startswith("emq:{Q}:" + name)]:
                    left.pop(k)
        self.transcript.append(("keys", left))
        return left

    def key_names(self, timing: tuple[str, ...] = ()) -> set[str]:
        """The keys left, relative to the queue base (``pending``, ``job:<id>``, ...);
        their normalised values go to the transcript."""
        self.keys(timing)
        base = self.q.keys.base
        return {k.removeprefix(base) for k in self.r.scan_iter(match=self.q.keys.pattern())}

    # ---- events: both streams behind one shape
    async def events(self, act: Callable[[], Awaitable[Any]], count: int) -> list[Any]:
        """Subscribe, run ``act``, then read ``count`` events (each normalised)."""
        got: list[Any] = []
        if isinstance(self.q, AsyncQueue):
            async with self.q.events() as stream:
                await act()
                for _ in range(count):
                    got.append(await stream.get(timeout=5))
        else:
            with self.q.events() as stream:
                await act()
                for _ in range(count):
                    got.append(stream.get(timeout=5))
        normed = [self.norm(e) for e in got]
        self.transcript.append(("events", normed))
        return got


#: The facades and how each is constructed: by URL, or around a client the caller made
#: (one that decodes replies to ``str``, and one speaking RESP3).
KINDS = ["sync", "async", "sync-client", "async-client"]
#: Every scenario runs every verb through each facade: the full run's (``slow``); the
#: quick loop keeps the check that each verb has a scenario.
_PARAMS = [pytest.param(kind, marks=pytest.mark.slow) for kind in KINDS]


@pytest.fixture(params=_PARAMS)
async def facade(
    request: pytest.FixtureRequest, server: EmbeddedServer, qname: str, r: redis.Redis
) -> AsyncIterator[Facade]:
    """A ``Queue`` or an ``AsyncQueue``, each on its own fresh queue."""
    kind = request.param
    if kind == "sync":
        q = Queue(qname, url=server.url)
        yield Facade(kind, q, r)
        q.close()
    elif kind == "sync-client":
        client = redis.Redis.from_url(server.url, decode_responses=True)
        q = Queue(qname, client=client)
        yield Facade(kind, q, r)
        q.close()
        client.close()
    elif kind == "async":
        aq = AsyncQueue(qname, url=server.url)
        yield Facade(kind, aq, r)
        await aq.aclose()
    else:
        aclient = redis.asyncio.Redis.from_url(server.url, protocol=3)
        aq = AsyncQueue(qname, client=aclient)
        yield Facade(kind, aq, r)
        await aq.aclose()
        await aclient.aclose()


#: scenario -> the first facade's transcript, for the second facade to match.
_SEEN: dict[str, tuple[str, list[Any]]] = {}
#: scenario -> the verbs it drives (checked when it runs, enumerated below).
COVERS: dict[str, set[str]] = {}


def scenario(*verbs: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Mark a test as a facade scenario driving ``verbs``: after it runs, the facade must
    have called each of them, and its transcript must equal the other facade's."""

    def wrap(fn: Callable[..., Any]) -> Callable[..., Any]:
        COVERS[fn.__name__] = set(verbs)

        async def run(facade: Facade, r: redis.Redis) -> None:
            await fn(facade, r)
            assert set(verbs) <= facade.called, set(verbs) - facade.called
            agree(fn.__name__, facade)

        run.__name__ = fn.__name__
        run.__doc__ = fn.__doc__
        return run

    return wrap


def first_difference(a: Any, b: Any, path: str = "") -> str | None:
    """Where two transcripts first differ (a readable failure), or ``None``."""
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b), key=repr):
            if k not in a or k not in b:
                return f"{path}[{k!r}]: only in {'second' if k not in a else 'first'}"
            found = first_difference(a[k], b[k], f"{path}[{k!r}]")
            if found:
                return found
        return None
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        for i, (x, y) in enumerate(zip(a, b)):
            found = first_difference(x, y, f"{path}[{i}]")
            if found:
                return found
        return None if len(a) == len(b) else f"{path}: {len(a)} items against {len(b)}"
    return None if a == b else f"{path}: {a!r:.200} against {b!r:.200}"


def agree(name: str, t: Facade) -> None:
    """The first facade to run ``name`` records its transcript; every later one matches it."""
    kind, transcript = _SEEN.setdefault(name, (t.kind, t.transcript))
    if kind != t.kind:
        where = first_difference(transcript, t.transcript)
        assert where is None, f"{t.kind} differs from {kind} at {where}"


def field(value: Any, name: str) -> Any:
    """A field of a reply that is a dict or a typed result."""
    return value[name] if isinstance(value, dict) else getattr(value, name)


def J(n: int) -> str:
    """A fixed job id, so both facades write the same rows."""
    return f"JOB{n:011d}"


def expire(r: redis.Redis, t: Facade, job_id: str) -> None:
    """Force a lease to have expired by rewriting its deadline (no sleeping)."""
    assert r.zadd(t.q.keys.active, {job_id: 0}, xx=True, ch=True) == 1


# ---------------------------------------------------------------- scenarios


@scenario(
    "enqueue",
    "enqueue_many",
    "counts",
    "claim",
    "claim_many",
    "complete",
    "complete_many",
    "get_job",
    "job_state",
    "browse",
    "is_paused",
    "metrics",
)
async def test_enqueue_claim_complete(facade: Facade, r: redis.Redis) -> None:
    t = facade
    assert await t("enqueue", {"n": 1}, job_id=J(1), name="a", priority=2) == J(1)
    assert await t("enqueue", "dup", job_id=J(1)) == J(1)  # a duplicate: nothing written
    assert await t("enqueue", [1], job_id=J(2), dedup_id="d") == J(2)
    assert await t("enqueue", [2], job_id=J(3), dedup_id="d") == J(2)  # the holder
    many = await t("enqueue_many", ["m1", "m2", "m3"], priority=1)
    assert len(many) == 3
    counts = await t("counts")
    assert (field(counts, "pending"), field(counts, "active")) == (5, 0)
    row = await t("get_job", J(1))
    assert field(row, "data") == {"n": 1}
    assert await t("job_state", J(1)) == "pending"
    assert await t("job_state", J(9)) is None
    assert await t("get_job", J(9)) is None
    # score desc (priority), then id desc
    assert await t("browse", "pending", n=10) == [J(1), *reversed(many), J(2)]
    assert await t("is_paused") is False
    first = await t("claim")
    assert (first.id, first.token, first.payload) == (J(2), 1, [1])
    batch = await t("claim_many", 3, lease_ms=5000, lock_ms=5000)
    assert [c.id for c in batch] == many
    assert await t("complete", J(2), 1) is None
    assert await t("complete_many", [(c.id, c.token) for c in batch] + [(J(9), 1)]) == [J(9)]
    metrics = await t("metrics")
    assert field(field(metrics, "completed"), "count") == 4
    assert await t("browse", "pending") == [J(1)]
    assert t.key_names() >= {"pending", f"job:{J(1)}", "metrics:completed"}
    assert f"job:{J(2)}" not in t.key_names()


@scenario("enqueue_flow", "children_results", "relay_flows")
async def test_flows(facade: Facade, r: redis.Redis) -> None:
    t = facade
    kids = [Flow(payload=i, id=J(10 + i)) for i in range(2)]
    ids = await t("enqueue_flow", Flow(payload="p", id=J(1), children=kids))
    assert (ids.id, [c.id for c in ids.children]) == (J(1), [J(10), J(11)])
    assert await t("job_state", J(1)) == "waiting_children"
    for _ in range(2):
        c = await t("claim")
        await t("complete", c.id, c.token, result={"n": c.payload})
    assert await t("relay_flows") == 0  # one queue: resolved inline, nothing to relay
    res = await t("children_results", J(1))
    name = t.q.name
    assert res.completed == {f"{name}:{J(10)}": {"n": 0}, f"{name}:{J(11)}": {"n": 1}}
    assert await t("job_state", J(1)) == "pending"
    assert {f"job:{J(1)}", f"job:{J(1)}:kids", "pending"} <= t.key_names()


@scenario("retry", "delay", "extend_lock", "extend_locks", "promote", "lock_job", "unlock_job")
async def test_retry_delay_extend_promote(facade: Facade, r: redis.Redis) -> None:
    t = facade
    await t("enqueue", "r", job_id=J(1), max_attempts=2, backoff=Backoff.fixed(5))
    await t("enqueue", "d", job_id=J(2))
    a, b = await t("claim_many", 2)
    assert await t("lock_job", a.id, a.token, ttl_ms=60_000) is None
    assert await t("unlock_job", a.id, a.token) is True
    assert await t("unlock_job", a.id, a.token) is False  # no lock held any more
    assert await t("extend_lock", a.id, a.token, 60_000) is None
    assert await t("extend_locks", [(a.id, a.token), (b.id, 7)], 60_000) == [b.id]
    assert await t("retry", a.id, a.token, "boom", delay_ms=0) == "scheduled"
    due = await t("delay", b.id, b.token, 0)
    assert isinstance(due, int)
    assert await t("promote", 10) == 2
    again = await t("claim_many", 2)
    assert sorted(c.id for c in again) == [J(1), J(2)]
    tok = {c.id: c.token for c in again}
    assert tok == {J(1): 2, J(2): 2}
    assert await t("retry", J(1), 2, "boom again") == "dead"
    assert field(await t("counts"), "dead") == 1
    row = await t("get_job", J(1))
    assert (field(row, "state"), field(row, "last_error")) == ("dead", "boom again")
    assert {"dead", "active", f"job:{J(1)}", f"job:{J(2)}"} <= t.key_names()


@scenario("reap", "check_stalled", "release")
async def test_recovery(facade: Facade, r: redis.Redis) -> None:
    t = facade
    for n in (1, 2, 3):
        await t("enqueue", n, job_id=J(n))
    got = await t("claim_many", 3)
    assert [c.id for c in got] == [J(1), J(2), J(3)]
    assert await t("release", J(3), 1) is None
    expire(r, t, J(1))
    assert await t("reap", 10) == 1
    expire(r, t, J(2))
    assert await t("check_stalled", max_stalled=0, budget=10) == ([], [J(2)])
    counts = await t("counts")
    assert (field(counts, "pending"), field(counts, "dead")) == (2, 1)
    row = await t("get_job", J(2))
    assert (field(row, "state"), field(row, "stalled")) == ("dead", 1)  # JobRow counters are ints
    assert {"pending", "dead"} <= t.key_names()


@scenario(
    "pause",
    "resume",
    "update_data",
    "update_progress",
    "add_log",
    "get_job_logs",
    "get_job_log_entries",
    "remove_job",
    "reprocess_job",
    "drain",
    "drain_step",
    "obliterate",
)
async def test_operator_plane(facade: Facade, r: redis.Redis) -> None:
    t = facade
    await t("enqueue", "a", job_id=J(1), dedup_id="d1")
    await t("enqueue", "b", job_id=J(2), max_attempts=1)
    await t("enqueue", "c", job_id=J(3), delay_ms=60_000)
    await t("enqueue", "d", job_id=J(4), delay_ms=60_000)
    assert await t("pause") is None
    assert await t("is_paused") is True
    assert await t("claim") is None  # the gate: nothing moves
    assert await t("resume") is None
    assert await t("update_data", J(1), {"new": True}) is None
    assert await t("update_progress", J(1), 50) is None
    assert await t("update_progress", J(1), {"step": "x"}) is None
    assert await t("add_log", J(1), "one") == 1
    assert await t("add_log", J(1), "two", keep=1) == 1
    assert await t("get_job_logs", J(1)) == ["two"]
    (entry,) = await t("get_job_log_entries", J(1))
    assert entry.line == "two" and isinstance(entry.time_ms, int)
    c = await t("claim")
    assert c.id == J(1) and c.payload == {"new": True}
    assert await t("retry", J(1), c.token, "x", max_attempts=1) == "dead"
    assert await t("reprocess_job", J(1)) is None
    assert await t("remove_job", J(2), dedup_id="nope") is None
    assert await t("drain", include_schedule=False) == 1
    assert f"job:{J(3)}" in t.key_names()
    await t("enqueue", "e", job_id=J(5))
    await t("enqueue", "f", job_id=J(6))
    assert await t("drain_step", budget=1) == (1, True)
    deleted, more = await t("drain_step", budget=1)
    while more:  # a full budget means "call again", even when nothing is left
        n, more = await t("drain_step", budget=1)
        deleted += n
    assert deleted == 1 and f"job:{J(6)}" not in t.key_names()
    assert f"job:{J(3)}" in t.key_names()  # the schedule stays
    await t("pause")
    assert await t("obliterate", budget=1) is False
    # the last step sweeps the server's keyspace a bounded amount per call, so how many
    # calls it takes depends on what else the server holds: only the end is compared
    calls = 1
    while not await t._call("obliterate"):
        calls += 1
        assert calls < 10_000
    t.transcript.append(("obliterate", "gone"))
    assert t.key_names() == set()


@scenario(
    "pause_group",
    "resume_group",
    "set_group_limit",
    "clear_group_limit",
    "set_group_weight",
    "group_depth",
    "groups",
    "drain_group",
    "reassign",
)
async def test_lanes(facade: Facade, r: redis.Redis) -> None:
    t = facade
    for n, g in ((1, "a"), (2, "a"), (3, "b"), (4, "b"), (5, None)):
        await t("enqueue", n, job_id=J(n), group=g)
    assert await t("group_depth", "a") == 2
    assert await t("set_group_limit", "a", 1) is None
    assert await t("set_group_weight", "b", 2) is None
    assert await t("pause_group", "b") is None
    got = await t("claim_many", 10)
    assert sorted(c.id for c in got) == [J(1), J(5)]
    assert await t("resume_group", "b") is None
    assert await t("clear_group_limit", "a") is None
    info = await t("groups")
    assert [(field(g, "name"), field(g, "depth"), field(g, "in_flight")) for g in info] == [
        ("a", 1, 1),
        ("b", 2, 0),
    ]
    assert await t("reassign", J(2), "b") is None
    assert await t("reassign", J(3), None) is None
    assert await t("drain_group", "b") == 2
    assert await t("group_depth", "b") == 0
    counts = await t("counts")
    assert (field(counts, "pending"), field(counts, "active")) == (1, 2)
    assert "pending" in t.key_names()


@scenario(
    "set_rate_limit",
    "clear_rate_limit",
    "rate_limit",
    "set_concurrency",
    "clear_concurrency",
    "set_group_rate_limit",
    "clear_group_rate_limit",
    "set_group_rate_default",
    "clear_group_rate_default",
    "group_rate_limit",
    "limits",
)
async def test_flow_control(facade: Facade, r: redis.Redis) -> None:
    t = facade
    day = 86_400_000  # a window this long reads as a time ("T") in the transcript
    for n, g in ((1, None), (2, None), (3, "a"), (4, "a"), (5, "b")):
        await t("enqueue", n, job_id=J(n), group=g)
    assert await t("set_rate_limit", 3, day, burst=3) is None
    assert await t("set_concurrency", 10) is None
    assert await t("set_group_rate_limit", "a", 1, day) is None
    assert await t("set_group_rate_default", 5, day) is None
    assert field(await t("rate_limit"), "max_jobs") == 3
    assert field(await t("group_rate_limit", "a"), "per_ms") == day
    got = await t("claim_many", 10)
    assert len(got) == 3
    limits = await t("limits")
    assert (field(limits, "starts_in_window"), field(limits, "active")) == (3, 3)
    assert await t("claim_many", 10) == []
    assert await t("clear_rate_limit") is None
    assert await t("clear_concurrency") is None
    assert await t("clear_group_rate_limit", "a") is None
    assert await t("clear_group_rate_default") is None
    assert len(await t("claim_many", 10)) == 2
    assert "meta" not in t.key_names()


@scenario("reindex")
async def test_reindex(facade: Facade, r: redis.Redis) -> None:
    t = facade
    for n, g in ((1, "a"), (2, "a"), (3, "b"), (4, None)):
        await t("enqueue", n, job_id=J(n), group=g)
    # an index that lost a lane's jobs and kept a member no lane holds
    r.delete(t.q.keys.gindex)
    r.zadd(t.q.keys.gindex, {J(9): 0})
    res = await t("reindex", dry_run=True)
    assert (field(res, "added"), field(res, "removed"), field(res, "cursor")) == (3, 1, None)
    res = await t("reindex", scan=1)
    assert (field(res, "added"), field(res, "removed")) == (3, 1)
    assert field(await t("counts"), "pending") == 4
    assert field(await t("reindex", dry_run=True), "added") == 0


@scenario("pause_repeat", "resume_repeat", "run_repeat")
async def test_pause_resume_and_run_a_repeatable(facade: Facade, r: redis.Redis) -> None:
    t = facade
    await t("repeat", "every", every_ms=3_600_000, payload={"p": 1}, first_in_ms=600_000)
    await t("repeat", "nightly", cron="0 3 * * *", job_name="digest")
    assert await t("pause_repeat", "every") is True
    assert await t("pause_repeat", "every") is False  # paused already: nothing written
    assert await t("pause_repeat", "nope") is False
    assert await t("run_repeat", "every") is None  # paused: resume it first
    listed = {field(x, "name"): field(x, "paused") for x in await t("repeats")}
    assert listed == {"every": True, "nightly": False}
    # registering the same cadence again (a worker starting) keeps it paused
    await t("repeat", "every", every_ms=3_600_000, payload={"p": 2})
    assert field((await t("repeats"))[-1], "paused") is True
    assert isinstance(await t("resume_repeat", "every"), int)
    assert await t("resume_repeat", "every") is None  # not paused
    made = await t("run_repeat", "nightly")
    assert isinstance(made, str) and made.startswith("JOB")
    assert field(await t("get_job", made), "name") == "digest"
    assert await t("run_repeat", "nope") is None
    assert {"pending", "repeat", "repeat:every", "repeat:nightly"} <= t.key_names()


@scenario("repeat", "cancel_repeat", "repeats")
async def test_repeatables(facade: Facade, r: redis.Redis) -> None:
    t = facade
    nxt = await t("repeat", "every", every_ms=60_000, payload={"p": 1}, first_in_ms=1000)
    assert isinstance(nxt, int)
    await t("repeat", "nightly", cron="0 3 * * *", group="g", priority=2, max_attempts=4)
    listed = await t("repeats")
    assert [field(x, "name") for x in listed] == ["every", "nightly"]
    assert field(listed[0], "payload") == {"p": 1}
    assert await t("cancel_repeat", "nightly") is True
    assert await t("cancel_repeat", "nightly") is False
    assert [field(x, "name") for x in await t("repeats", 5)] == ["every"]
    assert t.key_names() == {"repeat", "repeat:every", "audit"}


@scenario("dedup_owner", "release_dedup")
async def test_dedup_ids(facade: Facade, r: redis.Redis) -> None:
    t = facade
    spec = Dedup("k", mode="keep_last")
    assert await t("enqueue", "a", job_id=J(1), dedup=spec) == J(1)
    assert await t("enqueue", "b", dedup=spec) == J(1)
    owner = await t("dedup_owner", "k")
    assert (owner.job_id, owner.state, owner.mode) == (J(1), "pending", "keep_last")
    assert await t("dedup_owner", "free") is None
    assert await t("release_dedup", "k") == J(1)
    assert await t("release_dedup", "k") is None
    assert "de:k" not in t.key_names()


@scenario("reprocess_jobs", "remove_jobs", "promote_jobs", "promote_job", "clean")
async def test_bulk_verbs_by_filter(facade: Facade, r: redis.Redis) -> None:
    t = facade
    for n in range(4):
        await t("enqueue", n, job_id=J(n + 1), max_attempts=1, name="a" if n % 2 else "b")
        c = await t("claim")
        await t("retry", J(n + 1), field(c, "token"), "boom" if n < 3 else "other")
    await t("enqueue", "s1", job_id=J(10), delay_ms=60_000)
    await t("enqueue", "s2", job_id=J(11), delay_ms=60_000, group="g")
    assert field(await t("reprocess_jobs", error="boom", dry_run=True), "matched") == 3
    res = await t("reprocess_jobs", name="a", error="boom", scan=1)
    assert (field(res, "matched"), field(res, "calls")) == (1, 5)  # the 5th sees the end
    assert field(await t("remove_jobs", "pending", name="a"), "matched") == 1
    await t("promote_job", J(10))
    await t.outcome("promote_job", J(10))
    assert field(await t("promote_jobs", group="g"), "matched") == 1
    assert field(await t("clean", 0, dry_run=True), "matched") == 3
    assert field(await t("clean", 0, budget=2), "matched") == 3
    assert {"pending", "g:g:pending", "audit"} <= t.key_names()


@scenario("cancel_job", "workers")
async def test_cancel_and_the_worker_registry(facade: Facade, r: redis.Redis) -> None:
    t = facade
    await t("enqueue", "a", job_id=J(1))
    await t("enqueue", "b", job_id=J(2))
    c = await t("claim")
    assert field(c, "id") == J(1)
    assert await t("cancel_job", J(1)) is True
    assert await t("cancel_job", J(1)) is False  # asked already: nothing written
    assert field(await t.outcome("cancel_job", J(2)), "reason") == "not_active"
    assert field(await t.outcome("cancel_job", J(9)), "reason") == "gone"
    assert await t("workers") == []
    # a record as a beat writes it (a live worker is the worker scenario's), and the
    # index entry of one whose record expired: the read lists one, trims the other
    live, dead = "0123456789abcdef", "fedcba9876543210"
    r.hset(
        t.q.keys.worker(live),
        mapping={"host": "h", "pid": "7", "queues": '["x"]', "jobs": "1", "beat": "1"},
    )
    r.zadd(t.q.keys.workers, {live: 1, dead: 0})
    got = await t("workers", 10)
    assert [(field(w, "id"), field(w, "pid"), field(w, "queues")) for w in got] == [
        (live, 7, ["x"])
    ]
    assert r.zrange(t.q.keys.workers, 0, -1) == [live]
    t.keys()


@scenario("set_retention", "retention", "enqueue", "complete", "retry", "browse", "get_job")
async def test_history_retention_and_result(facade: Facade, r: redis.Redis) -> None:
    t = facade
    assert field(await t("retention"), "completed") is None
    assert await t("set_retention", completed=2, dead=3) == 0
    assert field(await t("retention"), "dead") == 3
    for n in (1, 2, 3):
        await t("enqueue", n, job_id=J(n), max_attempts=1)
    for n in (1, 2):
        c = await t("claim")
        await t("complete", c.id, c.token, result={"n": n})
    c = await t("claim")
    assert await t("retry", c.id, c.token, "boom") == "dead"
    assert await t("browse", "completed") == [J(2), J(1)]
    row = await t("get_job", J(1))
    assert (field(row, "state"), field(row, "result")) == ("completed", '{"n":1}')
    assert [field(e, "error") for e in field(await t("get_job", J(3)), "errors")] == ["boom"]
    assert await t("result", J(2), timeout_s=5) == {"n": 2}
    failed = await t.outcome("result", J(3))
    assert field(failed, "error") == "boom"
    await t.outcome("result", J(9))  # not kept: JobNotKept at once
    assert await t("enqueue", "again", job_id=J(1)) == J(1)  # still kept: a duplicate
    # the error history's entries carry their server time inside JSON text
    left = t.key_names(timing=("job:J3:errors",))
    assert {"completed", "dead", "meta", f"job:{J(3)}:errors"} <= left


@scenario("audit")
async def test_the_audit_journal(facade: Facade, r: redis.Redis) -> None:
    t = facade
    await t("enqueue", "a", job_id=J(1))
    await t("pause")
    await t("update_data", J(1), {"b": 2})
    await t.outcome("reprocess_job", J(1))  # refused: journals nothing
    got = await t._call("audit", 10)
    # the entry ids are server times: record everything else
    t.transcript.append(
        ("audit", [t.norm((e.verb, e.args, e.outcome, e.count, e.actor)) for e in got])
    )
    assert [e.verb for e in got] == ["update_data", "pause"]
    assert all(e.time_ms > 0 for e in got)
    assert "audit" in t.key_names()


@scenario("rerun_job")
async def test_rerun_job(facade: Facade, r: redis.Redis) -> None:
    t = facade
    await t("enqueue", "b", job_id=J(1), max_attempts=1)
    c = await t("claim")
    assert await t("retry", J(1), c.token, "x") == "dead"
    copy = await t("rerun_job", J(1))  # a minted id: the transcript names it J2
    assert copy != J(1)
    await t.outcome("rerun_job", copy)  # pending: not finished, nothing changed
    await t.outcome("rerun_job", J(9))  # gone
    row = await t("get_job", copy)
    assert (field(row, "state"), field(row, "rerun_of")) == ("pending", J(1))
    assert field(await t("get_job", J(1)), "rerun_as") == copy
    assert {"pending", "dead", "audit"} <= t.key_names()


@scenario("flow", "release_parent", "fail_parent", "cancel_flow", "sweep_flows", "flow_impact")
async def test_flow_operator_plane(facade: Facade, r: redis.Redis) -> None:
    t = facade
    for n in (1, 2, 3):  # three parents of two children each, chosen ids
        kids = [Flow(payload=i, id=J(10 * n + i)) for i in range(2)]
        await t("enqueue_flow", Flow(payload=n, id=J(n), children=kids))
    tree = await t("flow", J(11))
    assert tree.root.id == J(1) and tree.nodes == 3 and not tree.truncated
    impact = await t("flow_impact")
    assert (impact.waiting, impact.children) == (3, 6)
    assert await t("release_parent", J(1)) == 2
    await t("fail_parent", J(2), "by hand")
    got = await t("cancel_flow", J(3))
    assert (got.removed, got.cancelling, got.failed) == (2, 0, 1)
    await t.outcome("release_parent", J(2))  # dead now: not waiting, nothing changed
    swept = await t("sweep_flows", grace_ms=0)
    assert (swept.parents, swept.resolved) == (0, 0)
    assert await t("job_state", J(1)) == "pending" and await t("job_state", J(3)) == "dead"
    assert {"audit", "dead", "pending"} <= t.key_names()


@scenario(
    "server_time",
    "queue_exists",
    "latency",
    "job_page",
    "find_jobs",
    "job_view",
    "groups_page",
    "throughput",
    "history",
    "busiest_lanes",
)
async def test_views(facade: Facade, r: redis.Redis) -> None:
    t = facade
    assert await t("queue_exists") is False
    assert await t("latency") is None
    assert isinstance(await t("server_time"), int)
    await t("enqueue", {"to": "ann"}, job_id=J(1), name="mail")
    await t("enqueue", {"to": "bob"}, job_id=J(2), name="sms", priority=1)
    await t("enqueue", "g", job_id=J(3), group="g1")
    c = await t("claim")
    assert c.id == J(1)
    await t("add_log", J(1), "sending")
    assert await t("queue_exists") is True
    assert isinstance(await t._call("latency"), int)  # an age: timing alone
    page = await t("job_page", "pending", n=10)
    assert [field(j, "id") for j in field(page, "jobs")] == [J(2)]
    lane = await t("job_page", "pending", group="g1")
    assert [field(j, "id") for j in field(lane, "jobs")] == [J(3)]
    found = await t("find_jobs", "active", "ANN", fields=["payload"])
    assert [field(j, "id") for j in field(found, "jobs")] == [J(1)]
    assert field(await t("find_jobs", "pending", "nobody"), "jobs") == []
    view = await t("job_view", J(1))
    assert (field(view, "logs"), field(view, "locked")) == (["sending"], False)
    assert field(field(view, "row"), "data") == {"to": "ann"}
    assert await t("job_view", J(9)) is None
    groups = await t("groups_page")
    assert [field(g, "name") for g in field(groups, "groups")] == ["g1"]
    await t("complete", J(1), c.token)
    done = await t._call("throughput", 5)  # its series shifts if a minute turns: totals only
    totals = (field(field(done, "completed"), "total"), sum(field(done.completed, "series")))
    t.transcript.append(("throughput", totals))
    assert totals == (1, 1)
    hist = await t._call("history", "24h")  # points shift with the clock: sums only
    seen = (sum(field(hist, "completed")), sum(field(hist, "dead")), len(hist.completed))
    t.transcript.append(("history", seen))
    assert seen == (1, 0, 96)
    # the busiest lanes: the lane's job completes; wait and run are timing
    got = {}
    for _ in range(2):  # the lane's job and the flat one, in the claim's own order
        c = await t("claim")
        got[c.id] = c
    assert set(got) == {J(2), J(3)}
    await t("complete", J(3), got[J(3)].token)
    busy = await t._call("busiest_lanes", "1h", top=3)
    lanes = [(x.lane, x.completed, x.dead) for x in busy.lanes]
    t.transcript.append(("busiest_lanes", (lanes, busy.lanes_seen)))
    assert (lanes, busy.lanes_seen) == ([("g1", 1, 0)], 1)
    assert {"active", f"job:{J(2)}"} <= t.key_names()


@scenario(
    "complete",
    "retry",
    "extend_lock",
    "remove_job",
    "reprocess_job",
    "obliterate",
    "reassign",
    "unlock_job",
    "lock_job",
    "get_job_logs",
)
async def test_refusals_are_the_same_typed_errors(facade: Facade, r: redis.Redis) -> None:
    t = facade
    await t("enqueue", "x", job_id=J(1))
    await t("enqueue", "y", job_id=J(2))
    c = await t("claim")
    assert c.id == J(1)
    refused = [
        await t.outcome("complete", J(1), 9),  # stale
        await t.outcome("complete", J(9), 1),  # gone
        await t.outcome("retry", J(1), 9, "e"),
        await t.outcome("extend_lock", J(9), 1, 1000),
        await t.outcome("reprocess_job", J(2)),  # not dead
        await t.outcome("reassign", J(1), "g"),  # not pending
        await t.outcome("get_job_logs", J(9)),
        await t.outcome("obliterate"),  # not paused
    ]
    await t("lock_job", J(1), 1)
    refused.append(await t.outcome("remove_job", J(1)))  # locked
    refused.append(await t.outcome("unlock_job", J(1), 5))  # another token
    await t("pause")
    refused.append(await t.outcome("obliterate"))  # jobs in flight
    reasons = [x.reason for x in refused]
    assert reasons == [
        "stale",
        "gone",
        "stale",
        "gone",
        "not_dead",
        "not_pending",
        "gone",
        "not_paused",
        "locked",
        "stale",
        "active",
    ]
    assert all(isinstance(x, Refused) for x in refused)
    # input errors: typed, before anything is sent
    bad = [
        await t.outcome("enqueue", float("nan")),
        await t.outcome("enqueue", "x", priority=2**1100),
        await t.outcome("get_job", "not-an-id"),
        await t.outcome("pause_group", "bad name"),
        await t.outcome("promote", 0),
    ]
    assert [type(x).__name__ for x in bad] == [
        "InvalidPayload",
        "InvalidArgument",
        "InvalidJobId",
        "InvalidName",
        "InvalidArgument",
    ]
    assert {"active", "pending", "meta", f"job:{J(1)}:lock"} <= t.key_names()


@scenario("enqueue", "update_progress", "pause", "resume", "complete")
async def test_both_event_streams_see_the_same_events(facade: Facade, r: redis.Redis) -> None:
    t = facade

    async def act() -> None:
        await t("enqueue", "e", job_id=J(1))
        await t("update_progress", J(1), 7)
        await t("pause")
        await t("resume")
        c = await t("claim")
        await t("complete", c.id, c.token)

    events = await t.events(act, 6)
    assert [(e.name, e.job) for e in events] == [
        ("enqueued", J(1)),
        ("progress", J(1)),
        ("paused", None),
        ("resumed", None),
        ("active", J(1)),
        ("completed", J(1)),
    ]
    assert events[1].get("progress") == 7
    assert all(e.queue == t.name for e in events)


async def test_both_worker_entry_points_settle_the_same_jobs(
    facade: Facade, r: redis.Redis
) -> None:
    """``Worker(queue).run()`` (blocking, in a thread) and ``await Worker(aqueue).arun()``
    run the same engine: the same jobs settle the same way, the same keys are left."""
    t = facade
    seen: list[Any] = []

    def handle(job: Any) -> str:
        seen.append(job.data)
        if job.data == "fail":
            raise RuntimeError("no")
        return "ok"

    for n, data in enumerate(("a", "b", "fail", "c"), start=1):
        await t("enqueue", data, job_id=J(n), max_attempts=1)
    worker = Worker(t.q, handle, concurrency=2)

    async def settled() -> None:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            c = r.hgetall(t.q.keys.metrics_completed).get("count")
            f = r.hgetall(t.q.keys.metrics_failed).get("count")
            if c == "3" and f == "1" and r.zcard(t.q.keys.active) == 0:
                return
            await asyncio.sleep(0.02)
        raise AssertionError("the worker did not settle the jobs")

    if isinstance(t.q, Queue):
        thread = threading.Thread(target=worker.run, daemon=True)
        thread.start()
        await settled()
        assert worker.stop(timeout=10)
        thread.join(10)
    else:
        task = asyncio.create_task(worker.arun())
        await settled()
        worker.request_stop()
        await asyncio.wait_for(task, 10)
    stats = worker.stats
    assert (stats.claimed, stats.completed, stats.dead, stats.retried) == (4, 3, 1, 0)
    assert sorted(seen) == ["a", "b", "c", "fail"]
    # every counter but `errors` (server errors a loop recovered from: load, not logic)
    counters = {k: v for k, v in dataclasses.asdict(stats).items() if k != "errors"}
    t.transcript.append(("stats", counters))
    row = await t("get_job", J(3))
    assert (field(row, "state"), field(row, "last_error").splitlines()[-1]) == (
        "dead",
        "RuntimeError: no",
    )
    # how many wake tokens an idle worker's BLPOP took depends on timing alone, and so
    # does how its claims batched the jobs (one claim record per batch)
    left = t.key_names(timing=("wake", "claimreq:", "claimreqs"))
    assert {"dead", f"job:{J(3)}", "metrics:completed", "metrics:failed"} <= left
    assert not any(k.startswith(("job:" + J(1), "job:" + J(2), "job:" + J(4))) for k in left)
    agree("worker", t)


def test_every_verb_has_a_parity_scenario() -> None:
    covered = set().union(*COVERS.values())
    missing = set(verb_names(Queue)) - covered
    assert not missing, f"verbs with no facade scenario: {sorted(missing)}"
    assert verb_names(Queue) == verb_names(AsyncQueue)
