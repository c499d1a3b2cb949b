"""Readers of the lane structures and the checker of the ring law, shared by the lane tests.

The law (DESIGN.md section 5, docs/lanes.md): a group is on the ring exactly once iff
its lane is non-empty, it is not paused and it is under its limit; ``gactive`` of every
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


def lanes_of(r: redis.Redis, q: Queue | AsyncQueue) -> Lanes:
    """Read every lane structure of ``q``; a lane key is found by SCAN, not via ``groups``,
    so an orphaned lane shows up."""
    k = q.keys
    # queue and group names admit no glob characters, so the base is a literal prefix
    lane_keys = r.scan_iter(match=k.base + "g:*:pending", count=1000)
    prefix, suffix = k.base + "g:", ":pending"
    lanes = {key[len(prefix) : -len(suffix)]: r.zrange(key, 0, -1) for key in lane_keys}
    return Lanes(
        ring=r.lrange(k.ring, 0, -1),
        gactive={g: int(v) for g, v in r.hgetall(k.gactive).items()},
        glimit={g: int(v) for g, v in r.hgetall(k.glimit).items()},
        gweight={g: int(v) for g, v in r.hgetall(k.gweight).items()},
        gpaused=set(r.smembers(k.gpaused)),
        groups=set(r.smembers(k.groups)),
        lanes=lanes,
        pending=r.zrange(k.pending, 0, -1),
        active=r.zrange(k.active, 0, -1),
        schedule=r.zrange(k.schedule, 0, -1),
        dead=r.zrange(k.dead, 0, -1),
        wake=int(r.llen(k.wake)),
    )


def serveable(snap: Lanes, group: str) -> bool:
    """What the law says: work in the lane, not paused, under the limit."""
    if not snap.lanes.get(group):
        return False
    if group in snap.gpaused:
        return False
    limit = snap.glimit.get(group)
    return limit is None or snap.gactive.get(group, 0) < limit


def active_by_group(r: redis.Redis, q: Queue | AsyncQueue, active: list[str]) -> dict[str, int]:
    """How many jobs of each group are in active, from the rows."""
    out: dict[str, int] = {}
    for job_id in active:
        g = r.hget(q.keys.job(job_id), "group")
        if g is not None:
            out[g] = out.get(g, 0) + 1
    return out


def assert_law(r: redis.Redis, q: Queue | AsyncQueue) -> Lanes:
    """Assert the ring law and the gactive balance; return the snapshot read."""
    snap = lanes_of(r, q)
    # every lane is recorded, so counts, drain and obliterate see it
    assert set(snap.lanes) <= snap.groups, (snap.lanes, snap.groups)
    # gactive is exact: a slot taken by a claim was given back exactly once
    assert snap.gactive == active_by_group(r, q, snap.active), snap
    assert all(v > 0 for v in snap.gactive.values()), snap.gactive
    # on the ring exactly once iff serveable, nothing else on it
    assert len(snap.ring) == len(set(snap.ring)), snap.ring
    want = {g for g in snap.groups | set(snap.lanes) if serveable(snap, g)}
    assert set(snap.ring) == want, (snap.ring, want, snap)
    # each job row agrees with the set that holds it
    for g, ids in snap.lanes.items():
        for job_id in ids:
            row: Any = r.hmget(q.keys.job(job_id), "state", "group")
            assert row == ["pending", g], (job_id, row)
    return snap
