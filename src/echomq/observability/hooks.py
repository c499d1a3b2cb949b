"""The few lines the core calls into: tracing state, the traced verbs, the worker's job
observer. This module imports no optional package, so the core pays one attribute read
per hooked call when neither extra is installed or switched on.

- :data:`state` holds the tracer hooks once :func:`echomq.observability.tracing.instrument`
  ran; ``None`` otherwise.
- :func:`trace_opts` appends the W3C trace context to an enqueue's shared options (the
  enqueue script's optional trailing ARGV, written to the row's ``trace`` field).
- :func:`wrap_verb` wraps the facade's operator verbs (a span and a log record each) and,
  while tracing is on, the producer verbs (a span whose context the row carries).
- :func:`worker_observer` gives a worker the object that times its jobs, counts its
  claims and logs each job with its queue, id, attempt and token.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Sequence
from typing import Any, Protocol

#: Where an enqueue's trace context travels: the option after ``backoff`` in the
#: enqueue script's shared options (priority, name, group, max_attempts, delay_ms,
#: run_at_ms, backoff, trace). ``''`` or omitted = none.
TRACE_OPTION_INDEX = 7

#: Verbs that move a queue or a job by an operator's hand: each is a span (tracing on)
#: and an INFO record on ``echomq.operator``.
OPERATOR_VERBS = frozenset(
    {
        "pause",
        "resume",
        "drain",
        "obliterate",
        "update_data",
        "remove_job",
        "reprocess_job",
        "lock_job",
        "unlock_job",
        "pause_group",
        "resume_group",
        "set_group_limit",
        "clear_group_limit",
        "set_group_weight",
        "drain_group",
        "reassign",
        "repeat",
        "cancel_repeat",
    }
)
#: Verbs a handler calls on its own job: spans (tracing on) but no log record.
JOB_WRITE_VERBS = frozenset({"update_progress", "add_log"})
#: Verbs that produce jobs: a PRODUCER span (tracing on) whose context the row keeps.
PRODUCER_VERBS = frozenset({"enqueue", "enqueue_many"})

oplog = logging.getLogger("echomq.operator")


class Tracer(Protocol):
    """What :mod:`echomq.observability.tracing` installs in :data:`state`."""

    def traceparent(self) -> str:
        """The current W3C trace context as the row's ``trace`` text ('' = none)."""
        ...

    def verb_call(
        self, verb: str, queue: str, call: Callable[..., Any], is_async: bool
    ) -> Callable[..., Any]:
        """``call`` run inside a span for ``verb`` on ``queue``."""
        ...

    def job_span(self, queue: str, job: Any, trace: str | None) -> Any:
        """A started consumer span scope (``.end(outcome, exc)``; ``.attach()``)."""
        ...


class _State:
    __slots__ = ("tracer",)

    def __init__(self) -> None:
        self.tracer: Tracer | None = None


state = _State()


def trace_opts(opts: list[str]) -> list[str]:
    """An enqueue's shared options with the current trace context appended (unchanged
    when tracing is off or no span is current)."""
    tracer = state.tracer
    if tracer is None:
        return opts
    tp = tracer.traceparent()
    if not tp:
        return opts
    return [*opts, *([""] * (TRACE_OPTION_INDEX - len(opts))), tp]


def _job_of(verb: str, args: Sequence[Any], kwargs: dict[str, Any]) -> str | None:
    if verb in OPERATOR_VERBS or verb in JOB_WRITE_VERBS:
        first = args[0] if args else kwargs.get("job_id")
        if isinstance(first, str) and first.startswith("JOB"):
            return first
    return None


def _logged(verb: str, queue: str, call: Callable[..., Any], is_async: bool) -> Callable[..., Any]:
    """``call`` followed by one record on ``echomq.operator`` (outcome included)."""

    def record(args: Sequence[Any], kwargs: dict[str, Any], outcome: str) -> None:
        if oplog.isEnabledFor(logging.INFO):
            extra = {"queue": queue, "verb": verb, "outcome": outcome}
            job = _job_of(verb, args, kwargs)
            if job is not None:
                extra["job_id"] = job
            oplog.info("%s %s: %s", verb, queue, outcome, extra=extra)

    if is_async:

        async def acall(*args: Any, **kwargs: Any) -> Any:
            try:
                result = await call(*args, **kwargs)
            except Exception as exc:
                record(args, kwargs, getattr(exc, "reason", None) or type(exc).__name__)
                raise
            record(args, kwargs, "ok")
            return result

        return acall

    def scall(*args: Any, **kwargs: Any) -> Any:
        try:
            result = call(*args, **kwargs)
        except Exception as exc:
            record(args, kwargs, getattr(exc, "reason", None) or type(exc).__name__)
            raise
        record(args, kwargs, "ok")
        return result

    return scall


def wrap_verb(
    verb: str, queue: str, call: Callable[..., Any], is_async: bool
) -> Callable[..., Any]:
    """The facade's bound ``call`` for ``verb``, observed as its kind asks.

    The spine's hot verbs (claim, complete, ...) and the reads come back unchanged;
    the producer verbs too while tracing is off when the verb is first bound (so an
    untraced enqueue costs nothing): switch tracing on before making queues.
    """
    bound = call
    if verb in OPERATOR_VERBS:
        call = _logged(verb, queue, call, is_async)
    elif verb not in JOB_WRITE_VERBS and (verb not in PRODUCER_VERBS or state.tracer is None):
        return call
    tracer = state.tracer
    if tracer is not None:
        call = tracer.verb_call(verb, queue, call, is_async)
    if call is not bound:
        functools.update_wrapper(call, bound)  # the verb's name, doc and signature
    return call


# ---- the worker ---------------------------------------------------------------------


class WorkerObserver(Protocol):
    """What a worker reports to (see :func:`worker_observer`)."""

    def wrap_handler(self, handler: Any) -> Any:
        """A worker's handler (or mapping of them), each timed, logged and (tracing
        on) run in a consumer span."""
        ...

    def claimed(self, jobs: int, seconds: float) -> None:
        """One claim round trip took ``seconds`` and leased ``jobs`` jobs."""
        ...


def worker_observer(queue: str, metrics: Any = None) -> WorkerObserver:
    """The observer a worker of ``queue`` reports to.

    Args:
        metrics: ``None`` (no Prometheus metrics), a
            :class:`prometheus_client.CollectorRegistry` to register the worker's
            metrics in, or a :class:`echomq.observability.prometheus.WorkerMetrics`.
    """
    from .worker import JobObserver

    return JobObserver(queue, metrics)
