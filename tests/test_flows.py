"""Flows (issue 27): enqueue_flow, each ending x each policy, same queue and across
queues, the relay (idempotent), children_results, the bounds. Every test asserts the
reply and the keys left."""

from __future__ import annotations

import json
from collections.abc import Callable, Generator
from typing import Any

import pytest
import redis

from echomq import Flow, InvalidArgument, Queue, Worker
from echomq.flows.relay import relay_queue
from echomq.scripts import script
from faults.proxy import FaultProxy
from worker_support import FAST, running, wait_until

Make = Callable[..., Queue]

# every test under the scripts and the native executor (EMQ.COMPLETE and EMQ.RETRY
# settle a flow's jobs themselves: native/flow.c)
pytestmark = pytest.mark.both_executors


def row(r: redis.Redis, q: Queue, jid: str) -> dict[str, str]:
    return hgetall(r, q.keys.job(jid))


def _s(v: Any) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)


def smembers(r: redis.Redis, key: str) -> set[str]:
    return {_s(m) for m in r.smembers(key)}


def hgetall(r: redis.Redis, key: str) -> dict[str, str]:
    return {_s(k): _s(v) for k, v in r.hgetall(key).items()}


def fail_dead(q: Queue, jid: str, error: str = "boom") -> None:
    c = q.claim(lease_ms=60_000)
    assert c is not None and c.id == jid
    assert q.retry(jid, c.token, error, max_attempts=1) == "dead"


def run_one(q: Queue, result: Any = None) -> str:
    c = q.claim(lease_ms=60_000)
    assert c is not None
    q.complete(c.id, c.token, result=result)
    return c.id


def test_one_queue_fan_in(q: Queue, r: redis.Redis) -> None:
    ids = q.enqueue_flow(Flow(payload="p", children=[Flow(payload=i) for i in range(3)]))
    pid = ids.id
    assert q.job_state(pid) == "waiting_children"
    assert r.zscore(q.keys.base + "waiting", pid) is not None
    refs = {c.ref for c in ids.children}
    assert smembers(r, q.keys.deps(pid)) == refs
    assert row(r, q, pid)["children"] == "3"
    assert row(r, q, ids.children[0].id)["parent"] == f"{q.name}:{pid}"
    done = [run_one(q, result={"n": i}) for i in range(3)]
    assert set(done) == {c.id for c in ids.children}
    # the last completion made the parent ready in the same step
    assert q.job_state(pid) == "pending"
    assert r.exists(q.keys.deps(pid)) == 0
    assert r.zcard(q.keys.base + "waiting") == 0
    res = q.children_results(pid)
    assert sorted(res.completed.values(), key=lambda v: v["n"]) == [{"n": i} for i in range(3)]
    assert res.failed == {}
    # the parent runs and completes: its row and children's results go
    assert run_one(q) == pid
    assert r.exists(q.keys.job(pid), q.keys.kids(pid), q.keys.kidfails(pid)) == 0
    assert r.zcard(q.keys.base + "outbox") == 0


def test_across_queues_relay_is_idempotent(make_queue: Make, qname: str, r: redis.Redis) -> None:
    qa, qb = make_queue(qname + "a"), make_queue(qname + "b")
    ids = qa.enqueue_flow(Flow(payload="p", children=[Flow(qb.name, "x"), Flow(payload="y")]))
    pid, kb, ka = ids.id, ids.children[0], ids.children[1]
    assert kb.queue == qb.name and qb.job_state(kb.id) == "pending"
    assert smembers(r, qa.keys.deps(pid)) == {kb.ref, ka.ref}
    run_one(qa, "A")
    run_one(qb, "B")
    # the child's ending waits in its own queue's outbox
    assert [_s(m) for m in r.zrange(qb.keys.base + "outbox", 0, -1)] == [kb.id]
    msg = json.loads(r.hget(qb.keys.base + "outmsg", kb.id))
    assert (msg["pq"], msg["pid"], msg["o"], msg["v"]) == (qa.name, pid, "completed", '"B"')
    assert qa.job_state(pid) == "waiting_children"
    # a lost reply of resolve_child, sent again: the second run resolves nothing
    args = (kb.ref, pid, "completed", "", '"B"')
    r.script_load(script("resolve_child").body)
    first = r.evalsha(script("resolve_child").sha, 1, qa.keys.base, *args)
    assert first == [1, 0]
    again = r.evalsha(script("resolve_child").sha, 1, qa.keys.base, *args)
    assert again == [0, 0]
    assert qa.job_state(pid) == "pending"
    # the relay then finds it resolved and only drops the entry
    assert qb.relay_flows() == 1
    assert qb.relay_flows() == 0
    assert r.exists(qb.keys.base + "outbox", qb.keys.base + "outmsg") == 0
    assert qa.children_results(pid).completed == {kb.ref: "B", ka.ref: "A"}


