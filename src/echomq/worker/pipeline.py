"""Several plans in one round trip: what lets one worker over many queues pay for one.

- :func:`in_step` drives plans in lockstep: the operations each plan yields next go
  together in one pipelined :class:`~echomq.scripts.Batch`, and each plan gets its own
  replies back, exactly as the runner would have given them (a single operation's
  error reply is thrown into its plan). A plan's result, or what it raised, is its
  entry in the answer.
- :class:`Pipeline` is a group commit over one worker's engines: a plan handed to
  :meth:`Pipeline.drive` while the round trip of another is in flight on the same
  connection waits for it, then goes with every plan that came meanwhile, in step; a
  plan that finds none in flight goes at once, alone (the one queue with work pays
  nothing for the others).

Each operation keeps its own re-send rule, ``NOSCRIPT`` reload and reply reading
(:func:`echomq.transport.exchange.exchange` judges each operation of a batch on its
own); what the pipeline shares is only the write and the read. A failure of the round
trip itself (the server unreachable) is every plan's failure.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..scripts import Batch, Cmd, Eval, Op, Plan

if TYPE_CHECKING:
    from ..queue import AsyncQueue


class Raised:
    """A plan's failure in :func:`in_step`'s answer (a plan may return an exception
    object as its value, so a failure is wrapped).

    Attributes:
        error: what the plan raised.
    """

    __slots__ = ("error",)

    def __init__(self, error: Exception) -> None:
        self.error = error


def in_step(plans: Sequence[Plan[Any]]) -> Plan[list[Any]]:
    """Drive ``plans`` together: each step, every unfinished plan's next operation (a
    batch's operations each) in one :class:`~echomq.scripts.Batch`.

    Returns:
        One entry per plan, in order: its result, or :class:`Raised` with what it
        raised.

    Raises:
        EchoMQError: the round trip itself failed (nothing is known of any plan's
            later steps; the caller treats it as every plan's failure).
    """
    answer: list[Any] = [None] * len(plans)
    current: dict[int, Op] = {}
    for i, plan in enumerate(plans):
        _advance(plan, i, current, answer, _START, None)
    while current:
        spans: list[tuple[int, Op, int, int]] = []
        flat: list[Eval | Cmd] = []
        for i, op in current.items():
            ops = op.ops if isinstance(op, Batch) else (op,)
            spans.append((i, op, len(flat), len(ops)))
            flat.extend(ops)
        replies = yield Batch(tuple(flat))
        current = {}
        for i, op, start, count in spans:
            got = replies[start : start + count]
            if isinstance(op, Batch):
                _advance(plans[i], i, current, answer, got, None)
            elif isinstance(got[0], Exception):
                _advance(plans[i], i, current, answer, None, got[0])
            else:
                _advance(plans[i], i, current, answer, got[0], None)
    return answer


_START = object()  # the reply that starts a plan


def _advance(
    plan: Plan[Any],
    i: int,
    current: dict[int, Op],
    answer: list[Any],
    reply: Any,
    error: Exception | None,
) -> None:
    """Hand plan ``i`` its reply (or throw its operation's error in, as the runner
    does) and note its next operation, or its end in ``answer``."""
    try:
        if error is not None:
            op = plan.throw(error)
        elif reply is _START:
            op = next(plan)
        else:
            op = plan.send(reply)
    except StopIteration as stop:
        answer[i] = stop.value
        return
    except Exception as exc:
        answer[i] = Raised(exc)
        return
    current[i] = op


def connection_of(aq: AsyncQueue) -> tuple[int, bool | None]:
    """What queues must share for their operations to travel in one round trip: the
    client (so the connection) and how commands are spelled (native or scripts)."""
    return id(aq.client), aq.ctx.executor.native


class Pipeline:
    """Group commit over one worker's engines: one round trip in flight per
    connection; plans that come meanwhile go together in the next (:func:`in_step`)."""

    def __init__(self) -> None:
        self._queued: dict[tuple[int, bool | None], list[_Entry]] = {}
        self._flushing: dict[tuple[int, bool | None], asyncio.Task[None]] = {}
        self._busy: set[tuple[int, bool | None]] = set()  # a round trip in flight

    async def drive(self, aq: AsyncQueue, plan: Plan[Any]) -> Any:
        """Run ``plan`` on ``aq``'s connection, with the other plans queued for it.

        Returns:
            The plan's result.

        Raises:
            Exception: what the plan raised, or the round trip's failure.
        """
        loop = asyncio.get_running_loop()
        key = connection_of(aq)
        if key in self._busy:  # a round trip in flight: go with the next one
            entry = _Entry(aq, plan, loop.create_future())
            self._queued.setdefault(key, []).append(entry)
            return await entry.done
        # none in flight: this plan goes alone, at once (the one queue with work)
        self._busy.add(key)
        try:
            return await aq.runner.drive(plan)
        finally:
            if self._queued.get(key):  # those that came meanwhile go together next
                self._flushing[key] = loop.create_task(self._flush(key))
            else:
                self._busy.discard(key)

    async def _flush(self, key: tuple[int, bool | None]) -> None:
        try:
            while self._queued.get(key):
                entries = self._queued.pop(key)
                runner = entries[0].aq.runner
                try:
                    answer = await runner.drive(in_step([e.plan for e in entries]))
                except Exception as exc:
                    for entry in entries:
                        if not entry.done.done():
                            entry.done.set_exception(exc)
                    continue
                except BaseException:  # cancelled: so is every plan in it
                    for entry in entries:
                        entry.done.cancel()
                    for entry in self._queued.pop(key, []):
                        entry.done.cancel()
                    raise
                for entry, got in zip(entries, answer):
                    if entry.done.done():
                        continue
                    if isinstance(got, Raised):
                        entry.done.set_exception(got.error)
                    else:
                        entry.done.set_result(got)
        finally:
            del self._flushing[key]
            self._busy.discard(key)

    async def close(self) -> None:
        """Cancel what is in flight (the worker is done)."""
        tasks = list(self._flushing.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


class _Entry:
    __slots__ = ("aq", "done", "plan")

    def __init__(self, aq: AsyncQueue, plan: Plan[Any], done: asyncio.Future[Any]) -> None:
        self.aq, self.plan, self.done = aq, plan, done
