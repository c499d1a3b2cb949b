"""Queue-wide commands: queues, stats, pause, resume, drain, obliterate, enqueue.

``emq jobs`` (pages and search) lives in :mod:`.browse_cmds`."""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Any

import click
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn
from rich.table import Table

from ..admin import DEFAULT_DRAIN_BUDGET, DEFAULT_OBLITERATE_BUDGET
from ..checks import MAX_BATCH, STATES
from ..dedup import Dedup
from ..discovery import DEFAULT_SCAN_LIMIT, discover_queues
from ..queue import Queue
from ..registry import MAX_WORKERS
from ..views import HISTORY_RANGES
from .app import Env, cli, confirm, pass_env

# ``emq jobs`` moved to browse_cmds: its names stay importable from here
from .browse_cmds import FIND_SCAN_LIMIT as FIND_SCAN_LIMIT
from .browse_cmds import jobs as jobs
from .limit_cmds import limits_lines
from .series_text import history_json, lanes_json, print_history, print_lanes

#: The counts' columns: the states (from the one list; ``completed`` here is the
#: metrics' total, the kept jobs are ``kept``) and the failed total.
_COUNT_COLUMNS = (*STATES, "waiting_children", "completed", "failed")


def parse_json(text: str, what: str = "JSON") -> Any:
    """Parse a JSON argument.

    Raises:
        click.BadParameter: it is not JSON (exit status 2).
    """
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise click.BadParameter(f"not valid {what}: {exc}") from None


def queue_summary(q: Queue) -> dict[str, Any]:
    """A queue's counts and pause state, as ``--json`` shows them."""
    return {"queue": q.name, **q.counts().as_dict()}  # the counts carry the pause


def _counts_phrase(summary: dict[str, Any]) -> str:
    return ", ".join(f"{summary[k]} {k}" for k in ("pending", "active", "scheduled", "dead"))


def _flows_phrase(q: Queue, outcome: str) -> str:
    """The flows' part of a drain's or an obliterate's question, ``'...; '`` or ``''``."""
    text = q.flow_impact().phrase(outcome)
    return f"{text}; " if text else ""


