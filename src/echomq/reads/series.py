"""The history series (issue 29): per-minute completed, dead, wait and run of a queue,
kept 7 days in one small key per queue-hour, read in bounded calls.

The transitions write it (``lib/common.lua`` ``count_metric`` and its native twin): a
job that ends (completed, or dead) counts in the minute's slot of ``B + "hist:" +
hour`` (:data:`echomq.schema.HIST_FIELDS`) with its wait (enqueue to first start) and its
run (last start to end). A read asks each hour's key for its slots with one
``BITFIELD_RO`` of fixed ``GET`` operations (a reply of 240 integers; a key that does not
exist answers zeros): the 7-day view is 168 such commands in one round trip, each a
fixed, small amount of server work, never a walk. The exporter's counters add up the
minutes that closed (:func:`closed_minutes`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .. import checks
from ..context import Context, as_str
from ..errors import InvalidArgument
from ..results.views import BusiestLanes, History, LaneStat, Series, Throughput
from ..schema import (
    HIST_AT,
    HIST_FIELDS,
    HIST_LANE_FIELDS,
    HIST_LANE_TYPE,
    HIST_LANES,
    HIST_SLOT_BITS,
    HIST_TYPE,
    HIST_WAIT_UNIT_MS,
    hist_lane_at,
)
from ..scripts import Batch, Cmd, Plan
from . import decode
from .limits import MAX_MINUTES

#: The ranges a view may ask for: (minutes covered, minutes per point).
RANGES: dict[str, tuple[int, int]] = {"1h": (60, 1), "24h": (1440, 15), "7d": (10080, 60)}
#: The longest window in minutes (the keys live 7 days after their hour).
MAX_HISTORY_MINUTES = 10080

_OPS: tuple[Any, ...] = tuple(
    part
    for slot in range(60)
    for name, _ in HIST_FIELDS
    for part in ("GET", HIST_TYPE[name], slot * HIST_SLOT_BITS + HIST_AT[name])
)
_NFIELDS = len(HIST_FIELDS)
#: A slot's fields as the read takes them: its hash, then its sums.
_LANE_READ = ("hash", *(name for name, _ in HIST_LANE_FIELDS))
_LANE_OPS: tuple[Any, ...] = tuple(
    part
    for slot in range(HIST_LANES)
    for name in _LANE_READ
    for part in ("GET", HIST_LANE_TYPE[name], hist_lane_at(slot, name))
)
_NLANE = len(_LANE_READ)
#: How many names a read of the lanes looks at, at most, to name the hashes (pages of
#: ``_NAMES_PAGE``, newest first): past it a hash shows as ``#`` and its hex digits.
_NAMES_MAX = 100_000
_NAMES_PAGE = 1000


def lane_hash(name: str | bytes) -> int:
    """A lane's hash in the hour's table (``schema.HIST_LANE_FIELDS``): djb2 of its
    name's UTF-8 bytes, 32 bits, never 0."""
    h = 5381
    for b in name.encode() if isinstance(name, str) else name:
        h = (h * 33 + b) & 0xFFFFFFFF
    return h or 1


#: What each field's unit is in ms (1 for a count): the wait is kept in coarser units.
_SCALE = tuple(HIST_WAIT_UNIT_MS if name == "wait" else 1 for name, _ in HIST_FIELDS)


