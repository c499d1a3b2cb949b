"""Quiet recovery: one log line when the worker's calls start failing, one when they
work again, and every traceback at DEBUG only.

A reset storm makes hundreds of errors a second; each one logged with its traceback
buries the one line an operator needs ("the server went away at T, came back N s
later").
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable


class Outage:
    """Tracks a run of errors (an outage) for one worker and logs it in two lines.

    Each part of the worker (the serve loop, the beat) reports its own calls under a
    name. The outage begins with the first part that fails and ends once every part
    that failed has worked again, so one part failing steadily while another works
    makes one line, not a line per turn.

    Args:
        log: where the lines go.
        name: the queue name, to say which worker.
        clock: monotonic seconds (for tests).
    """

    def __init__(
        self, log: logging.Logger, name: str, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.log, self.name, self.clock = log, name, clock
        self.since: float | None = None  # when the current outage began
        self.errors = 0  # errors in the current outage
        self.failing: set[str] = set()  # the parts whose last call failed

    @property
    def ongoing(self) -> bool:
        """Whether some part's last call failed."""
        return self.since is not None

    def failed(self, exc: BaseException, where: str) -> None:
        """A call of part ``where`` failed: the first error of an outage is logged
        (WARNING, no traceback); later ones, and every traceback, only at DEBUG."""
        self.errors += 1
        self.failing.add(where)
        if self.since is None:
            self.since = self.clock()
            self.log.warning(
                "worker %s: %s failed: %r; retrying quietly until it recovers",
                self.name,
                where,
                exc,
            )
        self.log.debug("worker %s: %s failed", self.name, where, exc_info=exc)

    def ok(self, where: str) -> None:
        """A call of part ``where`` worked. Once every failing part has, the outage
        ends with a line saying how long it lasted (WARNING, so it shows wherever the
        first line did)."""
        if self.since is None:
            return
        self.failing.discard(where)
        if self.failing:
            return
        took = self.clock() - self.since
        self.log.warning(
            "worker %s: recovered after %.1f s (%d errors)", self.name, took, self.errors
        )
        self.since, self.errors = None, 0
