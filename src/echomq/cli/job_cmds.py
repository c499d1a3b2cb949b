"""Job-scope commands: ``emq job show|data|progress|log|logs|remove|reprocess|rerun|promote|
cancel``."""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Any

import click
from rich.table import Table

from .. import ids
from ..errors import JobGone
from ..keyspace import check_dedup
from ..schema import HIDDEN_ROW_FIELDS, TIME_ROW_FIELDS
from .app import Env, cli, confirm, pass_env
from .queue_cmds import parse_json
from .text import clean
from .times import time_text, utc_text

#: Row fields that hold a count: shown as numbers in ``--json``.
NUMERIC_FIELDS = (
    "attempts",
    "failures",
    "priority",
    "max_attempts",
    "stalled",
    # a kept job's history (issue 13): its keep_ms and its timeline, server ms
    "keep",
    "enqueued_at",
    "started_at",
    "last_started_at",
    "finished_at",
    "died_at",
)


def numbers(row: dict[str, Any]) -> dict[str, Any]:
    """The row with its count fields as numbers (text that is not a number stays text)."""
    out = dict(row)
    for key in NUMERIC_FIELDS:
        value = out.get(key)
        if isinstance(value, str) and value.lstrip("-").isdigit():
            out[key] = int(value)
    return out


@cli.group()
def job() -> None:
    """Reach into one job's row: read it, change it, remove or reprocess it."""


def _progress_value(text: str) -> Any:
    # A number or a JSON document is sent as that value; anything else as the text.
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


@job.command("show")
@click.argument("queue")
@click.argument("job_id", metavar="ID")
@pass_env
def show(env: Env, queue: str, job_id: str) -> None:
    """Every field of job ID of QUEUE, its data decoded."""
    q = env.queue(queue)
    found = q.get_job(job_id)
    if found is None:
        raise JobGone(f"job {job_id} is gone", job_id=job_id)
    row = numbers(found.as_dict())
    for hidden in ("payload", *HIDDEN_ROW_FIELDS):
        row.pop(hidden, None)
    if found.errors:  # a kept job's error history, oldest first
        row["errors"] = [asdict(e) for e in found.errors]
    if found.dedup is not None:  # its dedup id's mode, and who holds the id now
        row.setdefault("dedup_mode", "simple")
        held = q.dedup_owner(found.dedup)
        row["dedup_owner"] = None if held is None else held.job_id
    now = None if env.json or env.raw else q.server_time()

    def text() -> None:
        env.heading(f"job {job_id} of {queue} {env.on_server()}")
        table = Table("field", "value")
        for key in sorted(row):
            if key not in ("id", "data", "errors"):
                value = row[key]
                if key in TIME_ROW_FIELDS and isinstance(value, int) and not env.raw:
                    value = time_text(value, now)  # ISO UTC and how long ago; --raw: ms
                table.add_row(clean(key), clean(value))
        table.add_row("data", clean(json.dumps(row.get("data"), ensure_ascii=False)))
        for e in found.errors:
            table.add_row(f"error (attempt {e.attempt})", clean(e.error))
        env.out.print(table)

    env.emit(row, text)


@job.command("data")
@click.argument("queue")
@click.argument("job_id", metavar="ID")
@click.argument("payload", metavar="JSON")
@pass_env
def data(env: Env, queue: str, job_id: str, payload: str) -> None:
    """Replace the data of job ID with JSON (any state)."""
    value = parse_json(payload)
    env.queue(queue).update_data(job_id, value)
    env.emit({"id": job_id, "data": value}, f"updated the data of {job_id}")


@job.command("progress")
@click.argument("queue")
@click.argument("job_id", metavar="ID")
@click.argument("value")
@pass_env
def progress(env: Env, queue: str, job_id: str, value: str) -> None:
    """Write the progress of job ID and publish the progress event.

    VALUE is sent as a number or JSON document when it parses as one, else as text.
    """
    parsed = _progress_value(value)
    env.queue(queue).update_progress(job_id, parsed)
    env.emit({"id": job_id, "progress": parsed}, f"progress of {job_id}: {value}")


@job.command("log")
@click.argument("queue")
@click.argument("job_id", metavar="ID")
@click.argument("line")
@click.option("--keep", type=click.IntRange(min=0), default=0, help="Keep only the newest N lines.")
@pass_env
def log(env: Env, queue: str, job_id: str, line: str, keep: int) -> None:
    """Append LINE to the logs of job ID; print how many lines it keeps."""
    n = env.queue(queue).add_log(job_id, line, keep=keep)
    env.emit({"id": job_id, "lines": n}, f"{job_id} keeps {n} log line(s)")


@job.command("logs")
@click.argument("queue")
@click.argument("job_id", metavar="ID")
@pass_env
def logs(env: Env, queue: str, job_id: str) -> None:
    """The log lines of job ID, oldest first, each with the time it was written
    (server clock, ISO 8601 UTC; a line older than log times shows none)."""
    entries = env.queue(queue).get_job_log_entries(job_id)

    def text() -> None:
        for e in entries:  # one line each: an escape or a newline in it is shown, not run
            stamp = "-".ljust(24) if e.time_ms is None else utc_text(e.time_ms)
            env.out.print(f"{stamp}  {clean(e.line)}", markup=False)

    doc = {
        "id": job_id,
        "logs": [e.line for e in entries],
        "entries": [{"time_ms": e.time_ms, "line": e.line} for e in entries],
    }
    env.emit(doc, text)


@job.command("remove")
@click.argument("queue")
@click.argument("job_id", metavar="ID")
@click.option("--dedup-id", help="Also release this dedup key if it names the job.")
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
@pass_env
def remove(env: Env, queue: str, job_id: str, dedup_id: str | None, yes: bool) -> None:
    """Delete job ID in any state, with its logs (refused while a worker holds it)."""
    q = env.queue(queue)
    ids.validate(job_id)
    if dedup_id is not None:
        check_dedup(dedup_id)
    confirm(
        env,
        yes,
        lambda: (
            f"remove job {job_id} ({q.job_state(job_id) or 'gone'}) of {queue} {env.on_server()}?"
        ),
    )
    q.remove_job(job_id, dedup_id=dedup_id)
    env.emit({"id": job_id, "removed": True}, f"removed {job_id}")


@job.command("reprocess")
@click.argument("queue")
@click.argument("job_id", metavar="ID")
@pass_env
def reprocess(env: Env, queue: str, job_id: str) -> None:
    """Move dead job ID back to the backlog (its lane when grouped), error cleared."""
    env.queue(queue).reprocess_job(job_id)
    env.emit({"id": job_id, "reprocessed": True}, f"reprocessed {job_id}")


@job.command("rerun")
@click.argument("queue")
@click.argument("job_id", metavar="ID")
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
@pass_env
def rerun(env: Env, queue: str, job_id: str, yes: bool) -> None:
    """Run completed or dead job ID of QUEUE again as a new job (a copy; prints its id).

    The copy keeps the payload, name, group, priority, max_attempts, backoff and keep,
    not the dedup id; the original stays as it is, linked to the copy (rerun_as).
    """
    q = env.queue(queue)
    ids.validate(job_id)
    confirm(
        env,
        yes,
        lambda: (
            f"run job {job_id} ({q.job_state(job_id) or 'gone'}) of {queue} again as a new "
            f"job {env.on_server()}?"
        ),
    )
    copy = q.rerun_job(job_id)
    env.emit({"id": job_id, "copy": copy}, f"reran {job_id} as {copy}")


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