POLICIES = ["fail_parent", "ignore", "remove_dependency", "continue"]


def _ending(q: Queue, how: str, jid: str) -> str:
    """End child jid by `how`; the outcome its parent records."""
    if how == "failed":
        fail_dead(q, jid)
    elif how == "removed":
        q.remove_job(jid)
    elif how == "drained":
        q.drain()
    return how


@pytest.mark.parametrize("cross", [False, True], ids=["same", "cross"])
@pytest.mark.parametrize("how", ["failed", "removed", "drained"])
@pytest.mark.parametrize("policy", POLICIES)
def test_each_ending_each_policy(
    make_queue: Make, qname: str, r: redis.Redis, policy: str, how: str, cross: bool
) -> None:
    qa = make_queue(qname + "a")
    qb = make_queue(qname + "b") if cross else qa
    # a second child keeps the parent waiting unless the policy ends it
    ids = qa.enqueue_flow(
        Flow(
            payload="p",
            children=[
                Flow(qb.name, "bad", on_fail=policy),
                Flow(qa.name, "other", delay_ms=60_000),
            ],
        )
    )
    pid, bad, other = ids.id, ids.children[0], ids.children[1]
    _ending(qb, how, bad.id)
    if cross:
        assert qa.job_state(pid) == "waiting_children"
        assert qb.relay_flows() == 1
    assert r.exists(qb.keys.job(bad.id)) == (1 if how == "failed" else 0)
    fails = hgetall(r, qa.keys.kidfails(pid))
    state = qa.job_state(pid)
    if how == "drained" and not cross:
        # the drain took the waiting parent too (backlog), unless the child's ending
        # had already made it dead (fail_parent) or ready (continue, after pending)
        want = {"fail_parent": "dead", "continue": "pending"}.get(policy)
        assert state == want
        if want is None:
            assert r.exists(qa.keys.job(pid), qa.keys.deps(pid), qa.keys.kidfails(pid)) == 0
        return
    if policy == "fail_parent":
        assert state == "dead"
        err = row(r, qa, pid)["last_error"]
        assert err.startswith(f"child {bad.ref} {how}: ")
        assert (how == "failed") == err.endswith("boom")
        assert r.zscore(qa.keys.dead, pid) is not None
    elif policy == "continue":
        assert state == "pending"
    else:
        assert state == "waiting_children"
        assert smembers(r, qa.keys.deps(pid)) == {other.ref}
    if policy == "remove_dependency":
        assert fails == {}
    else:
        assert json.loads(fails[bad.ref])["outcome"] == how
    assert (r.zscore(qa.keys.base + "waiting", pid) is not None) == (state == "waiting_children")
    # the other child's later completion: recorded; a waiting parent now ready
    qa.promote_job(other.id)
    for c in qa.claim_many(10, lease_ms=60_000):
        if c.id == other.id:
            qa.complete(c.id, c.token, result="ok")
        else:
            qa.release(c.id, c.token)
    assert qa.children_results(pid).completed == {other.ref: "ok"}
    assert qa.job_state(pid) == ("dead" if policy == "fail_parent" else "pending")
    assert r.zcard(qa.keys.base + "waiting") == 0
    assert r.exists(qb.keys.base + "outbox") == 0


