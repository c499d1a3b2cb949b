"""Times on the command line: ms since the epoch shown as ISO 8601 UTC, and the one
parser of a point in time that ``emq jobs --since/--until`` and the bulk commands'
``--since/--until`` (``--since-ms/--until-ms``) share."""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from typing import Any

import click

from .. import checks

#: The units of a duration: ``500ms``, ``90s``, ``15m``, ``2h``, ``3d``.
UNITS_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}

_AGE = re.compile(r"([0-9]+)(ms|s|m|h|d)")
_EPOCH_MS = re.compile(r"[0-9]+")
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)

#: What a time option accepts, for help texts and messages.
TIME_FORMS = (
    "an ISO 8601 time (UTC unless it has an offset), an age (90s, 15m, 2h, 3d ago) "
    "or ms since the epoch"
)


def utc_text(ms: int) -> str:
    """``ms`` since the epoch as an ISO 8601 UTC time with milliseconds
    (``2026-12-01T11:30:00.123Z``)."""
    moment = _EPOCH + timedelta(milliseconds=ms)  # exact: no float on the way
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def duration_text(ms: int) -> str:
    """A duration in ms as an operator reads it: ``7d``, ``1h 30m``, ``90s``, ``1.5s``,
    ``250ms`` (the two largest units; exact when they are)."""
    if ms < 1000:
        return f"{ms}ms"
    if ms < 60_000 and ms % 1000:
        return f"{ms / 1000:.1f}s"
    parts: list[str] = []
    left = ms
    for unit in ("d", "h", "m", "s"):
        n, left = divmod(left, UNITS_MS[unit])
        if n:
            parts.append(f"{n}{unit}")
    return " ".join(parts[:2])


def time_text(ms: int, now_ms: int | None = None) -> str:
    """A point in time as ISO 8601 UTC, with how long ago (or ahead) when ``now_ms`` is
    given: ``2026-12-01T11:30:00.123Z (3m 20s ago)``."""
    text = utc_text(ms)
    if now_ms is None:
        return text
    delta = now_ms - ms
    return f"{text} ({duration_text(abs(delta))} {'ago' if delta >= 0 else 'ahead'})"


def parse_time_ms(value: str, now_ms: int) -> int:
    """A point in time as ms since the epoch.

    Args:
        value: ms since the epoch (digits only: ``1764590400000``); an age, that long
            before ``now_ms`` (``90s``, ``15m``, ``2h``, ``3d``, ``500ms``); or an ISO
            8601 time (``2026-12-01``, ``2026-12-01T11:30``, ``...T11:30:00.5+02:00``,
            ``...Z``), in UTC when it names no offset.
        now_ms: the clock an age counts back from.

    Returns:
        The time, ``0 .. checks.MAX_RUN_AT_MS``.

    Raises:
        ValueError: none of the three forms, or a time outside that range.
    """
    text = value.strip()
    if _EPOCH_MS.fullmatch(text):
        ms = int(text)
    elif m := _AGE.fullmatch(text.lower()):
        ms = now_ms - int(m.group(1)) * UNITS_MS[m.group(2)]
    else:
        try:
            moment = datetime.fromisoformat(text)
        except ValueError:
            raise ValueError(f"{value!r} is not {TIME_FORMS}") from None
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=timezone.utc)
        ms = (moment - _EPOCH) // timedelta(milliseconds=1)
    if not 0 <= ms <= checks.MAX_RUN_AT_MS:
        raise ValueError(f"{value!r} is outside 1970-01-01 .. 9999-12-31 (UTC)")
    return ms


class TimePoint(click.ParamType):  # type: ignore[type-arg]
    """A click option type for :func:`parse_time_ms`: a bad value is a usage error
    (exit 2), found while the command line is read, before anything is sent. An age
    counts back from this machine's clock (job ids carry their producer's clock)."""

    name = "time"

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self.clock = clock

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        try:
            return parse_time_ms(str(value), int(self.clock() * 1000))
        except ValueError as exc:
            self.fail(str(exc), param, ctx)


def check_range(since_ms: int | None, until_ms: int | None) -> None:
    """Refuse a range that ends before it starts, as a usage error."""
    if since_ms is not None and until_ms is not None and until_ms < since_ms:
        raise click.UsageError(
            f"--until ({utc_text(until_ms)}) is before --since ({utc_text(since_ms)})"
        )
