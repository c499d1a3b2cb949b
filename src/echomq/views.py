"""Read verbs for the operator's tools: pages, search, one job, groups, throughput.

Each view is a plan like every other verb (bound on :class:`~echomq.Queue` and
:class:`~echomq.AsyncQueue`), and each is **bounded**: no view walks every lane or
every group in one call, and no server command it sends grows with the queue beyond
the page or budget the caller asked for (a page of a sorted set by rank is
``O(log N + n)``; a search examines at most ``budget`` jobs per call and returns a
cursor to go on from).

Orders (the operator's, not :func:`echomq.reads.browse`'s, which stays newest first):
pending in run order (priority, then mint order), scheduled soonest first, active
and dead newest first. A queue's lanes are paged one lane at a time (``group=``):
merging every lane into one page would walk them all.

This module also holds the one JSON codec the tools share: :class:`LenientJson`
reads a payload another serializer wrote as its text, and :func:`to_json` writes
every document the CLI prints and the console answers.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from . import checks, ids
from .context import Context, JsonSerializer, as_str
from .errors import InvalidArgument
from .lanes import GroupInfo
from .results import ErrorRecord, log_entries
from .scripts import Batch, Cmd, Eval, Plan, script

STATES = ("pending", "active", "scheduled", "dead")
#: Every state a page or a search can read: the four sets and the completed jobs a
#: queue keeps as history (``set_retention``, ``keep_ms``), newest finished first.
PAGE_STATES = checks.PAGE_STATES
Order = Literal["run", "soonest", "newest"]
#: Each state's order in a page: (the order's name, whether the set is read reversed).
ORDERS: dict[str, tuple[Order, bool]] = {
    "pending": ("run", False),
    "scheduled": ("soonest", False),
    "active": ("newest", True),
    "dead": ("newest", True),
    "completed": ("newest", True),
}
#: The largest page a view returns.
MAX_PAGE = 200
#: The largest page of groups: each group costs the groups script five reads, and a
#: SSCAN page may hold more than asked; 100 keeps one call near 3 ms on 1,000 lanes.
MAX_GROUPS_PAGE = 100
#: Jobs one search call examines by default, and at most.
SEARCH_BUDGET = 1000
MAX_SEARCH_BUDGET = 5000
#: What a search may look in.
SEARCH_FIELDS = ("id", "name", "group", "error", "payload")
#: The newest log lines one job view carries.
LOG_TAIL = 200
#: The longest throughput window, in minutes (the buckets live a day).
MAX_MINUTES = 1440
#: The row fields a page shows.
LINE_FIELDS = (
    "state",
    "name",
    "group",
    "priority",
    "attempts",
    "failures",
    "progress",
    "last_error",
)
#: Keys whose presence says a queue exists (any one of them).
_PRESENCE = (
    "meta",
    "pending",
    "active",
    "schedule",
    "dead",
    "completed",
    "groups",
    "repeat",
    "metrics:completed",
    "metrics:failed",
)


# ------------------------------------------------------------------------ codec
class LenientJson(JsonSerializer):
    """The default JSON codec, except that a payload that is not JSON reads back as
    its raw text (a tool shows queues whose producers may use another serializer:
    a row it cannot parse must still render)."""

    def loads(self, text: str) -> Any:
        """Parse JSON text; return the text itself when it is not JSON."""
        try:
            return json.loads(text)
        except ValueError:
            return text


def _default(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    if isinstance(value, (bytes, bytearray)):
        return value.decode("utf-8", "replace")
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    return str(value)


_DOC = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, default=_default)


def to_json(doc: Any) -> str:
    """One compact JSON document (dataclasses as objects, numbers as numbers)."""
    return _DOC.encode(doc)


# ------------------------------------------------------------------------ types
@dataclass(frozen=True)
class JobLine:
    """One job as a list shows it.

    Attributes:
        id: the job id.
        state: ``pending``, ``active``, ``scheduled``, ``dead`` or ``completed``.
        score: the set's score: priority (pending), lease deadline (active), due
            time (scheduled), time of death (dead), finish time (completed, a job
            kept as history), in ms where it is a time.
    """

    id: str
    state: str
    name: str | None
    group: str | None
    priority: int
    attempts: int
    failures: int
    progress: str | None
    last_error: str | None
    score: int | None


@dataclass(frozen=True)
class JobPage:
    """A page of one state (or one lane), in the state's order."""

    state: str
    group: str | None
    order: Order
    n: int
    offset: int
    total: int
    now_ms: int
    jobs: list[JobLine]


