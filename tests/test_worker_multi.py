"""One worker over several queues (issue 28, item 2).

``Worker([a, b, c], handler, order=...)``: ``priority`` serves the first queue with work
(RQ's rule), ``fair`` shares the slots among the queues with work so none starves; one
blocking wait over every queue's wake list; each queue keeps its own pause; the
registry lists the worker under each queue; a mapping keyed by queue names gives each
queue its own handler.
"""

from __future__ import annotations

import asyncio
import collections
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
import redis

from echomq import InvalidArgument, JobContext, JobGone, Queue, Worker, WorkerConfig, lifecycle
from echomq.embedded import EmbeddedServer
from echomq.scripts import all_scripts
from echomq.worker import plans
from echomq.worker.multi import SharedWait, check_order, per_queue
from echomq.worker.pipeline import Raised, in_step
from worker_support import FAST, job_keys, running, wait_until

Make = Callable[..., Queue]


def three(make_queue: Make, qname: str) -> list[Queue]:
    return [make_queue(f"{qname}-{tag}") for tag in ("hi", "mid", "lo")]


def test_priority_serves_the_first_queue_with_work(
    make_queue: Make, qname: str, r: redis.Redis
) -> None:
    qs = three(make_queue, qname)
    for q in qs:
        q.enqueue_many([{"n": i} for i in range(8)])
    seen: list[str] = []

    def handle(job: JobContext) -> None:
        seen.append(job.queue)

    w = Worker(qs, handle, config=FAST, concurrency=1)
    with running(w):
        wait_until(lambda: len(seen) == 24)
    assert seen == [qs[0].name] * 8 + [qs[1].name] * 8 + [qs[2].name] * 8
    for q in qs:
        assert q.counts().completed == 8 and q.counts().pending == 0
        assert job_keys(r, q) == set()
    assert w.stats.completed == 24 and w.stats_of(qs[1].name).completed == 8


def test_priority_takes_new_high_work_before_queued_low_work(make_queue: Make, qname: str) -> None:
    hi, lo = make_queue(f"{qname}-hi"), make_queue(f"{qname}-lo")
    lo.enqueue_many([{"n": i} for i in range(20)])
    seen: list[str] = []
    first = threading.Event()

    def handle(job: JobContext) -> None:
        seen.append(job.queue)
        if len(seen) == 1:
            first.set()
            time.sleep(0.2)  # the high job arrives while this one runs

    with running(Worker([hi, lo], handle, config=FAST, concurrency=1)):
        first.wait(10)
        hi.enqueue({"urgent": True})
        wait_until(lambda: len(seen) == 21)
    assert seen[0] == lo.name
    # served at the next free slot (a claim already in flight may land first)
    assert seen.index(hi.name) <= 3


def test_fair_never_starves_a_queue(make_queue: Make, qname: str) -> None:
    big, small = make_queue(f"{qname}-big"), make_queue(f"{qname}-small")
    big.enqueue_many([{"n": i} for i in range(200)])
    seen: list[str] = []

    def handle(job: JobContext) -> None:
        seen.append(job.queue)
        time.sleep(0.002)

    with running(Worker([big, small], handle, config=FAST, concurrency=4, order="fair")):
        wait_until(lambda: len(seen) >= 20)
        small.enqueue_many([{"n": i} for i in range(20)])
        wait_until(lambda: small.counts().completed == 20)
        at = len(seen)
        wait_until(lambda: big.counts().completed == 200)
    # the small queue's 20 went through while the big one still had most of its work
    assert at < 200
    # and, while both had work, the slots were shared: about half each
    window = seen[seen.index(small.name) :][:30]
    counts = collections.Counter(window)
    assert counts[small.name] >= 10 and counts[big.name] >= 5


def test_fair_shares_from_the_start(make_queue: Make, qname: str) -> None:
    qs = three(make_queue, qname)
    for q in qs:
        q.enqueue_many([{"n": i} for i in range(30)])
    seen: list[str] = []

    def handle(job: JobContext) -> None:
        seen.append(job.queue)
        time.sleep(0.003)

    with running(Worker(qs, handle, config=FAST, concurrency=3, order="fair")):
        wait_until(lambda: len(seen) == 90)
    head = collections.Counter(seen[:30])
    assert all(head[q.name] >= 6 for q in qs), head