def test_removing_a_waiting_parent_leaves_no_key(q: Queue, r: redis.Redis) -> None:
    ids = q.enqueue_flow(Flow(payload="p", children=[Flow(payload=1)]))
    pid = ids.id
    q.remove_job(pid)
    assert r.exists(q.keys.job(pid), q.keys.deps(pid)) == 0
    assert r.zcard(q.keys.base + "waiting") == 0
    # the child still runs; its ending finds no parent and writes nothing
    assert run_one(q, "x") == ids.children[0].id
    assert r.exists(q.keys.kids(pid)) == 0


def test_drain_deletes_waiting_parents(q: Queue, r: redis.Redis) -> None:
    ids = q.enqueue_flow(Flow(payload="p", children=[Flow(payload=1, delay_ms=60_000)]))
    assert q.drain() == 1  # the parent (the child waits in the schedule)
    assert r.exists(q.keys.job(ids.id), q.keys.deps(ids.id)) == 0
    assert q.job_state(ids.children[0].id) == "scheduled"


def test_obliterate_resolves_parents_elsewhere(
    make_queue: Make, qname: str, r: redis.Redis
) -> None:
    qa, qb = make_queue(qname + "a"), make_queue(qname + "b")
    ids = qa.enqueue_flow(Flow(payload="p", children=[Flow(qb.name, "x", on_fail="ignore")]))
    qb.pause()
    while not qb.obliterate():
        pass
    assert [k for k in r.scan_iter(match=qb.keys.pattern())] == []
    assert qa.job_state(ids.id) == "pending"
    fails = qa.children_results(ids.id).failed
    assert fails[ids.children[0].ref].outcome == "obliterated"


def test_deduplicated_child_resolves_at_once(q: Queue, r: redis.Redis) -> None:
    owner = q.enqueue("held", dedup_id="d1")
    ids = q.enqueue_flow(Flow(payload="p", children=[Flow(payload="c", dedup_id="d1")]))
    kid = ids.children[0]
    assert kid.deduplicated and kid.id == owner
    assert q.job_state(ids.id) == "pending"
    failed = q.children_results(ids.id).failed
    assert [(f.outcome, f.error) for f in failed.values()] == [("deduplicated", owner)]


def test_nested_fail_parent_goes_up_the_tree(make_queue: Make, qname: str, r: redis.Redis) -> None:
    qa, qb = make_queue(qname + "a"), make_queue(qname + "b")
    leaf = Flow(qa.name, "leaf")
    mid = Flow(qb.name, "mid", children=[leaf])
    ids = qa.enqueue_flow(Flow(payload="root", children=[mid]))
    root, m = ids.id, ids.children[0]
    assert qb.job_state(m.id) == "waiting_children"
    fail_dead(qa, m.children[0].id)
    # to qb (mid goes dead), then mid's own ending back to qa: the relay follows it
    assert qa.relay_flows() == 2
    assert qb.job_state(m.id) == "dead"
    assert qb.relay_flows() == 0
    assert qa.job_state(root) == "dead"
    assert row(r, qa, root)["last_error"].startswith(f"child {m.ref} failed: child ")


def test_bounds_are_checked_before_anything_is_sent(q: Queue, r: redis.Redis) -> None:
    with pytest.raises(InvalidArgument):
        q.enqueue_flow(Flow(payload="p", children=[Flow(payload=1, on_fail="nope")]))
    with pytest.raises(InvalidArgument):
        q.enqueue_flow(Flow(payload="p", children=[Flow(payload=i) for i in range(10_001)]))
    deep = Flow(payload=0)
    for i in range(9):
        deep = Flow(payload=i, children=[deep])
    with pytest.raises(InvalidArgument):
        q.enqueue_flow(deep)
    with pytest.raises(InvalidArgument):
        q.enqueue_flow(Flow(payload="p", dedup_id="x", children=[Flow(payload=1)]))
    assert list(r.scan_iter(match=q.keys.pattern())) == []


