"""Reads of a queue as a whole: its counts and pause, the server's clock, its latency,
whether it exists, its groups, and its throughput totals (the per-minute series are
in :mod:`.series`)."""

from __future__ import annotations

from .. import checks, ids
from ..context import Context, as_str
from ..lanes import GROUP_FIELDS, GroupInfo, lane_rate_fields
from ..results import Counts
from ..results.views import GroupsPage
from ..scripts import Batch, Cmd, Eval, Plan, script
from . import decode
from .limits import MAX_GROUPS_PAGE, PRESENCE_KEYS


def counts(ctx: Context) -> Plan[Counts]:
    """Jobs in every state (lanes counted in pending), the settled totals and the pause,
    in one script call.

    Returns:
        A :class:`~echomq.results.Counts`.
    """
    r = yield Eval(script("counts"), (ctx.keys.base,))
    pending, active, scheduled, dead, completed, failed, paused, kept, *more = (int(v) for v in r)
    waiting = more[0] if more else 0  # a script cached before the field: none
    return Counts(pending, active, scheduled, dead, completed, failed, bool(paused), kept, waiting)


def is_paused(ctx: Context) -> Plan[bool]:
    """Whether the queue's claim gate is closed."""
    return bool(int((yield Cmd(("HEXISTS", ctx.keys.meta, "paused")))))


def metrics(ctx: Context) -> Plan[dict[str, dict[str, int]]]:
    """The throughput totals (the per-minute series: :func:`echomq.views.history`).

    Returns:
        ``{"completed": {"count": n}, "failed": {"count": n}}`` (failed: dead-lettered
        jobs); a queue written before the history series also holds its old per-minute
        fields there (``"<minute>": n``, ms since the epoch // 60000) until they age out.
    """
    done, failed = yield Batch(
        (
            Cmd(("HGETALL", ctx.keys.metrics_completed)),
            Cmd(("HGETALL", ctx.keys.metrics_failed)),
        )
    )
    return {
        "completed": {k: int(v) for k, v in done.items()},
        "failed": {k: int(v) for k, v in failed.items()},
    }


def server_time(ctx: Context) -> Plan[int]:
    """The server's clock in ms since the epoch (``TIME``)."""
    return decode.time_ms((yield Cmd(("TIME",))))


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
    return max(0, decode.time_ms(now) - oldest)


def queue_exists(ctx: Context) -> Plan[bool]:
    """Whether the queue has any of its sets, registries, metrics or settings.

    One ``EXISTS`` over a fixed list of the queue's keys (one slot): a mistyped name
    answers ``False``.
    """
    keys = tuple(ctx.keys.base + suffix for suffix in PRESENCE_KEYS)
    return bool(int((yield Cmd(("EXISTS", *keys)))))


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
    for i in range(1, len(r), GROUP_FIELDS):
        lim = as_str(r[i + 3])
        info = GroupInfo(
            name=as_str(r[i]),
            depth=int(r[i + 1]),
            in_flight=int(r[i + 2]),
            limit=int(lim) if lim else None,
            weight=int(r[i + 4]),
            paused=bool(int(r[i + 5])),
            **lane_rate_fields(r[i + 6], r[i + 7]),
        )
        found[info.name] = info
    return GroupsPage([found[k] for k in sorted(found)], as_str(r[0]))
