"""The native twins against the scripts: random sequences of verbs, replies and keys.

Two private servers, both with the module loaded; the same queue name on each. One queue
runs the scripts, the other the native commands. Hypothesis draws a sequence of verbs
(enqueue flat/grouped/delayed/deduplicated in every mode/kept, enqueue_many, claim, claim_many with
locks, complete with or without a result, retry to schedule or dead, extend, reprocess,
remove, pause/resume, group pause/limit, promote, the queue's retention, the flow
control limits: rate, concurrency, lane rates) with the same
ids on both sides. After every step the replies must be equal (a refusal: the same
exception and message) and every key of the queue equal on both servers: its type, its
value byte for byte in the server's own order (hash fields, list items), ttl presence,
and the events published. Server times are normalised (a 13-digit millisecond value is
``T``; metric minute buckets are ``M``). ``EMQ_DIFF_EXAMPLES`` raises the number of
sequences drawn (100 by default).
"""

from __future__ import annotations

import functools
import importlib
import itertools
import os
import re
import time
from collections.abc import Iterator
from typing import Any

import pytest
import redis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import _built, hour_lanes
from echomq import Dedup, Flow, Queue, ids
from echomq import journal as journal_mod
from echomq.embedded import EmbeddedServer
from echomq.lifecycle import claiming
from echomq.schema import HIST_AT, HIST_SLOT_BITS, HIST_TYPE
from echomq.worker import plans

pytestmark = [
    pytest.mark.skipif(_built is None, reason="the echomq native module is not built"),
    pytest.mark.slow,  # random sequences on two servers: soak-like
]

_TIME = re.compile(rb"(?<!\d)1\d{12}(?:\.\d+)?(?!\d)")
_MINUTE = re.compile(rb"^\d{8}$")
_counter = itertools.count()
#: the transport's exchange module (the package's `exchange` name is its function)
exchange_mod = importlib.import_module("echomq.transport.exchange")

IDS = [f"JOB{'0' * 10}{c}" for c in "123456"]
GROUPS = [None, "ga", "gb"]
#: the dedup modes on one id (windows and delays long enough that no step's timing decides)
DEDUPS = [
    Dedup("d1", mode="throttle", ttl_ms=3_600_000),
    Dedup("d1", mode="debounce", delay_ms=3_600_000),
    Dedup("d1", mode="keep_last"),
]


@pytest.fixture(scope="module")
def twin_servers(server: EmbeddedServer) -> Iterator[tuple[EmbeddedServer, EmbeddedServer]]:
    with EmbeddedServer(module=str(_built)) as other:
        yield server, other


def norm(value: bytes) -> bytes:
    return _TIME.sub(b"T", value)


def picture(r: redis.Redis, q: Queue) -> dict[bytes, Any]:
    """Every key of the queue: type, normalised value (server order kept), ttl presence."""
    out: dict[bytes, Any] = {}
    requests: list[Any] = []
    for key in sorted(r.scan_iter(match=q.keys.pattern(), count=1000)):
        kind = r.type(key)
        if b":claimreq:" in key:  # a claim's request id is random: compare the records
            requests.append((r.get(key), r.pttl(key) > 0))
            continue
        value: Any
        if b":hist:" in key:
            # the history series: the hour's counts compare (the wait and run sums are
            # timing); the hour is T (the two servers' runs may straddle one)
            ops: list[Any] = []
            for slot in range(60):
                at = slot * HIST_SLOT_BITS
                ops += ["GET", HIST_TYPE["completed"], at]
                ops += ["GET", HIST_TYPE["dead"], at + HIST_AT["dead"]]
            raw = [int(v) for v in r.execute_command("BITFIELD_RO", key, *ops)]
            counts = [sum(raw[0::2]), sum(raw[1::2])]  # a minute may turn between the runs
            # the busiest lanes' table: each lane's hash, ended and dead (wait and run
            # are timing)
            counts += [v for slot in hour_lanes(r, key) for v in slot[:3]]
            hour = q.keys.base.encode() + b"hist:T"
            prev = out.get(hour)
            if prev:
                counts = [a + b for a, b in zip(prev[1], counts)]
            out[hour] = (kind, counts, r.pttl(key) > 0)
            continue
        if kind == b"string":
            value = norm(r.get(key) or b"")
        elif kind == b"hash":
            metrics = b":metrics:" in key
            value = [
                (b"M" if metrics and _MINUTE.match(f) else f, norm(v))
                for f, v in r.hgetall(key).items()
            ]
        elif kind == b"list":
            # an error history and log times carry server times: T, as in a hash
            value = [norm(v) for v in r.lrange(key, 0, -1)]
        elif kind == b"set":
            value = sorted(r.smembers(key))
        elif kind == b"zset":
            # member -> score; a time score is T (ties of times may order differently)
            value = sorted(
                (m, "T" if s >= 1e12 else repr(s)) for m, s in r.zrange(key, 0, -1, withscores=True)
            )
        elif kind == b"stream":  # the audit journal: entry ids are server times
            value = [[(f, norm(v)) for f, v in fields.items()] for _, fields in r.xrange(key)]
        else:
            value = r.dump(key)
        out[key] = (kind, value, r.pttl(key) > 0)
    out[b"claimreq:*"] = sorted(requests)
    return out


