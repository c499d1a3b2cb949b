"""OpenTelemetry traces (the ``tracing`` extra: ``pip install 'echomq[tracing]'``).

Call :func:`instrument` once at start-up, before making queues and workers::

    from echomq.observability import tracing
    tracing.instrument()                 # the global tracer provider, or pass one

Then:

- ``enqueue`` / ``enqueue_many`` run in a PRODUCER span (``enqueue <queue>``) and write
  its W3C trace context (``traceparent``, then ``tracestate`` after a newline when
  there is one) into the job row's optional ``trace`` field;
- a worker runs each handler in a CONSUMER span (``process <queue>``) *linked* to that
  context (messaging semantic conventions: ``messaging.system`` = ``echomq``,
  ``messaging.destination.name``, ``messaging.message.id``, ``messaging.operation.*``,
  and ``echomq.job.attempt``, the fencing token: there is no generic convention for
  it); the handler's own spans are its children;
- every operator verb (pause, drain, remove_job, reprocess_job, group verbs, ...) and a
  handler's ``progress()`` / ``log()`` is a CLIENT span ``<verb> <queue>``; a refusal
  marks it as an error with ``echomq.refusal`` = the refusal's reason.

Without this call nothing is traced and nothing imports OpenTelemetry.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Link, SpanKind, Status, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from .. import hooks

SYSTEM = "echomq"
_W3C = TraceContextTextMapPropagator()


def _fail(span: trace.Span, exc: BaseException) -> None:
    reason = getattr(exc, "reason", None)
    if reason:
        span.set_attribute("echomq.refusal", str(reason))
    span.record_exception(exc)
    span.set_status(Status(StatusCode.ERROR, f"{type(exc).__name__}: {exc}"))


class _JobSpan:
    """A worker's consumer span around one handler run."""

    __slots__ = ("span",)

    def __init__(self, span: trace.Span) -> None:
        self.span = span

    def attach(self) -> object:
        return otel_context.attach(trace.set_span_in_context(self.span))

    def detach(self, token: Any) -> None:
        otel_context.detach(token)

    def end(self, outcome: str, exc: BaseException | None) -> None:
        self.span.set_attribute("echomq.job.outcome", outcome)
        if exc is not None and outcome == "failed":
            _fail(self.span, exc)
        self.span.end()


def parse_trace(text: str | None) -> trace.SpanContext | None:
    """The producer's span context from a row's ``trace`` field (``None`` when absent
    or malformed)."""
    if not text:
        return None
    tp, _, ts = text.partition("\n")
    carrier = {"traceparent": tp}
    if ts:
        carrier["tracestate"] = ts
    sc = trace.get_current_span(_W3C.extract(carrier)).get_span_context()
    return sc if sc.is_valid else None


class OtelTracer:
    """The hooks' tracer (see :class:`echomq.hooks.Tracer`)."""

    def __init__(self, tracer: trace.Tracer) -> None:
        self.tracer = tracer

    def traceparent(self) -> str:
        carrier: dict[str, str] = {}
        _W3C.inject(carrier)
        tp = carrier.get("traceparent", "")
        ts = carrier.get("tracestate")
        return f"{tp}\n{ts}" if tp and ts else tp

    def _attrs(
        self, verb: str, kind: hooks.Kind, queue: str, args: Any, kwargs: dict[str, Any]
    ) -> dict[str, Any]:
        attrs: dict[str, Any] = {
            "messaging.system": SYSTEM,
            "messaging.destination.name": queue,
            "messaging.operation.name": verb,
        }
        if kind == "producer":
            attrs["messaging.operation.type"] = "send"
        job = hooks.job_of(kind, args, kwargs)
        if job is not None:
            attrs["messaging.message.id"] = job
        return attrs

    def _done(self, span: trace.Span, verb: str, result: Any) -> None:
        if verb == "enqueue" and isinstance(result, str):
            span.set_attribute("messaging.message.id", result)
        elif verb == "enqueue_many" and isinstance(result, list):
            span.set_attribute("messaging.batch.message_count", len(result))

    def verb_call(
        self, verb: str, kind: hooks.Kind, queue: str, call: Callable[..., Any], is_async: bool
    ) -> Callable[..., Any]:
        span_kind = SpanKind.PRODUCER if kind == "producer" else SpanKind.CLIENT
        name = f"{verb} {queue}"
        tracer = self.tracer

        def start(args: Any, kwargs: dict[str, Any]) -> Any:
            return tracer.start_as_current_span(
                name,
                kind=span_kind,
                attributes=self._attrs(verb, kind, queue, args, kwargs),
                record_exception=False,
                set_status_on_exception=False,
            )

        if is_async:

            async def acall(*args: Any, **kwargs: Any) -> Any:
                if hooks.state.tracer is not self:
                    return await call(*args, **kwargs)
                with start(args, kwargs) as span:
                    try:
                        result = await call(*args, **kwargs)
                    except Exception as exc:
                        _fail(span, exc)
                        raise
                    self._done(span, verb, result)
                    return result

            return acall

        def scall(*args: Any, **kwargs: Any) -> Any:
            if hooks.state.tracer is not self:
                return call(*args, **kwargs)
            with start(args, kwargs) as span:
                try:
                    result = call(*args, **kwargs)
                except Exception as exc:
                    _fail(span, exc)
                    raise
                self._done(span, verb, result)
                return result

        return scall

    def job_span(self, queue: str, job: Any, trace_text: str | None) -> _JobSpan:
        producer = parse_trace(trace_text)
        attrs: dict[str, Any] = {
            "messaging.system": SYSTEM,
            "messaging.destination.name": queue,
            "messaging.operation.type": "process",
            "messaging.operation.name": "process",
            "messaging.message.id": job.id,
            "echomq.job.attempt": job.attempt,
        }
        if getattr(job, "name", None):
            attrs["echomq.job.name"] = job.name
        if getattr(job, "group", None):
            attrs["echomq.job.group"] = job.group
        span = self.tracer.start_span(
            f"process {queue}",
            kind=SpanKind.CONSUMER,
            links=[Link(producer)] if producer is not None else None,
            attributes=attrs,
        )
        return _JobSpan(span)


def instrument(tracer_provider: trace.TracerProvider | None = None) -> None:
    """Switch tracing on for this process (enqueue, workers, operator verbs).

    Args:
        tracer_provider: the provider to use (default: the global one).
    """
    from ..version import __version__

    tracer = trace.get_tracer("echomq", __version__, tracer_provider=tracer_provider)
    hooks.state.tracer = OtelTracer(tracer)


def uninstrument() -> None:
    """Switch tracing off (verbs bound while it was on skip their span from now on)."""
    hooks.state.tracer = None
