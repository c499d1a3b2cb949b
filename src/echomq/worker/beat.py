"""The worker's beat: one loop for every queue the worker serves.

Once a beat, for each queue: its leases in hand extended (``extend_locks``), its record
in the registry written with the read of the cancel requests (``worker_beat``), then,
unless the worker is stopping, its upkeep: the stalled check, promote and the due
repeatables, each bounded. Every queue's part travels in ONE pipelined round trip per
connection (:func:`~echomq.worker.pipeline.in_step`): the order within it is the order
of the old separate calls, so each queue's stalled check sees its rows as its own
extensions left them. A worker over ten idle queues beats in the round trips of one
(measured in ``docs/worker-recipes.md``); only due repeatables add one, to make their
jobs.

A queue's part that fails is that queue's failure (counted, logged by its outage
line); the others' parts stand. A round trip that fails is every queue's.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from .pipeline import connection_of, in_step

if TYPE_CHECKING:
    from .engine import Engine


class Beats:
    """The beat loop of one worker's engines (one engine, or one per queue).

    Args:
        engines: the worker's engines; each joins once it is serving
            (``engine.beating``) and leaves with :meth:`leave`.
        interval_s: the beat.
    """

    def __init__(self, engines: list[Engine], interval_s: float) -> None:
        self.engines, self.interval_s = engines, interval_s
        self._task: asyncio.Task[None] | None = None
        self._round: asyncio.Task[None] | None = None  # the beat in flight

    def start(self) -> None:
        """Start the loop (again: nothing)."""
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run())

    async def leave(self, engine: Engine) -> None:
        """Take ``engine`` out of the beats; return once no beat in flight carries it
        (its registry record is not written again after it leaves)."""
        engine.beating = False
        beat = self._round
        if beat is not None and not beat.done():
            # a server that answers nothing: give up after a beat and more
            await asyncio.wait([beat], timeout=self.interval_s + 2.0)

    async def close(self) -> None:
        """Stop the loop."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        beat, self._round = self._round, None
        if beat is not None and not beat.done():
            beat.cancel()
            await asyncio.gather(beat, return_exceptions=True)

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(self.interval_s)
            live = [e for e in self.engines if e.beating]
            if not live:
                continue
            self._round = loop.create_task(beat(live))
            await self._round  # a cancel of the loop cancels the beat in flight


async def beat(engines: list[Engine]) -> None:
    """One beat of ``engines``: a round trip per connection they use, concurrently."""
    groups: dict[tuple[int, bool | None], list[Engine]] = {}
    for engine in engines:
        assert engine.aq is not None
        groups.setdefault(connection_of(engine.aq), []).append(engine)
    await asyncio.gather(*(_beat_group(group) for group in groups.values()))


async def _beat_group(engines: list[Engine]) -> None:
    parts = [engine.beat_plans() for engine in engines]
    plans = [plan for _, plan_list in parts for plan in plan_list]
    aq = engines[0].aq
    assert aq is not None
    try:
        answer: list[Any] = await aq.runner.drive(in_step(plans))
    except Exception as exc:  # the round trip: every queue's beat failed
        for engine in engines:
            engine.beat_failed(exc)
        return
    at = 0
    for engine, (held, plan_list) in zip(engines, parts):
        engine.beat_done(held, answer[at : at + len(plan_list)])
        at += len(plan_list)
