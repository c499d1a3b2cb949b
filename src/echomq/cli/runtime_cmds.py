"""The running system: ``emq worker``, ``server``, ``console`` and ``demo``, and what
runs as it runs: ``emq events`` (the live events) and ``emq workers`` (the registry)."""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import json
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict
from types import FrameType
from typing import Any

import click
from rich.table import Table

from ..checks import MAX_HANDLER_BATCH
from ..embedded import EmbeddedServer, server_answers
from ..errors import ServerUnavailable
from ..events import Event
from ..registry import DEFAULT_WORKERS, MAX_WORKERS
from . import exits, obs_cmds
from .app import CommandFailed, Env, cli, pass_env
from .text import clean


def _require_server(env: Env) -> None:
    """Fail early, with the clear message, when nothing answers at the URL."""
    if not server_answers(env.server_url, timeout=2.0):
        raise ServerUnavailable(env.no_server_message())


@contextmanager
def _stop_signals() -> Iterator[threading.Event]:
    """An event set by SIGINT or SIGTERM while the block runs, so a foreground command
    stops cleanly; the previous handlers come back afterwards."""
    stop = threading.Event()
    if threading.current_thread() is not threading.main_thread():
        yield stop  # only the main thread may install handlers
        return

    def handler(signum: int, frame: FrameType | None) -> None:
        stop.set()

    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield stop
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


def _event_line(event: dict[str, Any]) -> str:
    clock = time.strftime("%H:%M:%S")
    rest = " ".join(f"{k}={json.dumps(v)}" for k, v in event.items() if k != "event")
    return f"{clock} {event.get('event', '?')} {rest}".rstrip()


@cli.command()
@click.argument("queue")
@click.option("--count", type=click.IntRange(min=1), help="Stop after this many events.")
@click.option("--timeout", type=click.FloatRange(min=0), help="Stop after this many seconds.")
@pass_env
def events(env: Env, queue: str, count: int | None, timeout: float | None) -> None:
    """Tail the live events of QUEUE (one line each; JSON lines with --json).

    Pub/sub is at-most-once: an event is a notification, the sets are the truth.
    """
    q = env.queue(queue, may_create=True)  # it may appear later: a note, not a refusal
    env.note_if_unknown(q)
    deadline = None if timeout is None else time.monotonic() + timeout
    seen = 0
    # The stream subscribes again after a lost connection; Ctrl-C ends the tail.
    with contextlib.suppress(KeyboardInterrupt), q.events() as stream:
        env.note(f"listening on {q.keys.events} {env.on_server()} (Ctrl-C to stop)")
        while count is None or seen < count:
            wait = 1.0 if deadline is None else deadline - time.monotonic()
            if wait <= 0:
                break
            event = stream.get(timeout=min(wait, 1.0))
            if event is not None:
                seen += 1
                _print_event(env, event)


def _print_event(env: Env, event: Event) -> None:
    doc: dict[str, Any] = {"event": event.name}
    if event.job is not None:
        doc["job"] = event.job
    doc.update(event.fields)
    if env.json:
        click.echo(json.dumps(doc, ensure_ascii=False))
    else:
        env.out.print(clean(_event_line(doc)), markup=False)


def load_handler(spec: str) -> Callable[..., Any]:
    """Import ``MODULE:FUNCTION`` and return the function.

    Raises:
        click.BadParameter: the spec is malformed, the module or the name is missing.
    """
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise click.BadParameter(f"want MODULE:FUNCTION, got {spec!r}")
    # Like `python -m`, let a handler module in the current directory be found.
    if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise click.BadParameter(f"cannot import {module_name}: {exc}") from None
    target: Any = module
    for part in attr.split("."):
        target = getattr(target, part, None)
        if target is None:
            raise click.BadParameter(f"{module_name} has no {attr}")
    if not callable(target) and not isinstance(target, dict):
        raise click.BadParameter(f"{spec} is not a function (or a mapping of name to handler)")
    handler: Callable[..., Any] = target
    return handler


