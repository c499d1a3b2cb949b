"""Quiet recovery: one log line when calls start failing, one when they work again,
and every traceback at DEBUG only.

A reset storm makes hundreds of errors a second; each one logged with its traceback
buries the one line an operator needs ("the server went away at T, came back N s
later"). :class:`OutageLog` keeps that rule once; the transport (:class:`Outage`) and
the worker (:class:`echomq.worker.outage.Outage`) each word its two lines.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable

from .. import errors

log = logging.getLogger("echomq.transport")


class OutageLog:
    """Tracks a run of errors (an outage) and logs it in two lines.

    Each caller reports its calls under the name of a part (``where``). The outage
    begins with the first part that fails and ends once every part that failed has
    worked again, so one part failing steadily while another works makes one line,
    not a line per turn. An outage that begins within :attr:`quiet_s` of the last
    first line logs neither of its lines (a link that flaps).

    Subclasses word the lines: :meth:`lost_line`, :meth:`recovered_line` (WARNING,
    no traceback) and :meth:`detail_line` (DEBUG, each error with its traceback).

    Args:
        log: where the lines go.
        clock: monotonic seconds (for tests).
        quiet_s: see above (0: every outage is logged).
    """

    def __init__(
        self,
        log: logging.Logger,
        *,
        clock: Callable[[], float] = time.monotonic,
        quiet_s: float = 0.0,
    ) -> None:
        self.log, self.clock, self.quiet_s = log, clock, quiet_s
        self.since: float | None = None  # when the current outage began
        self.errors = 0  # errors in the current outage
        self.failing: set[str] = set()  # the parts whose last call failed
        self._last_line = -math.inf  # when an outage's first line was last logged
        self._said = False  # whether this outage's first line was logged

    @property
    def ongoing(self) -> bool:
        """Whether some part's last call failed."""
        return self.since is not None

    def lost_line(self, exc: BaseException, where: str) -> tuple[object, ...]:
        """The first line of an outage (a format and its arguments)."""
        return ("lost: %s: %r", where, exc)

    def recovered_line(self, took: float) -> tuple[object, ...]:
        """The last line of an outage, ``took`` seconds long."""
        return ("recovered after %.1f s (%d errors)", took, self.errors)

    def detail_line(self, exc: BaseException, where: str) -> tuple[object, ...]:
        """The DEBUG line of each error (logged with its traceback)."""
        return ("%s failed: %s", where, exc)

    def failed(self, exc: BaseException, where: str = "") -> None:
        """A call of part ``where`` failed: the first error of an outage is logged
        (WARNING, no traceback); later ones, and every traceback, only at DEBUG."""
        self.errors += 1
        self.failing.add(where)
        if self.since is None:
            now = self.since = self.clock()
            self._said = now - self._last_line >= self.quiet_s
            if self._said:
                self._last_line = now
                self.log.warning(*self.lost_line(exc, where))
        self.log.debug(*self.detail_line(exc, where), exc_info=exc)

    def ok(self, where: str = "") -> None:
        """A call of part ``where`` worked. Once every failing part has, the outage
        ends with a line saying how long it lasted (WARNING, so it shows wherever the
        first line did)."""
        if self.since is None:
            return
        self.failing.discard(where)
        if self.failing:
            return
        if self._said:
            self.log.warning(*self.recovered_line(self.clock() - self.since))
        self.since, self.errors = None, 0


class Outage(OutageLog):
    """The transport's outage log: a failure that reached a caller, once per outage,
    and the recovery; a failure the transport recovered from by itself at DEBUG."""

    #: A new outage this soon after the last one's first line logs nothing new.
    QUIET_S = 5.0

    def __init__(self, where: str) -> None:
        super().__init__(log, quiet_s=self.QUIET_S)
        self.where = where

    def lost_line(self, exc: BaseException, where: str) -> tuple[object, ...]:
        return ("echomq: lost the server at %s: %s", self.where, exc)

    def recovered_line(self, took: float) -> tuple[object, ...]:
        return ("echomq: server at %s recovered after %.1f s (%d failed calls)",
                self.where, took, self.errors)  # fmt: skip

    def detail_line(self, exc: BaseException, where: str) -> tuple[object, ...]:
        return ("echomq: %s: %s", self.where, exc)

    def transient(self, exc: BaseException) -> None:
        """A failure the transport recovers from by itself: DEBUG only."""
        log.debug("echomq: connection to %s failed, retrying: %s", self.where, exc, exc_info=exc)

    def raised(self, exc: BaseException) -> None:
        """Report a call that raised ``exc``: a refusal or a full server (the server
        answered) ends an outage; any other :class:`ServerUnavailable` is a failure
        that reaches the caller; an exception of no echomq kind is not reported."""
        if isinstance(exc, errors.ServerUnavailable) and not isinstance(exc, errors.ServerFull):
            self.failed(exc)
        elif isinstance(exc, errors.EchoMQError):
            self.ok()