def _progress(env: Env, what: str) -> Progress:
    return Progress(
        TextColumn(what + " {task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        console=env.err,
        disable=env.json,
    )


@cli.command()
@click.option(
    "--scan-limit",
    type=click.IntRange(min=1),
    default=DEFAULT_SCAN_LIMIT,
    show_default=True,
    help="Stop the key scan after examining this many keys.",
)
@pass_env
def queues(env: Env, scan_limit: int) -> None:
    """Every queue found on the server, with its counts and pause state."""
    found = discover_queues(env.client, scan_limit)
    rows = [queue_summary(env.queue(name, may_create=True)) for name in found.queues]
    if not found.complete:
        env.note(f"note: the scan stopped after {scan_limit} keys; more queues may exist")

    def show() -> None:
        if not rows:
            env.out.print("no queues", markup=False)
            return
        env.heading(f"queues {env.on_server()}")
        table = Table("queue", *_COUNT_COLUMNS, "paused")
        for row in rows:
            table.add_row(
                row["queue"],
                *(str(row[c]) for c in _COUNT_COLUMNS),
                "yes" if row["paused"] else "no",
            )
        env.out.print(table)

    env.emit({"queues": rows, "complete": found.complete}, show)


#: Lanes ``emq stats`` lists by default (the deepest); ``--top 0`` lists every one.
STATS_TOP = 10


def stranded(summary: dict[str, Any]) -> bool:
    """Whether jobs wait with no live worker to take them (and the gate is open)."""
    return summary["pending"] > 0 and summary["workers"] == 0 and not summary["paused"]


@cli.command()
@click.argument("queue")
@click.option(
    "--top",
    type=click.IntRange(min=0),
    default=STATS_TOP,
    show_default=True,
    help="List the N deepest lanes (0: every lane); the rest are summed up in one line.",
)
@click.option(
    "--history",
    "span",
    type=click.Choice(list(HISTORY_RANGES)),
    is_flag=False,
    flag_value="1h",
    default=None,
    help="Also the history series: per minute over 1h (the default), per 15 minutes over "
    "24h, per hour over 7d: jobs completed and dead, their mean wait and run.",
)
@click.option(
    "--lanes",
    "busiest",
    type=click.IntRange(min=1, max=100),
    is_flag=False,
    flag_value=5,
    default=None,
    help="Also the N busiest lanes (5 without N) over the --history span (1h without it), "
    "by jobs ended, at hourly resolution: completed, dead, mean wait and run.",
)
@pass_env
def stats(env: Env, queue: str, top: int, span: str | None, busiest: int | None) -> None:
    """Counts of every state, the pause state, the latency, the live workers and the
    deepest lanes of QUEUE (warns when jobs wait and no worker is live); with --history,
    the history series; with --lanes, the busiest lanes' history."""
    q = env.queue(queue)
    summary = queue_summary(q)
    summary["latency_ms"] = q.latency()
    limits = q.limits()
    summary["limits"] = limits.as_dict()
    summary["workers"] = len(q.workers(MAX_WORKERS))
    every = sorted(q.groups(), key=lambda g: (-g.depth, -g.in_flight, g.name))
    shown = every if top == 0 else every[:top]
    groups = [asdict(g) for g in shown]
    summary["groups"] = groups
    summary["group_count"] = len(every)
    summary["stranded"] = stranded(summary)
    hist = q.history(span) if span else None
    if hist is not None:
        summary["history"] = history_json(hist)
    busy = q.busiest_lanes(span or "1h", top=busiest) if busiest else None
    if busy is not None:
        summary["busiest_lanes"] = lanes_json(busy)

    def show() -> None:
        env.heading(f"queue {queue} {env.on_server()}")
        table = Table("state", "jobs")
        for c in _COUNT_COLUMNS:
            table.add_row(c, str(summary[c]))
        table.add_row("paused", "yes" if summary["paused"] else "no")
        latency = summary["latency_ms"]
        table.add_row("latency", "-" if latency is None else f"{latency / 1000:.1f}s")
        table.add_row("workers", f"{summary['workers']} live")
        for name, value in limits_lines(limits):
            table.add_row(name, value)
        env.out.print(table)
        if summary["stranded"]:
            env.say(f"warning: {summary['pending']} pending but no live workers")
        if groups:
            print_groups(env, groups)
        rest = every[len(shown) :]
        if rest:
            env.say(
                f"... and {len(rest)} more of {len(every)} lanes "
                f"({sum(g.depth for g in rest)} pending, {sum(g.in_flight for g in rest)} "
                f"in flight, {sum(g.paused for g in rest)} paused); --top 0 lists every lane"
            )
        if hist is not None:
            print_history(env, hist)
        if busy is not None:
            print_lanes(env, busy)

    env.emit(summary, show)


def print_groups(env: Env, groups: list[dict[str, Any]]) -> None:
    table = Table("group", "depth", "in flight", "limit", "weight", "paused", "rate", "held")
    for g in groups:
        rate = g.get("rate_limit")
        table.add_row(
            g["name"],
            str(g["depth"]),
            str(g["in_flight"]),
            "-" if g["limit"] is None else str(g["limit"]),
            str(g["weight"]),
            "yes" if g["paused"] else "no",
            "-" if not rate else f"{rate[0]}/{rate[1]}ms",
            "-" if not g.get("held_until_ms") else "yes",
        )
    env.out.print(table)


@cli.command()
@click.argument("queue")
@pass_env
def pause(env: Env, queue: str) -> None:
    """Close the claim gate of QUEUE: claims answer empty, the backlog stays as it is."""
    env.queue(queue).pause()
    env.emit({"queue": queue, "paused": True}, f"paused {queue}")


@cli.command()
@click.argument("queue")
@pass_env
def resume(env: Env, queue: str) -> None:
    """Open the claim gate of QUEUE again."""
    env.queue(queue).resume()
    env.emit({"queue": queue, "paused": False}, f"resumed {queue}")


@cli.command()
@click.argument("queue")
@click.option("--include-schedule", is_flag=True, help="Also delete the scheduled jobs.")
@click.option(
    "--budget",
    type=click.IntRange(1, MAX_BATCH),
    default=DEFAULT_DRAIN_BUDGET,
    show_default=True,
    help="The most jobs one server call deletes.",
)
@click.option("--dry-run", is_flag=True, help="Count the jobs a drain would delete; change none.")
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
@pass_env
def drain(
    env: Env, queue: str, include_schedule: bool, budget: int, dry_run: bool, yes: bool
) -> None:
    """Delete the pending backlog of QUEUE (active jobs and repeatables survive),
    BUDGET jobs per server call, with a progress bar on a terminal."""
    q = env.queue(queue)
    what = "pending and scheduled" if include_schedule else "pending"
    summary: dict[str, Any] = {}
    if dry_run:
        summary.update(queue_summary(q))
        would = summary["pending"] + (summary["scheduled"] if include_schedule else 0)
        env.emit(
            {"queue": queue, "dry_run": True, "would_drain": would},
            f"dry run: a drain would delete {would} {what} jobs of {queue} {env.on_server()}; "
            "nothing changed",
        )
        return

    def question() -> str:
        summary.update(queue_summary(q))
        flows = _flows_phrase(q, "drained")
        return (
            f"drain every {what} job of {queue} {env.on_server()} ({_counts_phrase(summary)})"
            + (f"; {flows[:-2]}" if flows else "")
            + "?"
        )

    confirm(env, yes, question)
    if not summary:
        summary.update(queue_summary(q))
    total = summary["pending"] + (summary["scheduled"] if include_schedule else 0)
    drained, calls = 0, 0
    with _progress(env, "drain") as progress:
        task = progress.add_task(queue, total=max(total, 1))
        while True:
            n, more = q.drain_step(include_schedule=include_schedule, budget=budget)
            drained, calls = drained + n, calls + 1
            progress.update(task, completed=min(drained, max(total, 1)))
            if not more:
                break
    env.emit(
        {"queue": queue, "drained": drained, "calls": calls},
        f"drained {drained} jobs from {queue} {env.on_server()}",
    )


@cli.command()
@click.argument("queue")
@click.option("--force", is_flag=True, help="Also delete jobs in flight.")
@click.option(
    "--budget",
    type=click.IntRange(1, MAX_BATCH),  # checked here: the command reads counts first
    default=DEFAULT_OBLITERATE_BUDGET,
    show_default=True,
    help="The most jobs one server call deletes.",
)
@click.option(
    "--keep-audit", is_flag=True, help="Keep the audit journal (it names who obliterated)."
)
@click.option(
    "--sweep", is_flag=True, help="Also scan the keyspace for keys no registry names (slow)."
)
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
@pass_env
def obliterate(
    env: Env, queue: str, force: bool, budget: int, keep_audit: bool, sweep: bool, yes: bool
) -> None:
    """Delete every key of a paused QUEUE, BUDGET jobs per call, until none is left."""
    q = env.queue(queue)
    confirm(
        env,
        yes,
        lambda: (
            f"obliterate {queue} {env.on_server()} ({_counts_phrase(queue_summary(q))}); "
            + _flows_phrase(q, "obliterated")
            + "every key goes?"
        ),
    )

    def left() -> int:
        counts = q.counts()
        return counts.pending + counts.active + counts.scheduled + counts.dead

    total = left()
    # The first call runs before any bar is drawn: a refusal shows no progress.
    calls = 1
    if not q.obliterate(force=force, budget=budget, keep_audit=keep_audit, sweep=sweep):
        with _progress(env, "obliterate") as progress:
            # the bar counts what is gone, read back after each call: exact, never over
            task = progress.add_task(queue, total=max(total, 1), completed=total - left())
            while True:
                calls += 1
                if q.obliterate(force=force, budget=budget, keep_audit=keep_audit, sweep=sweep):
                    break
                progress.update(task, completed=max(0, total - left()))
            progress.update(task, completed=max(total, 1))
    env.emit(
        {"queue": queue, "obliterated": True, "calls": calls, "jobs": total},
        f"obliterated {queue} {env.on_server()}: {total} jobs in {calls} calls",
    )


@cli.command()
@click.argument("queue")
@click.argument("payload", metavar="JSON")
@click.option("--delay-ms", type=click.IntRange(min=0), help="Park the job this long first.")
@click.option("--group", help="Put the job in this group's lane.")
@click.option("--name", help="The job's name (workers may route on it).")
@click.option("--priority", type=int, default=0, show_default=True, help="Lower runs first.")
@click.option("--max-attempts", type=click.IntRange(min=1), help="Failures before dead.")
@click.option("--dedup-id", help="While a job holds this id, return that job instead.")
@click.option(
    "--dedup-mode",
    type=click.Choice(["simple", "throttle", "debounce", "keep_last"]),
    help="How --dedup-id deduplicates (docs/dedup.md); debounce takes --delay-ms.",
)
@click.option("--dedup-ttl-ms", type=click.IntRange(min=1), help="A throttle's window.")
@click.option("--job-id", help="Your own JOB id (idempotent enqueue).")
@pass_env
def enqueue(
    env: Env,
    queue: str,
    payload: str,
    delay_ms: int | None,
    group: str | None,
    name: str | None,
    priority: int,
    max_attempts: int | None,
    dedup_id: str | None,
    dedup_mode: str | None,
    dedup_ttl_ms: int | None,
    job_id: str | None,
) -> None:
    """Enqueue one job on QUEUE with JSON as its data; print its id."""
    data = parse_json(payload)
    q = env.queue(queue, may_create=True)  # enqueue makes queues
    spec = None
    if dedup_mode is not None or dedup_ttl_ms is not None:
        if dedup_id is None:
            raise click.UsageError("--dedup-mode and --dedup-ttl-ms need --dedup-id")
        spec = Dedup(dedup_id, mode=dedup_mode or "simple", ttl_ms=dedup_ttl_ms)  # type: ignore[arg-type]
        dedup_id = None
    jid = q.enqueue(
        data,
        job_id=job_id,
        name=name,
        group=group,
        delay_ms=delay_ms,
        priority=priority,
        max_attempts=max_attempts,
        dedup_id=dedup_id,
        dedup=spec,
    )
    env.emit({"queue": queue, "id": jid}, jid)
