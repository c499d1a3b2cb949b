"""Pages of jobs: :func:`browse` (ids, newest first or in run order) and the
operator's bounded pages and search (:func:`job_page`, :func:`find_jobs`).

Orders (the operator's, not :func:`browse`'s, which stays newest first): pending in
run order (priority, then enqueue order), scheduled soonest first, active and dead
newest first. A queue's lanes are paged one lane at a time (``group=``): merging
every lane into one page would walk them all.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .. import checks, ids
from ..context import Context, as_str
from ..errors import InvalidArgument
from ..results.views import Found, JobLine, JobPage
from ..scripts import Batch, Cmd, Eval, Plan, script
from . import decode
from .limits import (
    ASKED_ORDERS,
    BROWSE_ORDERS,
    LINE_FIELDS,
    MAX_PAGE,
    MAX_SEARCH_BUDGET,
    SEARCH_BUDGET,
    SEARCH_FIELDS,
    STATE_ORDERS,
    Order,
)

_SETS = {
    "pending": "pending",
    "active": "active",
    "scheduled": "schedule",
    "dead": "dead",
    "completed": "completed",
    "waiting_children": "waiting",
}


def browse(
    ctx: Context, state: str, n: int = 20, offset: int = 0, order: str = "newest"
) -> Plan[list[str]]:
    """A page of job ids in ``state`` (lanes merged into pending), bounded at any offset.

    Pending's flat set and every lane form one order through the lanes' index
    (``gindex``), so a page costs ``O(log^2 N + n)`` on the server whatever the offset
    and the number of lanes.

    Args:
        state: ``pending``, ``active``, ``scheduled``, ``dead``, ``completed``
            (the completed jobs kept as history; newest first = latest finished) or
            ``waiting_children`` (flow parents; newest first = latest to start waiting).
        n: page size.
        offset: how many to skip.
        order: ``newest`` (score then id, descending: the default) or ``run`` (the
            order claims take: priority then enqueue order; the schedule soonest first).

    Raises:
        InvalidArgument: an unknown state or order, or a bad page.
    """
    state = checks.state(state, kept=True)
    n = checks.batch(n, "n")
    offset = checks.count(offset, "offset", zero=True)
    if not isinstance(order, str) or order not in BROWSE_ORDERS:
        raise InvalidArgument(f"order must be 'newest' or 'run', got {checks.show(order, 40)}")
    argv = (_SETS[state], str(n), str(offset), "run" if order == "run" else "")
    ids: list[str] = yield Eval(script("browse"), (ctx.keys.base,), argv)
    return ids


def _state(state: str) -> str:
    return checks.state(state, kept=True)


def _order(state: str, order: str | None) -> tuple[Order, bool]:
    """The page's order name and whether the set is read reversed."""
    if order is None:
        return STATE_ORDERS[state]
    if not isinstance(order, str) or order not in ASKED_ORDERS:
        raise InvalidArgument(f"order must be 'run' or 'newest', got {checks.show(order, 40)}")
    if order == "newest":
        return "newest", True
    return ("soonest" if state == "scheduled" else "run"), False


def _set_key(ctx: Context, state: str, group: str | None) -> str:
    if group is not None:
        if state != "pending":
            raise InvalidArgument("a group's lane holds pending jobs only")
        return ctx.keys.lane(group)
    return ctx.keys.state_set(state)


def _range(key: str, start: int, stop: int, rev: bool) -> Cmd:
    args: tuple[str | int, ...] = ("ZRANGE", key, start, stop)
    return Cmd((*args, "REV", "WITHSCORES") if rev else (*args, "WITHSCORES"))


