"""Bulk verbs by filter: ``emq bulk reprocess|remove|promote|clean``, each in bounded
server calls (each journaled), with a dry run, a confirmation and a progress bar."""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import asdict
from typing import Any

import click
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

from ..bulk import DEFAULT_SCAN, MAX_SCAN, BulkResult
from ..errors import JobLocked
from .app import Env, cli, confirm, pass_env
from .times import TIME_FORMS, TimePoint, check_range


def _filter_options(f: Callable[..., Any]) -> Callable[..., Any]:
    """The filter every bulk command takes, and --dry-run/--yes/--scan. A time range
    that ends before it starts is a usage error, before the command's body runs."""

    body = f

    @functools.wraps(body)
    def checked(*args: Any, **kw: Any) -> Any:
        check_range(kw.get("since_ms"), kw.get("until_ms"))
        return body(*args, **kw)

    f = checked
    for opt in reversed(
        [
            click.option("--name", help="Only jobs with this name."),
            click.option("--group", help="Only jobs of this group."),
            click.option("--error", "error", help="Only jobs whose last error contains this."),
            click.option(
                "--since",
                "--since-ms",
                "since_ms",
                type=TimePoint(),
                help="Only jobs created at or after this time (the id's mint time, the "
                f"producer's clock): {TIME_FORMS}.",
            ),
            click.option(
                "--until",
                "--until-ms",
                "until_ms",
                type=TimePoint(),
                help="Only jobs created at or before this time (as --since).",
            ),
            click.option("--dry-run", is_flag=True, help="Count the matching jobs; change none."),
            click.option(
                "--scan",
                type=click.IntRange(1, MAX_SCAN),
                default=DEFAULT_SCAN,
                show_default=True,
                help="Jobs examined per server call.",
            ),
            click.option("--cursor", help="Resume a run from the cursor it printed."),
            click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation."),
        ]
    ):
        f = opt(f)
    return f


def _filter_kw(kw: dict[str, Any]) -> dict[str, Any]:
    keys = ("name", "group", "error", "since_ms", "until_ms")
    return {k: kw[k] for k in keys if kw.get(k) is not None}


def _describe(kw: dict[str, Any]) -> str:
    parts = [f"{k}={v!r}" for k, v in _filter_kw(kw).items()]
    return " matching " + ", ".join(parts) if parts else ""


def _result_doc(queue: str, res: BulkResult) -> dict[str, Any]:
    return {"queue": queue, **asdict(res), "done": res.done}


def _run_bulk(
    env: Env,
    queue: str,
    what: str,
    run: Callable[..., BulkResult],
    kw: dict[str, Any],
) -> None:
    """Dry run, confirm with the count, then run with a progress bar on stderr."""
    flt = _filter_kw(kw)
    cursor = kw.get("cursor")
    if kw["dry_run"]:
        res = run(dry_run=True, scan=kw["scan"], cursor=cursor, **flt)
        env.emit(
            _result_doc(queue, res),
            f"dry run: {res.matched} jobs would be {what} ({res.examined} examined); "
            "nothing changed",
        )
        return
    count = run(dry_run=True, scan=kw["scan"], cursor=cursor, **flt).matched
    confirm(
        env, kw["yes"], lambda: f"{what} {count} jobs of {queue} {env.on_server()}{_describe(kw)}?"
    )
    progress = Progress(
        TextColumn(f"{what} {{task.description}}"),
        BarColumn(),
        MofNCompleteColumn(),
        console=env.err,
        disable=env.json,
    )
    with progress:
        task = progress.add_task(queue, total=max(count, 1))

        def report(r: BulkResult) -> None:
            progress.update(task, completed=min(r.matched, max(count, 1)))

        res = run(scan=kw["scan"], cursor=cursor, progress=report, **flt)
        progress.update(task, completed=max(count, 1))
    text = f"{what} {res.matched} jobs of {queue} in {res.calls} calls"
    if res.locked:
        text += f"; {res.locked} held by a worker were skipped"
    env.emit(_result_doc(queue, res), text)


@cli.group()
def bulk() -> None:
    """Act on every job matching a filter, in bounded server calls (each journaled)."""


@bulk.command("reprocess")
@click.argument("queue")
@_filter_options
@pass_env
def bulk_reprocess(env: Env, queue: str, **kw: Any) -> None:
    """Reprocess every dead job of QUEUE matching the filter."""
    _run_bulk(env, queue, "reprocessed", env.queue(queue).reprocess_jobs, kw)


@bulk.command("remove")
@click.argument("queue")
@click.argument("state", type=click.Choice(["pending", "scheduled", "dead", "completed", "active"]))
@_filter_options
@pass_env
def bulk_remove(env: Env, queue: str, state: str, **kw: Any) -> None:
    """Remove every job of QUEUE in STATE matching the filter (active is refused: locked)."""
    q = env.queue(queue)
    if state == "active":
        raise JobLocked("active jobs are held by their workers; nothing removed")

    def run(**args: Any) -> BulkResult:
        return q.remove_jobs(state, **args)

    _run_bulk(env, queue, "removed", run, kw)


@bulk.command("promote")
@click.argument("queue")
@_filter_options
@pass_env
def bulk_promote(env: Env, queue: str, **kw: Any) -> None:
    """Promote every scheduled job of QUEUE matching the filter: it runs now."""
    _run_bulk(env, queue, "promoted", env.queue(queue).promote_jobs, kw)


@bulk.command("clean")
@click.argument("queue")
@click.option(
    "--older-than-ms", type=click.IntRange(min=0), required=True, help="Age past which a job goes."
)
@click.option(
    "--state",
    type=click.Choice(["dead", "completed"]),
    default="dead",
    show_default=True,
    help="The set to clean: dead jobs, or the completed jobs kept as history.",
)
@click.option("--dry-run", is_flag=True, help="Count the jobs that qualify; change none.")
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
@pass_env
def bulk_clean(
    env: Env, queue: str, older_than_ms: int, state: str, dry_run: bool, yes: bool
) -> None:
    """Delete the dead (or kept completed) jobs of QUEUE settled more than
    --older-than-ms ago."""
    q = env.queue(queue)
    count = q.clean(older_than_ms, state, dry_run=True).matched
    if dry_run:
        res = BulkResult("clean", matched=count, calls=1, dry_run=True)
        env.emit(
            _result_doc(queue, res),
            f"dry run: {count} {state} jobs would be deleted; nothing changed",
        )
        return
    confirm(
        env,
        yes,
        lambda: (
            f"delete {count} {state} jobs of {queue} {env.on_server()} "
            f"older than {older_than_ms} ms?"
        ),
    )
    res = q.clean(older_than_ms, state)
    env.emit(_result_doc(queue, res), f"deleted {res.matched} {state} jobs of {queue}")
