"""``Queue`` and ``AsyncQueue`` expose the same verbs with the same signatures."""

from __future__ import annotations

import inspect

import pytest
import redis
import redis.asyncio

from echomq import AsyncQueue, InvalidName, Queue, lifecycle
from echomq.embedded import EmbeddedServer, free_port
from echomq.queue import verb_names

SPINE_VERBS = {
    "enqueue",
    "enqueue_many",
    "claim",
    "claim_many",
    "complete",
    "complete_many",
    "retry",
    "delay",
    "extend_lock",
    "extend_locks",
    "promote",
    "reap",
    "check_stalled",
    "counts",
    "get_job",
    "job_state",
    "browse",
    "is_paused",
    "metrics",
}


@pytest.fixture()
def pair(qname: str) -> tuple[Queue, AsyncQueue]:
    # nothing listens here: binding a verb must not touch the network
    url = f"redis://127.0.0.1:{free_port()}/0"
    return Queue(qname, url=url), AsyncQueue(qname, url=url)


def test_same_verb_names() -> None:
    names = verb_names(Queue)
    assert names == verb_names(AsyncQueue)
    assert set(names) >= SPINE_VERBS
    assert len(names) == len(set(names))


def test_same_signatures_on_bound_methods(pair: tuple[Queue, AsyncQueue]) -> None:
    q, aq = pair
    for name in verb_names(Queue):
        sync, asyn = getattr(q, name), getattr(aq, name)
        assert inspect.signature(sync) == inspect.signature(asyn), name
        assert not inspect.iscoroutinefunction(sync), name
        assert inspect.iscoroutinefunction(asyn), name
        assert sync.__doc__ == asyn.__doc__ and sync.__doc__, name
        # the bound signature is the plan's, less the context
        plan = getattr(Queue, name).plan
        params = list(inspect.signature(plan).parameters)
        assert params[0] == "ctx"
        assert list(inspect.signature(sync).parameters) == params[1:], name


def test_spine_signatures_match_the_issue(pair: tuple[Queue, AsyncQueue]) -> None:
    q, _ = pair
    sig = inspect.signature(q.enqueue)
    for kw, default in [
        ("job_id", None),
        ("name", None),
        ("delay_ms", None),
        ("run_at_ms", None),
        ("priority", 0),
        ("max_attempts", None),
        ("dedup_id", None),
    ]:
        p = sig.parameters[kw]
        assert p.kind is inspect.Parameter.KEYWORD_ONLY and p.default == default
    assert list(inspect.signature(q.claim).parameters) == ["lease_ms"]
    assert inspect.signature(q.claim).parameters["lease_ms"].default == 30000
    complete = inspect.signature(q.complete).parameters
    assert list(complete) == ["job_id", "token", "result"]  # result: issue 13's history
    assert complete["result"].kind is inspect.Parameter.KEYWORD_ONLY
    assert complete["result"].default is None
    retry = inspect.signature(q.retry).parameters
    assert list(retry)[:3] == ["job_id", "token", "error"]
    assert retry["delay_ms"].default == 0 and retry["max_attempts"].default is None
    assert list(inspect.signature(q.delay).parameters) == ["job_id", "token", "delay_ms"]
    assert list(inspect.signature(q.extend_lock).parameters) == ["job_id", "token", "lease_ms"]
    assert list(inspect.signature(q.extend_locks).parameters)[:2] == ["pairs", "lease_ms"]
    assert inspect.signature(q.promote).parameters["budget"].default == 100
    assert inspect.signature(q.reap).parameters["budget"].default == 100
    stalled = inspect.signature(q.check_stalled).parameters
    assert (stalled["max_stalled"].default, stalled["budget"].default) == (2, 100)
    assert inspect.signature(q.browse).parameters["n"].default == 20


def test_constructors_match() -> None:
    qs = inspect.signature(Queue.__init__).parameters
    aqs = inspect.signature(AsyncQueue.__init__).parameters
    assert list(qs) == list(aqs)
    for name in ("url", "client"):
        assert qs[name].kind is inspect.Parameter.KEYWORD_ONLY and qs[name].default is None


def test_a_verb_is_defined_once_as_a_plan() -> None:
    for name in SPINE_VERBS & {n for n in dir(lifecycle) if not n.startswith("_")}:
        assert getattr(Queue, name).plan is getattr(lifecycle, name)
        assert getattr(AsyncQueue, name).plan is getattr(lifecycle, name)


def test_bad_name_before_any_connection() -> None:
    with pytest.raises(InvalidName):
        Queue("a b", url="redis://127.0.0.1:1/0")
    with pytest.raises(InvalidName):
        AsyncQueue("a{b}", url="redis://127.0.0.1:1/0")


def test_a_given_client_is_used_and_not_closed(server: EmbeddedServer, qname: str) -> None:
    client = redis.Redis.from_url(server.url, decode_responses=True)
    with Queue(qname, client=client) as q:
        jid = q.enqueue({"a": 1})
        c = q.claim()
        assert c is not None and c.id == jid and c.payload == {"a": 1}
        q.complete(c.id, c.token)
    assert client.ping() is True  # still open: the caller owns it
    assert client.hget(q.keys.metrics_completed, "count") == "1"
    client.close()


async def test_a_given_async_client_is_used_and_not_closed(
    server: EmbeddedServer, qname: str
) -> None:
    client = redis.asyncio.Redis.from_url(server.url)
    async with AsyncQueue(qname, client=client) as aq:
        jid = await aq.enqueue("x")
        assert await aq.job_state(jid) == "pending"
    assert await client.ping() is True
    assert await client.zcard(aq.keys.pending) == 1
    await client.aclose()


def test_sync_and_async_share_one_queue(server: EmbeddedServer, qname: str) -> None:
    import asyncio

    async def produce() -> str:
        async with AsyncQueue(qname, url=server.url) as aq:
            return await aq.enqueue({"from": "async"})

    jid = asyncio.run(produce())
    with Queue(qname, url=server.url) as q:
        c = q.claim()
        assert c is not None and (c.id, c.payload) == (jid, {"from": "async"})
        q.complete(c.id, c.token)
        assert q.counts().completed == 1


def test_the_old_name_of_the_lifecycle_module_is_a_deprecated_alias() -> None:
    import importlib
    import sys

    sys.modules.pop("echomq.spine", None)
    with pytest.warns(DeprecationWarning, match="echomq.lifecycle"):
        old = importlib.import_module("echomq.spine")
    assert old is lifecycle and old.enqueue is lifecycle.enqueue