@cli.command()
@click.argument("handler_spec", metavar="MODULE:FUNCTION")
@click.option(
    "--queue",
    "queue_names",
    required=True,
    multiple=True,
    help="The queue to work; repeat it (or a,b,c) for several, served in that order.",
)
@click.option(
    "--order",
    type=click.Choice(["priority", "fair"]),
    default="priority",
    show_default=True,
    help="Over several queues: the first with work first, or in turns (an equal share).",
)
@click.option(
    "--batch",
    "batch_size",
    type=click.IntRange(1, MAX_HANDLER_BATCH),
    default=None,
    help="Hand the handler lists of up to this many jobs (a batch handler).",
)
@click.option(
    "--batch-min",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="A batch starts with at least this many jobs...",
)
@click.option(
    "--batch-wait-ms",
    type=click.IntRange(min=0),
    default=500,
    show_default=True,
    help="...or when its first job has waited this long.",
)
@click.option(
    "--concurrency",
    type=click.IntRange(min=1),
    default=10,
    show_default=True,
    help="Jobs in flight over all the queues (batches, with --batch).",
)
@click.option("--lease-ms", type=click.IntRange(min=1), default=30000, show_default=True)
@click.option(
    "--failure-level",
    type=click.Choice(["debug", "info", "warning", "error"]),
    default="warning",
    show_default=True,
    help="The level of the one line a handler's failure logs.",
)
@click.option(
    "--log-tracebacks",
    is_flag=True,
    help="Attach the traceback to a failure's line (by default: a DEBUG record).",
)
@obs_cmds.worker_options
@pass_env
def worker(
    env: Env,
    handler_spec: str,
    queue_names: tuple[str, ...],
    order: str,
    batch_size: int | None,
    batch_min: int,
    batch_wait_ms: int,
    concurrency: int,
    lease_ms: int,
    failure_level: str,
    log_tracebacks: bool,
    **obs: Any,
) -> None:
    """Run a worker on QUEUE (or several) with the handler MODULE:FUNCTION until
    SIGINT/SIGTERM."""
    from ..worker import Batch, Worker, WorkerConfig

    names = queue_list(queue_names)
    # check the names before anything else; a worker may wait for its queues to appear
    queues = [env.queue(name, may_create=True) for name in names]
    batch = None
    if batch_size is not None:
        batch = Batch(size=batch_size, min_size=batch_min, wait_ms=batch_wait_ms)
    elif batch_min != 1 or batch_wait_ms != 500:
        raise click.UsageError("--batch-min and --batch-wait-ms need --batch")
    handler = load_handler(handler_spec)
    _require_server(env)
    for q in queues:
        env.note_if_unknown(q)
    metrics = obs_cmds.worker_observability(**obs)
    config = WorkerConfig(
        failure_log_level=logging.getLevelName(failure_level.upper()),
        log_tracebacks=log_tracebacks,
    )
    w = Worker(
        names,
        handler,
        url=env.server_url,
        concurrency=concurrency,
        lease_ms=lease_ms,
        config=config,
        metrics=metrics,
        executor=env.executor,
        order=order,  # type: ignore[arg-type]  # click.Choice checked it
        batch=batch,
    )
    shape = f", order {order}" if len(names) > 1 else ""
    if batch is not None:
        shape += f", batches of {batch.describe()}"
    env.note(f"worker on {', '.join(names)} at {env.server_url}, concurrency {concurrency}{shape}")
    stats = dataclasses.asdict(w.run())
    env.note("worker stopped: " + ", ".join(f"{v} {k}" for k, v in stats.items() if v))
    if env.json:
        env.emit({"queue": names[0], "queues": names, "stats": stats}, "")


def queue_list(given: tuple[str, ...]) -> list[str]:
    """``--queue`` values as queue names: each may list several (``a,b``), in order.

    Raises:
        click.BadParameter: an empty name, or a queue named twice.
    """
    names = [part.strip() for value in given for part in value.split(",")]
    if any(not name for name in names):
        raise click.BadParameter("an empty queue name", param_hint="--queue")
    twice = sorted({name for name in names if names.count(name) > 1})
    if twice:
        raise click.BadParameter(f"named twice: {', '.join(twice)}", param_hint="--queue")
    return names


@cli.command()
@click.option("--port", type=click.IntRange(1, 65535), help="TCP port (a free one by default).")
@pass_env
def server(env: Env, port: int | None) -> None:
    """Run a private embedded server in the foreground; print its URL; stop on Ctrl-C.

    Nothing is kept on disk: stopping the server forgets every queue.
    """
    try:
        srv = EmbeddedServer(port=port).start()
    except ServerUnavailable as exc:
        raise CommandFailed(str(exc), exits.FAILURE) from None
    with _stop_signals() as stop:
        try:
            env.emit({"url": srv.url, "pid": srv.proc.pid if srv.proc else None}, srv.url)
            env.note(f"serving at {srv.url}; use it with: export EMQ_URL={srv.url}")
            env.note("Ctrl-C stops the server (nothing is kept on disk)")
            while not stop.wait(0.2):
                if srv.proc is None or srv.proc.poll() is not None:
                    raise CommandFailed("the server exited", exits.FAILURE)
        finally:
            srv.stop()
    env.note("server stopped")


