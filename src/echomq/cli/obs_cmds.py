"""``emq exporter`` and the observability options of ``emq worker``."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

import click

from . import exits
from .app import CommandFailed, Env, cli, pass_env

log = logging.getLogger("echomq.exporter")

LOG_FORMATS = click.Choice(["text", "json"])


def _missing_metrics(exc: ImportError) -> CommandFailed:
    return CommandFailed(
        f"metrics need their extra: pip install 'echomq[metrics]'; import failed: {exc}",
        exits.MISSING_EXTRA,
    )


def worker_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``emq worker``'s options: ``--log-format``, ``--metrics-port``, ``--metrics-host``."""
    fn = click.option(
        "--metrics-host",
        default="127.0.0.1",
        show_default=True,
        help="Address of the metrics server.",
    )(fn)
    fn = click.option(
        "--metrics-port",
        type=click.IntRange(0, 65535),
        help="Serve this worker's Prometheus metrics on this port (needs echomq[metrics]).",
    )(fn)
    return click.option(
        "--log-format",
        type=LOG_FORMATS,
        default="text",
        show_default=True,
        help="Log records as text or one JSON object per line.",
    )(fn)


def worker_observability(
    log_format: str | None, metrics_port: int | None, metrics_host: str
) -> Any:
    """Set up ``emq worker``'s logs and metrics server; return the worker's ``metrics``
    argument (a registry, or ``None`` without ``--metrics-port``)."""
    from ..observability import logs

    logs.configure(log_format or "text", logging.INFO)
    if metrics_port is None:
        return None
    try:
        from prometheus_client import REGISTRY

        from ..observability.prometheus import serve_registry
    except ImportError as exc:
        raise _missing_metrics(exc) from None
    serve_registry(metrics_port, REGISTRY, metrics_host)
    return REGISTRY


def _queue_source(env: Env, queues: tuple[str, ...], every_s: float) -> Callable[[], list[str]]:
    """The queues to scrape: those given, else those discovered (again every
    ``every_s`` seconds: discovery SCANs the keyspace, far more work than a scrape)."""
    if queues:
        names = [env.queue(q, may_create=True).name for q in queues]  # checked; may appear later
        return lambda: names
    from ..discovery import discover_queues

    found: list[str] = []
    at = [-float("inf")]
    lock = threading.Lock()

    def source() -> list[str]:
        with lock:
            if time.monotonic() - at[0] >= every_s:
                found[:] = discover_queues(env.client).queues
                at[0] = time.monotonic()
                log.info("exporter: %d queues", len(found), extra={"queues": len(found)})
            return list(found)

    return source


@cli.command()
@click.option("--port", type=click.IntRange(0, 65535), default=9808, show_default=True)
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option(
    "--queue", "queues", multiple=True, help="A queue to export (repeat); default: discovered."
)
@click.option(
    "--top-groups",
    type=click.IntRange(min=0),
    default=10,
    show_default=True,
    help="Groups per queue in echomq_group_jobs (the busiest).",
)
@click.option(
    "--rediscover",
    type=click.FloatRange(min=1),
    default=300.0,
    show_default=True,
    help="Seconds between queue discoveries (without --queue).",
)
@click.option("--log-format", type=LOG_FORMATS, default="text", show_default=True)
@pass_env
def exporter(
    env: Env,
    port: int,
    host: str,
    queues: tuple[str, ...],
    top_groups: int,
    rediscover: float,
    log_format: str,
) -> None:
    """Serve every queue's metrics for Prometheus at http://HOST:PORT/metrics."""
    from ..observability import logs

    logs.configure(log_format, logging.INFO)
    try:
        from ..observability.prometheus import serve_queues
    except ImportError as exc:
        raise _missing_metrics(exc) from None
    source = _queue_source(env, queues, rediscover)
    source()  # fail now, not at the first scrape, when the server is absent
    server, thread, _ = serve_queues(env.client, source, port, addr=host, top_groups=top_groups)
    bound = server.server_address[1]
    env.note(f"exporter at http://{host}:{bound}/metrics for {env.server_url}")
    env.emit({"url": f"http://{host}:{bound}/metrics"}, "")
    try:
        while thread.is_alive():
            thread.join(0.5)
    except KeyboardInterrupt:
        pass
    finally:
        server.shutdown()
