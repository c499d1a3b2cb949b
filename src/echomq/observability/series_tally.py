"""The exporter's wait and run counters, added up from the history series.

The transitions keep no all-time sums of wait and run (one fewer write per completion):
the history series holds them per minute (:mod:`echomq.reads.series`). A minute's slot
is final once the server's clock has passed it (a script reads ``TIME`` and writes in
the same atomic step), so an exporter adds each closed minute once, per queue, from the
minute it first saw the queue: its counters start at 0 when the process starts (a reset,
which Prometheus's ``rate()`` expects) and only grow. A scrape reads the closed minutes
since its last one (at most :data:`CATCH_UP_MINUTES`, one or two ``BITFIELD_RO`` per
queue); two scrapes at once count a minute once (the later one finds it counted).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from dataclasses import dataclass

from ..context import Context
from ..keyspace import Keyspace
from ..reads import decode
from ..reads.series import read_minutes
from ..scripts import Cmd, Plan

#: The most closed minutes one scrape adds per queue (a longer gap: the older are skipped).
CATCH_UP_MINUTES = 120


@dataclass
class Tally:
    """What one queue's closed minutes added up to since the exporter first saw it."""

    minute: int  # the last minute counted
    completed: int = 0
    dead: int = 0
    wait_ms: int = 0
    run_ms: int = 0

    @property
    def ended(self) -> int:
        return self.completed + self.dead


class SeriesTally:
    """Per-queue running sums of the history series' closed minutes."""

    def __init__(self) -> None:
        self._by_queue: dict[str, Tally] = {}
        self._lock = threading.Lock()

    def get(self, queue: str) -> Tally | None:
        with self._lock:
            return self._by_queue.get(queue)

    def update(self, names: Iterable[str]) -> Plan[None]:
        """Add the minutes that closed since the last scrape, for each queue."""
        now = decode.time_ms((yield Cmd(("TIME",))))
        closed = now // 60000 - 1
        for name in names:
            with self._lock:
                seen = self._by_queue.get(name)
                if seen is None:
                    self._by_queue[name] = Tally(closed)
                    continue
                last = seen.minute
            if last >= closed:
                continue
            first = max(last + 1, closed - CATCH_UP_MINUTES + 1)
            cells = yield from read_minutes(Context(Keyspace(name)), first, closed)
            with self._lock:
                if seen.minute != last:  # another scrape counted them meanwhile
                    continue
                for c, d, w, r in cells.values():
                    seen.completed += c
                    seen.dead += d
                    seen.wait_ms += w
                    seen.run_ms += r
                seen.minute = closed