def outcome(call: Any) -> Any:
    try:
        return ("ok", call())
    except Exception as exc:
        return ("refused", type(exc).__name__, str(exc))


step = st.one_of(
    st.tuples(
        st.just("enqueue"),
        st.sampled_from(IDS),
        st.sampled_from(GROUPS),
        st.sampled_from([None, 0, 3]),  # priority
        st.sampled_from([None, None, 0, 3_600_000]),  # delay_ms
        st.sampled_from([None, None, "d1", *DEDUPS]),  # dedup_id or a Dedup
        st.sampled_from([None, 1, 2]),  # max_attempts
        st.sampled_from([None, None, 60_000]),  # keep_ms (history for this job)
    ),
    st.tuples(
        st.just("enqueue_many"),
        st.integers(1, 3),
        st.sampled_from(GROUPS),
        st.sampled_from([None, None, *DEDUPS]),
    ),
    st.tuples(st.just("claim")),
    st.tuples(st.just("claim_many"), st.integers(1, 4), st.sampled_from([0, 5000])),
    st.tuples(
        st.just("complete"), st.sampled_from(IDS), st.booleans(), st.sampled_from([None, {"r": 1}])
    ),
    # the batch form, as a worker sends it (an id may come twice: gone the second time)
    st.tuples(
        st.just("complete_batch"),
        st.lists(st.sampled_from(IDS), max_size=3),
        st.booleans(),
        st.sampled_from([None, '{"r":1}']),
    ),
    # the queue's retention (ages long enough that no step's timing decides a trim)
    st.tuples(
        st.just("retention"),
        st.sampled_from([None, 1, 2]),
        st.sampled_from([None, 3_600_000]),
        st.sampled_from([None, 1]),
    ),
    st.tuples(
        st.just("retry"),
        st.sampled_from(IDS),
        st.booleans(),
        st.sampled_from(["boom", 'x/"\\\n\x01é']),
        st.sampled_from([0, 3_600_000]),
        st.sampled_from([None, 1]),
    ),
    st.tuples(st.just("extend"), st.lists(st.sampled_from(IDS), max_size=3), st.booleans()),
    st.tuples(st.just("reprocess"), st.sampled_from(IDS)),
    st.tuples(st.just("remove"), st.sampled_from(IDS)),
    st.tuples(st.just("pause")),
    st.tuples(st.just("resume")),
    st.tuples(st.just("pause_group"), st.sampled_from(["ga", "gb"]), st.booleans()),
    st.tuples(st.just("limit"), st.sampled_from(["ga", "gb"]), st.sampled_from([None, 1, 2])),
    st.tuples(st.just("promote")),
    # flow control (windows long enough that no step's timing frees a start)
    st.tuples(st.just("rate"), st.sampled_from([None, 1, 2, 3]), st.sampled_from([None, 1, 3])),
    st.tuples(st.just("concurrency"), st.sampled_from([None, 1, 2])),
    st.tuples(st.just("lane_rate"), st.sampled_from(["ga", "gb"]), st.sampled_from([None, 1, 2])),
    st.tuples(st.just("lane_rate_default"), st.sampled_from([None, 1])),
)