def test_worker_fan_out_fan_in(make_queue: Make, qname: str, r: redis.Redis) -> None:
    qa, qb = make_queue(qname + "a"), make_queue(qname + "b")
    got: list[Any] = []

    async def handle(job: Any) -> Any:
        if job.data == "assemble":
            res = await job.children_results()
            got.append(sorted(res.completed.values()))
            return "book"
        return job.data * 2

    kids = [Flow(qa.name, i) for i in range(5)] + [Flow(qb.name, 10 + i) for i in range(5)]
    ids = qa.enqueue_flow(Flow(payload="assemble", children=kids))
    with running(Worker(qa, handle, config=FAST)), running(Worker(qb, handle, config=FAST)):
        wait_until(lambda: got, timeout=15)
    assert got == [sorted([2 * i for i in range(5)] + [2 * (10 + i) for i in range(5)])]
    wait_until(lambda: r.exists(qa.keys.job(ids.id)) == 0, timeout=5)
    assert r.exists(qa.keys.kids(ids.id), qb.keys.base + "outbox") == 0


def test_stalled_to_dead_resolves_the_parent(q: Queue, r: redis.Redis) -> None:
    ids = q.enqueue_flow(Flow(payload="p", children=[Flow(payload=1, on_fail="ignore")]))
    kid = ids.children[0].id
    c = q.claim(lease_ms=60_000)
    assert c is not None and c.id == kid
    assert r.zadd(q.keys.active, {kid: 0}, xx=True, ch=True) == 1  # the lease ran out
    back, dead = q.check_stalled(0, 10)
    assert (back, dead) == ([], [kid])
    assert q.job_state(ids.id) == "pending"
    fail = q.children_results(ids.id).failed[ids.children[0].ref]
    assert (fail.outcome, fail.error) == ("failed", "stalled: lease expired 1 times")


def test_native_settles_a_flow_child(make_queue: Make, qname: str, r: redis.Redis) -> None:
    qa = make_queue(qname + "a", executor="native")
    qb = make_queue(qname + "b", executor="native")
    ids = qa.enqueue_flow(Flow(payload="p", children=[Flow(payload=1), Flow(qb.name, 2)]))
    assert qa.ctx.executor.native is True
    run_one(qa, "one")  # EMQ.COMPLETE settles the child itself (native/flow.c)
    # the batch form too: its outbox entry, relayed
    c = qb.claim(lease_ms=60_000)
    assert c is not None
    assert qb.complete_many([(c.id, c.token)]) == []
    assert qb.relay_flows() == 1
    assert qa.job_state(ids.id) == "pending"
    assert qa.children_results(ids.id).completed == {
        ids.children[0].ref: "one",
        ids.children[1].ref: None,
    }
    # a job of no flow still completes natively
    plain = qa.enqueue("plain")
    assert run_one(qa) in (ids.id, plain)


def test_drain_group_and_bulk_remove_resolve_parents(q: Queue, r: redis.Redis) -> None:
    kids = [
        Flow(payload=1, group="g", on_fail="ignore"),
        Flow(payload=2, name="kid", on_fail="ignore"),
    ]
    ids = q.enqueue_flow(Flow(payload="p", children=kids))
    pid, grouped, flat = ids.id, ids.children[0], ids.children[1]
    assert q.drain_group("g") == 1
    assert smembers(r, q.keys.deps(pid)) == {flat.ref}
    res = q.remove_jobs("pending", name="kid")
    assert res.matched == 1
    assert r.exists(q.keys.job(flat.id)) == 0
    failed = q.children_results(pid).failed
    assert {k: v.outcome for k, v in failed.items()} == {
        grouped.ref: "drained",
        flat.ref: "removed",
    }
    # the parent became ready when its last child went
    assert q.job_state(pid) == "pending"
    assert r.zcard(q.keys.base + "waiting") == 0


def _once(op: Any) -> Generator[Any, Any, Any]:
    return (yield op)


