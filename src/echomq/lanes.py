"""Per-group (lane) operator verbs: pause, resume, limit, weight, drain, reassign, and
the rebuild of the lanes' index (reindex).

A grouped job waits in its group's lane; the grouped claim serves the groups on the
ring in turn. See ``docs/lanes.md`` for the ring law these verbs keep.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from . import checks, journal
from .context import Context, as_str
from .errors import InvalidArgument
from .keyspace import check_name
from .results import GroupInfo as GroupInfo
from .results import ReindexResult as ReindexResult
from .scripts import Cmd, Eval, Plan, script

#: Groups read per server call by :func:`groups`.
GROUPS_PAGE = 200


#: Entries per group in the ``groups`` script's reply.
GROUP_FIELDS = 8


def lane_rate_fields(rate: Any, held: Any) -> dict[str, Any]:
    """A group's rate limit and hold, from the ``groups`` script's last two entries."""
    text = as_str(rate)
    m, _, p = text.partition(":")
    until = int(held)
    return {
        "rate_limit": (int(m), int(p)) if text else None,
        "held_until_ms": until if until > 0 else None,
    }


def _g(group: str) -> str:
    return check_name(group, "group")


def pause_group(ctx: Context, group: str) -> Plan[None]:
    """Hold one group back: it leaves the ring, its backlog stays in its lane byte for
    byte, its jobs in flight keep running. Idempotent. Distinct from the queue pause.

    Args:
        group: the group, ``[A-Za-z0-9._-]{1,128}``.

    Raises:
        InvalidName: a malformed group name (nothing is sent).
    """
    argv = (_g(group), ctx.actor, journal.request_id())
    yield Eval(script("pause_group"), (ctx.keys.base,), argv)


def resume_group(ctx: Context, group: str) -> Plan[None]:
    """Serve a paused group again: it rejoins the ring (with a wake token) when its lane
    holds work and it is under its limit. Idempotent.

    Raises:
        InvalidName: a malformed group name (nothing is sent).
    """
    argv = (_g(group), ctx.actor, journal.request_id())
    yield Eval(script("resume_group"), (ctx.keys.base,), argv)


def set_group_limit(ctx: Context, group: str, limit: int) -> Plan[None]:
    """Allow at most ``limit`` jobs of ``group`` in flight at once.

    A raised limit re-rings a group held at the old one (with a wake token); a limit
    below the in-flight count takes the group off the ring until enough jobs finish.

    Args:
        group: the group.
        limit: a positive integer.

    Raises:
        InvalidName, InvalidArgument: before anything is sent.
    """
    limit = checks.count(limit, "limit")
    argv = (_g(group), str(limit), ctx.actor, journal.request_id())
    yield Eval(script("set_group_limit"), (ctx.keys.base,), argv)


def clear_group_limit(ctx: Context, group: str) -> Plan[None]:
    """Remove the group's concurrency limit (re-ringing it if the limit held it back).

    Raises:
        InvalidName: a malformed group name (nothing is sent).
    """
    argv = (_g(group), "", ctx.actor, journal.request_id())
    yield Eval(script("set_group_limit"), (ctx.keys.base,), argv)


def set_group_weight(ctx: Context, group: str, weight: int) -> Plan[None]:
    """Serve up to ``weight`` jobs of ``group`` per turn of the ring (1 = plain turns).

    Args:
        group: the group.
        weight: a positive integer; 1 clears the weight.

    Raises:
        InvalidName, InvalidArgument: before anything is sent.
    """
    weight = checks.count(weight, "weight")
    argv = (_g(group), str(weight), ctx.actor, journal.request_id())
    yield Eval(script("set_group_weight"), (ctx.keys.base,), argv)


def group_depth(ctx: Context, group: str) -> Plan[int]:
    """How many jobs wait in the group's lane (0 for a group never seen).

    Raises:
        InvalidName: a malformed group name (nothing is sent).
    """
    return int((yield Cmd(("ZCARD", ctx.keys.lane(group)))))


def groups(ctx: Context, page: int = GROUPS_PAGE) -> Plan[list[GroupInfo]]:
    """Every group of the queue with its depth, in-flight, limit, weight and pause.

    Args:
        page: how many groups one server call reads (the set is walked with a
            cursor, so a queue with many tenants never blocks the server).

    Returns:
        One :class:`GroupInfo` per group, sorted by name.
    """
    page = checks.batch(page, "page")
    by_name: dict[str, GroupInfo] = {}
    cursor = "0"
    while True:
        r = yield Eval(script("groups"), (ctx.keys.base,), (cursor, str(page)))
        cursor = r[0]
        for i in range(1, len(r), GROUP_FIELDS):
            lim = r[i + 3]
            info = GroupInfo(
                name=r[i],
                depth=int(r[i + 1]),
                in_flight=int(r[i + 2]),
                limit=int(lim) if lim else None,
                weight=int(r[i + 4]),
                paused=bool(int(r[i + 5])),
                **lane_rate_fields(r[i + 6], r[i + 7]),
            )
            # SSCAN may return a member twice across pages: keep one per name
            by_name[info.name] = info
        if cursor == "0":
            return [by_name[n] for n in sorted(by_name)]


def drain_group(ctx: Context, group: str, budget: int = 1000) -> Plan[int]:
    """Delete one group's pending lane: the jobs' rows and logs go, their dedup keys
    are released, the group leaves the ring. Jobs in flight are untouched.

    Args:
        group: the group.
        budget: the most jobs one server call deletes; the verb calls again until the
            lane is empty.

    Returns:
        How many jobs were drained.

    Raises:
        InvalidName, InvalidArgument: before anything is sent.
    """
    budget = checks.batch(budget, "budget")
    g = _g(group)
    total = 0
    while True:
        n, more = yield Eval(script("drain_group"), (ctx.keys.base,), (g, str(budget), ctx.actor))
        total += int(n)
        if not int(more):
            return total


def reassign(ctx: Context, job_id: str, group: str | None) -> Plan[None]:
    """Move a pending job to ``group``'s lane (``None``: to the flat pending set),
    keeping its priority score; both groups' places on the ring follow.

    Args:
        job_id: the job.
        group: the target group, or ``None`` for the flat pending set.

    Raises:
        InvalidJobId, InvalidName: before anything is sent.
        JobGone: no such job.
        JobNotPending: the job is active, scheduled or dead; nothing changed.
    """
    row = ctx.keys.job(job_id)
    target = "" if group is None else _g(group)
    yield Eval(script("reassign"), (ctx.keys.base, row), (job_id, target, ctx.actor), job=job_id)


#: Members one reindex step examines by default (a step also stops after about 1 ms).
REINDEX_SCAN = 1000
#: The largest ``scan`` a reindex step may be asked for.
MAX_REINDEX_SCAN = 5000
_REINDEX_PHASES = ("lanes", "index")


def _reindex_cursor(cursor: str | None) -> tuple[str, str, str, int]:
    """``(phase, sscan page, group, offset)`` from a cursor ``phase|page|group|offset``."""
    if cursor is None:
        return "lanes", "0", "", 0
    parts = cursor.split("|") if isinstance(cursor, str) else []
    if len(parts) != 4 or parts[0] not in _REINDEX_PHASES:
        raise InvalidArgument(f"invalid cursor {checks.show(cursor, 40)}")
    phase, page, group, off = parts
    if phase == "lanes":
        checks.scan_cursor(page)
        if group:
            _g(group)
    elif page or group:
        raise InvalidArgument(f"invalid cursor {checks.show(cursor, 40)}")
    if not (off.isascii() and off.isdigit()):
        raise InvalidArgument(f"invalid cursor {checks.show(cursor, 40)}")
    return phase, page, group, checks.integer(int(off), "cursor", 0, checks.MAX_COUNT)


def reindex(
    ctx: Context,
    *,
    dry_run: bool = False,
    cursor: str | None = None,
    scan: int = REINDEX_SCAN,
    max_calls: int | None = None,
    progress: Callable[[ReindexResult], Any] | None = None,
) -> Plan[ReindexResult]:
    """Rebuild the lanes' index (``gindex``) of a queue written before it existed.

    Counts, pages of pending, drain and obliterate find the lanes' jobs through the
    index, which every transition keeps; a queue whose lanes were filled by a client
    that predates it would be undercounted. This walks every lane (adding the jobs
    the index misses), then the index (removing members no lane holds), in bounded
    steps: idempotent, resumable from ``cursor``, safe on a live queue.

    Args:
        dry_run: write nothing; ``added``/``removed`` say what a run would change
            (whether a queue needs it).
        cursor: resume from a result's or progress report's ``cursor``.
        scan: members one server call examines (1..5000; a call also stops after
            about 1 ms of server time).
        max_calls: stop after this many server calls (the result's ``cursor`` goes on).
        progress: called with a :class:`ReindexResult` after every server call.

    Returns:
        A :class:`ReindexResult`.

    Raises:
        InvalidArgument, InvalidName: a bad cursor, bound or flag, before any I/O.
    """
    dry = "1" if checks.flag(dry_run, "dry_run") else ""
    scan = checks.integer(scan, "scan", 1, MAX_REINDEX_SCAN)
    if max_calls is not None:
        checks.count(max_calls, "max_calls")
    if progress is not None and not callable(progress):
        raise InvalidArgument("progress must be callable")
    phase, page, group, off = _reindex_cursor(cursor)
    res = ReindexResult(dry_run=bool(dry), cursor=cursor)
    while True:
        argv = (phase, page, group, str(off), str(scan), dry, ctx.actor)
        reply = yield Eval(script("reindex"), (ctx.keys.base,), argv)
        added, removed, seen = (int(x) for x in reply[:3])
        phase, page, group = (as_str(x) for x in reply[3:6])
        off, done = int(reply[6]), bool(int(reply[7]))
        res = replace(
            res,
            added=res.added + added,
            removed=res.removed + removed,
            examined=res.examined + seen,
            calls=res.calls + 1,
            cursor=None if done else f"{phase}|{page}|{group}|{off}",
        )
        if progress is not None:
            progress(res)
        if done or (max_calls is not None and res.calls >= max_calls):
            return res
