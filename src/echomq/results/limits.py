"""Flow control's results: what a claim held back answers (:class:`ClaimHold`, carried
by :class:`ClaimedBatch`), a rate limit (:class:`RateLimit`) and the queue's limits as
one read (:class:`Limits`)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Literal

from .jobs import Claimed

#: Why a claim was held back: the queue's rate window is full (``rate``), a handler's
#: ``RateLimited`` holds the queue (``blocked``), its concurrency cap is reached
#: (``concurrency``), or it answered fewer jobs than asked while a held lane is due
#: again (``lanes``).
HoldScope = Literal["rate", "blocked", "concurrency", "lanes"]


@dataclass(frozen=True)
class ClaimHold:
    """Flow control held a claim back.

    Attributes:
        scope: why (:data:`HoldScope`).
        wait_ms: for ``rate`` and ``blocked``, how long until the next start is
            allowed (no claim can start one sooner); for ``lanes``, when the first
            held lane may be served again; 0 for ``concurrency`` (a slot frees when a
            job of the queue ends, which pushes a wake token).
    """

    scope: HoldScope
    wait_ms: int


class ClaimedBatch(list[Claimed]):
    """The jobs a claim leased (a list), and :attr:`hold`: what held it back, if
    anything (``None`` when nothing did)."""

    hold: ClaimHold | None = None


@dataclass(frozen=True)
class RateLimit:
    """At most ``max_jobs`` claims start in any window of ``per_ms`` ms (server clock);
    ``burst`` (the queue's limit only): at most that many in any ``floor(0.9 * burst *
    per_ms / max_jobs)`` ms (``None``: a lane's limit, or ``burst = max_jobs``: none)."""

    max_jobs: int
    per_ms: int
    burst: int | None = None

    def as_dict(self) -> dict[str, Any]:
        """The limit as a plain dict (for JSON output)."""
        return asdict(self)


@dataclass(frozen=True)
class Limits:
    """A queue's flow control, read at once (``Queue.limits``).

    Attributes:
        rate: the queue's rate limit, or ``None``.
        concurrency: the most jobs of the queue active at once, or ``None``.
        group_rate_default: every lane's default rate limit, or ``None``.
        limited_for_ms: how long a handler's ``RateLimited`` still holds the queue
            (0 when it does not).
        starts_in_window: claims started in the rate window ending now (0 without a
            rate limit).
        active: the queue's active jobs.
        held_lanes: lanes held off the ring by their rate limit or a handler.
        next_start_in_ms: how long until the rate window or a handler's hold allows
            the next start (0: one may start now, the cap permitting).
    """

    rate: RateLimit | None
    concurrency: int | None
    group_rate_default: RateLimit | None
    limited_for_ms: int
    starts_in_window: int
    active: int
    held_lanes: int
    next_start_in_ms: int = 0

    @property
    def rate_limited(self) -> bool:
        """Whether no claim may start now (a full window, a handler's block or the cap)."""
        full = self.rate is not None and self.starts_in_window >= self.rate.max_jobs
        capped = self.concurrency is not None and self.active >= self.concurrency
        return full or capped or self.limited_for_ms > 0 or self.next_start_in_ms > 0

    def as_dict(self) -> dict[str, Any]:
        """The limits as a plain dict (for JSON output)."""
        out = asdict(self)
        out["rate_limited"] = self.rate_limited
        return out
