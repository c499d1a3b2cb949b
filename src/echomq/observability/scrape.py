"""One queue's state for a scrape, read with bounded server work.

A snapshot is two read-only scripts, each doing a fixed amount of work per call, and
the worker registry's read (``workers``: the live records, at most ``MAX_WORKERS``, and
a bounded trim of dead entries) for the live workers' count:

- ``obs_queue`` reads the four sets' sizes (``ZCARD``), the pause, the two throughput
  totals, the number of live groups and the oldest candidates of the flat pending set;
- ``obs_groups`` reads one ``SSCAN`` page of the groups set (``COUNT`` hint), each
  group's lane depth, in-flight count and oldest candidates. The client walks the
  cursor, keeping only the busiest groups (a bounded top-N).

So no call walks a set that grows with the jobs: the heaviest call reads one page of
groups. The total work of a scrape grows with the number of live groups (a queue with
no groups costs one call), never with the number of jobs.

**The oldest pending job's age, without walking a backlog.** Job ids are time-ordered
snowflakes (:mod:`echomq.ids`): the id carries its mint millisecond, and within one
priority (a band of scores, :data:`echomq.schema.SEQ_SPAN` wide) a backlog pops in
enqueue order, so a band's head is the job that waited longest in it. A backlog is
ordered by priority first; reading the oldest of every
priority band would walk the bands, so a snapshot reads two: the head of the backlog
(the band served first, the job served next) and the first member of the last band
(the band served last, where a starving job waits). That is three ``O(log n)`` reads
per backlog. The age is the server's ``TIME`` minus the oldest candidate's mint time:
it counts from *enqueue*, so a job that was delayed, retried or reaped back to pending
counts the time it spent scheduled or running too, and a job in a middle priority band
is not seen. The producer's clock stamps the id; skew between hosts shows up as age.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from dataclasses import dataclass, field

from .. import ids
from ..context import Context, as_str
from ..registry import MAX_WORKERS, TRIM_PER_READ
from ..scripts import Batch, Eval, Plan, script

# the two read-only scripts (lua/obs_queue.lua, lua/obs_groups.lua)
QUEUE_SCRIPT = script("obs_queue")
GROUPS_SCRIPT = script("obs_groups")
#: The worker registry's read (lua/workers.lua), for the live workers' count.
WORKERS_SCRIPT = script("workers")

#: Groups asked per ``obs_groups`` call (an ``SSCAN`` COUNT hint).
GROUP_PAGE = 100
#: How many groups a snapshot keeps (the busiest, by lane depth + in flight).
TOP_GROUPS = 10


@dataclass(frozen=True)
class GroupLoad:
    """One group's load: its lane's depth and its jobs in flight."""

    name: str
    pending: int
    active: int


@dataclass(frozen=True)
class QueueSnapshot:
    """One queue's state at a scrape.

    Attributes:
        queue: the queue name.
        pending: ready jobs, lanes included.
        active, scheduled, dead: the sizes of those sets.
        completed, failed: the throughput totals (``metrics:*`` hashes).
        paused: the claim gate is closed.
        groups: the number of live groups.
        oldest_pending_age_s: age of the oldest pending candidate (see the module
            docstring), ``0.0`` when nothing is pending.
        top_groups: the busiest groups, busiest first.
        rate_limited: no claim may start a job now (a full rate window, a handler's
            ``RateLimited`` hold or the concurrency cap; docs/flow-control.md).
        rate_limited_for_s: how long until a start is allowed (the window's or the
            hold's; 0 for the cap or when not limited).
        held_lanes: lanes held off the ring by their rate limit or a handler.
        server_calls: how many server calls the snapshot took.
        workers: the live workers of the queue's registry (records whose ttl has
            not passed: what ``Queue.workers`` answers, counted).
        kept: completed jobs kept as history (the ``completed`` set).
        waiting_children: flow parents waiting for their children (the ``waiting`` set).
    """

    queue: str
    pending: int
    active: int
    scheduled: int
    dead: int
    completed: int
    failed: int
    paused: bool
    groups: int
    oldest_pending_age_s: float
    top_groups: list[GroupLoad] = field(default_factory=list)
    rate_limited: bool = False
    rate_limited_for_s: float = 0.0
    held_lanes: int = 0
    server_calls: int = 1
    workers: int = 0
    kept: int = 0
    waiting_children: int = 0


def _age_s(oldest: str, now_ms: int) -> float:
    if not oldest:
        return 0.0
    try:
        minted = ids.minted_at_ms(oldest)
    except Exception:  # a foreign member: no age rather than a failed scrape
        return 0.0
    return max(0.0, (now_ms - minted) / 1000.0)


def _older(a: str, b: str) -> str:
    if not a:
        return b
    if not b:
        return a
    return min(a, b)


def snapshots(
    ctxs: Sequence[Context], *, top_groups: int = TOP_GROUPS, page: int = GROUP_PAGE
) -> Plan[list[QueueSnapshot]]:
    """The snapshots of many queues: one pipelined round trip of ``obs_queue`` calls,
    then, per queue that has groups, its ``obs_groups`` pages.

    Args:
        ctxs: the queues' contexts.
        top_groups: how many of each queue's busiest groups to keep (0 = none).
        page: the ``SSCAN`` COUNT hint of one groups call.
    """
    if not ctxs:
        return []
    replies = yield Batch(tuple(Eval(QUEUE_SCRIPT, (c.keys.base,)) for c in ctxs))
    # the live workers: the registry's read (its records, at most MAX_WORKERS, and a
    # bounded trim of the dead entries), counted; one more pipelined round trip
    registries = yield Batch(
        tuple(
            Eval(WORKERS_SCRIPT, (c.keys.base,), (str(MAX_WORKERS), str(TRIM_PER_READ)))
            for c in ctxs
        )
    )
    out: list[QueueSnapshot] = []
    for ctx, r, reg in zip(ctxs, replies, registries):
        if isinstance(r, Exception):
            raise r
        if isinstance(reg, Exception):
            raise reg
        oldest, now_ms = as_str(r[8]), int(r[9])
        pending, calls = int(r[0]), 1
        top: list[GroupLoad] = []
        if int(r[7]) > 0:
            seen: dict[str, GroupLoad] = {}
            cursor = "0"
            while True:
                g = yield Eval(GROUPS_SCRIPT, (ctx.keys.base,), (cursor, str(page)))
                calls += 1
                cursor = as_str(g[0])
                for i in range(1, len(g), 4):
                    name = as_str(g[i])
                    if name in seen:  # SSCAN may return a member twice
                        continue
                    seen[name] = GroupLoad(name, int(g[i + 1]), int(g[i + 2]))
                    oldest = _older(oldest, as_str(g[i + 3]))
                if cursor == "0":
                    break
            pending += sum(x.pending for x in seen.values())
            top = heapq.nlargest(
                top_groups, seen.values(), key=lambda x: (x.pending + x.active, x.name)
            )
        out.append(
            QueueSnapshot(
                queue=ctx.keys.name,
                pending=pending,
                active=int(r[1]),
                scheduled=int(r[2]),
                dead=int(r[3]),
                completed=int(r[4]),
                failed=int(r[5]),
                paused=bool(int(r[6])),
                groups=int(r[7]),
                oldest_pending_age_s=_age_s(oldest, now_ms),
                top_groups=top,
                rate_limited=bool(int(r[10])),
                rate_limited_for_s=int(r[11]) / 1000.0,
                held_lanes=int(r[12]),
                server_calls=calls + 1,
                workers=(len(reg) - 1) // 2,
                kept=int(r[14]) if len(r) > 14 else 0,
                waiting_children=int(r[15]) if len(r) > 15 else 0,
            )
        )
    return out
