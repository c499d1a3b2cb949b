"""Helpers shared by the operator-plane tests: put jobs in a state, compare key pictures.

Builders assume the queue has no other ready work when they claim (``active`` and
``dead`` claim the job they just enqueued), so build those states first.
"""

from __future__ import annotations

from typing import Any

import redis

from echomq import Queue

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
    if state == "waiting_children":  # a flow parent with no child left to wait for
        jid = q.enqueue(data, group=group, **kw)
        make_waiting(q, jid)
        return jid, None
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


def make_waiting(q: Queue, jid: str, refs: list[str] | tuple[str, ...] = ()) -> None:
    """Turn the pending job ``jid`` into a flow parent waiting for the children ``refs``
    ('queue:id'), writing the rows as the schema names them (what enqueue_flow writes:
    state waiting_children, the WAITING set at the server's now, :deps, ``children``)."""
    r = q.client
    k = q.keys
    row = k.job(jid)
    raw = r.hget(row, "group")
    group = raw.decode() if isinstance(raw, bytes) else raw
    now_s, now_us = r.time()
    pipe = r.pipeline(transaction=False)
    pipe.zrem(k.pending, jid)
    if group:
        pipe.zrem(k.lane(group), jid)
        pipe.zrem(k.gindex, jid)
    pipe.hset(row, mapping={"state": "waiting_children", "children": str(len(refs))})
    pipe.zadd(k.waiting, {jid: now_s * 1000 + now_us // 1000})
    if refs:
        pipe.sadd(k.deps(jid), *refs)
    pipe.execute()


def make_child(q: Queue, jid: str, parent: str, on_fail: str | None = None) -> None:
    """Mark job ``jid`` of ``q`` a flow child of ``parent`` ('queue:id')."""
    fields = {"parent": parent}
    if on_fail and on_fail != "fail_parent":
        fields["on_fail"] = on_fail
    q.client.hset(q.keys.job(jid), mapping=fields)
