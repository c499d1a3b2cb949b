"""Readers of the lane structures and the checker of the ring law, shared by the lane tests.

The law (DESIGN.md section 5, docs/lanes.md): a group is on the ring exactly once iff
its lane is non-empty, it is not paused, not held by a rate limit (``gwait``,
docs/flow-control.md) and it is under its limit; ``gactive`` of every
group equals the number of its jobs in active; every lane is recorded in ``groups``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import redis

from echomq import AsyncQueue, Queue


@dataclass
class Lanes:
    """A snapshot of one queue's lane structures, read with a decoding client."""

    ring: list[str]
    gactive: dict[str, int]
    glimit: dict[str, int]
    gweight: dict[str, int]
    gpaused: set[str]
    groups: set[str]
    lanes: dict[str, list[str]]  # group -> ids in its lane, head first
    pending: list[str]
    active: list[str]
    schedule: list[str]
    dead: list[str]
    wake: int
    gwait: set[str]
    grate: set[str]


def lanes_of(r: redis.Redis, q: Queue | AsyncQueue) -> Lanes:
    """Read every lane structure of ``q`` (a SCAN, then one pipelined round trip); a
    lane key is found by SCAN, not via ``groups``, so an orphaned lane shows up."""
    k = q.keys
    # queue and group names admit no glob characters, so the base is a literal prefix
    lane_keys = list(r.scan_iter(match=k.base + "g:*:pending", count=1000))
    prefix, suffix = k.base + "g:", ":pending"
    pipe = r.pipeline(transaction=False)
    pipe.lrange(k.ring, 0, -1)
    for h in (k.gactive, k.glimit, k.gweight):
        pipe.hgetall(h)
    pipe.smembers(k.gpaused)
    pipe.smembers(k.groups)
    for z in (k.pending, k.active, k.schedule, k.dead, *lane_keys):
        pipe.zrange(z, 0, -1)
    pipe.llen(k.wake)
    pipe.zrange(k.gwait, 0, -1)
    pipe.hkeys(k.grate)
    ring, gactive, glimit, gweight, gpaused, groups, pending, active, schedule, dead, *rest = (
        pipe.execute()
    )
    *lanes, wake, gwait, grate = rest
    return Lanes(
        ring=ring,
        gactive={g: int(v) for g, v in gactive.items()},
        glimit={g: int(v) for g, v in glimit.items()},
        gweight={g: int(v) for g, v in gweight.items()},
        gpaused=set(gpaused),
        groups=set(groups),
        lanes={key[len(prefix) : -len(suffix)]: ids for key, ids in zip(lane_keys, lanes)},
        pending=pending,
        active=active,
        schedule=schedule,
        dead=dead,
        wake=int(wake),
        gwait=set(gwait),
        grate=set(grate),
    )


def serveable(snap: Lanes, group: str) -> bool:
    """What the law says: work in the lane, not paused, under the limit."""
    if not snap.lanes.get(group):
        return False
    if group in snap.gpaused or group in snap.gwait:
        return False
    limit = snap.glimit.get(group)
    return limit is None or snap.gactive.get(group, 0) < limit


def active_by_group(r: redis.Redis, q: Queue | AsyncQueue, active: list[str]) -> dict[str, int]:
    """How many jobs of each group are in active, from the rows (one round trip)."""
    pipe = r.pipeline(transaction=False)
    for job_id in active:
        pipe.hget(q.keys.job(job_id), "group")
    out: dict[str, int] = {}
    for g in pipe.execute():
        if g is not None:
            out[g] = out.get(g, 0) + 1
    return out


def assert_law(r: redis.Redis, q: Queue | AsyncQueue) -> Lanes:
    """Assert the ring law and the gactive balance; return the snapshot read."""
    snap = lanes_of(r, q)
    # every lane is recorded, so counts, drain and obliterate see it...
    assert set(snap.lanes) <= snap.groups, (snap.lanes, snap.groups)
    # ...and only live groups are: work waiting or in flight, or a setting
    live = set(snap.lanes) | set(snap.gactive) | set(snap.glimit) | set(snap.gweight)
    live |= snap.gwait | snap.grate
    assert snap.groups <= live | snap.gpaused, (snap.groups, live)
    # gactive is exact: a slot taken by a claim was given back exactly once
    assert snap.gactive == active_by_group(r, q, snap.active), snap
    assert all(v > 0 for v in snap.gactive.values()), snap.gactive
    # on the ring exactly once iff serveable, nothing else on it
    assert len(snap.ring) == len(set(snap.ring)), snap.ring
    want = {g for g in snap.groups | set(snap.lanes) if serveable(snap, g)}
    assert set(snap.ring) == want, (snap.ring, want, snap)
    # each job row agrees with the lane that holds it (one round trip)
    pipe = r.pipeline(transaction=False)
    placed = [(g, job_id) for g, ids in snap.lanes.items() for job_id in ids]
    for _, job_id in placed:
        pipe.hmget(q.keys.job(job_id), "state", "group")
    rows: list[Any] = pipe.execute()
    for (g, job_id), row in zip(placed, rows):
        assert row == ["pending", g], (job_id, row)
    return snap
