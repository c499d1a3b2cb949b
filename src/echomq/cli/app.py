"""The root of ``emq``: global options, the shared environment, errors to exit codes.

Every subcommand receives an :class:`Env` (``--url``, ``--json``, one lazily made
client, the consoles). Errors are turned into messages and exit statuses in one place,
:meth:`EmqGroup.invoke`, so a command body only does its verb.
"""

from __future__ import annotations

import difflib
import getpass
import json
import os
import socket
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import click
import redis
from rich.console import Console

from .. import checks
from ..connect import is_cluster, sync_client
from ..discovery import discover_queues, server_label
from ..errors import (
    EchoMQError,
    InvalidArgument,
    InvalidJobId,
    InvalidName,
    Refused,
    ServerUnavailable,
)
from ..queue import DEFAULT_URL, Queue
from ..version import __version__
from ..views import to_json
from . import exits
from .known import require_known
from .once import OnceGroup
from .text import clean_lines

#: The environment variable naming the server.
URL_ENV = "EMQ_URL"

#: What a cluster client raises when the cluster cannot serve a command now (a node
#: down, a failover, a slot moving): the same exit as no server.
CLUSTER_ERRORS: tuple[type[Exception], ...] = (
    redis.exceptions.ClusterError,
    redis.exceptions.AskError,  # MOVED too (a subclass)
    redis.exceptions.TryAgainError,
    redis.exceptions.RedisClusterException,
)

#: Everything that exits as "no server".
NO_SERVER: tuple[type[Exception], ...] = (
    ServerUnavailable,
    redis.ConnectionError,
    redis.TimeoutError,
    *CLUSTER_ERRORS,
)

#: How long a connect may take before the server counts as absent.
CONNECT_TIMEOUT_S = 2.0


class NotConfirmed(Exception):
    """A destructive verb was not confirmed; nothing was sent."""


class UnknownQueue(Exception):
    """No key of the named queue exists on the server (a typo, most likely); nothing
    but the existence check was sent.

    Attributes:
        queue: the name asked for.
        suggestion: the closest queue name found on the server, or ``None``.
    """

    def __init__(self, message: str, queue: str, suggestion: str | None) -> None:
        super().__init__(message)
        self.queue = queue
        self.suggestion = suggestion


#: Keys the "did you mean" search examines at most (it runs only on the error path).
SUGGEST_SCAN_LIMIT = 100_000


class CommandFailed(Exception):
    """A command's own failure with an exit status (e.g. a demo step)."""

    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code


def _console(stderr: bool, markup: bool = False) -> Console:
    stream = sys.stderr if stderr else sys.stdout
    # Off a terminal rich would wrap at 80 columns; queue names and ids must stay whole.
    width = None if stream.isatty() else 200
    # No markup and no emoji codes, ever: job text (names, errors, logs) is printed
    # through these consoles and must not style the output (see cli/text.py).
    return Console(
        stderr=stderr, width=width, highlight=False, soft_wrap=False, markup=markup, emoji=False
    )


