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
from ..schema import HIST_AT, HIST_FIELDS, HIST_SLOT_BITS, HIST_TYPE, HIST_WAIT_UNIT_MS
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

    Each hour keeps its busiest lanes only (``schema.HIST_LANES_CAP``, the fewest-ended
    trimmed as more come): a lane's figures are low by what it ended in an hour where
    it was trimmed. One ``HGETALL`` of at most ``HIST_LANES_CAP`` fields per hour, in
    one round trip (168 small commands for 7 days).

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
    replies = yield Batch(tuple(Cmd(("HGETALL", ctx.keys.lanes_hist(h))) for h in hours))
    sums: dict[str, list[int]] = {}  # lane -> [ended, dead, wait ms, run ms]
    for raw in replies:
        for lane, value in decode.pairs(raw or []):
            cell = sums.setdefault(as_str(lane), [0, 0, 0, 0])
            for k, part in enumerate(as_str(value).split()[:4]):
                cell[k] += int(part)
    ranked = sorted(sums.items(), key=lambda kv: (-kv[1][0], kv[0]))[:top]
    lanes = [LaneStat(lane, n - dead, dead, wait, run) for lane, (n, dead, wait, run) in ranked]
    return BusiestLanes(span, hours[0], hours[-1], lanes, len(sums))
