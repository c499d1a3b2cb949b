"""What a worker reports per job: a timed handler, a log record, a consumer span.

:class:`JobObserver` wraps each handler once, when the worker is made. Per job the
wrapper reads the clock twice, checks two log levels and, when metrics are on,
observes one histogram and moves one gauge; with tracing on it also reads the job
row's ``trace`` field (one ``HGET``) and runs the handler inside a consumer span.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import time
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from .. import hooks
from ..errors import RateLimited

log = logging.getLogger("echomq.worker")

Handler = Callable[[Any], Any]


def job_extra(queue: str, job: Any) -> dict[str, Any]:
    """The ``extra`` fields of a record about ``job``: queue, job id, attempt, token.

    ``attempt`` and ``token`` are the same number in echomq: each claim increments the
    row's ``attempts`` and hands it to the worker as the fencing token.
    """
    return {"queue": queue, "job_id": job.id, "attempt": job.attempt, "token": job.attempt}


def _outcome(job: Any, exc: BaseException | None) -> str:
    if exc is None:
        return "completed"
    reason = getattr(job, "cancel_reason", None)
    if reason is None and isinstance(exc, RateLimited):
        return "rate_limited"  # handed back, not failed: no failure line, no error span
    if reason == "timeout":
        return "failed"
    if reason is not None or isinstance(exc, asyncio.CancelledError):
        return "cancelled"
    return "failed"


async def _trace_field(job: Any) -> str | None:
    """The row's ``trace`` field (the producer's W3C context), ``None`` when absent."""
    aq = job._aq  # the worker's AsyncQueue (JobContext keeps it)
    try:
        raw = await aq.client.hget(aq.keys.job(job.id), "trace")
    except Exception as exc:  # no link rather than a failed job
        log.debug("job %s: trace context unread: %r", job.id, exc)
        return None
    if raw is None:
        return None
    return raw.decode() if isinstance(raw, bytes) else str(raw)


def _trace_field_sync(job: Any) -> str | None:
    """:func:`_trace_field` from a handler thread, on the worker's loop."""
    fut = asyncio.run_coroutine_threadsafe(_trace_field(job), job._loop)
    return fut.result()


def _is_async(fn: Any) -> bool:
    call = getattr(fn, "__call__", None)  # noqa: B004 - an object's async __call__
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(call)