class Env:
    """What every subcommand shares.

    Attributes:
        url: the URL given by ``--url``/``EMQ_URL``, or ``None`` (the default address).
        json: print machine-readable JSON instead of text.
        executor: ``--executor``/``EMQ_EXECUTOR`` (auto, scripts, native), or None (auto).
        out: the console for results (stdout).
        err: the console for messages and progress (stderr).
    """

    def __init__(
        self, url: str | None, as_json: bool, executor: str | None = None, create: bool = False
    ) -> None:
        self.url = url
        self.json = as_json
        self.executor = executor
        self.create = create
        #: ``--raw``: times and durations as ms in text output (JSON always has ms).
        self.raw = False
        self.out = _console(stderr=False)
        self.err = _console(stderr=True)
        self._client: Any = None

    @property
    def server_url(self) -> str:
        """The URL commands connect to: the configured one, else the default address."""
        return self.url or DEFAULT_URL

    def styled_out(self) -> Console:
        """A stdout console that renders rich markup: for text echomq writes itself and
        escapes job text in (the demo's runbook), never for job text as it is."""
        return _console(stderr=False, markup=True)

    @property
    def server(self) -> str:
        """The server as every header and prompt names it: ``host:port/db``."""
        return server_label(self.server_url)

    def on_server(self) -> str:
        """``on host:port/db``, plus ``(default address)`` when no URL was given."""
        return f"on {self.server}" + ("" if self.url else " (default address)")

    @property
    def client(self) -> Any:
        """One client for the whole command, made on first use: a ``redis.Redis``, or a
        ``RedisCluster`` when the URL names a cluster node (asked then, see
        :mod:`echomq.connect`)."""
        if self._client is None:
            if self.url is None:
                # no silent default: say which server a table of zeros comes from
                self.note(
                    f"note: no --url and {URL_ENV} is unset: using the default address "
                    f"{DEFAULT_URL}"
                )
            self._client = sync_client(self.server_url, socket_connect_timeout=CONNECT_TIMEOUT_S)
        return self._client

    def queue(self, name: str, *, may_create: bool = False) -> Queue:
        """A :class:`~echomq.Queue` on the shared client, known to exist on the server.

        A queue is known when any of its keys that outlive a job exists (its meta
        hash, a state set, its lanes' registry, its metrics, its enqueue sequence,
        its worker registry or its audit journal: ``Queue.queue_exists``, one
        ``EXISTS``). A name with none of them is a typo far more often than an
        intent, so every verb but those that make queues refuses it, unless
        ``--create`` was given. The check runs with the first verb, after its
        arguments were checked (see :mod:`.known`).

        Args:
            may_create: skip the check (``enqueue``, ``worker``, the exporter, names
                the server just listed): nothing is sent here.

        Raises:
            InvalidName: the name is malformed (nothing is sent).
            UnknownQueue: no such queue on the server (and no ``--create``).
        """
        q = Queue(name, client=self.client, actor=self.actor, executor=self.executor)
        if may_create or self.create:
            return q
        return require_known(q, lambda: self._unknown(name))

    def note_if_unknown(self, q: Queue) -> None:
        """For the verbs that may wait for a queue to appear (``worker``, ``events``):
        say on stderr when it has no key yet, in case the name is a typo."""
        if not q.queue_exists():
            self.note(f"note: {self._unknown(q.name)}; waiting for it to appear")

    def _unknown(self, name: str) -> UnknownQueue:
        found = discover_queues(self.client, SUGGEST_SCAN_LIMIT).queues
        close = difflib.get_close_matches(name, found, n=1, cutoff=0.6)
        hint = f" (did you mean {close[0]}?)" if close else ""
        return UnknownQueue(
            f"no queue named {name} on {self.server}{hint}",
            name,
            close[0] if close else None,
        )

    @property
    def actor(self) -> str:
        """Who the operator verbs name in the audit journal: ``user@host``."""
        try:
            user = getpass.getuser()
        except Exception:  # no login name (a container with no passwd entry)
            user = "unknown"
        return f"{user}@{socket.gethostname()}"

    def close(self) -> None:
        """Close the client if one was made."""
        if self._client is not None:
            self._client.close()
            self._client = None

    def emit(self, data: Any, text: str | Callable[[], None]) -> None:
        """Print a result: ``data`` as JSON with ``--json``, else ``text`` (or call it)."""
        if self.json:
            click.echo(to_json(data))
        elif callable(text):
            text()
        else:
            self.out.print(clean_lines(text), markup=False)

    def heading(self, text: str) -> None:
        """The line above a table: what it shows and on which server (stdout, text only)."""
        if not self.json:
            self.out.print(clean_lines(text), markup=False, soft_wrap=True)

    def say(self, text: str) -> None:
        """A plain status line on stdout (suppressed with ``--json``)."""
        if not self.json:
            self.out.print(clean_lines(text), markup=False)

    def note(self, text: str) -> None:
        """A message on stderr (kept with ``--json``, which owns stdout), never broken
        into lines (a script greps it)."""
        self.err.print(clean_lines(text), markup=False, soft_wrap=True)

    @property
    def on_cluster(self) -> bool:
        """Whether the command's client (if made) is a cluster client."""
        return self._client is not None and is_cluster(self._client)

    def no_server_message(self) -> str:
        """The message shown when nothing answers."""
        if self.on_cluster:
            return f"the cluster at {self.server} did not serve this (a node down or failing over)"
        if self.url:
            return f"no server at {self.url}"
        return (
            f"no server at {DEFAULT_URL} (the default address); "
            "run `emq server` or pass --url (or set EMQ_URL)"
        )


