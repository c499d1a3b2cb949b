"""Dedup under concurrent producers, as a property: several clients enqueue on one dedup id
at once (each its own connection), between endings of every kind (complete, dead, remove,
drain, obliterate, a lost lease, the operator's release, an enqueue whose reply was lost
and is sent again). After every round:

- at most one live owner per id: simple and throttle have at most one live job with the
  id; debounce at most one waiting; keep_last at most one runnable and one held;
- the key names a live job of the id, or a throttle window, or nothing;
- never a stuck key: once every job has ended, the id is free (a throttle's window
  aside) and the next enqueue makes a new job.

Run under both executors (the native enqueue's dedup must keep the same laws).
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Generator
from typing import Any

import pytest
import redis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from echomq import Dedup, Queue, Refused
from echomq.lifecycle import produce
from echomq.scripts import Eval

pytestmark = pytest.mark.both_executors

CLIENTS = 4
LIVE = ("pending", "active", "scheduled")
MODES = {
    "simple": Dedup("p"),
    "throttle": Dedup("p", mode="throttle", ttl_ms=60_000),
    "debounce": Dedup("p", mode="debounce", delay_ms=60_000),
    "keep_last": Dedup("p", mode="keep_last"),
}
ENDINGS = st.sampled_from(
    ["none", "claim", "complete", "dead", "remove", "drain", "reap", "obliterate", "release"]
)


def _once(op: Eval) -> Generator[Eval, Any, Any]:
    return (yield op)


def enqueue_lost_reply(q: Queue, payload: Any, spec: Dedup) -> None:
    """An enqueue sent, its reply lost, and sent again in its re-send form: the second
    answers what the first did (nothing is made twice)."""
    op = next(produce.enqueue(q.ctx, payload, dedup=spec))
    assert isinstance(op, Eval)
    first = q.runner.drive(_once(op))
    assert q.runner.drive(_once(op.resent())) == first


def jobs_of(r: redis.Redis, q: Queue) -> dict[str, dict[str, str]]:
    """Every row of the queue with the dedup id, by id (the queue's sets list them)."""
    out = {}
    for key in (q.keys.pending, q.keys.active, q.keys.schedule, q.keys.dead):
        for jid in r.zrange(key, 0, -1):
            row = r.hgetall(q.keys.job(jid))
            if row.get("dedup") == "p":
                out[jid] = row
    return out


def check(r: redis.Redis, q: Queue, mode: str, slack: int) -> None:
    """The laws; ``slack``: how many more live jobs the operator's releases since the
    queue was last emptied allow (a release frees the id while its job lives on)."""
    rows = jobs_of(r, q)
    live = {j: f for j, f in rows.items() if f.get("state") in LIVE}
    held = {j for j, f in live.items() if "dedup_behind" in f}
    # a debounce's waiting jobs that never started (a lost lease puts a started one back)
    fresh = {
        j
        for j, f in live.items()
        if f["state"] != "active" and j not in held and f["attempts"] == "0"
    }
    if mode in ("simple", "throttle"):
        assert len(live) <= 1 + slack, live
    elif mode == "debounce":
        assert len(fresh) <= 1 + slack, live
    else:
        assert len(held) <= 1 and len(live) - len(held) <= 1 + slack, live
    key = r.get(q.keys.dedup("p"))
    if key is not None and key not in live:
        # a key naming no live job: a throttle window, or free (the owner is gone)
        assert r.pttl(q.keys.dedup("p")) > 0 or q.dedup_owner("p") is None
    if live and mode != "throttle" and not slack:
        # the live jobs' id is held: by one of them
        assert key in live


def end(q: Queue, what: str, tokens: dict[str, int]) -> None:
    if what == "claim":
        c = q.claim()
        if c is not None:
            tokens[c.id] = c.token
    elif what in ("complete", "dead") and tokens:
        jid, tok = tokens.popitem()
        with contextlib.suppress(Refused):  # reaped or removed meanwhile: stale or gone
            if what == "complete":
                q.complete(jid, tok)
            else:
                q.retry(jid, tok, "boom", max_attempts=1)
    elif what == "remove":
        for state in ("pending", "scheduled"):
            for jid in q.browse(state, 1):
                q.remove_job(jid)
    elif what == "drain":
        q.drain(include_schedule=True)
    elif what == "reap":
        c = q.claim(lease_ms=1)
        time.sleep(0.005)
        q.reap()
        if c is not None:
            tokens.pop(c.id, None)
    elif what == "obliterate":
        wipe(q)
        tokens.clear()
    elif what == "release":
        q.release_dedup("p")


def wipe(q: Queue) -> None:
    q.pause()
    while not q.obliterate(force=True):
        pass


def burst(queues: list[Queue], spec: Dedup, lost: bool, n: int) -> None:
    """Each client enqueues once, all at the same time (one of them losing its reply)."""
    gate = threading.Barrier(len(queues))
    errors: list[BaseException] = []

    def client(k: int, q: Queue) -> None:
        try:
            gate.wait()
            if lost and k == 0:
                enqueue_lost_reply(q, {"n": n, "k": k}, spec)
            else:
                q.enqueue({"n": n, "k": k}, dedup=spec)
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=client, args=(k, q)) for k, q in enumerate(queues)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors


@pytest.mark.parametrize("mode", sorted(MODES))
def test_one_owner_and_no_stuck_key_under_concurrent_producers(
    make_queue: Callable[..., Queue], qname: str, r: redis.Redis, mode: str
) -> None:
    spec = MODES[mode]
    queues = [make_queue(qname) for _ in range(CLIENTS)]
    q = queues[0]
    runs = iter(range(10**6))

    @settings(
        max_examples=15,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )
    @given(st.lists(st.tuples(ENDINGS, st.booleans()), min_size=1, max_size=8))
    def run(rounds: list[tuple[str, bool]]) -> None:
        wipe(q)  # each example starts from nothing, whatever the last one left
        tokens: dict[str, int] = {}
        slack = 0
        for what, lost in rounds:
            burst(queues, spec, lost, next(runs))
            check(r, q, mode, slack)
            end(q, what, tokens)
            if what == "release":
                # the id is free while its job lives on (and a held keep_last job is
                # let go): up to two more jobs of the id may be live
                slack += 2
            elif what in ("drain", "obliterate"):
                slack = 0 if not r.zcard(q.keys.active) else slack
            check(r, q, mode, slack)
        # every job ends: the id is free (a throttle's window aside), nothing stuck
        wipe(q)
        if mode == "throttle":
            assert r.exists(q.keys.dedup("p")) == 0  # obliterate found the window
        assert q.dedup_owner("p") is None
        fresh = q.enqueue({"fresh": True}, dedup=spec)
        owner = q.dedup_owner("p")
        assert owner is not None and owner.job_id == fresh

    run()
