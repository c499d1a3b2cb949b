"""Helpers shared by the operator-plane tests: put jobs in a state, compare key pictures.

Builders assume the queue has no other ready work when they claim (``active`` and
``dead`` claim the job they just enqueued), so build those states first.
"""

from __future__ import annotations

from typing import Any

import redis

from echomq import Flow, Queue

STATES = ("pending", "active", "scheduled", "dead")
#: Far enough ahead that no test sees a scheduled job come due.
LATER_MS = 3_600_000


def put_job(
    q: Queue, state: str, *, group: str | None = None, payload: Any = None, **kw: Any
) -> tuple[str, int | None]:
    """Enqueue one job and drive it to ``state``.

    Returns:
        ``(job_id, token)``; the token is the fencing token for an active job, the last
        one handed out for a dead job, ``None`` otherwise.
    """
    data = {"state": state} if payload is None else payload
    if state == "pending":
        return q.enqueue(data, group=group, **kw), None
    if state == "scheduled":
        return q.enqueue(data, group=group, delay_ms=LATER_MS, **kw), None
    if state == "waiting_children":  # a flow parent waiting for one pending child
        kids = [Flow(payload={"child": 1})]
        return q.enqueue_flow(Flow(payload=data, group=group, children=kids, **kw)).id, None
    jid = q.enqueue(data, group=group, max_attempts=1, **kw)
    got = q.claim()
    assert got is not None and got.id == jid, "the builder expects no other ready work"
    if state == "active":
        return jid, got.token
    if state == "completed":  # kept as history: the job asks for its own keep
        assert kw.get("keep_ms"), "a completed job stays only when kept (keep_ms=...)"
        q.complete(jid, got.token)
        return jid, None
    assert state == "dead"
    assert q.retry(jid, got.token, "boom") == "dead"
    return jid, got.token


def changed(before: dict[str, Any], after: dict[str, Any]) -> set[str]:
    """The keys whose type, value or ttl presence differ between two ``dump`` pictures
    (keys added or removed count as changed)."""
    return {k for k in before.keys() | after.keys() if before.get(k) != after.get(k)}


def row_keys(r: redis.Redis, q: Queue) -> set[str]:
    """Every job row of ``q`` (not its logs or lock keys)."""
    rows = set(r.scan_iter(match=q.keys.base + "job:*", count=1000))
    return {k for k in rows if not k.endswith((":logs", ":logtimes", ":lock", ":errors"))}


def ring(r: redis.Redis, q: Queue) -> list[str]:
    """The groups on the ring, in order."""
    return list(r.lrange(q.keys.ring, 0, -1))
