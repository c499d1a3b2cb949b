"""Lane commands: ``emq group list|pause|resume|limit|weight|drain|reassign`` and
``emq reindex`` (the rebuild of the lanes' index)."""

from __future__ import annotations

from dataclasses import asdict

import click
from rich.progress import Progress, TextColumn

from ..keyspace import check_name
from ..lanes import MAX_REINDEX_SCAN, REINDEX_SCAN, ReindexResult
from .app import Env, cli, confirm, pass_env
from .queue_cmds import print_groups


@cli.group()
def group() -> None:
    """Operate one group's lane (see docs/lanes.md)."""


@group.command("list")
@click.argument("queue")
@pass_env
def list_groups(env: Env, queue: str) -> None:
    """Every group of QUEUE: depth, in flight, limit, weight, paused."""
    rows = [asdict(g) for g in env.queue(queue).groups()]

    def text() -> None:
        if rows:
            print_groups(env, rows)
        else:
            env.out.print(f"no groups in {queue}", markup=False)

    env.emit({"queue": queue, "groups": rows}, text)


@group.command("pause")
@click.argument("queue")
@click.argument("name", metavar="GROUP")
@pass_env
def pause_group(env: Env, queue: str, name: str) -> None:
    """Hold GROUP back; its backlog stays in its lane."""
    env.queue(queue).pause_group(name)
    env.emit({"queue": queue, "group": name, "paused": True}, f"paused group {name}")


@group.command("resume")
@click.argument("queue")
@click.argument("name", metavar="GROUP")
@pass_env
def resume_group(env: Env, queue: str, name: str) -> None:
    """Serve GROUP again."""
    env.queue(queue).resume_group(name)
    env.emit({"queue": queue, "group": name, "paused": False}, f"resumed group {name}")


@group.command("limit")
@click.argument("queue")
@click.argument("name", metavar="GROUP")
@click.argument("limit", type=click.IntRange(min=1), required=False)
@click.option("--clear", is_flag=True, help="Remove the limit instead.")
@pass_env
def limit_group(env: Env, queue: str, name: str, limit: int | None, clear: bool) -> None:
    """Allow at most LIMIT jobs of GROUP in flight (or --clear the limit)."""
    if (limit is None) == (not clear):
        raise click.UsageError("give either LIMIT or --clear")
    q = env.queue(queue)
    if clear:
        q.clear_group_limit(name)
        env.emit({"queue": queue, "group": name, "limit": None}, f"no limit on group {name}")
    else:
        assert limit is not None
        q.set_group_limit(name, limit)
        env.emit({"queue": queue, "group": name, "limit": limit}, f"group {name}: limit {limit}")


@group.command("weight")
@click.argument("queue")
@click.argument("name", metavar="GROUP")
@click.argument("weight", type=click.IntRange(min=1))
@pass_env
def weight_group(env: Env, queue: str, name: str, weight: int) -> None:
    """Serve up to WEIGHT jobs of GROUP per turn of the ring."""
    env.queue(queue).set_group_weight(name, weight)
    env.emit({"queue": queue, "group": name, "weight": weight}, f"group {name}: weight {weight}")


@group.command("drain")
@click.argument("queue")
@click.argument("name", metavar="GROUP")
@click.option("--dry-run", is_flag=True, help="Count the jobs a drain would delete; change none.")
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
@pass_env
def drain_group(env: Env, queue: str, name: str, dry_run: bool, yes: bool) -> None:
    """Delete the pending lane of GROUP (its jobs in flight survive)."""
    q = env.queue(queue)
    check_name(name, "group")
    if dry_run:
        would = q.group_depth(name)
        env.emit(
            {"queue": queue, "group": name, "dry_run": True, "would_drain": would},
            f"dry run: a drain would delete the {would} pending jobs of group {name}; "
            "nothing changed",
        )
        return
    confirm(
        env,
        yes,
        lambda: (
            f"drain the {q.group_depth(name)} pending jobs of group {name} of {queue} "
            f"{env.on_server()}?"
        ),
    )
    n = q.drain_group(name)
    env.emit({"queue": queue, "group": name, "drained": n}, f"drained {n} jobs from group {name}")


@group.command("reassign")
@click.argument("queue")
@click.argument("job_id", metavar="ID")
@click.argument("name", metavar="[GROUP]", required=False)
@click.option("--flat", is_flag=True, help="Move the job to the flat pending set instead.")
@pass_env
def reassign(env: Env, queue: str, job_id: str, name: str | None, flat: bool) -> None:
    """Move pending job ID to GROUP's lane (or --flat: out of every lane), keeping its priority."""
    if (name is None) == (not flat):
        raise click.UsageError("give either GROUP or --flat")
    # The verb checks the id and the group before it sends anything.
    env.queue(queue).reassign(job_id, name)
    where = "the flat pending set" if name is None else f"group {name}"
    env.emit({"queue": queue, "id": job_id, "group": name}, f"reassigned {job_id} to {where}")


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
