"""The flows' operator plane (issue 27): waiting_children shown where a state is,
flow() (the tree), release_parent, fail_parent, cancel_flow and the sweep.

Every test checks the reply and the keys left; a refusal leaves every queue it could
touch exactly as it was.
"""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest
import redis
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from conftest import dump
from echomq import JobGone, Queue, Worker
from echomq.errors import JobNotWaiting
from echomq.flows import Flow, FlowIds
from echomq.flows.sweep import SWEEP_GRACE_MS
from echomq.observability.prometheus import QueueCollector
from echomq.observability.scrape import snapshots
from operator_support import changed
from worker_support import FAST, running, server_ms, wait_until

# cross-queue flows span slots on the cluster (each read and verb works per queue); the
# native executor settles a flow job's complete and retry itself (native/flow.c)
pytestmark = [pytest.mark.both_servers, pytest.mark.both_executors]


@pytest.fixture()
def other(make_queue: Callable[..., Queue], qname: str) -> Queue:
    """A second queue (another slot on a cluster) for the cross-queue flows."""
    return make_queue(qname + "-o")


def fan(q: Queue, n: int = 2, *, queue: str | None = None, on_fail: str = "fail_parent") -> FlowIds:
    """A parent in ``q`` with ``n`` leaf children (in ``queue``, default ``q``)."""
    kids = [Flow(queue=queue, payload={"k": i}, on_fail=on_fail) for i in range(n)]
    return q.enqueue_flow(Flow(payload={"p": 1}, name="assemble", children=kids))


def run_one(q: Queue, result: object = "ok") -> str:
    got = q.claim()
    assert got is not None
    q.complete(got.id, got.token, result=result)
    return got.id


def audit_verbs(q: Queue) -> list[str]:
    return [e.verb for e in q.audit()]


# -- waiting_children where a state is --------------------------------------------------


def test_a_waiting_parent_is_counted_browsed_and_paged(q: Queue) -> None:
    ids = fan(q, 2)
    c = q.counts()
    assert (c.waiting_children, c.pending) == (1, 2)
    assert c.as_dict()["waiting_children"] == 1
    assert q.job_state(ids.id) == "waiting_children"
    row = q.get_job(ids.id)
    assert row is not None and row.state == "waiting_children"
    assert q.browse("waiting_children") == [ids.id]
    page = q.job_page("waiting_children")
    assert page.total == 1 and [j.id for j in page.jobs] == [ids.id]
    assert page.jobs[0].state == "waiting_children"
    view = q.job_view(ids.id)
    assert view is not None and view.score is not None  # since when it waits
    assert [j.id for j in q.find_jobs("waiting_children", "assemble").jobs] == [ids.id]


# -- flow(): the tree -----------------------------------------------------------------


def test_flow_shows_the_tree_from_any_node_with_states_and_outcomes(q: Queue, other: Queue) -> None:
    ids = q.enqueue_flow(
        Flow(
            payload=1,
            children=[
                Flow(payload=2),
                Flow(queue=other.name, payload=3, on_fail="ignore"),
                Flow(payload=4, children=[Flow(payload=5)]),
            ],
        )
    )
    done = run_one(q, {"r": 1})  # the first leaf of q: completes, recorded on the root
    assert done == ids.children[0].id
    tree = q.flow(ids.children[2].children[0].id)  # from a grandchild: the root's tree
    assert tree is not None
    assert tree.root.ref == ids.ref and tree.root.state == "waiting_children"
    assert tree.nodes == 5 and not tree.truncated
    assert tree.job == ids.children[2].children[0].ref
    first = tree.find(ids.children[0].ref)
    assert first is not None
    assert (first.state, first.outcome, first.summary) == (None, "completed", '{"r":1}')
    cross = tree.find(ids.children[1].ref)
    assert cross is not None
    assert (cross.queue, cross.state, cross.policy, cross.outcome) == (
        other.name,
        "pending",
        "ignore",
        None,
    )
    sub = tree.find(ids.children[2].ref)
    assert sub is not None and sub.state == "waiting_children" and sub.unresolved == 1
    assert [k.ref for k in sub.kids] == [ids.children[2].children[0].ref]
    assert tree.root.unresolved == 2 and tree.root.children == 3
    d = tree.as_dict()
    assert d["root"]["ref"] == ids.ref and len(d["root"]["kids"]) == 3