def read_minutes(ctx: Context, first: int, last: int) -> Plan[dict[int, tuple[int, ...]]]:
    """The slots of minutes ``first..last`` (server minutes), each ``(completed, dead,
    wait_ms, run_ms)`` (the wait as kept: a multiple of ``HIST_WAIT_UNIT_MS``); minutes
    with nothing are absent. One ``BITFIELD_RO`` per hour,
    one round trip."""
    hours = list(range(first // 60, last // 60 + 1))
    replies = yield Batch(tuple(Cmd(("BITFIELD_RO", ctx.keys.hist(h), *_OPS)) for h in hours))
    out: dict[int, tuple[int, ...]] = {}
    for hour, raw in zip(hours, replies):
        values = [int(v or 0) * _SCALE[i % _NFIELDS] for i, v in enumerate(raw)]
        for slot in range(60):
            cell = tuple(values[slot * _NFIELDS : (slot + 1) * _NFIELDS])
            minute = hour * 60 + slot
            if any(cell) and first <= minute <= last:
                out[minute] = cell
    return out


def _check_span(span: str) -> None:
    if not isinstance(span, str) or span not in RANGES:
        raise InvalidArgument(
            f"span must be one of {', '.join(RANGES)}, got {checks.show(span, 20)}"
        )


def _window(span: str, now_ms: int) -> tuple[int, int, int, int]:
    """(first minute, end minute, minutes per point, points) of a span's view."""
    minutes, step = RANGES[span]
    end = now_ms // 60000
    # the points are aligned to their step (a 15-minute point starts at :00, :15, ...)
    last_point = end - end % step
    points = minutes // step
    return last_point - (points - 1) * step, end, step, points


def history(ctx: Context, span: str = "1h") -> Plan[History]:
    """The queue's history over ``span`` (``"1h"``: per minute; ``"24h"``: per 15
    minutes; ``"7d"``: per hour), ending at the server's current minute.

    Returns:
        A :class:`~echomq.results.History`: per point, jobs completed, jobs dead, and
        their summed wait and run in ms (an average is a sum over completed + dead).

    Raises:
        InvalidArgument: a span other than 1h, 24h or 7d, before any I/O.
    """
    _check_span(span)
    first, end, step, points = _window(span, decode.time_ms((yield Cmd(("TIME",)))))
    cells = yield from read_minutes(ctx, first, end)
    sums = [[0] * points for _ in range(_NFIELDS)]
    for minute, cell in cells.items():
        i = (minute - first) // step
        for f in range(_NFIELDS):
            sums[f][i] += cell[f]
    return History(span, step, first, end, *sums)


def throughput(ctx: Context, minutes: int = 60) -> Plan[Throughput]:
    """Completed and dead per minute over the last ``minutes`` (server clock), from the
    history series, with the all-time totals.

    Reads the totals (``HGET``) and one ``BITFIELD_RO`` per hour of the window.
    """
    minutes = checks.integer(minutes, "minutes", 1, MAX_MINUTES)
    end = decode.time_ms((yield Cmd(("TIME",)))) // 60000
    first = end - minutes + 1
    done, failed = yield Batch(
        (
            Cmd(("HGET", ctx.keys.metrics_completed, "count")),
            Cmd(("HGET", ctx.keys.metrics_failed, "count")),
        )
    )
    cells = yield from read_minutes(ctx, first, end)

    def series(total: Any, col: int) -> Series:
        values: Sequence[int] = [cells.get(m, (0, 0, 0, 0))[col] for m in range(first, end + 1)]
        return Series(decode.int_or_zero(total), list(values))

    return Throughput(minutes, end, series(done, 0), series(failed, 1))


def busiest_lanes(ctx: Context, span: str = "1h", top: int = 5) -> Plan[BusiestLanes]:
    """The lanes (a job's ``group``) with the most endings over ``span``, at hourly
    resolution: the whole hours the queue's :meth:`history` of the same span reads
    (``"1h"``: the current hour, and the one before unless this is its last minute;
    ``"24h"``: 24 or 25 hours; ``"7d"``: 168).

    Each hour keeps its busiest lanes only, in its history key (``schema.HIST_LANES``
    slots, a lane's hash and sums; the fewest-ended taken over by a new lane): a lane's
    figures are low by what it ended in an hour before it took its slot or after it lost
    it. One ``BITFIELD_RO`` of fixed ``GET`` operations per hour (a key of the first
    layout, or none, answers zeros: no lanes), in one round trip; then the names, from
    the queue's ``lanenames`` (the lanes that took a slot since the window's first hour,
    newest first, in pages of 1,000 until every hash is named; at most 100,000): a hash
    no name matches shows as ``#`` and its 8 hex digits.

    Args:
        span: ``"1h"``, ``"24h"`` or ``"7d"``.
        top: how many lanes to answer, 1..100.

    Returns:
        A :class:`~echomq.results.BusiestLanes`: the ``top`` lanes by endings
        (completed + dead), most first (ties by name), each with its completed, dead and
        summed wait and run in ms.

    Raises:
        InvalidArgument: a span other than 1h, 24h or 7d, or ``top`` out of range,
            before any I/O.
    """
    _check_span(span)
    top = checks.integer(top, "top", 1, 100)
    first, end, _, _ = _window(span, decode.time_ms((yield Cmd(("TIME",)))))
    hours = list(range(first // 60, end // 60 + 1))
    replies = yield Batch(tuple(Cmd(("BITFIELD_RO", ctx.keys.hist(h), *_LANE_OPS)) for h in hours))
    sums: dict[int, list[int]] = {}  # hash -> [ended, dead, wait ms, run ms]
    for raw in replies:
        values = [int(v or 0) for v in raw]
        for slot in range(HIST_LANES):
            h, ended, dead, wait, run = values[slot * _NLANE : (slot + 1) * _NLANE]
            if h == 0:
                continue
            cell = sums.setdefault(h, [0, 0, 0, 0])
            cell[0] += ended
            cell[1] += dead
            cell[2] += wait * HIST_WAIT_UNIT_MS
            cell[3] += run
    names = yield from _lane_names(ctx, set(sums), hours[0] * 3_600_000)
    named = [(names.get(h, f"#{h:08x}"), cell) for h, cell in sums.items()]
    ranked = sorted(named, key=lambda kv: (-kv[1][0], kv[0]))[:top]
    lanes = [LaneStat(lane, n - dead, dead, wait, run) for lane, (n, dead, wait, run) in ranked]
    return BusiestLanes(span, hours[0], hours[-1], lanes, len(sums))


def _lane_names(ctx: Context, hashes: set[int], since_ms: int) -> Plan[dict[int, str]]:
    """hash -> name for ``hashes``, from the queue's ``lanenames`` (members that took a
    slot at ``since_ms`` or later), newest first; the first name of a hash wins."""
    out: dict[int, str] = {}
    offset = 0
    while len(out) < len(hashes) and offset < _NAMES_MAX:
        page = yield Cmd(
            ("ZREVRANGEBYSCORE", ctx.keys.lanenames, "+inf", since_ms, "LIMIT", offset, _NAMES_PAGE)
        )
        for raw in page or []:
            name = as_str(raw)
            h = lane_hash(name)
            if h in hashes and h not in out:
                out[h] = name
        if len(page or []) < _NAMES_PAGE:
            break
        offset += _NAMES_PAGE
    return out