def test_fair_turns_claim_several_jobs_at_once(
    make_queue: Make, qname: str, r: redis.Redis
) -> None:
    # the queue whose turn it is fills the free slots: a claim carries several jobs,
    # not one a queue (an equal split of 8 slots over 4 queues would claim by twos at
    # best, and by ones as single slots free up). Counted on the server: every claim
    # call in the SLOWLOG (this test's private server logs every command meanwhile)
    qs = [make_queue(f"{qname}-{i}") for i in range(4)]
    for q in qs:
        q.enqueue_many([{"n": i} for i in range(100)])
    seen: list[str] = []
    claim = next(s for s in all_scripts() if s.name == "claim")
    names = (claim.sha, claim.library.name if claim.library else claim.sha)
    old = r.config_get("slowlog-*")
    r.config_set("slowlog-max-len", 100_000)
    r.config_set("slowlog-log-slower-than", 0)
    r.slowlog_reset()
    try:
        with running(
            Worker(qs, lambda job: seen.append(job.queue), config=FAST, concurrency=8, order="fair")
        ):
            wait_until(lambda: sum(q.counts().completed for q in qs) == 400)
        log = r.slowlog_get(100_000)
    finally:
        r.config_set("slowlog-log-slower-than", old["slowlog-log-slower-than"])
        r.config_set("slowlog-max-len", old["slowlog-max-len"])
    claims = [e for e in log if _is_claim(e["command"], names)]
    assert 0 < len(claims) < 150  # more than two jobs a claim on average
    # every queue was served from the start: each had work among the first 100
    head = collections.Counter(seen[:100])
    assert all(head[q.name] >= 10 for q in qs), head
    assert all(job_keys(r, q) == set() for q in qs)


def _is_claim(command: Any, names: tuple[str, str]) -> bool:
    """Whether a logged command is a claim: its script by ``EVALSHA`` (its sha) or
    ``FCALL`` (its function's name), or the native command."""
    words = (command if isinstance(command, str) else command.decode()).split()
    if not words:
        return False
    verb = words[0].upper()
    return (verb in ("EVALSHA", "FCALL") and words[1] in names) or verb == "EMQ.CLAIM"


def test_each_queue_keeps_its_own_pause(make_queue: Make, qname: str) -> None:
    a, b = make_queue(f"{qname}-a"), make_queue(f"{qname}-b")
    b.pause()
    a.enqueue_many([{"n": i} for i in range(5)])
    b.enqueue_many([{"n": i} for i in range(5)])
    seen: list[str] = []

    with running(Worker([a, b], lambda job: seen.append(job.queue), config=FAST)):
        wait_until(lambda: a.counts().completed == 5)
        time.sleep(0.1)
        assert b.counts().pending == 5 and b.counts().active == 0
        b.resume()
        wait_until(lambda: b.counts().completed == 5)
    assert collections.Counter(seen) == {a.name: 5, b.name: 5}


def test_one_blocking_wait_over_every_queue(make_queue: Make, qname: str, r: redis.Redis) -> None:
    qs = [make_queue(f"{qname}-{i}") for i in range(5)]
    seen: list[str] = []
    # a beat of a second: the wait times out (and is sent again) once a second
    cfg = WorkerConfig(lease_ms=3000, grace_ms=2000)
    with running(Worker(qs, lambda job: seen.append(job.queue), config=cfg)):

        def blocked() -> list[dict[str, Any]]:
            # blocked now (flag b) in a BLPOP
            clients = r.client_list()
            return [c for c in clients if c.get("cmd") == "blpop" and "b" in c["flags"]]

        waits = wait_until(blocked)
        assert len(waits) == 1  # ONE blocked call for the five queues
        samples = []
        for _ in range(20):
            samples.append(len(blocked()))
            time.sleep(0.01)
        assert max(samples) == 1
        # each queue's job wakes the worker through that wait
        for q in reversed(qs):
            q.enqueue({"q": q.name})
        wait_until(lambda: len(seen) == 5)
        wait_until(lambda: len(blocked()) == 1)
    assert sorted(seen) == sorted(q.name for q in qs)