def test_flow_is_bounded_and_says_so(q: Queue) -> None:
    ids = fan(q, 30)
    tree = q.flow(ids.id, limit=10)
    assert tree is not None
    assert tree.nodes == 10 and tree.truncated
    assert len(tree.root.kids) == 9 and tree.root.more == 21


def test_flow_of_a_plain_job_is_one_node_and_of_no_job_none(q: Queue) -> None:
    jid = q.enqueue({"x": 1})
    tree = q.flow(jid)
    assert tree is not None and tree.nodes == 1 and tree.root.kids == ()
    assert tree.root.state == "pending" and not tree.truncated
    q.remove_job(jid)
    assert q.flow(jid) is None


def test_flow_of_a_child_whose_parent_was_removed_starts_at_the_child(q: Queue) -> None:
    ids = q.enqueue_flow(Flow(payload=0, children=[Flow(payload=1, children=[Flow(payload=2)])]))
    q.remove_job(ids.id)  # its children keep running, their endings find no parent
    tree = q.flow(ids.children[0].children[0].id)
    assert tree is not None and tree.root.ref == ids.children[0].ref
    assert [k.ref for k in tree.root.kids] == [ids.children[0].children[0].ref]


def test_flow_relays_first_a_cross_queue_ending(q: Queue, other: Queue, r: redis.Redis) -> None:
    ids = fan(q, 1, queue=other.name)
    run_one(other, 7)  # the child's ending waits in the other queue's outbox...
    tree = q.flow(ids.id)  # ... and flow relays it before it reads
    assert tree is not None
    assert r.zcard(other.keys.outbox) == 0
    assert tree.root.state == "pending" and tree.root.kids[0].outcome == "completed"


# -- release_parent -------------------------------------------------------------------


def test_release_parent_makes_it_ready_and_later_children_only_record(
    q: Queue, r: redis.Redis
) -> None:
    ids = fan(q, 2)
    before = dump(r, q)
    assert q.release_parent(ids.id) == 2
    assert q.job_state(ids.id) == "pending"
    assert r.zscore(q.keys.waiting, ids.id) is None
    assert r.zscore(q.keys.pending, ids.id) is not None
    assert r.scard(q.keys.deps(ids.id)) == 2  # the children still report
    assert changed(before, dump(r, q)) == {
        q.keys.waiting, q.keys.pending, q.keys.job(ids.id), q.keys.wake, q.keys.audit
    }  # fmt: skip
    entry = q.audit()[0]
    assert entry.verb == "release_parent" and entry.args["job"] == ids.id
    # a child that ends now is recorded, the parent's state is left as it is
    first = q.claim()
    assert first is not None and first.id == ids.id  # the parent: enqueued first
    got = q.claim()
    assert got is not None and got.id == ids.children[0].id
    q.complete(got.id, got.token, result="v")
    assert q.job_state(ids.id) == "active"
    assert r.hget(q.keys.kids(ids.id), ids.children[0].ref) == '"v"'


@pytest.mark.parametrize("verb", ["release_parent", "fail_parent", "cancel_flow"])
def test_a_job_that_is_not_waiting_is_refused_and_nothing_changes(
    q: Queue, other: Queue, r: redis.Redis, verb: str
) -> None:
    ids = fan(q, 2, queue=other.name)
    plain = q.enqueue({"x": 1})
    before, before_o = dump(r, q), dump(r, other)
    with pytest.raises(JobNotWaiting) as err:
        getattr(q, verb)(plain)
    assert err.value.reason == "not_waiting" and err.value.job_id == plain
    with pytest.raises(JobNotWaiting):
        getattr(other, verb)(ids.children[0].id)
    with pytest.raises(JobGone):
        getattr(q, verb)(ids.children[0].id)  # a job of another queue: not in this one
    assert dump(r, q) == before and dump(r, other) == before_o


# -- fail_parent ----------------------------------------------------------------------


