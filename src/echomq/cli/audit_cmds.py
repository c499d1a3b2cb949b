"""The audit journal: ``emq audit`` (who ran which operator verb, when, with what outcome)."""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import asdict

import click
from rich.table import Table

from ..journal import DEFAULT_AUDIT_ENTRIES
from .app import Env, cli, pass_env
from .text import clean


def _when(ms: int) -> str:
    return dt.datetime.fromtimestamp(ms / 1000, dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f")[
        :-3
    ]


@cli.command()
@click.argument("queue")
@click.option(
    "-n",
    "count",
    type=click.IntRange(min=1),
    default=DEFAULT_AUDIT_ENTRIES,
    show_default=True,
    help="How many entries, newest first.",
)
@pass_env
def audit(env: Env, queue: str, count: int) -> None:
    """The audit journal of QUEUE: who ran which operator verb, when, with what outcome."""
    entries = env.queue(queue).audit(count)

    def show() -> None:
        if not entries:
            env.out.print(f"no audit entries for {queue}", markup=False)
            return
        env.heading(f"audit journal of {queue} {env.on_server()}")
        table = Table("time (UTC)", "verb", "args", "outcome", "count", "actor")
        for e in entries:
            args = json.dumps(e.args, ensure_ascii=False, separators=(",", ":"))
            table.add_row(
                _when(e.time_ms),
                clean(e.verb),
                clean(args),
                clean(e.outcome),
                str(e.count),
                clean(e.actor),
            )
        env.out.print(table)

    env.emit({"queue": queue, "entries": [asdict(e) for e in entries]}, show)
