"""The few lines the core calls into: tracing state and the observed verbs.

This module imports no optional package, so the core pays one attribute read per
hooked call when neither extra is installed or switched on.

- :data:`state` holds the tracer hooks once :func:`echomq.observability.tracing.instrument`
  ran; ``None`` otherwise.
- :func:`trace_opts` appends the W3C trace context to an enqueue's shared options (the
  enqueue script's optional ``trace`` option, written to the row's ``trace`` field).
- :func:`wrap_verb` wraps a facade verb as its :data:`Kind` asks (the kind is declared
  once per verb in :mod:`echomq.verbs`): an operator verb gets a span (tracing on) and
  an INFO record on ``echomq.operator``; a job write a span; a producer verb a span
  whose context the row keeps; the worker's hot path and the reads nothing.

The worker's per-job observer lives in :mod:`echomq.observability.worker`.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Sequence
from typing import Any, Literal, Protocol

from .schema import ENQUEUE_OPTIONS

#: What a verb is, for what observes it (declared per verb in :mod:`echomq.verbs`):
#: ``producer`` makes jobs; ``hot`` is the worker's path; ``read`` changes nothing;
#: ``operator`` moves a queue or a job by an operator's hand; ``job_write`` is a
#: handler's write to its own job (progress, logs).
Kind = Literal["producer", "hot", "read", "operator", "job_write"]
KINDS: tuple[Kind, ...] = ("producer", "hot", "read", "operator", "job_write")

#: Where an enqueue's trace context travels among the enqueue script's shared options.
TRACE_OPTION_INDEX = ENQUEUE_OPTIONS.index("trace")

oplog = logging.getLogger("echomq.operator")


class Tracer(Protocol):
    """What :mod:`echomq.observability.tracing` installs in :data:`state`."""

    def traceparent(self) -> str:
        """The current W3C trace context as the row's ``trace`` text ('' = none)."""
        ...

    def verb_call(
        self, verb: str, kind: Kind, queue: str, call: Callable[..., Any], is_async: bool
    ) -> Callable[..., Any]:
        """``call`` run inside a span for ``verb`` (of ``kind``) on ``queue``."""
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


def job_of(kind: Kind, args: Sequence[Any], kwargs: dict[str, Any]) -> str | None:
    """The job an operator verb or a job write is about (its first argument), if any."""
    if kind == "operator" or kind == "job_write":
        first = args[0] if args else kwargs.get("job_id")
        if isinstance(first, str) and first.startswith("JOB"):
            return first
    return None


def _logged(verb: str, queue: str, call: Callable[..., Any], is_async: bool) -> Callable[..., Any]:
    """``call`` followed by one record on ``echomq.operator`` (outcome included)."""

    def record(args: Sequence[Any], kwargs: dict[str, Any], outcome: str) -> None:
        if oplog.isEnabledFor(logging.INFO):
            extra = {"queue": queue, "verb": verb, "outcome": outcome}
            job = job_of("operator", args, kwargs)
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
    verb: str, kind: Kind, queue: str, call: Callable[..., Any], is_async: bool
) -> Callable[..., Any]:
    """The facade's bound ``call`` for ``verb``, observed as its ``kind`` asks.

    The worker's hot verbs (claim, complete, ...) and the reads come back unchanged;
    the producer verbs too while tracing is off when the verb is first bound (so an
    untraced enqueue costs nothing): switch tracing on before making queues.
    """
    bound = call
    if kind == "operator":
        call = _logged(verb, queue, call, is_async)
    elif kind != "job_write" and (kind != "producer" or state.tracer is None):
        return call
    tracer = state.tracer
    if tracer is not None:
        call = tracer.verb_call(verb, kind, queue, call, is_async)
    if call is not bound:
        functools.update_wrapper(call, bound)  # the verb's name, doc and signature
    return call
