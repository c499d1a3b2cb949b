"""Property test of the lane structures (issue 3, item 6).

A hypothesis state machine drives random sequences of grouped and flat enqueues,
claims, completes, retries, delays, expired leases (reap and the stalled check),
promotes, per-group pause/resume, limit and weight changes, queue pause, reassign,
remove and drain_group against the private server. After every step the ring law
must hold (:func:`lanes_law.assert_law`): ``gactive`` of every group equals the number
of its jobs in active, and every group with serveable work is on the ring exactly once,
no other group on it. The model also tracks the jobs the test holds, so a claim that
answers nothing while serveable work exists is caught, and so is a lost or extra lease.

Expired leases are forced by rewriting the active score with the test's own client:
no sleeping.
"""

from __future__ import annotations

import itertools
import os

import pytest
import redis
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    rule,
    run_state_machine_as_test,
)

from conftest import dump
from echomq import JobNotPending, Queue, StaleToken
from echomq.embedded import EmbeddedServer
from lanes_law import assert_law

# run under both executors: the native twins must equal the scripts
pytestmark = [pytest.mark.both_executors, pytest.mark.slow]  # random walks: soak-like

# Mostly grouped work, some flat, so lanes fill up and compete with pending. The
# machine starts with lanes a and b; lane c is only ever reached through the schedule
# (a job enqueued due later, then promoted), which must record the group too.
group_or_flat = st.sampled_from(("a", "b", "a", "b", None))
later_group = st.sampled_from(("a", "b", "c"))
groups = st.sampled_from(("a", "b", "c"))
pick = st.integers(min_value=0, max_value=1000)
SETTLE = ("complete", "retry", "delay", "reap", "stalled", "remove")
GATE = (
    "pause",
    "resume",
    "limit1",
    "limit2",
    "clear_limit",
    "weight2",
    "weight1",
    "queue_pause",
    "pause_cycle",
)


