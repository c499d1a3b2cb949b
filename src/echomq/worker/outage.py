"""The worker's quiet recovery: the shared outage log
(:class:`echomq.transport.outage.OutageLog`), worded for one worker's parts (the serve
loop, the beat)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from ..transport.outage import OutageLog


class Outage(OutageLog):
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
        super().__init__(log, clock=clock)
        self.name = name

    def lost_line(self, exc: BaseException, where: str) -> tuple[object, ...]:
        return ("worker %s: %s failed: %r; retrying quietly until it recovers",
                self.name, where, exc)  # fmt: skip

    def recovered_line(self, took: float) -> tuple[object, ...]:
        return ("worker %s: recovered after %.1f s (%d errors)", self.name, took, self.errors)

    def detail_line(self, exc: BaseException, where: str) -> tuple[object, ...]:
        return ("worker %s: %s failed", self.name, where)