def job_page(
    ctx: Context,
    state: str,
    n: int = 20,
    offset: int = 0,
    group: str | None = None,
    order: str | None = None,
) -> Plan[JobPage]:
    """A page of jobs in ``state`` in the operator's order, with their list fields.

    Args:
        state: ``pending``, ``active``, ``scheduled``, ``dead``, ``completed`` (the
            completed jobs kept as history, newest finished first) or
            ``waiting_children`` (flow parents, longest waiting first).
        n: page size, 1..``MAX_PAGE``.
        offset: jobs to skip.
        group: page this group's lane instead (``pending`` only); without it,
            ``pending`` is the flat set (each lane is paged on its own).
        order: ``None`` for the state's order (pending in run order, scheduled
            soonest first, active and dead newest first); ``run`` (the set ascending:
            the order claims take, the schedule soonest first, dead oldest first) or
            ``newest`` (descending), as :func:`echomq.reads.browse` takes.

    Returns:
        A :class:`JobPage`; ``total`` counts the set paged. Two round trips: the
        page of ids with their scores, then their rows.

    Raises:
        InvalidArgument, InvalidName: before anything is sent.
    """
    _state(state)
    n = checks.integer(n, "n", 1, MAX_PAGE)
    offset = checks.count(offset, "offset", zero=True)
    named, rev = _order(state, order)
    key = _set_key(ctx, state, group)
    page, total, now = yield Batch(
        (_range(key, offset, offset + n - 1, rev), Cmd(("ZCARD", key)), Cmd(("TIME",)))
    )
    scored = [(as_str(m), decode.scored(state, s)) for m, s in decode.pairs(page)]
    jobs = yield from _lines(ctx, state, scored)
    return JobPage(state, group, named, n, offset, int(total), decode.time_ms(now), jobs)


def _lines(ctx: Context, state: str, scored: list[tuple[str, int]]) -> Plan[list[JobLine]]:
    if not scored:
        return []
    rows = yield Batch(tuple(Cmd(("HMGET", ctx.keys.job(j), *LINE_FIELDS)) for j, _ in scored))
    out: list[JobLine] = []
    for (job_id, score), values in zip(scored, rows):
        if isinstance(values, Exception) or values[0] is None:
            continue  # settled between the two reads
        out.append(decode.line(job_id, state, values, score))
    return out


