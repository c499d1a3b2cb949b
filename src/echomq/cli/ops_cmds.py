"""Operator-plane commands of issues 13 and 16: the audit journal (``emq audit``), the
bulk verbs by filter (``emq bulk reprocess|remove|promote|clean``), ``emq job
promote``, ``emq job cancel``, the worker registry (``emq workers``) and the rebuild of
the lanes' index (``emq reindex``)."""

from __future__ import annotations

import datetime as dt
import functools
import json
from collections.abc import Callable
from dataclasses import asdict
from typing import Any

import click
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn
from rich.table import Table

from .. import ids
from ..bulk import DEFAULT_SCAN, MAX_SCAN, BulkResult
from ..errors import JobLocked
from ..journal import DEFAULT_AUDIT_ENTRIES
from ..lanes import MAX_REINDEX_SCAN, REINDEX_SCAN, ReindexResult
from ..registry import DEFAULT_WORKERS, MAX_WORKERS
from .app import Env, cli, confirm, pass_env
from .job_cmds import job
from .text import clean
from .times import TIME_FORMS, UNITS_MS, TimePoint, check_range


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


# ---------------------------------------------------------------- bulk verbs by filter


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
        env.emit(_result_doc(queue, res), f"dry run: {count} {state} jobs would be deleted")
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


@job.command("promote")
@click.argument("queue")
@click.argument("job_id", metavar="ID")
@pass_env
def job_promote(env: Env, queue: str, job_id: str) -> None:
    """Run scheduled job ID of QUEUE now (refused unless it is scheduled)."""
    env.queue(queue).promote_job(job_id)
    env.emit({"id": job_id, "promoted": True}, f"promoted {job_id}")


@job.command("cancel")
@click.argument("queue")
@click.argument("job_id", metavar="ID")
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
@pass_env
def job_cancel(env: Env, queue: str, job_id: str, yes: bool) -> None:
    """Ask the worker running job ID of QUEUE to stop it (refused unless it is active).

    The worker sees the request on its next beat; a handler that stops sends the job
    dead ("JobCancelled: cancelled by an operator"), one that finishes anyway completes.
    """
    q = env.queue(queue)
    ids.validate(job_id)
    confirm(env, yes, lambda: f"cancel running job {job_id} of {queue} {env.on_server()}?")
    asked = q.cancel_job(job_id)
    text = f"asked the worker to cancel {job_id}" if asked else f"{job_id}: cancel already asked"
    env.emit({"id": job_id, "requested": asked}, text)


def _ago(ms: int) -> str:
    s = ms / 1000
    if s < 120:
        return f"{s:.1f}s"
    if s < 7200:
        return f"{s / 60:.0f}m"
    return f"{s / 3600:.1f}h"


def _duration_ms(value: str) -> int:
    """``500ms``, ``30s``, ``15m``, ``12h``, ``7d`` or a bare number of ms; 0 clears."""
    text = value.strip().lower()
    for unit in ("ms", "s", "m", "h", "d"):
        if text.endswith(unit) and text[: -len(unit)].strip().isascii():
            number = text[: -len(unit)].strip()
            if number.isdigit():
                return int(number) * UNITS_MS[unit]
    if text.isascii() and text.isdigit():
        return int(text)
    raise click.BadParameter(f"{value!r} is not a duration (500ms, 30s, 15m, 12h, 7d or ms)")


class _Duration(click.ParamType):  # type: ignore[type-arg]
    name = "duration"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int:
        if isinstance(value, int):
            return value
        try:
            return _duration_ms(str(value))
        except click.BadParameter as exc:
            self.fail(str(exc.message), param, ctx)


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
            "worker", "host", "pid", "jobs", "concurrency", "done", "failed", "up", "last beat"
        )
        for w in found:
            table.add_row(
                clean(w.id),
                clean(w.host),
                str(w.pid),
                str(w.jobs),
                str(w.concurrency),
                str(w.completed),
                str(w.failed),
                _ago(max(0, w.beat_ms - w.started_ms)),
                _ago(w.age_ms) + " ago",
            )
        env.out.print(table)

    env.emit({"queue": queue, "workers": [asdict(w) for w in found]}, show)


@cli.command()
@click.argument("queue")
@click.option("--dry-run", is_flag=True, help="Count what a run would fix; change nothing.")
@click.option(
    "--scan",
    type=click.IntRange(1, MAX_REINDEX_SCAN),
    default=REINDEX_SCAN,
    show_default=True,
    help="Members examined per server call.",
)
@click.option("--cursor", help="Resume a run from the cursor it printed.")
@pass_env
def reindex(env: Env, queue: str, dry_run: bool, scan: int, cursor: str | None) -> None:
    """Rebuild the lanes' index of QUEUE (a queue written before echomq kept it):
    counts and pages of pending then see every lane's jobs. Bounded server calls,
    idempotent, safe on a live queue."""
    q = env.queue(queue)
    progress = Progress(
        TextColumn(f"reindex {queue}"),
        TextColumn("{task.fields[examined]} examined"),
        console=env.err,
        disable=env.json or dry_run,
    )
    with progress:
        task = progress.add_task(queue, examined=0)

        def report(r: ReindexResult) -> None:
            progress.update(task, examined=r.examined)

        res = q.reindex(dry_run=dry_run, scan=scan, cursor=cursor, progress=report)
    doc = {"queue": queue, **asdict(res), "done": res.done}
    verb = "would add" if dry_run else "added"
    gone = "would remove" if dry_run else "removed"
    text = (
        f"{'dry run: ' if dry_run else ''}{queue} {env.on_server()}: "
        f"{verb} {res.added} lane jobs to the index, {gone} {res.removed} stale members "
        f"({res.examined} examined, {res.calls} calls)"
    )
    env.emit(doc, text)


@cli.command()
@click.argument("queue")
@click.option("--completed", type=click.IntRange(min=0), help="Keep the newest N completed jobs.")
@click.option("--completed-age", type=_Duration(), help="Keep completed jobs younger than this.")
@click.option("--dead", type=click.IntRange(min=0), help="Keep only the newest N dead jobs.")
@click.option("--dead-age", type=_Duration(), help="Keep only dead jobs younger than this.")
@pass_env
def retention(
    env: Env,
    queue: str,
    completed: int | None,
    completed_age: int | None,
    dead: int | None,
    dead_age: int | None,
) -> None:
    """Show or set how much settled history QUEUE keeps.

    With no option, shows the retention. Each option given replaces that limit (0
    clears it); the others stay as they are. Ages take 500ms, 30s, 15m, 12h, 7d or ms.
    """
    q = env.queue(queue)
    current = q.retention()
    given = {
        "completed": completed,
        "completed_age_ms": completed_age,
        "dead": dead,
        "dead_age_ms": dead_age,
    }
    trimmed = None
    if any(v is not None for v in given.values()):
        merged = {k: (current.as_dict()[k] if v is None else v) for k, v in given.items()}
        trimmed = q.set_retention(**merged)
        current = q.retention()

    def show() -> None:
        if not current.keeps:
            env.out.print(f"{queue} keeps no history", markup=False)
        else:
            env.heading(f"retention of {queue} {env.on_server()}")
            table = Table("set", "newest N", "younger than (ms)")
            for name in ("completed", "dead"):
                n, age = getattr(current, name), getattr(current, name + "_age_ms")
                table.add_row(name, "-" if n is None else str(n), "-" if age is None else str(age))
            env.out.print(table)
        if trimmed:
            env.out.print(f"trimmed {trimmed} settled jobs", markup=False)

    env.emit({"queue": queue, **current.as_dict(), "trimmed": trimmed or 0}, show)