def run(q: Queue, tokens: dict[str, int], op: tuple[Any, ...]) -> Any:
    verb = op[0]
    if verb == "enqueue":
        _, jid, g, prio, delay, dedup, maxa, keep = op
        kw: dict[str, Any] = {"job_id": jid, "group": g, "keep_ms": keep}
        kw["dedup" if isinstance(dedup, Dedup) else "dedup_id"] = dedup
        if prio is not None:
            kw["priority"] = prio
        if delay is not None:
            kw["delay_ms"] = delay
        if maxa is not None:
            kw["max_attempts"] = maxa
        return q.enqueue({"id": jid}, **kw)
    if verb == "enqueue_many":
        return q.enqueue_many([{"n": i} for i in range(op[1])], group=op[2], dedup=op[3])
    if verb in ("claim", "claim_many"):
        got = [q.claim()] if verb == "claim" else q.claim_many(op[1], lock_ms=op[2])
        for c in got:
            if c is not None:
                tokens[c.id] = c.token
        hold = getattr(got, "hold", None)
        # what held the claim back (its wait in ms is a time: the two servers differ)
        return got, hold and hold.scope
    if verb == "rate":
        if op[1] is None:
            return q.clear_rate_limit()
        burst = None if op[2] is None else min(op[2], op[1])
        return q.set_rate_limit(op[1], 3_600_000, burst=burst)
    if verb == "concurrency":
        return q.clear_concurrency() if op[1] is None else q.set_concurrency(op[1])
    if verb == "lane_rate":
        if op[2] is None:
            return q.clear_group_rate_limit(op[1])
        return q.set_group_rate_limit(op[1], op[2], 3_600_000)
    if verb == "lane_rate_default":
        if op[1] is None:
            return q.clear_group_rate_default()
        return q.set_group_rate_default(op[1], 3_600_000)
    if verb == "complete":
        return q.complete(op[1], tokens.get(op[1], 1) + (0 if op[2] else 7), result=op[3])
    if verb == "complete_batch":
        pairs = [(j, tokens.get(j, 1) + (0 if op[2] else 7)) for j in op[1]]
        results = {p: op[3] for p in pairs} if op[3] else None
        got = q.runner.drive(plans.complete_and_claim(q.ctx, pairs, 0, 30_000, 0, results))
        return (got.gone, got.stale)
    if verb == "retention":
        return q.set_retention(completed=op[1], completed_age_ms=op[2], dead=op[3])
    if verb == "retry":
        _, jid, right, err, delay, maxa = op
        tok = tokens.get(jid, 1) + (0 if right else 7)
        return q.retry(jid, tok, err, delay_ms=delay, max_attempts=maxa)
    if verb == "extend":
        pairs = [(j, tokens.get(j, 1) + (0 if op[2] else 7)) for j in op[1]]
        return q.extend_locks(pairs, 60_000, lock_ms=5000)
    if verb == "reprocess":
        return q.reprocess_job(op[1])
    if verb == "remove":
        return q.remove_job(op[1])
    if verb == "pause":
        return q.pause()
    if verb == "resume":
        return q.resume()
    if verb == "pause_group":
        return q.pause_group(op[1]) if op[2] else q.resume_group(op[1])
    if verb == "limit":
        if op[2] is None:
            return q.clear_group_limit(op[1])
        return q.set_group_limit(op[1], op[2])
    assert verb == "promote"
    return q.promote()


