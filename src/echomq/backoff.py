"""Backoff policies: how long a failed job waits before it is due again.

A policy is a small frozen value. It is stored on a job's row (``enqueue(...,
backoff=policy)``) as compact JSON text, its *spec*::

    {"type":"fixed","delay":5000}
    {"type":"exponential","delay":1000,"max":60000,"jitter":0.2}

``delay`` is in milliseconds. For ``exponential`` the n-th failure waits
``delay * 2**(n-1)``, capped at ``max`` (no cap when absent). ``jitter`` (0..1) takes a
random share of up to that fraction off the wait, so retries of many jobs that failed
together spread out instead of arriving at once. A worker reads the row's spec when a
job fails; a job without one (or with one it cannot read) gets the worker's default
policy. Every delay stays within the horizon, :data:`HORIZON_MS` (ten years): a
policy's fields are checked against it and a computed delay is clamped to it.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from typing import Any

from . import checks
from .checks import HORIZON_MS, show
from .errors import InvalidArgument

KINDS = ("fixed", "exponential")


@dataclass(frozen=True)
class Backoff:
    """A retry delay policy.

    Attributes:
        kind: ``"fixed"`` or ``"exponential"``.
        delay_ms: the base delay in ms (the whole delay for ``fixed``).
        max_ms: the cap of an exponential delay (``None`` = no cap).
        jitter: the largest share (0..1) of the delay taken off at random.

    Raises:
        InvalidArgument: a field is out of range.
    """

    kind: str = "exponential"
    delay_ms: int = 1000
    max_ms: int | None = None
    jitter: float = 0.0

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise InvalidArgument(f"backoff kind must be one of {KINDS}, got {show(self.kind)}")
        if _bad_int(self.delay_ms):
            raise InvalidArgument(
                f"backoff delay_ms must be an integer within 0..{HORIZON_MS}: {show(self.delay_ms)}"
            )
        if self.max_ms is not None and _bad_int(self.max_ms):
            raise InvalidArgument(
                f"backoff max_ms must be an integer within 0..{HORIZON_MS}: {show(self.max_ms)}"
            )
        if isinstance(self.jitter, bool) or not (
            isinstance(self.jitter, (int, float)) and 0.0 <= self.jitter <= 1.0
        ):
            raise InvalidArgument(f"backoff jitter must be within 0..1, got {show(self.jitter)}")

    @classmethod
    def fixed(cls, delay_ms: int, *, jitter: float = 0.0) -> Backoff:
        """Every retry waits ``delay_ms`` (less up to ``jitter`` of it)."""
        return cls("fixed", delay_ms, None, jitter)

    @classmethod
    def exponential(
        cls, delay_ms: int, *, max_ms: int | None = None, jitter: float = 0.0
    ) -> Backoff:
        """The n-th retry waits ``delay_ms * 2**(n-1)``, capped at ``max_ms``."""
        return cls("exponential", delay_ms, max_ms, jitter)

    def delay_for(self, failure: int, rng: random.Random | None = None) -> int:
        """The wait in ms after the ``failure``-th failure (1 for the first), at most
        :data:`HORIZON_MS`.

        Args:
            failure: which failure this is, counting from 1.
            rng: the random source for jitter (the module's when omitted).
        """
        base = self.delay_ms
        if self.kind == "exponential":
            # cap the exponent too, so a huge failure count cannot build a huge int
            base = self.delay_ms * (1 << min(max(failure - 1, 0), 62))
            if self.max_ms is not None:
                base = min(base, self.max_ms)
            base = min(base, HORIZON_MS)
        if self.jitter and base:
            base -= int(base * self.jitter * (rng or random).random())
        return base

    def spec(self) -> str:
        """The compact JSON text stored on a row."""
        doc: dict[str, Any] = {"type": self.kind, "delay": self.delay_ms}
        if self.max_ms is not None:
            doc["max"] = self.max_ms
        if self.jitter:
            doc["jitter"] = self.jitter
        return json.dumps(doc, separators=(",", ":"))

    def __str__(self) -> str:
        return self.spec()

    @classmethod
    def parse(cls, spec: str | None) -> Backoff | None:
        """Read a spec: ``None`` for an absent or empty one, else the policy.

        A bare number is taken as a fixed delay in ms. This is the strict reader that
        ``enqueue(..., backoff=text)`` applies before anything is sent; a worker reads
        a row's spec with :meth:`read`, which never raises.

        Raises:
            InvalidArgument: the text is not a spec, or a field is out of range
                (``"1e400"``, a negative delay, an unknown type, ...).
        """
        if spec is None or spec == "":
            return None
        if not isinstance(spec, str):
            raise InvalidArgument(f"a backoff spec is text, got {type(spec).__name__}")
        try:
            doc = json.loads(spec)
        except (ValueError, RecursionError):
            raise InvalidArgument(f"unreadable backoff spec: {show(spec)}") from None
        if isinstance(doc, (int, float)) and not isinstance(doc, bool):
            return cls.fixed(_whole(doc, "delay"))
        if not isinstance(doc, dict):
            raise InvalidArgument(f"a backoff spec is an object or a number: {show(spec)}")
        kind = doc.get("type", "exponential")
        if not isinstance(kind, str):
            raise InvalidArgument(f"backoff type must be text: {show(kind)}")
        jitter = doc.get("jitter", 0.0)
        if isinstance(jitter, bool) or not isinstance(jitter, (int, float)):
            raise InvalidArgument(f"backoff jitter must be a number: {show(jitter)}")
        return cls(
            kind,
            _whole(doc.get("delay", 1000), "delay"),
            None if doc.get("max") is None else _whole(doc["max"], "max"),
            float(jitter),
        )

    @classmethod
    def read(cls, spec: str | None) -> Backoff | None:
        """Read a row's spec leniently: ``None`` for an absent, empty or unreadable one
        (the worker's default then applies rather than the failure being lost)."""
        try:
            return cls.parse(spec)
        except InvalidArgument:
            return None


def as_spec(policy: str | Backoff | None) -> str | None:
    """The row text for a policy given as a :class:`Backoff` or as spec text."""
    if policy is None or isinstance(policy, str):
        return policy
    return policy.spec()


def _bad_int(value: Any) -> bool:
    return isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= HORIZON_MS


def _whole(value: Any, what: str) -> int:
    """A spec's number as an int: an integer, or a float with no fraction."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or _bad_int(value):
        raise InvalidArgument(f"backoff {what} must be an integer within 0..{HORIZON_MS}")
    return value


def spec_text(value: Any) -> str | None:
    """The row text of a backoff policy given as a :class:`Backoff` or as spec text.

    Raises:
        InvalidArgument: spec text that :meth:`Backoff.parse` refuses, or another type.
    """
    if value is None:
        return None
    if isinstance(value, Backoff):
        return value.spec()
    if not isinstance(value, str):
        raise InvalidArgument(f"backoff must be a Backoff or its spec text, got {show(value, 80)}")
    checks.text(value, "backoff")
    Backoff.parse(value)  # raises InvalidArgument when unreadable or out of range
    return value