def test_the_registry_lists_the_worker_under_each_queue(make_queue: Make, qname: str) -> None:
    a, b = make_queue(f"{qname}-a"), make_queue(f"{qname}-b")
    w = Worker([a, b], lambda job: None, config=FAST, concurrency=3, order="fair")
    with running(w):
        (wa,) = wait_until(a.workers)
        (wb,) = wait_until(b.workers)
        assert wa.id == wb.id == w._engine.wid
        assert wa.queues == wb.queues == [a.name, b.name]
        assert wa.order == "fair" and wa.batch == "" and wa.concurrency == 3
    assert a.workers() == [] and b.workers() == []


def test_per_queue_handlers(make_queue: Make, qname: str) -> None:
    a, b = make_queue(f"{qname}-a"), make_queue(f"{qname}-b")
    a.enqueue({"n": 1}, keep_ms=60_000)
    b.enqueue({"n": 2}, keep_ms=60_000)
    got: list[tuple[str, str]] = []
    handlers = {
        a.name: lambda job: got.append(("A", job.queue)),
        b.name: {"*": lambda job: got.append(("B", job.queue))},
    }
    with running(Worker([a, b], handlers, config=FAST)):
        wait_until(lambda: len(got) == 2)
    assert sorted(got) == [("A", a.name), ("B", b.name)]


def test_bad_arguments_are_refused_before_any_io(make_queue: Make, qname: str) -> None:
    a = make_queue(f"{qname}-a")
    with pytest.raises(InvalidArgument, match="named twice"):
        Worker([a.name, a.name], lambda job: None)
    with pytest.raises(InvalidArgument, match="no queue"):
        Worker([], lambda job: None)
    with pytest.raises(InvalidArgument, match="order"):
        Worker([a.name, "other"], lambda job: None, order="random")  # type: ignore[arg-type]
    with pytest.raises(InvalidArgument, match="no handler for queue"):
        Worker(["x1", "x2", "x3"], {"x1": print, "x2": print})
    assert check_order("fair") == "fair"
    # a mapping that is not keyed by the queues is a job-name table, shared
    table = {"send": print, "*": print}
    assert per_queue(table, ["x1", "x2"]) == [table, table]


def test_a_single_queue_worker_is_unchanged(q: Queue) -> None:
    # one queue: no coordinator, the wait with the claim behind it (issue 4)
    w = Worker(q, lambda job: None, config=WorkerConfig(lease_ms=3000))
    assert w._engine.coord is None and w.queue_names == [q.name]
    assert w._engine.shape == {}


async def test_the_shared_wait_takes_in_a_key_that_joins_while_it_blocks(
    server: EmbeddedServer, qname: str
) -> None:
    import redis.asyncio as aredis

    blocker = aredis.Redis.from_url(server.url)
    control = aredis.Redis.from_url(server.url)
    wait = SharedWait(blocker, control, timeout_s=30.0)  # no timeout within the test
    k1, k2 = f"{qname}:w1", f"{qname}:w2"
    try:
        first = asyncio.ensure_future(wait.wait(k1))
        for _ in range(200):  # until the BLPOP on k1 alone is in place
            if wait._blocked == frozenset({k1}):
                break
            await asyncio.sleep(0.005)
        second = asyncio.ensure_future(wait.wait(k2))  # unblocks, waits on both
        await control.rpush(k2, "1", "2", "3")
        await asyncio.wait_for(second, 5)  # woken by its token, not by the timeout
        assert not first.done()
        assert await control.exists(k2) == 0  # the stale tokens went with the wake
        await control.rpush(k1, "1")
        await asyncio.wait_for(first, 5)
        # a waiter after the pump has wound down starts a new one
        third = asyncio.ensure_future(wait.wait(k2))
        await asyncio.sleep(0.05)
        await control.rpush(k2, "1")
        await asyncio.wait_for(third, 5)
    finally:
        await wait.close()
        await blocker.aclose()
        await control.aclose()


def _calls(info: dict[str, Any], command: str) -> int:
    return int(info.get(f"cmdstat_{command}", {}).get("calls", 0))


