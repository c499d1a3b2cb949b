"""Flows as a property: random small trees over two queues, random policies, random
endings (complete, dead, remove, drain, obliterate, in any order, parents included),
relayed after every step (sometimes twice: a relay is idempotent). Then every job left
runs to its end. The laws:

- no parent is left waiting: both queues' ``waiting`` sets end empty, and no row is
  left in ``waiting_children``;
- no child is counted twice: a parent's completed and other endings name disjoint
  children, never more than it has, and a child's ref is one of its own;
- nothing is left in an outbox once relayed.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import redis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from echomq import Flow, FlowIds, Queue

pytestmark = pytest.mark.both_executors

POLICY = st.sampled_from(["fail_parent", "ignore", "remove_dependency", "continue"])
ACTION = st.sampled_from(["complete", "dead", "remove", "drain", "obliterate", "relay"])


def trees(depth: int) -> st.SearchStrategy[tuple[int, str, list[Any]]]:
    """(queue index, policy, children), at most `depth` levels of children."""
    leaf = st.tuples(st.integers(0, 1), POLICY, st.just([]))
    if depth == 0:
        return leaf
    return st.one_of(
        leaf,
        st.tuples(st.integers(0, 1), POLICY, st.lists(trees(depth - 1), min_size=1, max_size=3)),
    )


def build(t: tuple[int, str, list[Any]], names: list[str]) -> Flow:
    qi, policy, kids = t
    return Flow(names[qi], "x", children=[build(k, names) for k in kids], on_fail=policy)


def relay_all(qs: list[Queue]) -> None:
    for _ in range(4):  # chains across the two queues go back and forth
        for q in qs:
            q.relay_flows()


def check_parent(q: Queue, jid: str, tree: dict[str, FlowIds]) -> None:
    node = tree.get(f"{q.name}:{jid}")
    res = q.children_results(jid)
    done, other = set(res.completed), set(res.failed)
    assert not (done & other), "a child counted twice"
    if node is not None:
        refs = {c.ref for c in node.children}
        assert done | other <= refs
        assert len(done) + len(other) <= len(node.children)


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    tree=st.tuples(st.integers(0, 1), POLICY, st.lists(trees(2), min_size=1, max_size=4)),
    actions=st.lists(st.tuples(ACTION, st.integers(0, 1), st.integers(0, 50)), max_size=12),
)
def test_no_parent_waits_and_no_child_counts_twice(
    make_queue: Callable[..., Queue], qname: str, r: redis.Redis, tree: Any, actions: Any
) -> None:
    run = next(_runs)
    names = [f"{qname}{run}x", f"{qname}{run}y"]
    qs = [make_queue(n) for n in names]
    ids = qs[0].enqueue_flow(build(tree, names))
    nodes = {n.ref: n for n in ids.walk()}
    relay_all(qs)
    for action, qi, pick in actions:
        q = qs[qi]
        if action in ("complete", "dead"):
            c = q.claim(lease_ms=60_000)
            if c is not None:
                check_parent(q, c.id, nodes)
                if action == "complete":
                    q.complete(c.id, c.token, result="r")
                else:
                    q.retry(c.id, c.token, "boom", max_attempts=1)
        elif action == "remove":
            mine = [n for n in nodes.values() if n.queue == q.name]
            n = mine[pick % len(mine)] if mine else None
            if n is not None and r.exists(q.keys.job(n.id)):
                q.remove_job(n.id)
        elif action == "drain":
            q.drain()
        elif action == "obliterate":
            q.pause()
            while not q.obliterate(force=True):
                pass
        relay_all(qs)
    # everything left runs to its end
    for _ in range(200):
        ran = False
        for q in qs:
            c = q.claim(lease_ms=60_000)
            if c is not None:
                check_parent(q, c.id, nodes)
                q.complete(c.id, c.token, result="r")
                ran = True
        relay_all(qs)
        if not ran:
            break
    for q in qs:
        assert r.zcard(q.keys.base + "waiting") == 0, "a parent left waiting"
        assert r.zcard(q.keys.base + "outbox") == 0
        assert r.hlen(q.keys.base + "outmsg") == 0
        for n in nodes.values():
            if n.queue == q.name:
                assert q.job_state(n.id) != "waiting_children"
        assert q.counts().pending == 0


_runs = iter(range(10**9))
