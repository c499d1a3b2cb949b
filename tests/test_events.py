"""Lifecycle events: every transition publishes, subscribers get typed events in order,
and a stream subscribes again after its connection is cut."""

from __future__ import annotations

import dataclasses
from typing import Any

import redis

from echomq import AsyncQueue, Backoff, Event, JobContext, Queue, Worker
from echomq.events import decode, every_queue
from worker_support import FAST, running, wait_until


def names(events: list[Event]) -> list[str]:
    return [e.name for e in events]


def collect(stream: Any, until: str, limit: int = 50) -> list[Event]:
    """Events off a sync stream up to and including the first named ``until``."""
    out: list[Event] = []
    while len(out) < limit:
        event = stream.get(timeout=10)
        assert event is not None, f"no event after {names(out)}"
        out.append(event)
        if event.name == until:
            return out
    raise AssertionError(f"no {until!r} in {names(out)}")


def test_decode_reads_event_messages_and_ignores_the_rest() -> None:
    msg = {"type": "message", "data": b'{"event":"active","job":"JOB1","attempt":2}'}
    assert decode("q", msg) == Event("q", "active", "JOB1", {"attempt": 2})
    assert decode("q", {"type": "message", "data": '{"event":"paused"}'}) == Event("q", "paused")
    assert decode("q", {"type": "subscribe", "data": 1}) is None
    assert decode("q", {"type": "message", "data": "not json"}) is None
    assert decode("q", {"type": "message", "data": '{"job":"JOB1"}'}) is None
    assert decode("q", None) is None
    assert Event("q", "dead", "J", {"error": "x"}).get("error") == "x"


def test_a_subscriber_sees_one_jobs_events_in_order(q: Queue, r: redis.Redis) -> None:
    async def handle(job: JobContext) -> None:
        await job.progress(50)
        await job.log("half way")

    with q.events() as stream, running(Worker(q, handle, config=FAST)):
        jid = q.enqueue({"n": 1})
        got = [e for e in collect(stream, "completed") if e.job == jid]
    assert names(got) == ["enqueued", "active", "progress", "completed"]
    assert got[1].fields == {"attempt": 1}
    assert got[2].fields == {"progress": 50}
    assert all(e.queue == q.name for e in got)


def test_failures_publish_retrying_then_dead(q: Queue, r: redis.Redis) -> None:
    def boom(job: JobContext) -> None:
        raise KeyError("nope")

    cfg = dataclasses.replace(FAST, backoff=Backoff.fixed(0))
    with q.events() as stream, running(Worker(q, boom, config=cfg)):
        jid = q.enqueue("x", max_attempts=2)
        got = [e for e in collect(stream, "dead") if e.job == jid]
    assert names(got) == ["enqueued", "active", "retrying", "promoted", "active", "dead"]
    assert got[2].get("failures") == 1 and got[2].get("error").startswith("KeyError: 'nope'")
    assert got[5].get("failures") == 2


def test_every_transition_publishes_its_event(q: Queue, r: redis.Redis) -> None:
    with q.events() as stream:
        a = q.enqueue("a")
        ca = q.claim()
        assert ca is not None
        q.update_progress(a, "half")
        q.add_log(a, "line")
        q.delay(a, ca.token, 0)
        q.promote()
        ca = q.claim()
        assert ca is not None
        q.retry(a, ca.token, "err", max_attempts=1)
        q.reprocess_job(a)
        ca = q.claim(lease_ms=1)
        assert ca is not None
        wait_until(lambda: q.reap() == 1)
        ca = q.claim()
        assert ca is not None
        q.release(a, ca.token)
        ca = q.claim()
        assert ca is not None
        q.complete(a, ca.token)
        b = q.enqueue("b")
        q.remove_job(b)
        q.enqueue("c")
        q.pause()
        q.drain()
        q.resume()
        q.pause()
        assert q.obliterate()
        got = collect(stream, "obliterated")
    assert names(got) == [
        "enqueued",
        "active",
        "progress",
        "delayed",
        "promoted",
        "active",
        "dead",
        "reprocessed",
        "active",
        "stalled",
        "active",
        "released",
        "active",
        "completed",
        "enqueued",
        "removed",
        "enqueued",
        "paused",
        "drained",
        "resumed",
        "paused",
        "obliterated",
    ]
    assert got[2].fields == {"progress": "half"}
    assert got[11].fields == {"attempt": 4}
    assert got[18].fields == {"count": 1}


def test_the_stream_subscribes_again_after_a_lost_connection(q: Queue, r: redis.Redis) -> None:
    with q.events() as stream:
        q.pause()
        assert stream.get(timeout=10) == Event(q.name, "paused")
        # cut every pub/sub connection of this server: the stream's among them
        assert r.execute_command("CLIENT", "KILL", "TYPE", "pubsub") >= 1

        def heard() -> bool:
            q.enqueue("x")  # published again and again until the new subscription hears one
            event = stream.get(timeout=0.05)
            return event is not None and event.name == "enqueued"

        wait_until(heard)
        assert stream.reconnects >= 1


async def test_async_stream_in_order(aq: AsyncQueue, r: redis.Redis) -> None:
    async with aq.events() as stream:
        jid = await aq.enqueue("x")
        c = await aq.claim()
        assert c is not None
        await aq.complete(jid, c.token)
        got = []
        async for event in stream:
            got.append(event)
            if event.name == "completed":
                break
    assert [(e.name, e.job) for e in got] == [
        ("enqueued", jid),
        ("active", jid),
        ("completed", jid),
    ]
    async with aq.events() as stream:
        assert await stream.get(timeout=0.01) is None  # nothing published: a timeout


async def test_async_stream_subscribes_again_after_a_lost_connection(
    aq: AsyncQueue, r: redis.Redis
) -> None:
    async with aq.events() as stream:
        await aq.enqueue("x")
        first = await stream.get(timeout=10)
        assert first is not None and first.name == "enqueued"
        assert r.execute_command("CLIENT", "KILL", "TYPE", "pubsub") >= 1
        for _ in range(200):
            await aq.enqueue("x")
            event = await stream.get(timeout=0.05)
            if event is not None and event.name == "enqueued":
                break
        else:
            raise AssertionError("no event after the connection was cut")
        assert stream.reconnects >= 1


async def test_every_queue_stream_names_each_events_queue(
    aq: AsyncQueue, server: Any, r: redis.Redis
) -> None:
    other = AsyncQueue(aq.name + "-other", url=server.url)
    try:
        async with every_queue(aq.client) as stream:
            a = await aq.enqueue("x")
            b = await other.enqueue("y")
            got = []
            while len(got) < 2:
                event = await stream.get(timeout=10)
                assert event is not None
                if event.queue in (aq.name, other.name):
                    got.append((event.queue, event.name, event.job))
        assert got == [(aq.name, "enqueued", a), (other.name, "enqueued", b)]
        assert r.exists(aq.keys.job(a), other.keys.job(b)) == 2
    finally:
        await other.pause()
        while not await other.obliterate(force=True):
            pass
        await other.aclose()
