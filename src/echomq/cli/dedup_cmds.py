"""Dedup-id commands: ``emq dedup owner|release``.

A dedup id (``enqueue(..., dedup=Dedup(id, mode=...))``) is held by the job that owns
it; ``owner`` reads who (as an enqueue would see it), ``release`` frees the id now
(journaled), whoever holds it and whatever its mode. See docs/dedup.md.
"""

from __future__ import annotations

from typing import Any

import click

from ..keyspace import check_dedup
from ..results import DedupOwner
from .app import Env, cli, confirm, pass_env


@cli.group()
def dedup() -> None:
    """Read or free a dedup id: who holds it, and the operator's release."""


def owner_doc(dedup_id: str, found: DedupOwner | None) -> dict[str, Any]:
    """The JSON of ``emq dedup owner`` (and of the owner line of ``emq job show``)."""
    if found is None:
        return {"dedup": dedup_id, "owner": None}
    return {
        "dedup": dedup_id,
        "owner": found.job_id,
        "state": found.state,
        "mode": found.mode,
        "window_ms": found.window_ms,
    }


@dedup.command("owner")
@click.argument("queue")
@click.argument("dedup_id", metavar="ID")
@pass_env
def owner(env: Env, queue: str, dedup_id: str) -> None:
    """Who holds dedup id ID of QUEUE: the job an enqueue with it would answer."""
    found = env.queue(queue).dedup_owner(dedup_id)
    if found is None:
        text = f"dedup id {dedup_id} is free"
    else:
        window = "" if found.window_ms is None else f", window {found.window_ms} ms left"
        state = found.state or "gone (its throttle window holds the id)"
        text = f"dedup id {dedup_id}: {found.job_id} ({state}), mode {found.mode}{window}"
    env.emit(owner_doc(dedup_id, found), text)


@dedup.command("release")
@click.argument("queue")
@click.argument("dedup_id", metavar="ID")
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
@pass_env
def release(env: Env, queue: str, dedup_id: str, yes: bool) -> None:
    """Free dedup id ID of QUEUE now (a throttle window too); the job that held it runs
    or waits as before, and the next enqueue with the id makes a new job. Journaled."""
    check_dedup(dedup_id)
    q = env.queue(queue)
    confirm(env, yes, lambda: f"release dedup id {dedup_id} of {queue} {env.on_server()}?")
    held = q.release_dedup(dedup_id)
    text = f"released dedup id {dedup_id} (held by {held})" if held else f"{dedup_id} was free"
    env.emit({"dedup": dedup_id, "released": held}, text)