def test_fail_parent_ends_it_dead_and_its_parent_resolves_by_policy(
    q: Queue, r: redis.Redis
) -> None:
    ids = q.enqueue_flow(
        Flow(payload=0, children=[Flow(payload=1, on_fail="ignore", children=[Flow(payload=2)])])
    )
    mid = ids.children[0]
    assert q.fail_parent(mid.id, "stuck: \x1b[31mred") is None
    row = q.get_job(mid.id)
    assert row is not None and row.state == "dead" and row.last_error == "stuck: \x1b[31mred"
    assert r.zscore(q.keys.dead, mid.id) is not None
    assert r.zscore(q.keys.waiting, mid.id) is None
    # the root recorded it (ignore) and, its last dependency resolved, became ready
    assert q.job_state(ids.id) == "pending"
    rec = json.loads(r.hget(q.keys.kidfails(ids.id), mid.ref))
    assert rec == {"outcome": "failed", "error": "stuck: \x1b[31mred"}
    assert audit_verbs(q)[0] == "fail_parent"
    assert q.counts().failed == 1


def test_fail_parent_across_queues_relays_to_the_grandparent(
    q: Queue, other: Queue, r: redis.Redis
) -> None:
    ids = q.enqueue_flow(
        Flow(payload=0, children=[Flow(queue=other.name, payload=1, children=[Flow(payload=2)])])
    )
    mid = ids.children[0]
    other.fail_parent(mid.id, "gave up")
    assert other.job_state(mid.id) == "dead"
    assert r.zcard(other.keys.outbox) == 0  # relayed before the call returned
    row = q.get_job(ids.id)
    assert row is not None and row.state == "dead"  # fail_parent, the default policy
    assert row.last_error == f"child {mid.ref} failed: gave up"


# -- cancel_flow ----------------------------------------------------------------------


def test_cancel_flow_removes_waiting_work_asks_running_work_and_fails_parents(
    q: Queue, other: Queue, r: redis.Redis
) -> None:
    ids = q.enqueue_flow(
        Flow(
            payload=0,
            children=[
                Flow(payload=1, max_attempts=1),
                Flow(payload=2),
                Flow(queue=other.name, payload=3, children=[Flow(queue=other.name, payload=4)]),
            ],
        )
    )
    running = q.claim()
    assert running is not None and running.id == ids.children[0].id
    got = q.cancel_flow(ids.id)
    assert (got.removed, got.cancelling, got.failed) == (2, 1, 2)
    assert got.nodes == 5 and not got.truncated
    root = q.get_job(ids.id)
    assert root is not None and root.state == "dead"
    assert root.last_error == "cancelled by an operator"
    assert q.job_state(ids.children[1].id) is None  # not started: removed
    assert r.hget(q.keys.job(running.id), "cancel") == str(running.token)
    sub = other.get_job(ids.children[2].id)
    assert sub is not None and sub.state == "dead"
    assert other.job_state(ids.children[2].children[0].id) is None
    assert q.counts().waiting_children == other.counts().waiting_children == 0
    assert other.counts().pending == q.counts().pending == 0
    # journaled in each queue it changed
    assert audit_verbs(q)[0] == "cancel_flow" and audit_verbs(other)[0] == "cancel_flow"
    # the running child, stopped, is recorded on its dead parent: nothing stays waiting
    q.retry(running.id, running.token, "JobCancelled: cancelled by an operator")
    assert r.scard(q.keys.deps(ids.id)) == 0
    assert r.zcard(q.keys.outbox) == r.zcard(other.keys.outbox) == 0


# -- the sweep ------------------------------------------------------------------------


def test_sweep_resolves_a_vanished_child_as_missing_once(q: Queue, r: redis.Redis) -> None:
    ids = fan(q, 2)
    gone = ids.children[0]
    r.delete(q.keys.job(gone.id))  # lost without an ending: nothing told the parent
    r.zrem(q.keys.pending, gone.id)
    held = q.sweep_flows()  # inside the grace: nothing looked at
    assert (held.parents, held.resolved) == (0, 0)
    before = dump(r, q)
    got = q.sweep_flows(grace_ms=0)
    assert (got.parents, got.checked, got.missing, got.resolved) == (1, 2, 1, 1)
    assert got.missing_refs == (gone.ref,)
    row = q.get_job(ids.id)
    assert row is not None and row.state == "dead"
    assert row.last_error == f"child {gone.ref} missing: "
    assert q.keys.waiting in changed(before, dump(r, q))
    again_before = dump(r, q)
    again = q.sweep_flows(grace_ms=0)  # idempotent: the parent no longer waits
    assert (again.parents, again.resolved) == (0, 0)
    assert dump(r, q) == again_before


