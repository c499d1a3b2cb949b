"""The queue-scope operator verbs: pause, resume, drain, obliterate.

Pause is a field on the queue's meta hash that every claim reads first, not a move on
any set. Drain and obliterate are bounded per server call.
"""

from __future__ import annotations

from . import checks
from .context import Context
from .flows.relay import relay_flows
from .scripts import Eval, Plan, script

DEFAULT_OBLITERATE_BUDGET = 1000
#: Jobs one drain call deletes: sized so a call stays within a few ms of server time
#: (about 5 us a job with its row, logs and dedup key; see docs/runbook.md).
DEFAULT_DRAIN_BUDGET = 1000


def pause(ctx: Context) -> Plan[None]:
    """Close the claim gate of the whole queue: a field on its meta hash.

    Every claim, flat and grouped, reads the field first and answers ``None`` (``[]``)
    while it is set; no set moves, so the backlog stays byte-for-byte as it was.
    Idempotent: pausing a paused queue changes nothing.
    """
    yield Eval(script("pause"), (ctx.keys.base,), (ctx.actor,))


def resume(ctx: Context) -> Plan[None]:
    """Open the claim gate: the next claim serves the head of pending again.

    Idempotent: resuming a running queue changes nothing. When the gate was closed,
    wake tokens for the ready work bring idle workers back.
    """
    yield Eval(script("resume"), (ctx.keys.base,), (ctx.actor,))


def drain(
    ctx: Context, include_schedule: bool = False, budget: int = DEFAULT_DRAIN_BUDGET
) -> Plan[int]:
    """Delete the pending backlog (flat and every lane), rows, logs and dedup keys.

    Active jobs and the repeat registry survive. Each server call deletes at most
    ``budget`` jobs; the verb calls again until the backlog is empty.

    Args:
        include_schedule: also delete the scheduled jobs.
        budget: the most jobs one server call deletes.

    Returns:
        The total number of jobs drained.

    Raises:
        InvalidArgument: ``budget`` outside 1..100000, or a flag that is not a bool,
            before any I/O.
    """
    flag = "1" if checks.flag(include_schedule, "include_schedule") else ""
    budget = checks.batch(budget, "budget")
    total = 0
    while True:
        n, more = yield Eval(script("drain"), (ctx.keys.base,), (flag, str(budget), ctx.actor))
        total += int(n)
        if not int(more):
            return total


def _flags(keep_audit: bool, sweep: bool) -> str:
    return ",".join(f for f, on in (("keep", keep_audit), ("sweep", sweep)) if on)


def drain_step(
    ctx: Context, include_schedule: bool = False, budget: int = DEFAULT_DRAIN_BUDGET
) -> Plan[tuple[int, bool]]:
    """One bounded drain call (what :func:`drain` repeats), for a caller that shows
    progress between calls.

    Returns:
        ``(deleted, more)``: the jobs this call deleted and whether any remain.

    Raises:
        InvalidArgument: as :func:`drain`, before any I/O.
    """
    flag = "1" if checks.flag(include_schedule, "include_schedule") else ""
    budget = checks.batch(budget, "budget")
    n, more = yield Eval(script("drain"), (ctx.keys.base,), (flag, str(budget), ctx.actor))
    return int(n), bool(int(more))


def obliterate(
    ctx: Context,
    force: bool = False,
    budget: int = DEFAULT_OBLITERATE_BUDGET,
    keep_audit: bool = False,
    sweep: bool = False,
) -> Plan[bool]:
    """Destroy a paused queue, at most ``budget`` jobs of work per call.

    Jobs go first (active when forced, pending, schedule, dead, every lane: each row
    with its logs and lock, dedup keys released), then the repeat records, the
    metrics and lane structures, any other key under ``emq:{q}:``, and meta last.
    Call again while it answers ``False``.

    Args:
        force: also delete jobs in flight.
        budget: the most jobs this call deletes.
        keep_audit: keep the queue's audit journal (``emq:{q}:audit``), which then
            ends with the entry naming who obliterated the queue. By default the
            journal goes with the queue in the last call.
        sweep: also find keys no registry of the queue names (an orphan dedup key
            or log list, a key another program wrote under ``emq:{q}:``) by scanning
            the keyspace (``SCAN MATCH``): a recovery tool whose calls cost as much
            as the whole keyspace is large. Without it every key is found from the
            queue's own sets and registries.

    Returns:
        ``True`` when no key of the queue is left (but the journal with
        ``keep_audit``); ``False`` when more remains
        (call again).

    Raises:
        QueueNotPaused: the queue is not paused; nothing changed.
        QueueHasActiveJobs: jobs are in flight and ``force`` is not set; nothing changed.
        InvalidArgument: ``budget`` below 1, before any I/O.
    """
    force = checks.flag(force, "force")
    keep_audit = checks.flag(keep_audit, "keep_audit")
    budget = checks.batch(budget, "budget")
    keep_audit = checks.flag(keep_audit, "keep_audit")
    sweep = checks.flag(sweep, "sweep")
    reply = yield Eval(
        script("obliterate"),
        (ctx.keys.base,),
        ("force" if force else "", str(budget), _flags(keep_audit, sweep), ctx.actor),
    )
    if reply:
        # flow children deleted here report to parents in other queues through the
        # outbox, which goes only once relayed (one read when it is empty)
        yield from relay_flows(ctx)
    return int(reply) == 0
