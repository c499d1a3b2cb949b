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

    @property
    def ongoing(self) -> bool:
        """Whether the last call failed and none has worked since."""
        return self.since is not None

    def failed(self, exc: BaseException, where: str) -> None:
        """A call failed: the first error of an outage is logged (WARNING, no
        traceback); later ones, and every traceback, only at DEBUG."""
        self.errors += 1
        if self.since is None:
            self.since = self.clock()
            self.log.warning(
                "worker %s: %s failed: %r; retrying quietly until it recovers",
                self.name,
                where,
                exc,
            )
        self.log.debug("worker %s: %s failed", self.name, where, exc_info=exc)

    def ok(self) -> None:
        """A call worked: ends an outage, logging how long it lasted (WARNING, so it
        shows wherever the first line did)."""
        if self.since is None:
            return
        took = self.clock() - self.since
        self.log.warning(
            "worker %s: recovered after %.1f s (%d errors)", self.name, took, self.errors
        )
        self.since, self.errors = None, 0
