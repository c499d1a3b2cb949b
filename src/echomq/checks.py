"""Argument checks: every verb's argument checks, stated once, run before any I/O.

Each verb's plan starts with a few calls to this module; each call either returns the
value in the form the script wants or raises an :class:`~echomq.errors.InvalidArgument`
subclass, and nothing has been sent yet. The limits are the documented ones
(``docs/concepts.md``, "Limits"):

- **integers** are Python ``int`` (``bool`` is refused): a Lua number is a double, so
  nothing past 2**53 reaches a script, where it would lose precision or fail;
- **priority** within ``-2**20 .. 2**20`` (:data:`~echomq.schema.PRIORITY_MAX`: the
  score ``priority * 2**32 + seq`` that orders a backlog stays exact);
- **durations** (``delay_ms``, ``lease_ms``, ``lock_ms``, ``ttl_ms``, ``every_ms``,
  ``first_in_ms``) within the horizon, 0 .. :data:`HORIZON_MS` (ten years);
- **run_at_ms** within 0 .. :data:`MAX_RUN_AT_MS` (the last ms of the year 9999);
- **budgets, counts and page sizes** within 1 .. :data:`MAX_BATCH` per server call;
- **other counters** (``max_attempts``, ``keep``, ``offset``, ``limit``, ``weight``, ...)
  within 0 .. :data:`MAX_COUNT`;
- **text** is ``str`` that encodes as UTF-8 (no lone surrogates);
- **payloads** serialize as strict JSON (no NaN/Infinity) that is valid UTF-8, or
  raise :class:`~echomq.errors.InvalidPayload`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any, Protocol

from redis import connection as _connection

from .errors import InvalidArgument, InvalidName, InvalidPayload
from .results.jobs import JOB_STATES
from .schema import PRIORITY_MAX

#: The longest delay, lease, lock or interval, in ms (ten years); a computed backoff
#: delay is clamped to it.
HORIZON_MS = 10 * 365 * 86_400_000
#: The largest integer a Lua number (a double) and a sorted-set score hold exactly.
MAX_EXACT = 2**53
#: The latest absolute due time: 9999-12-31T23:59:59.999Z, in ms since the epoch.
MAX_RUN_AT_MS = 253_402_300_799_999
#: The most jobs (or groups, or ids) one server call handles: budgets, counts, pages.
MAX_BATCH = 100_000
#: The most jobs a batch handler takes at once (``Batch.size``; one claim call leases them).
MAX_HANDLER_BATCH = 1000
#: The largest value of any other counter (max_attempts, keep, offset, limit, weight).
MAX_COUNT = 2**31 - 1
#: The longest job name, in characters.
MAX_NAME_LEN = 256
#: The four sets of ready, running, delayed and dead jobs (the bulk verbs' filter).
STATES = ("pending", "active", "scheduled", "dead")
#: The states a read can page: every state a job can be in (the four sets, the
#: completed jobs kept as history, the flow parents waiting for their children),
#: from the one list :data:`echomq.results.JOB_STATES`.
PAGE_STATES: tuple[str, ...] = JOB_STATES


# ---- names and ids of the keyspace: checked before any key is built

NAME_RE = re.compile(r"[A-Za-z0-9._-]{1,128}")
MAX_DEDUP_LEN = 256


def check_name(name: str, what: str = "queue") -> str:
    """Return ``name`` if it matches ``[A-Za-z0-9._-]{1,128}`` and is not ``.`` or ``..``
    (a path segment a browser or a proxy would resolve away).

    Raises:
        InvalidName: it does not.
    """
    if not isinstance(name, str) or NAME_RE.fullmatch(name) is None or name in (".", ".."):
        raise InvalidName(f"invalid {what} name: {show(name)} (want [A-Za-z0-9._-]{{1,128}})")
    return name


WORKER_ID_RE = re.compile(r"[0-9a-f]{8,32}")


def check_worker_id(wid: str) -> str:
    """Return ``wid`` if it is a worker id (8 to 32 lowercase hex digits).

    Raises:
        InvalidName: it is not.
    """
    if not isinstance(wid, str) or WORKER_ID_RE.fullmatch(wid) is None:
        raise InvalidName(f"invalid worker id: {show(wid)} (want [0-9a-f]{{8,32}})")
    return wid


def check_dedup(dedup_id: str) -> str:
    """Return ``dedup_id`` if it is a non-empty string of at most 256 characters.

    Raises:
        InvalidName: it is not.
    """
    if not isinstance(dedup_id, str) or not 0 < len(dedup_id) <= MAX_DEDUP_LEN:
        raise InvalidName(f"invalid dedup id: {show(dedup_id)}")
    return dedup_id


# redis-py's own URL reader (typed in some versions, not in others)
parse_url: Any = _connection.parse_url


class Dumps(Protocol):
    """Anything with a ``dumps`` (a :class:`~echomq.context.Serializer`)."""

    def dumps(self, value: Any) -> str: ...


def show(value: Any, width: int = 80) -> str:
    """A short repr for a message (``repr`` of a huge int, or of a hostile object, can
    itself raise)."""
    try:
        text = repr(value)
    except Exception:
        return f"<{type(value).__name__}>"
    return text if len(text) <= width else text[: width - 3] + "..."


def integer(value: Any, what: str, low: int, high: int) -> int:
    """An ``int`` (not a ``bool``) within ``low .. high``.

    Raises:
        InvalidArgument: it is not.
    """
    if type(value) is int and low <= value <= high:
        return value  # the common case, first
    if type(value) is not int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise InvalidArgument(f"{what} must be an integer, got {show(value, 80)}")
        value = int(value)  # an int subclass (an IntEnum, ...) travels as a plain int
    if not low <= value <= high:
        raise InvalidArgument(f"{what} must be within {low}..{high}, got {show(value, 80)}")
    return int(value)


def ms(value: Any, what: str, *, zero: bool = False) -> int:
    """A duration in ms within the horizon: ``1 .. HORIZON_MS`` (``0 ..`` with ``zero``)."""
    return integer(value, what, 0 if zero else 1, HORIZON_MS)


def run_at(value: Any) -> int:
    """An absolute due time in ms since the epoch, ``0 .. MAX_RUN_AT_MS``."""
    return integer(value, "run_at_ms", 0, MAX_RUN_AT_MS)


def priority(value: Any) -> int:
    """A priority: an integer within ``-2**20 .. 2**20`` (the run order's score,
    ``priority * 2**32 + seq``, stays exact)."""
    return integer(value, "priority", -PRIORITY_MAX, PRIORITY_MAX)


def batch(value: Any, what: str) -> int:
    """A budget, count or page size: ``1 .. MAX_BATCH``."""
    return integer(value, what, 1, MAX_BATCH)


def count(value: Any, what: str, *, zero: bool = False) -> int:
    """A counter: ``1 .. MAX_COUNT`` (``0 ..`` with ``zero``)."""
    return integer(value, what, 0 if zero else 1, MAX_COUNT)


#: The most starts a rate limit may admit per window (its start log holds that many).
MAX_RATE_JOBS = 100_000
#: The longest window of a rate limit: one day.
MAX_RATE_MS = 86_400_000


def rate(max_jobs: Any, per_ms: Any) -> tuple[int, int]:
    """A rate limit: ``max_jobs`` within ``1 .. MAX_RATE_JOBS`` starts per ``per_ms``
    within ``1 .. MAX_RATE_MS`` (the start log a limit keeps is bounded by both)."""
    return (
        integer(max_jobs, "max_jobs", 1, MAX_RATE_JOBS),
        integer(per_ms, "per_ms", 1, MAX_RATE_MS),
    )


def token(value: Any) -> int:
    """A fencing token: ``1 .. 2**53``."""
    return integer(value, "token", 1, MAX_EXACT)


def flag(value: Any, what: str) -> bool:
    """A ``bool`` (a destructive switch is never taken from a truthy string)."""
    if not isinstance(value, bool):
        raise InvalidArgument(f"{what} must be True or False, got {show(value, 80)}")
    return value


def _utf8(value: str) -> bool:
    if value.isascii():
        return True
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def text(value: Any, what: str, *, max_len: int | None = None, empty: bool = True) -> str:
    """A ``str`` that encodes as UTF-8, optionally non-empty and at most ``max_len``.

    Raises:
        InvalidArgument: it is not.
    """
    if not isinstance(value, str):
        raise InvalidArgument(f"{what} must be a string, got {type(value).__name__}")
    if not empty and not value:
        raise InvalidArgument(f"{what} must not be empty")
    if max_len is not None and len(value) > max_len:
        raise InvalidArgument(f"{what} is longer than {max_len} characters")
    if not _utf8(value):
        raise InvalidArgument(f"{what} is not valid UTF-8 text (a lone surrogate?)")
    return value


def job_name(value: Any) -> str:
    """A job name: 1 .. 256 characters of UTF-8 text."""
    return text(value, "job name", max_len=MAX_NAME_LEN, empty=False)


def dedup(value: Any) -> str:
    """A dedup id: 1 .. 256 characters of UTF-8 text.

    Raises:
        InvalidName: it is not.
    """
    check_dedup(value)
    if not _utf8(value):
        raise InvalidName(f"invalid dedup id: {show(value, 80)} (not valid UTF-8 text)")
    return str(value)


def error_text(value: Any) -> str:
    """A failure's text, kept as ``last_error``. Never refused: the text is a diagnosis,
    so a value that is not valid UTF-8 is kept with its bad code points escaped
    (refusing it would lose the failure)."""
    out = value if isinstance(value, str) else _safe_str(value)
    if _utf8(out):
        return out
    return out.encode("utf-8", "backslashreplace").decode("utf-8")


def _safe_str(value: Any) -> str:
    try:
        return str(value)
    except Exception:
        return repr(type(value))


def state(value: Any, *, kept: bool = False) -> str:
    """A job state: ``pending``, ``active``, ``scheduled`` or ``dead``; with ``kept``
    also ``completed`` (the kept history) and ``waiting_children`` (flow parents), for
    the reads that page them."""
    allowed = PAGE_STATES if kept else STATES
    if not isinstance(value, str) or value not in allowed:
        raise InvalidArgument(f"unknown state {show(value, 80)}; want one of {', '.join(allowed)}")
    return value


# What a serializer (or json) raises for a value it cannot carry: TypeError (an
# object), ValueError (NaN, a circular reference, an int past the digits limit),
# RecursionError (nesting), OverflowError.
_UNSERIALIZABLE = (TypeError, ValueError, RecursionError, OverflowError)


def payload(serializer: Dumps, value: Any) -> str:
    """The payload's text: the serializer's output, checked to be valid UTF-8.

    The default serializer writes strict JSON (no NaN/Infinity).

    Raises:
        InvalidPayload: the value does not serialize, or its text is not valid UTF-8.
    """
    try:
        out = serializer.dumps(value)
    except InvalidArgument:
        raise
    except _UNSERIALIZABLE as exc:
        raise InvalidPayload(f"payload does not serialize: {type(exc).__name__}: {exc}") from None
    if not isinstance(out, str):
        raise InvalidPayload(f"the serializer returned {type(out).__name__}, not str")
    if not _utf8(out):
        raise InvalidPayload("payload is not valid UTF-8 text (a lone surrogate?)")
    return out


def payloads(serializer: Dumps, values: Any) -> list[str]:
    """Each payload's text, for ``enqueue_many``: ``values`` is an iterable of payloads
    (a ``str``/``bytes``/``dict`` is refused: it would enqueue its characters or keys).

    Raises:
        InvalidArgument: ``values`` is not such an iterable.
        InvalidPayload: one of them does not serialize.
    """
    if isinstance(values, (str, bytes, bytearray, dict)) or not isinstance(values, Iterable):
        raise InvalidArgument(f"payloads must be an iterable of payloads, got {type(values)}")
    return [payload(serializer, v) for v in values]


def pairs(value: Any, what: str = "pairs", *, limit: int | None = None) -> list[tuple[str, int]]:
    """``(job_id, token)`` pairs, each token checked (ids are checked at the key builder).

    Raises:
        InvalidArgument: not a sequence of 2-tuples, a bad token, or more than ``limit``.
    """
    if isinstance(value, (str, bytes, dict)) or not isinstance(value, (Sequence, Iterable)):
        raise InvalidArgument(f"{what} must be a sequence of (job_id, token) pairs")
    out: list[tuple[str, int]] = []
    for item in value:
        if not isinstance(item, (tuple, list)) or len(item) != 2:
            raise InvalidArgument(f"{what}: each item must be a (job_id, token) pair")
        out.append((item[0], token(item[1])))
        if limit is not None and len(out) > limit:
            raise InvalidArgument(f"{what}: at most {limit} per call")
    return out


def scan_cursor(value: Any) -> str:
    """A server ``SCAN`` cursor: ``"0"`` or the text a page returned (ASCII digits of
    an unsigned 64-bit number)."""
    if not (
        isinstance(value, str)
        and 0 < len(value) <= 20
        and value.isascii()
        and value.isdigit()
        and int(value) < 2**64
    ):
        raise InvalidArgument(f"cursor must be the digits a page returned, got {show(value)}")
    return value


def url(value: Any, what: str = "url") -> str:
    """A server URL that redis-py can read (``redis://``, ``rediss://``, ``unix://``), or
    a cluster named so (``redis+cluster://``, ``rediss+cluster://``).

    Raises:
        InvalidArgument: it is not (no connection is attempted).
    """
    value = text(value, what, empty=False)
    readable = value
    scheme, sep, rest = value.partition("://")
    if sep and scheme.lower() in ("redis+cluster", "rediss+cluster"):
        # a cluster, named so (echomq.connect): redis-py reads it without the +cluster
        readable = f"{scheme[: -len('+cluster')]}://{rest}"
    try:
        parse_url(readable)
    except (ValueError, TypeError) as exc:
        raise InvalidArgument(f"invalid {what} {show(value, 120)}: {exc}") from None
    return str(value)
