"""Bulk operator verbs by filter: reprocess, remove, promote, clean.

Each verb walks one sorted set in bounded server calls (one Lua step per call, each
examining at most ``scan`` members), so no call holds the server long whatever the
queue's size. A step acts on the members that match the filter and leaves the others;
the walk's position is a **cursor** the verb returns (and hands to ``progress``), so
an interrupted run resumes where it stopped (``cursor=``). A **dry run** writes nothing
and answers how many jobs would be acted on.

The filter (:class:`JobFilter`): the job's ``name``, its ``group``, a substring of its
``last_error``, and a time range (``since_ms``/``until_ms``, the job's creation time,
read from its id: ids sort in mint order). Every step that changed something journals
one audit entry (verbs ``reprocess_jobs``, ``remove_jobs``, ``promote_jobs``, ``clean``).

Caveat: the cursor is a rank in the walked set. Jobs another caller removes from the
part already walked shift the rest down, so a concurrent run may pass over as many
jobs; run the verb again to catch them (a second run finds only what the first missed).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from . import checks, ids, journal
from .context import Context, as_str
from .errors import InvalidArgument, JobLocked
from .keyspace import check_name
from .results import BulkResult as BulkResult
from .scripts import Cmd, Eval, Plan, script

#: Members one bulk step examines by default (sized so a step stays within a few ms).
DEFAULT_SCAN = 250
#: Jobs one clean step deletes by default.
DEFAULT_CLEAN_BUDGET = 500
#: The largest ``scan`` a caller may ask for.
MAX_SCAN = 5000


@dataclass(frozen=True)
class JobFilter:
    """Which jobs a bulk verb acts on; ``None`` matches any.

    Attributes:
        name: the job's name, exactly.
        group: the job's group, exactly (a pending walk then reads that lane only).
        error: a substring of the job's ``last_error``.
        since_ms, until_ms: the job was created in this range (ms since the epoch,
            inclusive), read from its id.
    """

    name: str | None = None
    group: str | None = None
    error: str | None = None
    since_ms: int | None = None
    until_ms: int | None = None

    def argv(self) -> tuple[str, str, str, str, str]:
        """The five script arguments: name, group, error, lowest id, highest id."""
        lo = hi = ""
        if self.since_ms is not None:
            lo = ids.encode(_clamp((self.since_ms - ids.EPOCH_MS) << _SHIFT))
        if self.until_ms is not None:
            hi = ids.encode(_clamp(((self.until_ms - ids.EPOCH_MS + 1) << _SHIFT) - 1))
        return (self.name or "", self.group or "", self.error or "", lo, hi)


_SHIFT = ids.NODE_BITS + ids.SEQ_BITS


def _clamp(value: int) -> int:
    return max(0, min(value, ids.MAX_VALUE))


Progress = Callable[[BulkResult], Any]


def _filter(
    name: str | None,
    group: str | None,
    error: str | None,
    since_ms: int | None,
    until_ms: int | None,
) -> JobFilter:
    if name is not None:
        checks.job_name(name)
    if group is not None:
        check_name(group, "group")
    if error is not None:
        checks.text(error, "error", max_len=1024, empty=False)
    for v, what in ((since_ms, "since_ms"), (until_ms, "until_ms")):
        if v is not None:
            checks.integer(v, what, 0, checks.MAX_RUN_AT_MS)
    if since_ms is not None and until_ms is not None and until_ms < since_ms:
        raise InvalidArgument("until_ms is before since_ms")
    return JobFilter(name, group, error, since_ms, until_ms)


def _offset(cursor: str | None) -> int:
    if cursor is None:
        return 0
    if not isinstance(cursor, str) or not cursor.isascii() or not cursor.isdigit():
        raise InvalidArgument(f"invalid cursor {checks.show(cursor, 40)}")
    return checks.integer(int(cursor), "cursor", 0, checks.MAX_COUNT)


def _report(progress: Progress | None, result: BulkResult) -> None:
    if progress is not None:
        progress(result)


def _walk(
    verb: str,
    step: Callable[[int], Eval],
    offset: int,
    dry_run: bool,
    progress: Progress | None,
    max_calls: int | None,
) -> Plan[BulkResult]:
    """Drive a one-set bulk step until its walk is done (or ``max_calls`` are made)."""
    res = BulkResult(verb, dry_run=dry_run, cursor=str(offset))
    while True:
        reply = yield step(offset)
        n, seen, offset, done = (int(x) for x in reply[:4])
        locked = int(reply[4]) if len(reply) > 4 else 0
        res = replace(
            res,
            matched=res.matched + n,
            examined=res.examined + seen,
            locked=res.locked + locked,
            calls=res.calls + 1,
            cursor=None if done else str(offset),
        )
        _report(progress, res)
        if done or (max_calls is not None and res.calls >= max_calls):
            return res


def _check_bounds(scan: int, max_calls: int | None, progress: Progress | None) -> None:
    checks.integer(scan, "scan", 1, MAX_SCAN)
    if max_calls is not None:
        checks.count(max_calls, "max_calls")
    if progress is not None and not callable(progress):
        raise InvalidArgument("progress must be callable")


def reprocess_jobs(
    ctx: Context,
    *,
    name: str | None = None,
    group: str | None = None,
    error: str | None = None,
    since_ms: int | None = None,
    until_ms: int | None = None,
    dry_run: bool = False,
    cursor: str | None = None,
    scan: int = DEFAULT_SCAN,
    max_calls: int | None = None,
    progress: Progress | None = None,
) -> Plan[BulkResult]:
    """Reprocess every dead job matching the filter (as :meth:`reprocess_job` does each).

    Walks the dead set oldest death first, ``scan`` members per server call.

    Args:
        name, group, error, since_ms, until_ms: the filter (:class:`JobFilter`).
        dry_run: write nothing; ``matched`` is how many would be reprocessed.
        cursor: resume a run from the cursor it reported.
        scan: members examined per server call (1..5000).
        max_calls: stop after this many calls (the result's cursor resumes).
        progress: called with a :class:`BulkResult` after every call.

    Returns:
        The :class:`BulkResult`.

    Raises:
        InvalidArgument, InvalidName: a bad filter, cursor or bound, before any I/O.
    """
    f = _filter(name, group, error, since_ms, until_ms)
    checks.flag(dry_run, "dry_run")
    _check_bounds(scan, max_calls, progress)
    off = _offset(cursor)
    dry = "1" if dry_run else ""

    def step(o: int) -> Eval:
        return Eval(
            script("bulk_reprocess"),
            (ctx.keys.base,),
            (str(o), str(scan), dry, *f.argv(), ctx.actor),
        )

    return (yield from _walk("reprocess_jobs", step, off, dry_run, progress, max_calls))


def promote_jobs(
    ctx: Context,
    *,
    name: str | None = None,
    group: str | None = None,
    error: str | None = None,
    since_ms: int | None = None,
    until_ms: int | None = None,
    dry_run: bool = False,
    cursor: str | None = None,
    scan: int = DEFAULT_SCAN,
    max_calls: int | None = None,
    progress: Progress | None = None,
) -> Plan[BulkResult]:
    """Promote every scheduled job matching the filter now (to pending or its lane).

    Walks the schedule soonest first; arguments and result as :func:`reprocess_jobs`.
    """
    f = _filter(name, group, error, since_ms, until_ms)
    checks.flag(dry_run, "dry_run")
    _check_bounds(scan, max_calls, progress)
    off = _offset(cursor)
    dry = "1" if dry_run else ""

    def step(o: int) -> Eval:
        argv = (str(o), str(scan), dry, *f.argv(), ctx.actor)
        return Eval(script("bulk_promote"), (ctx.keys.base,), argv)

    return (yield from _walk("promote_jobs", step, off, dry_run, progress, max_calls))


def promote_job(ctx: Context, job_id: str) -> Plan[None]:
    """Run one scheduled job now: it moves to pending (or its lane) at its priority.

    Raises:
        InvalidJobId: a malformed id, before any I/O.
        JobGone: no such job.
        JobNotScheduled: the job is not in the schedule; nothing changed.
    """
    keys = (ctx.keys.base, ctx.keys.job(job_id))
    yield Eval(script("promote_job"), keys, (job_id, ctx.actor), job=job_id)


def _lane_cursor(cursor: str | None) -> tuple[str, str, int]:
    """``(sscan page, group, offset)`` of a pending walk; page ``-`` = the flat set."""
    if cursor is None:
        return "-", "", 0
    parts = cursor.split("|") if isinstance(cursor, str) else []
    if len(parts) != 3:
        raise InvalidArgument(f"invalid cursor {checks.show(cursor, 40)}")
    page, group, off = parts
    if page != "-":
        checks.scan_cursor(page)
    if group:
        check_name(group, "group")
    return page, group, _offset(off)


def remove_jobs(
    ctx: Context,
    state: str,
    *,
    name: str | None = None,
    group: str | None = None,
    error: str | None = None,
    since_ms: int | None = None,
    until_ms: int | None = None,
    dry_run: bool = False,
    cursor: str | None = None,
    scan: int = DEFAULT_SCAN,
    max_calls: int | None = None,
    progress: Progress | None = None,
) -> Plan[BulkResult]:
    """Remove every job of ``state`` matching the filter (as :meth:`remove_job` does each).

    ``pending`` walks the flat set, then each lane (with ``group=``, that lane only);
    ``scheduled``, ``dead`` and ``completed`` (the jobs kept as history) walk their
    set. A matching job a worker holds (a lock) is skipped and counted in ``locked``.
    Each removed job leaves its settled tombstone, as :meth:`remove_job` does.

    Args:
        state: ``pending``, ``scheduled``, ``dead`` or ``completed``.
        (the rest): as :func:`reprocess_jobs`.

    Raises:
        JobLocked: ``state`` is ``active``: every active job is held by its worker
            (nothing is sent).
        InvalidArgument, InvalidName: a bad state, filter, cursor or bound, before any I/O.
    """
    if state == "active":
        raise JobLocked("active jobs are held by their workers; nothing removed")
    checks.state(state, kept=True)
    f = _filter(name, group, error, since_ms, until_ms)
    checks.flag(dry_run, "dry_run")
    _check_bounds(scan, max_calls, progress)
    dry = "1" if dry_run else ""
    base = (ctx.keys.base,)

    def one(lane: str) -> Callable[[int], Eval]:
        def step(o: int) -> Eval:
            argv = (state, lane, str(o), str(scan), dry, *f.argv(), ctx.actor, journal.request_id())
            return Eval(script("bulk_remove"), base, argv, again=(*argv, "1"))

        return step

    if state != "pending":
        off = _offset(cursor)
        return (yield from _walk("remove_jobs", one(""), off, dry_run, progress, max_calls))
    if group is not None:
        # one lane: the cursor is its offset
        off = _offset(cursor)
        return (yield from _walk("remove_jobs", one(group), off, dry_run, progress, max_calls))
    # the flat set, then each lane, one SSCAN page of groups at a time
    page, lane, off = _lane_cursor(cursor)
    total = BulkResult("remove_jobs", dry_run=dry_run)

    def add(part: BulkResult, cur: str | None) -> BulkResult:
        return replace(
            total,
            matched=total.matched + part.matched,
            examined=total.examined + part.examined,
            locked=total.locked + part.locked,
            calls=total.calls + part.calls,
            cursor=cur,
        )

    def left() -> int | None:
        return None if max_calls is None else max_calls - total.calls

    def sub(p: Progress | None, prefix: str) -> Progress | None:
        if p is None:
            return None
        start = total

        def report(r: BulkResult) -> None:
            cur = None if r.cursor is None else prefix + r.cursor
            p(
                replace(
                    start,
                    matched=start.matched + r.matched,
                    examined=start.examined + r.examined,
                    locked=start.locked + r.locked,
                    calls=start.calls + r.calls,
                    cursor=cur or prefix + "0",
                )
            )

        return report

    if page == "-":
        part = yield from _walk("remove_jobs", one(""), off, dry_run, sub(progress, "-||"), left())
        if part.cursor is not None:
            return add(part, "-||" + part.cursor)
        total = add(part, "0||0")
        page, lane, off = "0", "", 0
    while True:
        reply = yield Cmd(("SSCAN", ctx.keys.groups, page, "COUNT", "100"))
        nxt, names = as_str(reply[0]), sorted(as_str(g) for g in reply[1])
        if lane:
            names = [g for g in names if g >= lane]
        for g in names:
            if max_calls is not None and total.calls >= max_calls:
                return replace(total, cursor=f"{page}|{g}|{off}")
            prefix = f"{page}|{g}|"
            part = yield from _walk(
                "remove_jobs", one(g), off, dry_run, sub(progress, prefix), left()
            )
            if part.cursor is not None:
                return add(part, prefix + part.cursor)
            total = add(part, f"{page}|{g}|0")
            off = 0
        lane = ""
        if nxt == "0":
            total = replace(total, cursor=None)
            _report(progress, total)
            return total
        page = nxt
        total = replace(total, cursor=f"{page}||0")


def clean(
    ctx: Context,
    older_than_ms: int,
    state: str = "dead",
    *,
    dry_run: bool = False,
    budget: int = DEFAULT_CLEAN_BUDGET,
    progress: Progress | None = None,
) -> Plan[BulkResult]:
    """Delete the dead jobs that died more than ``older_than_ms`` ago (server clock),
    or with ``state="completed"`` the completed jobs kept as history that finished
    more than ``older_than_ms`` ago.

    Each server call deletes the oldest ``budget`` of them (rows, logs, error
    histories, dedup keys); the verb calls again until none qualifies. A dry run
    answers how many qualify.

    Args:
        older_than_ms: the age, in ms, past which a job goes.
        state: ``dead`` or ``completed`` (the two sets scored by their time of settling).
        dry_run: write nothing.
        budget: jobs deleted per server call.
        progress: called with a :class:`BulkResult` after every call.

    Raises:
        InvalidArgument: a bad age, state or budget, before any I/O.
    """
    checks.ms(older_than_ms, "older_than_ms", zero=True)
    if state not in ("dead", "completed"):
        raise InvalidArgument(
            f"clean takes state 'dead' or 'completed', got {checks.show(state, 40)}"
        )
    checks.flag(dry_run, "dry_run")
    _check_bounds(budget, None, progress)
    res = BulkResult("clean", dry_run=dry_run)
    dry = "1" if dry_run else ""
    while True:
        argv = (str(older_than_ms), str(budget), dry, ctx.actor, state, journal.request_id())
        n, more = yield Eval(script("bulk_clean"), (ctx.keys.base,), argv, again=(*argv, "1"))
        res = replace(res, matched=res.matched + int(n), calls=res.calls + 1, cursor=None)
        _report(progress, res)
        if not int(more):
            return res