def test_sweep_leaves_a_child_whose_ending_waits_in_an_outbox(
    q: Queue, other: Queue, r: redis.Redis
) -> None:
    ids = fan(q, 1, queue=other.name)
    run_one(other)  # its row is gone, its ending is in the other queue's outbox
    assert r.zcard(other.keys.outbox) == 1
    before = dump(r, q)
    got = q.sweep_flows(grace_ms=0)
    assert (got.parents, got.checked, got.missing, got.resolved) == (1, 1, 0, 0)
    assert dump(r, q) == before
    assert q.job_state(ids.id) == "waiting_children"


def test_the_worker_beat_sweeps_a_parent_past_the_grace(q: Queue, r: redis.Redis) -> None:
    ids = fan(q, 1)
    gone = ids.children[0]
    r.delete(q.keys.job(gone.id))
    r.zrem(q.keys.pending, gone.id)
    r.zadd(q.keys.waiting, {ids.id: server_ms(r) - SWEEP_GRACE_MS - 1000})  # waited long
    worker = Worker(q, lambda job: "done", config=FAST)
    with running(worker):
        # the parent, resolved as missing by the beat's sweep, goes dead (fail_parent)
        wait_until(lambda: q.job_state(ids.id) == "dead")
    row = q.get_job(ids.id)
    assert row is not None and row.last_error == f"child {gone.ref} missing: "
    assert r.zcard(q.keys.waiting) == 0


def test_flow_impact_counts_waiting_parents_and_children(q: Queue, other: Queue) -> None:
    assert q.flow_impact().as_dict() == {
        "waiting": 0, "examined": 0, "backlog": 0, "children": 0, "elsewhere": 0, "exact": True
    }  # fmt: skip
    q.enqueue_flow(Flow(payload=0, children=[Flow(payload=1), Flow(payload=2)]))
    other.enqueue_flow(Flow(payload=0, children=[Flow(queue=q.name, payload=3)]))
    q.enqueue({"plain": 1})
    got = q.flow_impact()
    assert (got.waiting, got.examined, got.backlog, got.children, got.elsewhere) == (1, 4, 4, 3, 1)
    assert got.exact and "3 flow child(ren) will resolve" in got.phrase("drained")
    small = q.flow_impact(budget=2)
    assert (small.examined, small.backlog, small.exact) == (2, 4, False)
    assert "(of 2 jobs examined)" in small.phrase("drained")


@pytest.mark.single_node("the exporter reads one server")
def test_the_exporter_gauges_waiting_parents(q: Queue) -> None:
    q.enqueue_flow(Flow(payload=0, children=[Flow(payload=1)]))
    registry = CollectorRegistry(auto_describe=False)
    registry.register(QueueCollector(q.client, [q.name]))
    text = generate_latest(registry).decode()
    got = {
        s.labels["state"]: s.value
        for fam in text_string_to_metric_families(text)
        for s in fam.samples
        if s.name == "echomq_queue_jobs" and s.labels["queue"] == q.name
    }
    assert got["waiting_children"] == 1 and got["pending"] == 1
    (snap,) = q.runner.drive(snapshots([q.ctx]))
    assert snap.waiting_children == 1


def test_cancel_flow_journals_once_a_queue_however_many_calls(q: Queue, r: redis.Redis) -> None:
    ids = fan(q, 120)  # 121 nodes: three script calls of at most 50
    got = q.cancel_flow(ids.id)
    assert (got.removed, got.failed, got.nodes) == (120, 1, 121)
    entries = [e for e in q.audit() if e.verb == "cancel_flow"]
    assert len(entries) == 1 and entries[0].args == {"job": ids.ref, "nodes": 121}
    assert r.zcard(q.keys.pending) == 0 and r.zcard(q.keys.waiting) == 0