@dataclass(frozen=True)
class Found:
    """One bounded search step.

    Attributes:
        scanned: jobs examined by this call.
        cursor: where the next call goes on (a rank in the state's order), or
            ``None`` when the state was examined to its end.
    """

    state: str
    group: str | None
    text: str
    fields: list[str]
    scanned: int
    cursor: int | None
    now_ms: int
    jobs: list[JobLine]


@dataclass(frozen=True)
class JobView:
    """One job with what a detail page shows.

    Attributes:
        row: every row field as text, plus ``id`` and ``data`` (the payload decoded).
        logs: the newest ``LOG_TAIL`` log lines, oldest first.
        log_count: how many lines the job has in all.
        locked: a worker holds the job (a lock key or a ``lock`` field).
        score: the job's score in its state's set (see :class:`JobLine`); for a kept
            completed job its finish time.
        now_ms: the server's clock.
        errors: a kept job's error history, oldest first (``[]`` when none is kept).
        result: a kept completed job's result, decoded (``None`` when there is none).
        log_times: the server time (ms) each of ``logs`` was written, aligned with it;
            ``None`` for a line written before echomq kept log times.
    """

    row: dict[str, Any]
    logs: list[str]
    log_count: int
    locked: bool
    score: int | None
    now_ms: int
    errors: list[ErrorRecord] = dataclasses.field(default_factory=list)
    result: Any = None
    log_times: list[int | None] = dataclasses.field(default_factory=list)


@dataclass(frozen=True)
class GroupsPage:
    """One page of the queue's groups; ``cursor`` is ``"0"`` after the last page."""

    groups: list[GroupInfo]
    cursor: str


@dataclass(frozen=True)
class Series:
    """A throughput record: the total and one count per minute, oldest first."""

    total: int
    series: list[int]


@dataclass(frozen=True)
class Throughput:
    """Completed and failed per minute over ``minutes`` ending at ``end_minute``
    (a minute is ms since the epoch // 60000, server clock)."""

    minutes: int
    end_minute: int
    completed: Series
    failed: Series


# ---------------------------------------------------------------------- helpers
def _state(state: str) -> str:
    return checks.state(state, kept=True)


#: The orders a caller may ask for instead of the state's own (as ``browse`` takes):
#: ``run`` (the set ascending: the order claims take; the schedule soonest first) or
#: ``newest`` (descending).
ASKED_ORDERS = ("run", "newest")


def _order(state: str, order: str | None) -> tuple[Order, bool]:
    """The page's order name and whether the set is read reversed."""
    if order is None:
        return ORDERS[state]
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


def _pairs(raw: Any) -> Iterator[tuple[Any, Any]]:
    if isinstance(raw, dict):
        return iter(raw.items())
    if raw and isinstance(raw[0], (list, tuple)):
        return ((p[0], p[1]) for p in raw)
    return zip(raw[::2], raw[1::2])


def _ms(raw: Any) -> int:
    return int(float(as_str(raw)))


def _opt(raw: Any) -> str | None:
    return None if raw is None else as_str(raw)


def _int(raw: Any) -> int:
    try:
        return int(as_str(raw)) if raw is not None else 0
    except ValueError:
        return 0


