"""The flow sweep on the worker's beat: at a low rate (once a minute a queue, per
worker: :data:`echomq.flows.sweep.BEAT_EVERY_MS`), bounded like any sweep call
(docs/flows-operations.md). A failure is counted and logged; the next minute tries
again."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from ..flows.sweep import BEAT_EVERY_MS, sweep_flows
from .outcomes import RECOVERABLE

if TYPE_CHECKING:
    from ..queue import AsyncQueue
    from .engine import Engine


async def sweep_sometimes(eng: Engine, aq: AsyncQueue, every_ms: int = BEAT_EVERY_MS) -> None:
    """Sweep ``aq``'s waiting parents when the last sweep of it is ``every_ms`` old."""
    now = time.monotonic()
    if now - eng.flow_swept.get(aq.name, -1e18) < every_ms / 1000:
        return
    eng.flow_swept[aq.name] = now
    try:
        await aq.runner.drive(sweep_flows(aq.ctx))
    except RECOVERABLE as exc:
        eng.stats.errors += 1
        eng._outage.failed(exc, "the flow sweep")
