"""Observability: Prometheus metrics, OpenTelemetry traces, structured logs.

Nothing here imports an optional package until asked:

- :mod:`echomq.observability.prometheus` (extra ``metrics``): the queue collector, the
  worker metrics, the exporter;
- :mod:`echomq.observability.tracing` (extra ``tracing``): :func:`~.tracing.instrument`;
- :mod:`echomq.observability.logs`: the JSON formatter and :func:`~.logs.configure`;
- :mod:`echomq.observability.scrape`: one queue's state read with bounded server work
  (no extra needed);
- the hooks the core calls live in :mod:`echomq.hooks` (``echomq.observability.hooks``
  names the same module).

See ``docs/observability.md``.
"""
