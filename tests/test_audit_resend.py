"""An audited verb the transport sends again after a lost reply journals once: each
call carries a request id, and a send whose id the journal already holds writes no
second entry (lib/audit.lua)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import redis

from echomq import Queue, jobs
from faults.proxy import FaultProxy

CALLS: dict[str, Callable[[Queue, str], Any]] = {
    "update_data": lambda q, jid: q.update_data(jid, {"b": 2}),
    "pause_group": lambda q, jid: q.pause_group("g"),
    "resume_group": lambda q, jid: q.resume_group("g"),
    "set_group_limit": lambda q, jid: q.set_group_limit("g", 3),
    "clear_group_limit": lambda q, jid: q.clear_group_limit("g"),
    "set_group_weight": lambda q, jid: q.set_group_weight("g", 2),
    "repeat": lambda q, jid: q.repeat("nightly", cron="0 3 * * *"),
}


@pytest.mark.parametrize("verb", sorted(CALLS))
def test_a_resent_audited_verb_journals_once(
    pq: Queue, proxy: FaultProxy, r: redis.Redis, verb: str
) -> None:
    jid = pq.enqueue({"a": 1}, group="g")
    pq.counts()  # warm: the connection and the version fence are done
    proxy.drop_replies(1)
    CALLS[verb](pq, jid)
    assert proxy.replies_dropped == 1  # the first send ran; its reply was lost
    entries = pq.audit(10)
    assert [e.verb for e in entries] == [verb]
    req = r.xrevrange(pq.keys.audit, "+", "-", count=1)[0][1]["req"]
    assert len(req) == 16
    # a second call is a second act: a new request id, a second entry
    CALLS[verb](pq, jid)
    assert [e.verb for e in pq.audit(10)] == [verb, verb]


def test_the_same_request_id_journals_once_and_another_twice(q: Queue) -> None:
    jid = q.enqueue({"a": 1})
    op = next(jobs.update_data(q.ctx, jid, {"b": 2}))
    q.runner.execute(op)
    q.runner.execute(op)  # what the transport sends after a lost reply
    assert len(q.audit(10)) == 1 and q.get_job(jid).data == {"b": 2}  # type: ignore[union-attr]
    q.update_data(jid, {"b": 2})
    assert len(q.audit(10)) == 2
