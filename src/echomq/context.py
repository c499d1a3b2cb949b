"""What every verb of one queue needs: its keys, its serializer, its defaults."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Protocol

from .checks import show
from .errors import InvalidArgument
from .keyspace import Keyspace
from .native import Executor


class Serializer(Protocol):
    """Turns payloads into the text stored in a row's ``payload`` field and back."""

    def dumps(self, value: Any) -> str:
        """Serialize ``value`` to text."""
        ...

    def loads(self, text: str) -> Any:
        """Deserialize text written by :meth:`dumps`."""
        ...


# One encoder for the process: json.dumps with options builds a new one per call,
# which is a third of the cost of a small payload on the enqueue hot path.
# Strict JSON: NaN and Infinity are refused (ValueError), not written as non-JSON.
_ENCODE = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode


class JsonSerializer:
    """The default serializer: compact, strict JSON text."""

    def dumps(self, value: Any) -> str:
        """Serialize ``value`` as compact JSON (``ValueError`` for NaN/Infinity)."""
        return _ENCODE(value)

    def loads(self, text: str) -> Any:
        """Parse JSON text."""
        return json.loads(text)


#: How many failures dead-letter a job when neither the job nor the call says.
DEFAULT_MAX_ATTEMPTS = 3


@dataclass
class Context:
    """The per-queue state a verb's plan reads.

    Attributes:
        keys: the queue's keyspace.
        serializer: payload codec.
        max_attempts: default failures before a job is dead.
        flat_first: which side a claim tries first; flipped per claim call so that
            neither flat nor grouped work can starve the other.
        actor: who drives the queue, written by every operator verb into the audit
            journal (``emq:{q}:audit``); ``Queue(actor=...)`` sets it.
        executor: scripts or native commands; shared with the queue's runner, which
            resolves it on its first call (a native claim reads the pause itself).
    """

    keys: Keyspace
    serializer: Serializer = field(default_factory=JsonSerializer)
    max_attempts: int = DEFAULT_MAX_ATTEMPTS
    flat_first: bool = True
    actor: str = ""
    executor: Executor = field(default_factory=Executor)


def as_str(value: Any) -> str:
    """A reply element as text (clients may or may not decode responses)."""
    if isinstance(value, bytes):
        return value.decode()
    return str(value)


def opt_str(value: Any) -> str | None:
    """Like :func:`as_str`, but ``None`` and ``''`` stay ``None``."""
    if value is None:
        return None
    text = as_str(value)
    return text or None


def positive(value: int, what: str, *, zero: bool = False) -> int:
    """Gate an integer argument before any I/O (see :mod:`echomq.checks` for the
    verb-specific limits; this one bounds it by what a Lua number holds exactly).

    Raises:
        InvalidArgument: it is not an int, below 1 (below 0 with ``zero``) or past 2**53.
    """
    low = 0 if zero else 1
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= 2**53:
        raise InvalidArgument(f"{what} must be an integer within {low}..2**53, got {show(value)}")
    return value