def stdin_is_terminal() -> bool:
    """Whether a person can answer a prompt (a function so tests can pretend)."""
    return sys.stdin.isatty()


def confirm(env: Env, yes: bool, question: Callable[[], str]) -> None:
    """Gate a destructive verb: ``--yes``, or a "y" on a terminal.

    Args:
        yes: the ``--yes`` flag.
        question: builds the prompt (called only when a prompt is shown, so the
            counts it may read are only read then).

    Raises:
        NotConfirmed: no ``--yes`` and no terminal, or the answer was no.
    """
    if yes:
        return
    if not stdin_is_terminal():
        raise NotConfirmed("stdin is not a terminal; pass --yes to confirm")
    # the question may carry job text (a dedup id, a job's name): escaped like output
    if not click.confirm(clean_lines(question()), default=False, err=True):
        raise NotConfirmed("not confirmed")


def _error_doc(kind: str, message: str, code: int, **extra: Any) -> str:
    return json.dumps({"ok": False, "error": kind, "message": message, "exit": code, **extra})


@contextmanager
def _translated(ctx: click.Context) -> Iterator[None]:
    """Turn every known failure into a message on stderr and an exit status."""

    def fail(kind: str, message: str, code: int, **extra: Any) -> click.exceptions.Exit:
        click.echo(message, err=True)
        env = ctx.find_object(Env)
        if env is not None and env.json:
            click.echo(_error_doc(kind, message, code, **extra))
        return click.exceptions.Exit(code)

    def no_server() -> str:
        env = ctx.find_object(Env)
        return env.no_server_message() if env is not None else "no server"

    try:
        yield
    except Refused as exc:
        detail = str(exc)
        if detail.startswith("EMQ") or detail == exc.reason:
            # a script's internal code (EMQSTATE not paused): say what it means instead
            message = f"refused: {exc.reason}: {exits.meaning(exc.reason)}"
        else:
            message = f"refused: {exc.reason} ({detail})"
        code = exits.for_reason(exc.reason)
        raise fail("refused", message, code, reason=exc.reason) from None
    except (InvalidJobId, InvalidName) as exc:
        raise fail("malformed", f"error: {exc}", exits.MALFORMED) from None
    except InvalidArgument as exc:
        raise fail("usage", f"error: {exc}", exits.USAGE) from None
    except NO_SERVER:
        raise fail("no_server", f"error: {no_server()}", exits.NO_SERVER) from None
    except NotConfirmed as exc:
        raise fail("not_confirmed", f"not confirmed: {exc}", exits.NOT_CONFIRMED) from None
    except UnknownQueue as exc:
        raise fail(
            "no_queue",
            f"error: {exc}; --create acts on it anyway",
            exits.NO_QUEUE,
            queue=exc.queue,
            suggestion=exc.suggestion,
        ) from None
    except CommandFailed as exc:
        raise fail("failed", f"error: {exc}", exc.code) from None
    except (EchoMQError, redis.RedisError) as exc:
        raise fail("error", f"error: {exc}", exits.FAILURE) from None


class EmqGroup(OnceGroup):
    """The root group: runs the subcommand inside the error translation. Its
    commands and groups refuse a single-valued option given twice
    (:mod:`echomq.cli.once`)."""

    group_class = OnceGroup

    def invoke(self, ctx: click.Context) -> Any:
        """Run the subcommand; map echomq errors to messages and exit statuses."""
        try:
            with _translated(ctx):
                return super().invoke(ctx)
        finally:
            env = ctx.find_object(Env)
            if env is not None:
                env.close()