def _line(job_id: str, state: str, values: Sequence[Any], score: int | None) -> JobLine:
    f = dict(zip(LINE_FIELDS, values))
    return JobLine(
        id=job_id,
        state=_opt(f["state"]) or state,
        name=_opt(f["name"]),
        group=_opt(f["group"]),
        priority=_int(f["priority"]),
        attempts=_int(f["attempts"]),
        failures=_int(f["failures"]),
        progress=_opt(f["progress"]),
        last_error=_opt(f["last_error"]),
        score=score,
    )


def _time_ms(raw: Any) -> int:
    sec, usec = raw
    return int(as_str(sec)) * 1000 + int(as_str(usec)) // 1000


def _range(key: str, start: int, stop: int, rev: bool) -> Cmd:
    args: tuple[str | int, ...] = ("ZRANGE", key, start, stop)
    return Cmd((*args, "REV", "WITHSCORES") if rev else (*args, "WITHSCORES"))


# ------------------------------------------------------------------------ views
def server_time(ctx: Context) -> Plan[int]:
    """The server's clock in ms since the epoch (``TIME``)."""
    return _time_ms((yield Cmd(("TIME",))))


def latency(ctx: Context) -> Plan[int | None]:
    """The queue's latency: how long the job at the head of the backlog has waited.

    The head of the flat pending set and the head of the lanes' index (the next job
    each side would serve) are read, and the older one's age is its creation time
    (read from its id) to the server's clock now: a job that waited in the schedule
    first counts that wait too. Three commands, each ``O(log N)``.

    Returns:
        The age in ms, or ``None`` when nothing is pending.
    """
    now, flat, laned = yield Batch(
        (
            Cmd(("TIME",)),
            Cmd(("ZRANGE", ctx.keys.pending, 0, 0)),
            Cmd(("ZRANGE", ctx.keys.gindex, 0, 0)),
        )
    )
    heads = [as_str(x) for x in (*flat, *laned)]
    if not heads:
        return None
    oldest = min(ids.minted_at_ms(h) for h in heads)
    return max(0, _time_ms(now) - oldest)


def queue_exists(ctx: Context) -> Plan[bool]:
    """Whether the queue has any of its sets, registries, metrics or settings.

    One ``EXISTS`` over a fixed list of the queue's keys (one slot): a mistyped name
    answers ``False``.
    """
    keys = tuple(ctx.keys.base + suffix for suffix in _PRESENCE)
    return bool(int((yield Cmd(("EXISTS", *keys)))))


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
        state: ``pending``, ``active``, ``scheduled``, ``dead`` or ``completed`` (the
            completed jobs kept as history, newest finished first).
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
    scored = [(as_str(m), _ms(s)) for m, s in _pairs(page)]
    jobs = yield from _lines(ctx, state, scored)
    return JobPage(state, group, named, n, offset, int(total), _time_ms(now), jobs)


def _lines(ctx: Context, state: str, scored: list[tuple[str, int]]) -> Plan[list[JobLine]]:
    if not scored:
        return []
    rows = yield Batch(tuple(Cmd(("HMGET", ctx.keys.job(j), *LINE_FIELDS)) for j, _ in scored))
    out: list[JobLine] = []
    for (job_id, score), values in zip(scored, rows):
        if isinstance(values, Exception) or values[0] is None:
            continue  # settled between the two reads
        out.append(_line(job_id, state, values, score))
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
    a page of the set or one row read, pipelined.

    Args:
        text: the text to look for; ``""`` matches every job (with a time range, the
            search is by time alone).
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
    key = _set_key(ctx, state, group)
    page, now = yield Batch((_range(key, cursor, cursor + budget - 1, rev), Cmd(("TIME",))))
    scored = [(as_str(m), _ms(s)) for m, s in _pairs(page)]
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
        line = _line(job_id, state, values[: len(LINE_FIELDS)], score)
        hay = {
            "id": job_id,
            "name": line.name,
            "group": line.group,
            "error": line.last_error,
            "payload": _opt(values[-1]) if extra else None,
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
        _time_ms(now),
        hits,
    )