@pytest.mark.usefixtures("executor")
def test_a_lost_reply_of_the_relay_is_sent_again_and_resolves_once(
    pq: Queue, proxy: FaultProxy, make_queue: Make, qname: str, r: redis.Redis
) -> None:
    qa = make_queue(qname + "parent")
    kids = [Flow(pq.name, 1), Flow(pq.name, 2)]
    ids = qa.enqueue_flow(Flow(payload="p", children=kids))
    c = pq.claim(lease_ms=60_000)
    assert c is not None
    pq.complete(c.id, c.token, result="r")
    done = next(k for k in ids.children if k.id == c.id)
    r.script_load(script("resolve_child").body)  # a NOSCRIPT is not the reply to lose
    plan = relay_queue(pq.keys)
    read = next(plan)
    step = plan.send(pq.runner.drive(_once(read)))  # the resolve_child batch
    proxy.drop_replies(1)
    replies = pq.runner.drive(_once(step))  # its reply lost: sent again (resend=True)
    assert proxy.replies_dropped == 1
    assert replies == [[0, 0]]  # the repeat found the ref resolved: wrote nothing
    drop = plan.send(replies)
    pq.runner.drive(_once(drop))
    with pytest.raises(StopIteration) as stop:
        plan.send(1)
    assert stop.value.value == (1, [])
    # resolved exactly once: one dependency left, one result recorded
    assert smembers(r, qa.keys.deps(ids.id)) == {k.ref for k in ids.children} - {done.ref}
    assert qa.children_results(ids.id).completed == {done.ref: "r"}
    assert qa.job_state(ids.id) == "waiting_children"
    assert r.exists(pq.keys.base + "outbox", pq.keys.base + "outmsg") == 0


def test_the_beat_relays_what_a_settle_left(make_queue: Make, qname: str, r: redis.Redis) -> None:
    # a child completed by a client that never relayed (as a worker killed right after
    # its settle): any worker of the child's queue relays it on its beat
    qa, qb = make_queue(qname + "a"), make_queue(qname + "b")
    ids = qa.enqueue_flow(Flow(payload="p", children=[Flow(qb.name, 1)]))
    run_one(qb, "r")
    assert r.zcard(qb.keys.base + "outbox") == 1
    with running(Worker(qb, lambda job: None, config=FAST)):
        wait_until(lambda: qa.job_state(ids.id) == "pending", timeout=5)
    assert r.exists(qb.keys.base + "outbox", qb.keys.base + "outmsg") == 0
    assert qa.children_results(ids.id).completed == {ids.children[0].ref: "r"}


def test_a_delayed_parent_waits_for_its_due_time(q: Queue, r: redis.Redis) -> None:
    ids = q.enqueue_flow(Flow(payload="p", delay_ms=60_000, children=[Flow(payload=1)]))
    assert "due" in row(r, q, ids.id)
    run_one(q, "r")
    assert q.job_state(ids.id) == "scheduled"
    assert r.zscore(q.keys.schedule, ids.id) == float(row(r, q, ids.id)["due"])
    assert r.zcard(q.keys.base + "waiting") == 0


def test_a_kept_parent_keeps_its_results_until_trimmed(
    make_queue: Make, qname: str, r: redis.Redis
) -> None:
    # the parents' queue keeps one completed job; the children's none
    q, kids = make_queue(qname + "a"), make_queue(qname + "b")
    q.set_retention(completed=1)
    first = q.enqueue_flow(Flow(payload="p1", children=[Flow(kids.name, 1)]))
    run_one(kids, "a")
    assert kids.relay_flows() == 1
    assert run_one(q) == first.id
    assert q.job_state(first.id) == "completed"
    assert q.children_results(first.id).completed == {first.children[0].ref: "a"}
    second = q.enqueue_flow(Flow(payload="p2", children=[Flow(kids.name, 2)]))
    run_one(kids, "b")
    assert kids.relay_flows() == 1
    assert run_one(q) == second.id
    # the retention of one trimmed the first parent: its children's results went with it
    assert r.exists(q.keys.job(first.id), q.keys.kids(first.id)) == 0
    assert r.exists(q.keys.kids(second.id)) == 1