def find_jobs(
    ctx: Context,
    state: str,
    text: str,
    *,
    fields: Sequence[str] = SEARCH_FIELDS,
    n: int = 20,
    cursor: int = 0,
    budget: int = SEARCH_BUDGET,
    group: str | None = None,
    order: str | None = None,
    since_ms: int | None = None,
    until_ms: int | None = None,
) -> Plan[Found]:
    """Jobs in ``state`` whose fields contain ``text`` (case-insensitive), one bounded step.

    Examines at most ``budget`` jobs from rank ``cursor`` in the state's order and
    returns the matches (at most ``n``) and where to go on. Every server command is
    a page of the set or one row read, pipelined. ``pending`` without ``group`` walks
    every pending job: the flat set, then every lane (through the lanes' index), so
    the cursor is a rank in that walk and ``total`` counts both.

    Args:
        text: the text to look for; it may be ``""`` only with a time range (the
            search is then by time alone), else it is refused.
        fields: where to look: ``id``, ``name``, ``group``, ``error`` (last error),
            ``payload`` (the stored text).
        order: the order the cursor walks, as :func:`job_page` takes it.
        since_ms, until_ms: only jobs created in this range (ms since the epoch,
            inclusive, read from the id: no row is read for a job outside it).

    Raises:
        InvalidArgument, InvalidName: before anything is sent.
    """
    _state(state)
    n = checks.integer(n, "n", 1, MAX_PAGE)
    cursor = checks.count(cursor, "cursor", zero=True)
    budget = checks.integer(budget, "budget", 1, MAX_SEARCH_BUDGET)
    for v, what in ((since_ms, "since_ms"), (until_ms, "until_ms")):
        if v is not None:
            checks.integer(v, what, 0, checks.MAX_RUN_AT_MS)
    ranged = since_ms is not None or until_ms is not None
    checks.text(text, "the search text", empty=ranged)
    if isinstance(fields, str) or not isinstance(fields, (list, tuple)):
        raise InvalidArgument(f"search fields must be a list among {', '.join(SEARCH_FIELDS)}")
    if not all(isinstance(f, str) for f in fields):
        raise InvalidArgument(f"search fields must be among {', '.join(SEARCH_FIELDS)}")
    wanted = list(dict.fromkeys(fields))
    unknown = [f for f in wanted if f not in SEARCH_FIELDS]
    if unknown or not wanted:
        raise InvalidArgument(f"search fields must be among {', '.join(SEARCH_FIELDS)}")
    _, rev = _order(state, order)
    if state == "pending" and group is None:
        scored, total, now = yield from _pending_window(ctx, cursor, budget, rev)
    else:
        key = _set_key(ctx, state, group)
        page, total, now = yield Batch(
            (_range(key, cursor, cursor + budget - 1, rev), Cmd(("ZCARD", key)), Cmd(("TIME",)))
        )
        scored = [(as_str(m), decode.scored(state, s)) for m, s in decode.pairs(page)]
    lo = -1 if since_ms is None else since_ms
    hi = checks.MAX_RUN_AT_MS if until_ms is None else until_ms
    inside = [lo <= ids.minted_at_ms(j) <= hi for j, _ in scored]
    extra = ("payload",) if "payload" in wanted else ()
    rows: list[Any] = []
    read = [j for (j, _), ok in zip(scored, inside) if ok]
    if read:
        got = yield Batch(
            tuple(Cmd(("HMGET", ctx.keys.job(j), *LINE_FIELDS, *extra)) for j in read)
        )
        it = iter(got)
        rows = [next(it) if ok else None for ok in inside]
    else:
        rows = [None] * len(scored)
    needle = text.casefold()
    hits: list[JobLine] = []
    examined = 0
    for (job_id, score), values in zip(scored, rows):
        examined += 1
        if values is None or isinstance(values, Exception) or values[0] is None:
            continue
        line = decode.line(job_id, state, values[: len(LINE_FIELDS)], score)
        hay = {
            "id": job_id,
            "name": line.name,
            "group": line.group,
            "error": line.last_error,
            "payload": decode.opt(values[-1]) if extra else None,
        }
        if any(needle in (hay[f] or "").casefold() for f in wanted):
            hits.append(line)
            if len(hits) == n:
                break
    more = examined < len(scored) or len(scored) == budget
    return Found(
        state,
        group,
        text,
        wanted,
        examined,
        cursor + examined if more else None,
        decode.time_ms(now),
        hits,
        int(total),
    )


def _pending_window(
    ctx: Context, cursor: int, budget: int, rev: bool
) -> Plan[tuple[list[tuple[str, int]], int, Any]]:
    """Up to ``budget`` pending jobs from rank ``cursor`` of one walk over every
    pending job: the flat set, then every lane through the lanes' index (``gindex``,
    each lane's jobs at their lane score), so a search never walks the lanes one by
    one and never misses one. Two reads by rank at most (the second only where the
    window crosses into the index).

    Returns:
        ``(scored, total, time)``: the window's ``(id, priority)``, the jobs in the
        walk (flat and laned), the server's ``TIME`` reply.
    """
    k = ctx.keys
    page, flat, laned, now = yield Batch(
        (
            _range(k.pending, cursor, cursor + budget - 1, rev),
            Cmd(("ZCARD", k.pending)),
            Cmd(("ZCARD", k.gindex)),
            Cmd(("TIME",)),
        )
    )
    scored = [(as_str(m), decode.scored("pending", s)) for m, s in decode.pairs(page)]
    left = budget - len(scored)
    if left > 0 and int(laned):
        start = max(0, cursor - int(flat))
        more = yield _range(k.gindex, start, start + left - 1, rev)
        scored += [(as_str(m), decode.scored("pending", s)) for m, s in decode.pairs(more)]
    return scored, int(flat) + int(laned), now