def _blocked(r: redis.Redis) -> list[dict[str, Any]]:
    return [c for c in r.client_list() if c.get("cmd") == "blpop" and "b" in c["flags"]]


def test_idle_queues_stay_in_one_wait_and_beat_together(
    make_queue: Make, qname: str, r: redis.Redis, executor: str
) -> None:
    # five empty queues, a beat of 50 ms: across ten beats the wait is never ended
    # to be sent again (each queue's claim at the timeout used to leave the BLPOP and
    # join it back with a CLIENT UNBLOCK), and no queue claims (nothing is ready)
    qs = [make_queue(f"{qname}-{i}") for i in range(5)]
    cfg = WorkerConfig(lease_ms=400, beat_ms=50, grace_ms=2000)
    w = Worker(qs, lambda job: None, config=cfg)
    with running(w):
        for q in qs:
            wait_until(q.workers)  # every queue's record written by the shared beat
        wait_until(lambda: len(_blocked(r)) == 1)
        time.sleep(0.1)
        before = r.info("commandstats")
        time.sleep(0.5)
        after = r.info("commandstats")
        assert max(len(_blocked(r)) for _ in range(20)) == 1
        records = [q.workers() for q in qs]
    assert _calls(after, "client|unblock") == _calls(before, "client|unblock")
    if executor == "native":
        assert _calls(after, "emq.claim") == _calls(before, "emq.claim")
    assert w.stats.claimed == 0 and w.stats.errors == 0
    assert all(len(rec) == 1 and rec[0].id == w._engine.wid for rec in records)
    for q in qs:  # nothing left behind: the worker left each registry, no job made
        assert q.workers() == []
        assert q.counts().pending == 0 and q.counts().active == 0


def test_work_without_its_wake_token_is_found_at_the_beat(
    make_queue: Make, qname: str, r: redis.Redis
) -> None:
    # the beat's timeout asks which waiting queues have work a claim could take and
    # wakes those: a job whose wake token is gone is served within a beat or two
    qs = three(make_queue, qname)
    lo = qs[-1]
    seen: list[str] = []
    cfg = WorkerConfig(lease_ms=1000, beat_ms=100, grace_ms=2000)
    with running(Worker(qs, lambda job: seen.append(job.id), config=cfg)):
        wait_until(lambda: len(_blocked(r)) == 1)
        lo.pause()
        job_id = lo.enqueue({"n": 1})
        time.sleep(0.05)  # the worker may pop its token: its claim finds the queue paused
        r.delete(lo.keys.wake)
        r.hdel(lo.keys.meta, "paused")  # resumed with no token pushed
        assert r.llen(lo.keys.wake) == 0
        wait_until(lambda: seen == [job_id], timeout=3.0)
        wait_until(lambda: lo.counts().completed == 1)
    assert lo.counts().pending == 0 and lo.counts().active == 0
    assert r.exists(lo.keys.job(job_id)) == 0


def test_plans_in_step_share_each_round_trip(make_queue: Make, qname: str) -> None:
    # in_step: each plan gets its own replies (a batch's, a single op's, an error
    # thrown in as the runner would), its result or what it raised
    a, b = make_queue(f"{qname}-a"), make_queue(f"{qname}-b")
    a.enqueue_many([{"n": i} for i in range(3)])
    b.enqueue({"n": 9})
    gone = a.enqueue({"n": 99})
    a.remove_job(gone)
    answer = a.runner.drive(
        in_step(
            [
                lifecycle.claim_many(a.ctx, 2, lease_ms=5000),
                lifecycle.claim_many(b.ctx, 5, lease_ms=5000),
                lifecycle.complete(a.ctx, gone, 1),  # refused: the job is gone
                plans.may_have_work(a.ctx),
            ]
        )
    )
    got_a, got_b, refused, more = answer
    assert [c.payload for c in got_a] == [{"n": 0}, {"n": 1}]
    assert [c.payload for c in got_b] == [{"n": 9}]
    assert isinstance(refused, Raised) and isinstance(refused.error, JobGone)
    assert more is True
    ca, cb = a.counts(), b.counts()
    assert (ca.pending, ca.active, cb.pending, cb.active) == (1, 2, 0, 1)
    assert b.runner.drive(plans.may_have_work(b.ctx)) is False
