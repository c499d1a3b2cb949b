"""The verb table: every verb of the facades, declared once.

One line per verb: its plan (the sans-IO generator that checks its arguments, yields
operations and decodes their replies), its :data:`~echomq.hooks.Kind` and the
transitions (Lua scripts, declared in :mod:`echomq.transitions` with their re-send rule,
native twin and journal) it runs. From this table:

- :class:`VerbTable` *is* the facades' verb list: ``Queue`` and ``AsyncQueue`` inherit it,
  and each attribute binds its plan to the queue's runner (sync: the result; async: an
  awaitable of it), observed as its kind asks (:func:`echomq.hooks.wrap_verb`: an
  operator verb logs one line on ``echomq.operator`` and is a span when tracing is on);
- :func:`verbs` lists them for the tests' enumerations (hostile arguments, the sync/async
  parity scenarios) and the documentation;
- ``tests/test_verb_table.py`` checks the table against the scripts: every transition run
  by a verb, every journaling transition's verb an operator verb, every audit entry's
  verb name a verb that runs that script.

Verbs that only the runtime calls (the worker's beat and leave, the repeat scheduler's
fire, the metrics scrape) are listed in :data:`RUNTIME_VERBS` with the transitions
they run.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Concatenate, Generic, TypeVar, overload

from typing_extensions import ParamSpec, Self

from . import (
    admin,
    bulk,
    dedup,
    flows,
    history,
    hooks,
    jobs,
    journal,
    lanes,
    lifecycle,
    limits,
    reads,
    registry,
    views,
)
from . import repeat as repeating
from .context import Context
from .flows import impact as flows_impact
from .flows import ops as flow_ops
from .flows import relay as flows_relay
from .flows import sweep as flow_sweep
from .flows import tree as flow_tree
from .hooks import Kind
from .scripts import Plan
from .transitions import TRANSITIONS

if TYPE_CHECKING:
    from .queue import AsyncQueue, Queue

P = ParamSpec("P")
T = TypeVar("T")


def _bound_signature(plan: Callable[..., Any]) -> inspect.Signature:
    sig = inspect.signature(plan)
    params = list(sig.parameters.values())[1:]  # drop the context
    return sig.replace(parameters=params)


class Verb(Generic[P, T]):
    """One verb: its plan, kind and transitions; bound to a facade on attribute access.

    On a :class:`~echomq.queue.Queue` calling it runs the plan and returns the result;
    on an :class:`~echomq.queue.AsyncQueue` it returns an awaitable of the result.
    """

    def __init__(
        self,
        plan: Callable[Concatenate[Context, P], Plan[T]],
        kind: Kind,
        runs: tuple[str, ...] = (),
    ) -> None:
        self.plan = plan
        self.kind: Kind = kind
        self.runs = runs
        self.__doc__ = plan.__doc__
        self.name = plan.__name__

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    @overload
    def __get__(self, obj: None, owner: type) -> Self: ...
    @overload
    def __get__(self, obj: Queue, owner: type) -> Callable[P, T]: ...
    @overload
    def __get__(self, obj: AsyncQueue, owner: type) -> Callable[P, Awaitable[T]]: ...
    def __get__(self, obj: Any, owner: type) -> Any:
        if obj is None:
            return self
        plan, ctx, runner = self.plan, obj.ctx, obj.runner
        call: Callable[..., Any]
        if obj.is_async:

            async def acall(*args: P.args, **kwargs: P.kwargs) -> T:
                return await runner.drive(plan(ctx, *args, **kwargs))  # type: ignore[no-any-return]

            call = acall
        else:

            def scall(*args: P.args, **kwargs: P.kwargs) -> T:
                return runner.drive(plan(ctx, *args, **kwargs))  # type: ignore[no-any-return]

            call = scall
        functools.update_wrapper(call, plan)
        call.__signature__ = _bound_signature(plan)  # type: ignore[union-attr]
        call = hooks.wrap_verb(self.name, self.kind, obj.name, call, obj.is_async)
        obj.__dict__[self.name] = call  # later lookups skip the descriptor
        return call


def _v(plan: Callable[Concatenate[Context, P], Plan[T]], kind: Kind, *runs: str) -> Verb[P, T]:
    return Verb(plan, kind, runs)


class VerbTable:
    """The verbs both facades expose, one line each: plan, kind, transitions run.

    ``Queue`` and ``AsyncQueue`` inherit this class; it holds no state of its own.
    """

    # the lifecycle: producers
    enqueue = _v(lifecycle.enqueue, "producer", "enqueue")
    enqueue_many = _v(lifecycle.enqueue_many, "producer", "enqueue")
    # flows
    enqueue_flow = _v(flows.enqueue_flow, "producer", "enqueue_flow")
    children_results = _v(flows.children_results, "read")
    relay_flows = _v(flows_relay.relay_flows, "hot", "outbox_read", "resolve_child", "outbox_done")
    # the lifecycle: the worker's path
    claim = _v(lifecycle.claim, "hot", "claim")
    claim_many = _v(lifecycle.claim_many, "hot", "claim")
    complete = _v(lifecycle.complete, "hot", "complete")
    complete_many = _v(lifecycle.complete_many, "hot", "complete")
    retry = _v(lifecycle.retry, "hot", "retry")
    delay = _v(lifecycle.delay, "hot", "delay")
    extend_lock = _v(lifecycle.extend_lock, "hot", "extend_lock")
    extend_locks = _v(lifecycle.extend_locks, "hot", "extend_lock")
    promote = _v(lifecycle.promote, "hot", "promote")
    reap = _v(lifecycle.reap, "hot", "reap")
    check_stalled = _v(lifecycle.check_stalled, "hot", "check_stalled")
    release = _v(lifecycle.release, "hot", "release")
    # reads
    counts = _v(reads.counts, "read", "counts")
    get_job = _v(reads.get_job, "read")
    job_state = _v(reads.job_state, "read")
    browse = _v(reads.browse, "read", "browse")
    is_paused = _v(reads.is_paused, "read")
    metrics = _v(reads.metrics, "read")
    # the operator plane: queue scope
    pause = _v(admin.pause, "operator", "pause")
    resume = _v(admin.resume, "operator", "resume")
    drain = _v(admin.drain, "operator", "drain")
    drain_step = _v(admin.drain_step, "operator", "drain")
    obliterate = _v(admin.obliterate, "operator", "obliterate")
    # flow control (decided inside the claim)
    set_rate_limit = _v(limits.set_rate_limit, "operator", "set_limits")
    clear_rate_limit = _v(limits.clear_rate_limit, "operator", "set_limits")
    rate_limit = _v(limits.rate_limit, "read")
    set_concurrency = _v(limits.set_concurrency, "operator", "set_limits")
    clear_concurrency = _v(limits.clear_concurrency, "operator", "set_limits")
    set_group_rate_limit = _v(limits.set_group_rate_limit, "operator", "set_group_rate")
    clear_group_rate_limit = _v(limits.clear_group_rate_limit, "operator", "set_group_rate")
    set_group_rate_default = _v(limits.set_group_rate_default, "operator", "set_limits")
    clear_group_rate_default = _v(limits.clear_group_rate_default, "operator", "set_limits")
    group_rate_limit = _v(limits.group_rate_limit, "read")
    limits = _v(limits.limits, "read", "obs_queue")
    # the operator plane: job scope
    update_data = _v(jobs.update_data, "operator", "update_data")
    update_progress = _v(jobs.update_progress, "job_write", "update_progress")
    add_log = _v(jobs.add_log, "job_write", "add_log")
    get_job_logs = _v(jobs.get_job_logs, "read", "get_job_logs")
    get_job_log_entries = _v(jobs.get_job_log_entries, "read", "get_job_log_entries")
    remove_job = _v(jobs.remove_job, "operator", "remove_job")
    reprocess_job = _v(jobs.reprocess_job, "operator", "reprocess_job")
    rerun_job = _v(jobs.rerun_job, "operator", "rerun_job")
    lock_job = _v(jobs.lock_job, "operator", "lock_job")
    unlock_job = _v(jobs.unlock_job, "operator", "unlock_job")
    cancel_job = _v(jobs.cancel_job, "operator", "cancel_job")
    # dedup ids
    dedup_owner = _v(dedup.dedup_owner, "read", "dedup_owner")
    release_dedup = _v(dedup.release_dedup, "operator", "release_dedup")
    # the worker registry
    workers = _v(registry.workers, "read", "workers")
    # the audit journal
    audit = _v(journal.audit, "read")
    # opt-in history
    set_retention = _v(history.set_retention, "operator", "set_retention")
    retention = _v(history.retention, "read")
    # bulk verbs by filter
    reprocess_jobs = _v(bulk.reprocess_jobs, "operator", "bulk_reprocess")
    remove_jobs = _v(bulk.remove_jobs, "operator", "bulk_remove")
    promote_jobs = _v(bulk.promote_jobs, "operator", "bulk_promote")
    promote_job = _v(bulk.promote_job, "operator", "promote_job")
    clean = _v(bulk.clean, "operator", "bulk_clean")
    # lanes
    pause_group = _v(lanes.pause_group, "operator", "pause_group")
    resume_group = _v(lanes.resume_group, "operator", "resume_group")
    set_group_limit = _v(lanes.set_group_limit, "operator", "set_group_limit")
    clear_group_limit = _v(lanes.clear_group_limit, "operator", "set_group_limit")
    set_group_weight = _v(lanes.set_group_weight, "operator", "set_group_weight")
    group_depth = _v(lanes.group_depth, "read")
    groups = _v(lanes.groups, "read", "groups")
    drain_group = _v(lanes.drain_group, "operator", "drain_group")
    reassign = _v(lanes.reassign, "operator", "reassign")
    reindex = _v(lanes.reindex, "operator", "reindex")
    # repeatables
    repeat = _v(repeating.repeat, "operator", "repeat")
    cancel_repeat = _v(repeating.cancel_repeat, "operator", "cancel_repeat")
    pause_repeat = _v(repeating.pause_repeat, "operator", "pause_repeat")
    resume_repeat = _v(repeating.resume_repeat, "operator", "resume_repeat")
    run_repeat = _v(repeating.run_repeat, "operator", "run_repeat", "fire_due")
    repeats = _v(repeating.repeats, "read")
    # flows: the operator plane (docs/flows-operations.md)
    flow = _v(flow_tree.flow, "read", "flow_nodes")
    release_parent = _v(flow_ops.release_parent, "operator", "release_parent")
    fail_parent = _v(flow_ops.fail_parent, "operator", "fail_parent")
    cancel_flow = _v(flow_ops.cancel_flow, "operator", "cancel_flow")
    sweep_flows = _v(flow_sweep.sweep_flows, "operator", "resolve_child")
    flow_impact = _v(flows_impact.flow_impact, "read", "flow_impact")
    # views for the operator's tools (bounded pages, search, one job)
    server_time = _v(views.server_time, "read")
    latency = _v(views.latency, "read")
    queue_exists = _v(views.queue_exists, "read")
    job_page = _v(views.job_page, "read")
    find_jobs = _v(views.find_jobs, "read")
    job_view = _v(views.job_view, "read", "get_job_log_entries", "dedup_owner")
    groups_page = _v(views.groups_page, "read", "groups")
    throughput = _v(views.throughput, "read")
    history = _v(views.history, "read")
    busiest_lanes = _v(views.busiest_lanes, "read")


@dataclass(frozen=True)
class RuntimeVerb:
    """A verb only the runtime calls (no facade attribute): who calls it, what it runs."""

    name: str
    caller: str
    runs: tuple[str, ...]


#: The runtime's own verbs.
RUNTIME_VERBS: tuple[RuntimeVerb, ...] = (
    RuntimeVerb("worker_beat", "the worker's beat (registry.beat_op)", ("worker_beat",)),
    RuntimeVerb("worker_leave", "a worker's graceful exit (registry.leave)", ("worker_leave",)),
    RuntimeVerb(
        "fire_due", "the repeat scheduler (repeat.fire_due)", ("fire_due_list", "fire_due")
    ),
    RuntimeVerb(
        "rate_limited",
        "the worker, on a handler's RateLimited (worker.limits.rate_limited)",
        ("rate_limited",),
    ),
    RuntimeVerb("scrape", "the metrics scrape", ("obs_queue", "obs_groups")),
    RuntimeVerb(
        "relay",
        "the flow relay: the worker after a settle that wrote an outbox entry, and its beat "
        "(flows.relay.relay_flows)",
        ("outbox_read", "resolve_child", "outbox_done"),
    ),
)


def verbs() -> dict[str, Verb[Any, Any]]:
    """Every facade verb by name, in declaration order."""
    return {n: v for n, v in vars(VerbTable).items() if isinstance(v, Verb)}


def of_kind(kind: Kind) -> frozenset[str]:
    """The facade verbs of one kind."""
    return frozenset(n for n, v in verbs().items() if v.kind == kind)


def journaling(verb: Verb[Any, Any]) -> bool:
    """Whether a verb writes an audit entry (one of its transitions journals)."""
    return any(TRANSITIONS[s].journals for s in verb.runs)