@settings(
    max_examples=int(os.environ.get("EMQ_DIFF_EXAMPLES", "100")),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(ops=st.lists(step, min_size=1, max_size=25))
def test_native_equals_scripts(
    twin_servers: tuple[EmbeddedServer, EmbeddedServer],
    monkeypatch: pytest.MonkeyPatch,
    ops: list[tuple[Any, ...]],
) -> None:
    a_srv, b_srv = twin_servers
    name = f"diff{next(_counter)}"
    ra, rb = redis.Redis.from_url(a_srv.url), redis.Redis.from_url(b_srv.url)
    qa = Queue(name, url=a_srv.url, executor="scripts")
    qb = Queue(name, url=b_srv.url, executor="native")
    # minted ids: the same on both sides (a fresh run of ids per step)
    minted = itertools.count(1)
    seed = [0]

    def fixed_ids(n: int) -> list[str]:
        base = seed[0]
        return [ids.encode(base + k) for k in range(n)]

    monkeypatch.setattr(ids, "new_ids", fixed_ids)

    # the claim request ids: the same on both sides too (when the claim carries one)
    def fixed_rid() -> str:  # each side claims at most once per step
        return f"r{seed[0]}"

    monkeypatch.setattr(claiming, "request_id", fixed_rid)
    # and the audit request ids of the re-sendable audited verbs (journal entries' req)
    monkeypatch.setattr(journal_mod, "request_id", fixed_rid)
    pa, pb = ra.pubsub(), rb.pubsub()
    pa.subscribe(qa.keys.events)
    pb.subscribe(qb.keys.events)
    try:
        assert qa.counts() == qb.counts()  # each runner asks the server for the module
        assert qb.ctx.executor.native is True and qa.ctx.executor.native is False
        ta: dict[str, int] = {}
        tb: dict[str, int] = {}
        for i, op in enumerate(ops):
            seed[0] = (next(minted) << 30) + i
            got_a = outcome(lambda op=op: run(qa, ta, op))
            got_b = outcome(lambda op=op: run(qb, tb, op))
            assert got_a == got_b, f"step {i} {op}: replies differ"
            assert picture(ra, qa) == picture(rb, qb), f"step {i} {op}: keys differ"
        ra.publish(qa.keys.events, "END")
        rb.publish(qb.keys.events, "END")
        assert events(pa) == events(pb)
    finally:
        pa.close()
        pb.close()
        for r, q in ((ra, qa), (rb, qb)):
            for key in r.scan_iter(match=q.keys.pattern(), count=1000):
                r.delete(key)
            q.close()
            r.close()


def events(p: Any) -> list[bytes]:
    """Every event published on the channel, up to the END published after the last step."""
    out: list[bytes] = []
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        m = p.get_message(timeout=0.5)
        if m is not None and m["type"] == "message":
            if m["data"] == b"END":
                return out
            out.append(norm(m["data"]))
    raise AssertionError("the END marker never came")


# ---- flows: a flow child's ending settled by EMQ.COMPLETE / EMQ.RETRY themselves ----


def _fid(n: int) -> str:
    return f"JOB{n:011d}"


def _kid(n: int, queue: str | None = None, fail: bool = False, **kw: Any) -> Flow:
    return Flow(queue, {"n": n, "fail": fail}, id=_fid(n), **kw)


def _flow_case(case: str, other: str) -> Flow:
    """The flow of a case; `other` is the second queue's name (cross-queue children)."""
    if case == "fan_in":  # one queue: results, a lane, the last one by the batch form
        kids = [_kid(2), _kid(3, group="g"), _kid(4, on_fail="ignore"), _kid(5)]
        return Flow(None, "root", kids, id=_fid(1))
    if case == "fail_up":  # a leaf dies: its parent dies (fail_parent), and so does the root
        mid = Flow(None, "mid", [_kid(3, fail=True), _kid(4)], id=_fid(2))
        return Flow(None, "root", [mid, _kid(5)], id=_fid(1))
    if case == "policies":  # each policy on a dead child; then the last one completes
        kids = [
            _kid(2, fail=True, on_fail="ignore"),
            _kid(3, fail=True, on_fail="remove_dependency"),
            _kid(4, fail=True, on_fail="continue"),
            _kid(5),
        ]
        return Flow(None, "root", kids, id=_fid(1))
    if case == "trim":  # a parent gone dead, then trimmed from `dead` (below)
        return Flow(None, "root", [_kid(2, fail=True)], id=_fid(1))
    # cross: children in the other queue (outbox entries: reply 2, dead_relay, the batch's
    # ('', 'relay')), and a parent there whose death goes up to this queue's root
    far_mid = Flow(other, "mid", [_kid(5, other, fail=True)], id=_fid(4))
    kids = [_kid(2, other), _kid(3, other, fail=True, on_fail="ignore"), far_mid, _kid(6)]
    return Flow(None, "root", kids, id=_fid(1))


def _unordered(p: dict[bytes, Any]) -> dict[bytes, Any]:
    """A picture with each hash's fields sorted: a parent's `last_error` naming a chain
    of children outgrows the listpack encoding, and a hashtable's order is the server's
    own (it differs between two servers whatever wrote the hash)."""
    return {
        k: (v[0], sorted(v[1]), v[2]) if isinstance(v, tuple) and v[0] == b"hash" else v
        for k, v in p.items()
    }


def _settle(queue: Queue, c: Any, case: str) -> Any:
    body = c.payload
    if isinstance(body, dict) and body.get("fail"):
        return queue.retry(c.id, c.token, 'no\n"way"/é', max_attempts=1)
    if isinstance(body, dict) and body["n"] in (5, 2) and case in ("fan_in", "cross"):
        return queue.complete_many([(c.id, c.token)])
    return queue.complete(c.id, c.token, result=body)


def _play(q: Queue, o: Queue, case: str) -> list[Any]:
    """Serve both queues until nothing is left to claim: a job whose payload says fail goes
    dead (max_attempts=1), the others complete (result = payload); `fan_in`'s last child
    and cross's second completion go through complete_many. Returns every reply."""
    if case == "trim":  # keep one of each: the native endings trim flow parents' rows
        q.set_retention(completed=1, dead=1)
    got: list[Any] = [outcome(lambda: q.enqueue_flow(_flow_case(case, o.name)))]
    if case == "trim":
        # a kept parent (flowkept) with its child's result, trimmed from `completed`
        got.append(outcome(lambda: q.enqueue_flow(Flow(None, "r2", [_kid(4)], id=_fid(3)))))
        got.append(q.enqueue({"n": 5, "fail": True}, job_id=_fid(5)))
        got.append(q.enqueue({"n": 6}, job_id=_fid(6)))
    for _ in range(20):
        progressed = False
        for queue in (o, q):
            c = queue.claim(lease_ms=60_000)
            if c is None:
                continue
            progressed = True
            got.append(outcome(functools.partial(_settle, queue, c, case)))
            got.append(outcome(lambda: o.relay_flows()))
        if not progressed:
            break
    return got


@pytest.mark.parametrize("case", ["fan_in", "fail_up", "policies", "cross", "trim"])
def test_native_flow_endings_equal_scripts(
    twin_servers: tuple[EmbeddedServer, EmbeddedServer],
    monkeypatch: pytest.MonkeyPatch,
    case: str,
) -> None:
    a_srv, b_srv = twin_servers
    name = f"flowdiff{next(_counter)}"
    deferred: list[Any] = []
    real = exchange_mod._deferred

    def counted(reply: Any) -> bool:
        hit = real(reply)
        if hit:
            deferred.append(reply)
        return hit

    monkeypatch.setattr(exchange_mod, "_deferred", counted)
    monkeypatch.setattr(claiming, "request_id", lambda: "r0")
    sides = []
    for url, executor in ((a_srv.url, "scripts"), (b_srv.url, "native")):
        r = redis.Redis.from_url(url)
        q = Queue(name, url=url, executor=executor)
        o = Queue(name + "o", url=url, executor=executor)
        sides.append((r, q, o))
    try:
        played = []
        for r, q, o in sides:
            p = r.pubsub()
            p.subscribe(q.keys.events, o.keys.events)
            p.get_message(timeout=1)
            p.get_message(timeout=1)
            before = len(deferred)
            replies = _play(q, o, case)
            for qq in (q, o):
                r.publish(qq.keys.events, "END")
            played.append(
                (
                    replies,
                    _unordered(picture(r, q)),
                    _unordered(picture(r, o)),
                    events(p),
                    len(deferred) - before,
                )
            )
            p.close()
        (ra, pqa, poa, eva, da), (rb, pqb, pob, evb, db) = played
        assert ra == rb
        assert pqa == pqb and poa == pob
        assert eva == evb
        assert sides[1][1].ctx.executor.native is True
        # the native side deferred nothing to the scripts (EMQFLOW): children and parents
        assert (da, db) == (0, 0), deferred
        if case == "trim":  # the parents' rows went with their :deps/:kids/:kidfails
            r, q, _ = sides[1]
            left = [k for k in r.scan_iter(match=q.keys.pattern()) if b":job:" in k]
            assert sorted(left) == [
                q.keys.job(_fid(5)).encode(),
                (q.keys.job(_fid(5)) + ":errors").encode(),
                q.keys.job(_fid(6)).encode(),
            ]
    finally:
        for r, q, o in sides:
            for qq in (q, o):
                for key in r.scan_iter(match=qq.keys.pattern(), count=1000):
                    r.delete(key)
                qq.close()
            r.close()