class JobObserver:
    """Observes one queue's jobs (see :func:`worker_observer`)."""

    def __init__(
        self,
        queue: str,
        metrics: Any = None,
        failure_level: int = logging.WARNING,
        tracebacks: bool = False,
    ) -> None:
        self.queue = queue
        self.failure_level = failure_level
        self.tracebacks = tracebacks
        self.metrics = None
        if metrics is not None and metrics is not False:
            from .prometheus import worker_metrics

            self.metrics = worker_metrics(metrics).bind(queue)

    def claimed(self, jobs: int, seconds: float) -> None:
        """Record one claim round trip."""
        m = self.metrics
        if m is not None:
            m.claim.observe(seconds)
            if jobs:
                m.claimed.inc(jobs)

    def limited(self, seconds: float) -> None:
        """Record a wait the queue's limits imposed (a held claim's answer)."""
        m = self.metrics
        if m is not None:
            m.limited_ms.inc(round(seconds * 1000))

    def _start(self, job: Any) -> dict[str, Any] | None:
        extra = job_extra(self.queue, job) if log.isEnabledFor(logging.DEBUG) else None
        if extra is not None:
            log.debug("job %s started", job.id, extra=extra)
        if self.metrics is not None:
            self.metrics.running.add((job.id, job.attempt))
        return extra

    def _end(self, job: Any, t0: float, exc: BaseException | None, span: Any) -> None:
        took = time.perf_counter() - t0
        outcome = _outcome(job, exc)
        m = self.metrics
        if m is not None:
            m.running.discard((job.id, job.attempt))
            m.duration[outcome].observe(took)
        if span is not None:
            span.end(outcome, exc)
        if outcome == "failed":
            assert exc is not None
            self._log_failure(job, exc, round(took * 1000, 3))
        elif log.isEnabledFor(logging.DEBUG):
            extra = job_extra(self.queue, job)
            extra["outcome"] = outcome
            extra["duration_ms"] = round(took * 1000, 3)
            log.debug("job %s %s", job.id, outcome, extra=extra)

    def _log_failure(self, job: Any, exc: BaseException, duration_ms: float | None) -> None:
        """One line at the chosen level (the traceback on it with ``tracebacks``, else
        a second record at DEBUG): a handler's failure is the application's, not the
        runtime's, so it never floods the log with tracebacks by default."""
        level = self.failure_level
        loud = log.isEnabledFor(level)
        if not loud and not log.isEnabledFor(logging.DEBUG):
            return
        extra = job_extra(self.queue, job)
        extra["outcome"] = "failed"
        extra["error"] = f"{type(exc).__name__}: {exc}"
        extra["error_type"] = type(exc).__name__
        if duration_ms is not None:
            extra["duration_ms"] = duration_ms
        with_tb = exc if self.tracebacks else None
        if loud:
            log.log(
                level,
                "job %s failed (attempt %s): %s",
                job.id,
                job.attempt,
                extra["error"],
                extra=extra,
                exc_info=with_tb,
            )
        if with_tb is None and log.isEnabledFor(logging.DEBUG):
            log.debug("job %s failed: traceback", job.id, extra=extra, exc_info=exc)

    def wrap_handler(self, handler: Any) -> Any:
        """A worker's ``handler`` (one callable, or a mapping of job name to one) with
        every callable wrapped by :meth:`wrap`; anything else is left for the worker
        to refuse."""
        if isinstance(handler, Mapping):
            return {k: self._maybe_wrap(fn) for k, fn in handler.items()}
        return self._maybe_wrap(handler)

    def _maybe_wrap(self, fn: Any) -> Any:
        return self.wrap(fn, _is_async(fn)) if callable(fn) else fn

    def _failed(self, job: Any, exc: BaseException) -> None:
        if _outcome(job, exc) == "failed":
            self._log_failure(job, exc, None)

    def _light(self, fn: Handler, is_async: bool) -> Handler:
        """Nothing timed, nothing counted: only a failure is logged (with the job's
        fields). Exceptions cost nothing until one is raised."""
        if is_async:

            async def alight(job: Any) -> Any:
                try:
                    return await fn(job)
                except BaseException as e:
                    self._failed(job, e)
                    raise

            return alight

        def light(job: Any) -> Any:
            try:
                return fn(job)
            except BaseException as e:
                self._failed(job, e)
                raise

        return light

    def wrap(self, fn: Handler, is_async: bool) -> Handler:
        """``fn`` observed; async stays async (the worker awaits it on its loop), a
        plain handler stays plain (it runs in the worker's thread pool).

        With no metrics, tracing off and ``echomq.worker`` below DEBUG when the worker
        is made, the wrapper only logs failures (see :meth:`_light`).
        """
        if (
            self.metrics is None
            and hooks.state.tracer is None
            and not log.isEnabledFor(logging.DEBUG)
        ):
            return self._light(fn, is_async)
        queue = self.queue
        if is_async:

            async def arun(job: Any) -> Any:
                t0 = time.perf_counter()
                self._start(job)
                span: Any = None
                token: Any = None
                exc: BaseException | None = None
                try:
                    tracer = hooks.state.tracer
                    if tracer is not None:
                        span = tracer.job_span(queue, job, await _trace_field(job))
                        token = span.attach()
                    return await fn(job)
                except BaseException as e:
                    exc = e
                    raise
                finally:
                    if token is not None:
                        span.detach(token)
                    self._end(job, t0, exc, span)

            return arun

        def run(job: Any) -> Any:
            t0 = time.perf_counter()
            self._start(job)
            span: Any = None
            token: Any = None
            exc: BaseException | None = None
            try:
                tracer = hooks.state.tracer
                if tracer is not None:
                    span = tracer.job_span(queue, job, _trace_field_sync(job))
                    token = span.attach()
                return fn(job)
            except BaseException as e:
                exc = e
                raise
            finally:
                if token is not None:
                    span.detach(token)
                self._end(job, t0, exc, span)

        return run


class WorkerObserver(Protocol):
    """What a worker reports to (see :func:`worker_observer`)."""

    def wrap_handler(self, handler: Any) -> Any:
        """A worker's handler (or mapping of them), each timed, logged and (tracing
        on) run in a consumer span."""
        ...

    def claimed(self, jobs: int, seconds: float) -> None:
        """One claim round trip took ``seconds`` and leased ``jobs`` jobs."""
        ...

    def limited(self, seconds: float) -> None:
        """The queue's limits (rate, concurrency, a handler's hold) kept the worker
        from claiming for ``seconds``."""
        ...


def worker_observer(
    queue: str,
    metrics: Any = None,
    failure_level: int = logging.WARNING,
    tracebacks: bool = False,
) -> WorkerObserver:
    """The observer a worker of ``queue`` reports to.

    Args:
        metrics: ``None`` (no Prometheus metrics), a
            :class:`prometheus_client.CollectorRegistry` to register the worker's
            metrics in, or a :class:`echomq.observability.prometheus.WorkerMetrics`.
        failure_level: the level of a handler failure's one line.
        tracebacks: attach the traceback to that line (else at DEBUG).
    """
    return JobObserver(queue, metrics, failure_level, tracebacks)