def _machine(server: EmbeddedServer, r: redis.Redis) -> type[RuleBasedStateMachine]:
    names = itertools.count()

    class LaneMachine(RuleBasedStateMachine):
        # Few rules, each with a choice inside: most steps are then a claim, a settle
        # or a gate change, and deep states (a limited lane with a backlog whose job
        # is retried, ...) are reached within a short sequence.

        def __init__(self) -> None:
            super().__init__()
            self.q = Queue(f"prop-{os.getpid()}-{next(names)}", url=server.url)
            self.held: dict[str, int] = {}  # job id -> token, for every job in active

        def teardown(self) -> None:
            self.q.pause()
            self.q.obliterate(force=True, budget=10_000)
            self.q.close()

        @initialize(
            depth=st.tuples(st.integers(1, 6), st.integers(1, 6)),
            limit=st.sampled_from((1, 1, 2, None)),
        )
        def fill(self, depth: tuple[int, int], limit: int | None) -> None:
            for g, n in zip(("a", "b"), depth):
                self.q.enqueue_many(range(n), group=g)
            if limit is not None:
                self.q.set_group_limit("a", limit)

        def _held(self, i: int) -> tuple[str, int]:
            job_id = sorted(self.held)[i % len(self.held)]
            return job_id, self.held[job_id]

        # --- producers -----------------------------------------------------------
        @rule(group=group_or_flat, n=st.integers(1, 4), priority=st.sampled_from((0, 0, 1)))
        def enqueue(self, group: str | None, n: int, priority: int) -> None:
            assert len(self.q.enqueue_many(range(n), group=group, priority=priority)) == n

        @rule(group=later_group)
        def enqueue_due(self, group: str) -> None:
            # already due (run_at_ms=1): the next promote moves it into its lane
            assert self.q.enqueue("later", group=group, run_at_ms=1)

        # --- the claim -----------------------------------------------------------
        @rule(count=st.integers(1, 3), promote=st.booleans())
        def claim(self, count: int, promote: bool) -> None:
            if promote:
                self.q.promote()
            got = self.q.claim_many(count)
            for c in got:
                assert c.id not in self.held
                assert r.hget(self.q.keys.job(c.id), "group") == c.group
                self.held[c.id] = c.token
            if len(got) < count:
                # a short claim leaves nothing serveable behind
                assert r.zcard(self.q.keys.pending) == 0
                assert r.llen(self.q.keys.ring) == 0

        # --- settling the jobs we hold -------------------------------------------
        @rule(i=pick, how=st.sampled_from(SETTLE), last=st.booleans())
        def settle(self, i: int, how: str, last: bool) -> None:
            # `last`: the final try (retry dead-letters, the stalled check too). With
            # nothing in hand, claim first: a precondition would make hypothesis
            # draw this rule far less often, and settling is where slots come back.
            if not self.held:
                self.claim(1, promote=False)
                if not self.held:
                    return
            job_id, token = self._held(i)
            q = self.q
            if how == "complete":
                # a stale token first: refused, and nothing moves
                before = dump(r, q)
                with pytest.raises(StaleToken):
                    q.complete(job_id, token + 1)
                assert dump(r, q) == before
                q.complete(job_id, token)
            elif how == "retry":
                got = q.retry(job_id, token, "boom", max_attempts=1 if last else 99)
                assert got == ("dead" if last else "scheduled")
            elif how == "delay":
                q.delay(job_id, token, 0)
            elif how == "remove":
                q.remove_job(job_id)
            else:
                # the lease expires: rewrite its deadline instead of sleeping
                r.zadd(q.keys.active, {job_id: 0}, xx=True)
                if how == "stalled":
                    back, dead = q.check_stalled(max_stalled=0 if last else 1)
                    assert back + dead == [job_id]
                else:
                    assert q.reap() == 1
            del self.held[job_id]

        # --- operator verbs ------------------------------------------------------
        @rule(group=groups, how=st.sampled_from(GATE))
        def gate(self, group: str, how: str) -> None:
            q = self.q
            if how == "queue_pause":
                # the queue-wide gate: a claim answers nothing and touches nothing. The
                # queue is resumed in the same step so later steps keep claiming.
                q.pause()
                before = dump(r, q)
                assert q.claim() is None
                assert q.claim_many(3) == []
                assert dump(r, q) == before
                q.resume()
            elif how == "pause_cycle":
                # pause, claim around the paused lane, resume: within one step
                q.pause_group(group)
                assert_law(r, q)
                got = q.claim_many(2)
                assert group not in {c.group for c in got}
                self.held.update((c.id, c.token) for c in got)
                assert_law(r, q)
                q.resume_group(group)
            elif how == "pause":
                q.pause_group(group)
            elif how == "resume":
                q.resume_group(group)
            elif how == "clear_limit":
                q.clear_group_limit(group)
            elif how.startswith("limit"):
                q.set_group_limit(group, int(how[-1]))
            else:
                q.set_group_weight(group, int(how[-1]))

        @rule(i=pick, to=group_or_flat, drain=st.sampled_from((False, False, False, True)))
        def move_or_drain(self, i: int, to: str | None, drain: bool) -> None:
            q = self.q
            if drain and to is not None:
                depth = q.group_depth(to)
                assert q.drain_group(to, budget=2) == depth
                assert q.group_depth(to) == 0
                return
            waiting = q.browse("pending", n=50)
            if waiting:
                q.reassign(waiting[i % len(waiting)], to)
            elif self.held:
                job_id, _ = self._held(i)
                before = dump(r, q)
                with pytest.raises(JobNotPending):
                    q.reassign(job_id, to)
                assert dump(r, q) == before

        # --- the law -------------------------------------------------------------
        @invariant()
        def ring_law_and_balance(self) -> None:
            snap = assert_law(r, self.q)
            assert sorted(snap.active) == sorted(self.held)
            for job_id, token in self.held.items():
                assert r.hget(self.q.keys.job(job_id), "attempts") == str(token)

    return LaneMachine


def test_ring_law_holds_under_random_transitions(server: EmbeddedServer, r: redis.Redis) -> None:
    run_state_machine_as_test(
        _machine(server, r),
        settings=settings(
            max_examples=100,
            stateful_step_count=30,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow],
        ),
    )
