"""OpenTelemetry: the producer span's context in the row, the worker's consumer span
linked to it, operator verbs as spans; checked with the SDK's in-memory exporter."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
import redis

pytest.importorskip("opentelemetry.sdk")

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from echomq import JobContext, JobNotDead, Queue, Worker
from echomq.observability import hooks, tracing
from worker_support import FAST, running, wait_until


@pytest.fixture()
def spans() -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracing.instrument(provider)
    yield exporter
    tracing.uninstrument()
    provider.shutdown()


def named(exporter: InMemorySpanExporter, name: str) -> list[ReadableSpan]:
    return [s for s in exporter.get_finished_spans() if s.name == name]


def test_enqueue_writes_its_producer_span_context_into_the_row(
    spans: InMemorySpanExporter, make_queue: Callable[..., Queue], qname: str, r: redis.Redis
) -> None:
    q = make_queue(qname)
    jid = q.enqueue({"a": 1})
    grouped = q.enqueue({"a": 2}, group="g", priority=3)
    many = q.enqueue_many([{"b": 1}, {"b": 2}], delay_ms=50_000)
    (send, _) = named(spans, f"enqueue {q.name}")
    assert send.kind == SpanKind.PRODUCER
    assert send.attributes is not None
    assert send.attributes["messaging.system"] == "echomq"
    assert send.attributes["messaging.destination.name"] == q.name
    assert send.attributes["messaging.message.id"] == jid
    ctx = send.get_span_context()
    assert ctx is not None
    trace_text = r.hget(q.keys.job(jid), "trace")
    assert trace_text.startswith(f"00-{ctx.trace_id:032x}-{ctx.span_id:016x}-")
    # the other options are untouched by the trailing trace option
    row = r.hgetall(q.keys.job(grouped))
    assert row["group"] == "g" and row["priority"] == "3" and row["trace"].startswith("00-")
    (batch,) = named(spans, f"enqueue_many {q.name}")
    assert batch.attributes is not None and batch.attributes["messaging.batch.message_count"] == 2
    bctx = batch.get_span_context()
    assert bctx is not None
    for j in many:
        assert r.hget(q.keys.job(j), "state") == "scheduled"
        parsed = tracing.parse_trace(r.hget(q.keys.job(j), "trace"))
        assert parsed is not None
        assert (parsed.trace_id, parsed.span_id) == (bctx.trace_id, bctx.span_id)


def test_without_instrument_no_trace_field_and_no_wrapper(
    make_queue: Callable[..., Queue], qname: str, r: redis.Redis
) -> None:
    assert hooks.state.tracer is None
    q = make_queue(qname)
    jid = q.enqueue({"a": 1})
    assert r.hget(q.keys.job(jid), "trace") is None
    # the hot verbs are the plain bound calls: no observation layer at all
    assert q.enqueue.__code__.co_filename.endswith("verbs.py")
    assert q.claim.__code__.co_filename.endswith("verbs.py")


def test_the_worker_span_is_a_consumer_linked_to_the_producer(
    spans: InMemorySpanExporter, make_queue: Callable[..., Queue], qname: str
) -> None:
    q = make_queue(qname)
    jid = q.enqueue({"a": 1})
    inner: list[int] = []

    def handle(job: JobContext) -> None:
        from opentelemetry import trace

        inner.append(trace.get_current_span().get_span_context().span_id)
        if job.data.get("fail"):
            raise ValueError("no")

    bad = q.enqueue({"fail": True}, max_attempts=1)
    with running(Worker(q, handle, config=FAST)):
        wait_until(lambda: len(named(spans, f"process {q.name}")) == 2)
    (send, _) = named(spans, f"enqueue {q.name}")
    procs = {s.attributes["messaging.message.id"]: s for s in named(spans, f"process {q.name}")}  # type: ignore[index]
    ok = procs[jid]
    assert ok.kind == SpanKind.CONSUMER
    assert ok.attributes is not None
    assert ok.attributes["messaging.operation.type"] == "process"
    assert ok.attributes["messaging.destination.name"] == q.name
    assert ok.attributes["echomq.job.attempt"] == 1
    assert ok.attributes["echomq.job.outcome"] == "completed"
    sent = send.get_span_context()
    assert sent is not None
    assert [(x.context.trace_id, x.context.span_id) for x in ok.links] == [
        (sent.trace_id, sent.span_id)
    ]
    assert ok.get_span_context().span_id in inner  # the handler ran inside it
    failed = procs[bad]
    assert failed.status.status_code == StatusCode.ERROR
    assert failed.attributes is not None and failed.attributes["echomq.job.outcome"] == "failed"


def test_operator_verbs_are_spans_and_refusals_are_errors(
    spans: InMemorySpanExporter, make_queue: Callable[..., Queue], qname: str
) -> None:
    q = make_queue(qname)
    jid = q.enqueue({"a": 1})
    q.pause()
    with pytest.raises(JobNotDead):
        q.reprocess_job(jid)
    q.resume()
    (pause,) = named(spans, f"pause {q.name}")
    assert pause.kind == SpanKind.CLIENT and pause.status.status_code != StatusCode.ERROR
    (rep,) = named(spans, f"reprocess_job {q.name}")
    assert rep.status.status_code == StatusCode.ERROR
    assert rep.attributes is not None
    assert rep.attributes["messaging.message.id"] == jid
    assert rep.attributes["echomq.refusal"] == "not_dead"
    assert len(named(spans, f"resume {q.name}")) == 1
    assert not named(spans, f"counts {q.name}")  # reads are not spans