@cli.command()
@click.option("--queue", "queue_name", help="The queue to use (a fresh demo-* name by default).")
@pass_env
def demo(env: Env, queue_name: str | None) -> None:
    """Walk the operator runbook end to end and check every step.

    Uses --url/EMQ_URL when given (on its own fresh queue, obliterated at the end),
    else a private embedded server it starts and stops. Never the default address.
    """
    from ..demo import DemoFailed, run_demo

    try:
        run_demo(url=env.url, queue=queue_name, console=env.styled_out())
    except DemoFailed as exc:
        message = f"demo step {exc.step!r} failed: {exc.reason}"
        raise CommandFailed(message, exits.DEMO_FAILED) from None
    if env.json:
        click.echo(json.dumps({"ok": True}))


def load_console() -> Callable[..., Any]:
    """Import the console (it needs the ``console`` extra) and return its ``serve``.

    Raises:
        ImportError: the console or one of its dependencies is not installed.
    """
    module = importlib.import_module("echomq.console")
    serve: Callable[..., Any] = module.serve
    return serve


@cli.command()
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", type=click.IntRange(1, 65535), default=8765, show_default=True)
@click.option(
    "--token-file",
    type=click.Path(exists=True, dir_okay=False),
    help="Require the token in this file for every read and change "
    "(default: env EMQ_CONSOLE_TOKEN_FILE, else env EMQ_CONSOLE_TOKEN).",
)
@click.option(
    "--token",
    help="Discouraged: a token on the command line is visible to every user in `ps`; "
    "use EMQ_CONSOLE_TOKEN or --token-file.",
)
@click.option("--read-only", is_flag=True, help="Show the queues; refuse every write.")
@click.option(
    "--users-file",
    type=click.Path(exists=True, dir_okay=False),
    help="Users with roles: NAME ROLE sha256:HEX per line (viewer, operator, admin; "
    "default: env EMQ_CONSOLE_USERS_FILE).",
)
@click.option(
    "--shared-reads",
    type=click.FloatRange(0, 60),
    default=1.0,
    show_default=True,
    help="Seconds identical reads of a queue share one server read (0: every request reads).",
)
@pass_env
def console(
    env: Env,
    host: str,
    port: int,
    token_file: str | None,
    token: str | None,
    read_only: bool,
    users_file: str | None,
    shared_reads: float,
) -> None:
    """Serve the web console: the operator plane in a browser.

    With a token (EMQ_CONSOLE_TOKEN, or a file: an admin's), per-role tokens
    (EMQ_CONSOLE_OPERATOR_TOKEN, EMQ_CONSOLE_VIEWER_TOKEN) or a users file, every read
    and change needs one, and its role decides what it may change; a bind beyond
    loopback refuses to start without one.
    """
    try:
        serve = load_console()
    except ImportError as exc:
        raise CommandFailed(
            "the console needs its extra: pip install 'echomq[console]' "
            f"(starlette and uvicorn); import failed: {exc}",
            exits.MISSING_EXTRA,
        ) from None
    if token is not None:
        env.note(
            "warning: --token is visible to every user of this machine in `ps`; "
            "prefer EMQ_CONSOLE_TOKEN or --token-file"
        )
    _require_server(env)
    env.note(f"console at http://{host}:{port}/ for {env.server}")
    serve(
        url=env.server_url,
        host=host,
        port=port,
        token=token,
        read_only=read_only,
        token_file=token_file,
        users_file=users_file,
        shared_reads_s=shared_reads,
    )


def _ago(ms: int) -> str:
    s = ms / 1000
    if s < 120:
        return f"{s:.1f}s"
    if s < 7200:
        return f"{s / 60:.0f}m"
    return f"{s / 3600:.1f}h"


@cli.command()
@click.argument("queue")
@click.option(
    "-n",
    "count",
    type=click.IntRange(1, MAX_WORKERS),
    default=DEFAULT_WORKERS,
    show_default=True,
    help="How many workers, newest beat first.",
)
@pass_env
def workers(env: Env, queue: str, count: int) -> None:
    """The live workers of QUEUE: host, pid, jobs in hand, last beat (the registry)."""
    found = env.queue(queue).workers(count)

    def show() -> None:
        if not found:
            env.out.print(f"no live workers for {queue} {env.on_server()}", markup=False)
            return
        env.heading(f"workers of {queue} {env.on_server()}")
        table = Table(
            "worker",
            "host",
            "pid",
            "queues",
            "jobs",
            "concurrency",
            "batch",
            "done",
            "failed",
            "up",
            "last beat",
        )
        for w in found:
            table.add_row(
                clean(w.id),
                clean(w.host),
                str(w.pid),
                clean(",".join(w.queues)) + (f" ({w.order})" if w.order else ""),
                str(w.jobs),
                str(w.concurrency),
                clean(w.batch) if w.batch else "-",
                str(w.completed),
                str(w.failed),
                _ago(max(0, w.beat_ms - w.started_ms)),
                _ago(w.age_ms) + " ago",
            )
        env.out.print(table)

    env.emit({"queue": queue, "workers": [asdict(w) for w in found]}, show)
