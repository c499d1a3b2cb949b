"""Decoding the server's replies for the reads: score pairs, times, a row's list fields."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from ..context import as_str
from ..results.views import JobLine
from ..schema import SEQ_SPAN
from .limits import LINE_FIELDS


def pairs(raw: Any) -> Iterator[tuple[Any, Any]]:
    """Member and score pairs of a ``WITHSCORES`` reply, in any of its shapes (RESP2
    flat list, RESP3 pairs, a mapping)."""
    if isinstance(raw, dict):
        return iter(raw.items())
    if raw and isinstance(raw[0], (list, tuple)):
        return ((p[0], p[1]) for p in raw)
    return zip(raw[::2], raw[1::2])


def ms(raw: Any) -> int:
    """A score as whole ms."""
    return int(float(as_str(raw)))


def run_priority(raw: Any) -> int:
    """A ready job's score (``priority * SEQ_SPAN + seq``: the run order) as its
    priority."""
    return int(float(as_str(raw))) // SEQ_SPAN


def scored(state: str, raw: Any) -> int:
    """A score of ``state``'s set as a page shows it: the priority for pending (see
    :func:`run_priority`), else whole ms."""
    return run_priority(raw) if state == "pending" else ms(raw)


def opt(raw: Any) -> str | None:
    """A field as text, ``None`` when absent."""
    return None if raw is None else as_str(raw)


def int_or_zero(raw: Any) -> int:
    """A field as an integer; absent or not a number: 0."""
    try:
        return int(as_str(raw)) if raw is not None else 0
    except ValueError:
        return 0


def line(job_id: str, state: str, values: Sequence[Any], score: int | None) -> JobLine:
    """A :class:`~echomq.results.views.JobLine` from the ``LINE_FIELDS`` of a row (its own state
    when the row names none)."""
    f = dict(zip(LINE_FIELDS, values))
    return JobLine(
        id=job_id,
        state=opt(f["state"]) or state,
        name=opt(f["name"]),
        group=opt(f["group"]),
        priority=int_or_zero(f["priority"]),
        attempts=int_or_zero(f["attempts"]),
        failures=int_or_zero(f["failures"]),
        progress=opt(f["progress"]),
        last_error=opt(f["last_error"]),
        score=score,
    )


def time_ms(raw: Any) -> int:
    """A ``TIME`` reply as ms since the epoch."""
    sec, usec = raw
    return int(as_str(sec)) * 1000 + int(as_str(usec)) // 1000