@click.group(cls=EmqGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--url",
    envvar="EMQ_URL",
    default=None,
    metavar="URL",
    help=f"Server URL (env EMQ_URL; default {DEFAULT_URL}).",
)
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="Machine-readable JSON on stdout (anywhere on the line).",
)
@click.option(
    "--executor",
    envvar="EMQ_EXECUTOR",
    type=click.Choice(["auto", "scripts", "native"]),
    default=None,
    help="Scripts or the server module's native commands (env EMQ_EXECUTOR; default auto).",
)
@click.option(
    "--raw",
    is_flag=True,
    help="Times and durations as numbers of ms, not ISO times and 7d/90s (anywhere on the line).",
)
@click.option(
    "--create",
    is_flag=True,
    help="Let a verb act on a queue with no keys yet (anywhere on the line); without "
    "it such a name is refused as a likely typo (exit 8).",
)
@click.version_option(__version__, prog_name="emq")
@click.pass_context
def cli(
    ctx: click.Context,
    url: str | None,
    as_json: bool,
    executor: str | None,
    raw: bool,
    create: bool,
) -> None:
    """emq: operate echomq queues on Valkey/Redis.

    Destructive verbs (drain, obliterate, job remove, group drain) ask for
    confirmation on a terminal and need --yes otherwise. A refusal prints
    `refused: <reason>` and exits with the reason's status (see docs/cli.md).
    """
    if url == "" or (url is None and os.environ.get(URL_ENV) == ""):
        raise click.UsageError(
            f"{URL_ENV} (or --url) is set but empty: name the server "
            f"(e.g. redis://host:6379/0), or unset it to use the default address {DEFAULT_URL}"
        )
    ctx.obj = Env(url or None, as_json, executor, create)
    ctx.obj.raw = raw
    if url:
        checks.url(url, "--url")  # a typed usage error (exit 2), not a traceback later


def pass_env(f: Callable[..., Any]) -> Callable[..., Any]:
    """Decorator: hand the command the shared :class:`Env` as its first argument."""
    return click.pass_obj(f)


#: The root flags that may come anywhere on the line.
HOISTED = ("--json", "--create", "--raw")


def hoist_json(argv: list[str]) -> list[str]:
    """``--json``, ``--create`` and ``--raw`` may come anywhere on the line: move them
    before the subcommand.

    Arguments after a ``--`` are left alone (``emq job log Q ID -- --json`` logs
    the text ``--json``).
    """
    end = argv.index("--") if "--" in argv else len(argv)
    head, tail = argv[:end], argv[end:]
    flags = [f for f in HOISTED if f in head]
    if not flags:
        return argv
    return [*flags, *(a for a in head if a not in HOISTED), *tail]


def _click_error_kind(exc: click.ClickException) -> str:
    return "usage" if isinstance(exc, click.UsageError) else "error"


def main(argv: list[str] | None = None) -> int:
    """Run ``emq`` with ``argv`` (default: the process arguments); return the status."""
    args = hoist_json(list(sys.argv[1:] if argv is None else argv))
    # hoisted: a --json before any "--" is among the first arguments now
    as_json = "--json" in args[: len(HOISTED)]
    try:
        rv = cli.main(args=args, prog_name="emq", standalone_mode=False)
    except click.ClickException as exc:
        # usage errors are found by click before any command runs: the same JSON
        # error document as every other failure, so a script reads one shape
        exc.show()
        if as_json:
            click.echo(_error_doc(_click_error_kind(exc), exc.format_message(), exc.exit_code))
        return exc.exit_code
    except click.Abort:
        click.echo("interrupted", err=True)
        if as_json:
            click.echo(_error_doc("interrupted", "interrupted", exits.INTERRUPTED))
        return exits.INTERRUPTED
    return rv if isinstance(rv, int) else exits.OK
