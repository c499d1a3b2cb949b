"""Repeatable commands: ``emq repeat list|add|cancel|pause|resume|run``."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

import click
from rich.table import Table

from .app import Env, cli, pass_env
from .queue_cmds import parse_json
from .text import clean
from .times import duration_text, utc_text

#: Repeatables listed when ``--limit`` is not given (the verb's own default).
DEFAULT_LIST_LIMIT = 1000


@cli.group()
def repeat() -> None:
    """Jobs made on a cadence: list, register, cancel, pause, resume or run a repeatable."""


def _cadence(row: dict[str, Any], raw: bool = False) -> str:
    if row["every_ms"] is None:
        return f"cron {row['cron']}"
    return f"every {row['every_ms']} ms" if raw else f"every {duration_text(row['every_ms'])}"


@repeat.command("list")
@click.argument("queue")
@click.option(
    "--limit",
    type=click.IntRange(min=1),
    default=DEFAULT_LIST_LIMIT,
    show_default=True,
    help="List at most this many (soonest first).",
)
@pass_env
def list_repeats(env: Env, queue: str, limit: int) -> None:
    """The repeatables of QUEUE, soonest first: cadence, next run, jobs made."""
    rows = [asdict(rep) for rep in env.queue(queue).repeats(limit)]

    def text() -> None:
        if not rows:
            env.out.print(f"no repeatables in {queue}", markup=False)
            return
        env.heading(f"repeatables of {queue} {env.on_server()}")
        table = Table("name", "cadence", "next run (UTC)", "made", "job name", "group")
        for row in rows:
            table.add_row(
                clean(row["name"]),
                clean(_cadence(row, env.raw)),
                ("paused (was " + utc_text(row["next_run_ms"]) + ")")
                if row["paused"]
                else utc_text(row["next_run_ms"]),
                str(row["count"]),
                clean(row["job_name"]),
                clean(row["group"] or "-"),
            )
        env.out.print(table)

    env.emit({"queue": queue, "repeats": rows}, text)


@repeat.command("add")
@click.argument("queue")
@click.argument("name")
@click.option("--every-ms", type=click.IntRange(min=1), help="Fire every this many ms.")
@click.option("--cron", "cron_expr", metavar="EXPR", help="Fire on this cron expression (UTC).")
@click.option("--payload", metavar="JSON", help="The data of each job (default null).")
@click.option(
    "--first-in-ms",
    type=click.IntRange(min=0),
    default=0,
    show_default=True,
    help="The first run is this long from now (cron: the first slot after that).",
)
@click.option("--job-name", help="The name of each job (default: NAME).")
@click.option("--group", help="Put each job in this group's lane.")
@click.option("--priority", type=int, default=0, show_default=True, help="Lower runs first.")
@click.option("--max-attempts", type=click.IntRange(min=1), help="Failures before dead.")
@pass_env
def add_repeat(
    env: Env,
    queue: str,
    name: str,
    every_ms: int | None,
    cron_expr: str | None,
    payload: str | None,
    first_in_ms: int,
    job_name: str | None,
    group: str | None,
    priority: int,
    max_attempts: int | None,
) -> None:
    """Register repeatable NAME on QUEUE (or update it); print its next run.

    Give exactly one of --every-ms and --cron. Registering NAME again with the
    same cadence keeps its next run and replaces the job template.
    """
    if (every_ms is None) == (cron_expr is None):
        raise click.UsageError("give exactly one of --every-ms and --cron")
    data = None if payload is None else parse_json(payload)
    # a repeatable produces jobs: like enqueue, it may make its queue
    next_run = env.queue(queue, may_create=True).repeat(
        name,
        every_ms=every_ms,
        cron=cron_expr,
        payload=data,
        first_in_ms=first_in_ms,
        job_name=job_name,
        group=group,
        priority=priority,
        max_attempts=max_attempts,
    )
    env.emit(
        {"queue": queue, "name": name, "next_run_ms": next_run},
        f"repeat {name}: next run {utc_text(next_run)}",
    )


@repeat.command("cancel")
@click.argument("queue")
@click.argument("name")
@pass_env
def cancel_repeat(env: Env, queue: str, name: str) -> None:
    """Remove repeatable NAME from QUEUE; the jobs it already made stay.

    An unknown NAME changes nothing and still exits 0 (cancelling is idempotent);
    the output says so, and --json shows "cancelled": false.
    """
    cancelled = env.queue(queue).cancel_repeat(name)
    text = (
        f"cancelled repeat {name}" if cancelled else f"no repeat {name} in {queue}; nothing changed"
    )
    env.emit({"queue": queue, "name": name, "cancelled": cancelled}, text)


@repeat.command("pause")
@click.argument("queue")
@click.argument("name")
@pass_env
def pause_repeat(env: Env, queue: str, name: str) -> None:
    """Stop repeatable NAME of QUEUE making jobs (its record and next run are kept)."""
    paused = env.queue(queue).pause_repeat(name)
    text = f"paused repeat {name}" if paused else f"repeat {name}: not registered or paused already"
    env.emit({"queue": queue, "name": name, "paused": paused}, text)


@repeat.command("resume")
@click.argument("queue")
@click.argument("name")
@pass_env
def resume_repeat(env: Env, queue: str, name: str) -> None:
    """Let paused repeatable NAME of QUEUE make jobs again, from its next slot after now."""
    nxt = env.queue(queue).resume_repeat(name)
    text = (
        f"repeat {name}: not registered or not paused"
        if nxt is None
        else f"resumed repeat {name}: next run {utc_text(nxt)}"
    )
    env.emit({"queue": queue, "name": name, "next_run_ms": nxt}, text)


@repeat.command("run")
@click.argument("queue")
@click.argument("name")
@pass_env
def run_repeat(env: Env, queue: str, name: str) -> None:
    """Run repeatable NAME of QUEUE now: one job, as its slots make them."""
    made = env.queue(queue).run_repeat(name)
    text = (
        f"repeat {name}: not registered, paused, or fired by a worker just now"
        if made is None
        else f"repeat {name} made job {made}"
    )
    env.emit({"queue": queue, "name": name, "id": made}, text)
