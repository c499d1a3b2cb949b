"""The worker's beat: one loop for every queue the worker serves.

Once a beat, for each queue: its leases in hand extended (``extend_locks``), its record
in the registry written with the read of the cancel requests (``worker_beat``), then,
unless the worker is stopping, its upkeep: the stalled check, promote and the due
repeatables, each bounded. Every queue's part travels in ONE pipelined round trip per
connection (:func:`~echomq.worker.pipeline.in_step`): the order within it is the order
of the old separate calls, so each queue's stalled check sees its rows as its own
extensions left them. A worker over ten idle queues beats in the round trips of one
(measured in ``docs/worker-recipes.md``); only due repeatables add one, to make their
jobs. After it, each queue's flow outbox is relayed (one bounded read when empty: a
relay reaches the parents' queues, other slots) and its waiting parents are swept once
a minute (:mod:`echomq.worker.sweeping`).

A queue's part that fails is that queue's failure (counted, logged by its outage
line); the others' parts stand. A round trip that fails is every queue's.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from .. import lifecycle, repeat
from . import outcomes, plans, stats, sweeping
from .job import CANCELLED, LEASE_LOST
from .pipeline import Raised, connection_of, in_step

if TYPE_CHECKING:
    from ..scripts import Plan
    from .engine import Engine, _Running


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
    parts = [_plans_of(engine) for engine in engines]
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
        _read(engine, held, answer[at : at + len(plan_list)])
        at += len(plan_list)
    # the flows' safety net, after the round trip (a relay reaches other queues' slots):
    # each queue's outbox relayed (bounded), and its waiting parents swept once a minute
    await asyncio.gather(*(_flows(engine) for engine in engines if not engine.stop_requested))


async def _flows(engine: Engine) -> None:
    aq = engine.aq
    assert aq is not None
    await outcomes.relay_now(engine, aq)
    await sweeping.sweep_sometimes(engine, aq)


# The two below work on the engine's own state (its jobs in hand, its cancels and its
# outage line), as :mod:`echomq.worker.outcomes` does: the engine's, in a file of its own.


def _plans_of(engine: Engine) -> tuple[dict[tuple[str, int], _Running], list[Plan[Any]]]:
    """One queue's part of a beat: the jobs in hand, and the plans: the lease
    extensions with the registry record and the cancel read; then, unless stopping,
    the stalled check, promote and due repeatables (in that order: the stalled check
    sees the rows as the extensions left them)."""
    cfg, aq = engine.config, engine.aq
    assert aq is not None
    held = {key: run for key, run in engine._running.items() if not run.recorded}
    pairs = list(held)
    # the record lives three beats (and two seconds more): a worker that misses
    # one beat under load is not dropped, a crashed one is gone within seconds
    ttl = 3 * cfg.beat + 2000
    fields = stats.record_fields(engine.queues, cfg, engine.stats, pairs, engine.shape)
    todo: list[Plan[Any]] = [
        plans.beat(aq.ctx, pairs, cfg.lease_ms, cfg.lock, engine.wid, ttl, fields)
    ]
    if not engine.stop_requested:  # a stopping worker only keeps its own leases alive
        budget = cfg.maintenance_budget
        todo += [
            lifecycle.check_stalled(aq.ctx, cfg.max_stalled, budget),
            lifecycle.promote(aq.ctx, budget),
        ]
        if cfg.repeat_budget:
            todo.append(repeat.fire_due(aq.ctx, cfg.repeat_budget))
    return held, todo


def _read(engine: Engine, held: dict[tuple[str, int], _Running], answer: list[Any]) -> None:
    """Read one queue's part of a beat (in :func:`_plans_of`' order)."""
    got = answer[0]
    if isinstance(got, Raised):
        engine.beat_failed(got.error)
        return
    lost, cancelled = set(got.lost), set(got.cancelled)
    if lost or cancelled:  # else nothing to look up for each job held
        for (job_id, _), run in held.items():
            if job_id in lost:
                engine.cancel(run, LEASE_LOST)
            elif job_id in cancelled:
                engine.cancel(run, CANCELLED)
    failed = [a.error for a in answer[1:] if isinstance(a, Raised)]
    # the registry write's error, else an upkeep's: counted and logged once
    error = got.error if got.error is not None else failed[0] if failed else None
    if error is not None:
        engine.beat_failed(error)
    else:
        engine._outage.ok("the beat")