def job_view(ctx: Context, job_id: str, log_tail: int = LOG_TAIL) -> Plan[JobView | None]:
    """One job for a detail page in one round trip, or ``None`` when it is gone.

    Raises:
        InvalidJobId: a malformed id (before anything is sent).
    """
    row_key = ctx.keys.job(job_id)
    log_tail = checks.batch(log_tail, "log_tail")
    k = ctx.keys
    raw, logged, lock, errs, *scores, now = yield Batch(
        (
            Cmd(("HGETALL", row_key)),
            # the newest log lines, their times and the count, read at one instant
            Eval(script("get_job_log_entries"), (k.base, row_key), (str(log_tail),)),
            Cmd(("EXISTS", k.lock(job_id))),
            # a kept job's error history is capped (20 entries): read whole
            Cmd(("LRANGE", k.errors(job_id), 0, -1)),
            *(Cmd(("ZSCORE", k.state_set(s), job_id)) for s in PAGE_STATES),
            Cmd(("TIME",)),
        )
    )
    if not raw:
        return None
    row: dict[str, Any] = {as_str(a): as_str(b) for a, b in _pairs(raw)}
    row["id"] = job_id
    if "payload" in row:
        row["data"] = ctx.serializer.loads(row["payload"])
    state = row.get("state")
    score = dict(zip(PAGE_STATES, scores)).get(state) if state in PAGE_STATES else None
    if state == "pending" and score is None:  # in its lane
        score = _int(row.get("priority"))
    # the row went between the two reads (the script answers -1): no logs
    lines, times, count = logged if isinstance(logged, list) else ([], [], 0)
    entries = log_entries([as_str(x) for x in lines], times)
    return JobView(
        row=row,
        logs=[e.line for e in entries],
        log_count=int(count),
        locked=bool(int(lock)) or "lock" in row,
        score=None if score is None else _ms(score),
        now_ms=_time_ms(now),
        errors=[ErrorRecord.from_text(as_str(e)) for e in errs or ()],
        result=ctx.serializer.loads(row["result"]) if row.get("result") else None,
        log_times=[e.time_ms for e in entries],
    )


def groups_page(ctx: Context, cursor: str = "0", n: int = 50) -> Plan[GroupsPage]:
    """One page of the queue's groups (about ``n``; a server call reads one page).

    Args:
        cursor: ``"0"`` for the first page, else the cursor a page returned.

    Returns:
        The groups of this page, sorted by name, and the next cursor (``"0"`` at
        the end). Groups come in the set's order, not by name across pages.
    """
    n = checks.integer(n, "n", 1, MAX_GROUPS_PAGE)
    cursor = checks.scan_cursor(cursor)
    r = yield Eval(script("groups"), (ctx.keys.base,), (cursor, str(n)))
    found: dict[str, GroupInfo] = {}
    for i in range(1, len(r), 6):
        lim = as_str(r[i + 3])
        info = GroupInfo(
            name=as_str(r[i]),
            depth=int(r[i + 1]),
            in_flight=int(r[i + 2]),
            limit=int(lim) if lim else None,
            weight=int(r[i + 4]),
            paused=bool(int(r[i + 5])),
        )
        found[info.name] = info
    return GroupsPage([found[k] for k in sorted(found)], as_str(r[0]))


def throughput(ctx: Context, minutes: int = 60) -> Plan[Throughput]:
    """Completed and failed per minute over the last ``minutes`` (server clock).

    Reads only the totals and the window's buckets (``HMGET``), never the whole record.
    """
    minutes = checks.integer(minutes, "minutes", 1, MAX_MINUTES)
    end = _time_ms((yield Cmd(("TIME",)))) // 60000
    fields = ["count", *(str(m) for m in range(end - minutes + 1, end + 1))]
    done, failed = yield Batch(
        (
            Cmd(("HMGET", ctx.keys.metrics_completed, *fields)),
            Cmd(("HMGET", ctx.keys.metrics_failed, *fields)),
        )
    )

    def series(raw: Sequence[Any]) -> Series:
        values = [_int(v) for v in raw]
        return Series(values[0], values[1:])

    return Throughput(minutes, end, series(done), series(failed))
