"""Flow control: ``emq limit show|rate|concurrency|group|group-default`` (see
docs/flow-control.md). Every limit is decided inside the claim, across every worker;
each change is journaled in the queue's audit."""

from __future__ import annotations

from typing import Any

import click
from rich.table import Table

from ..results import Limits, RateLimit
from .app import Env, cli, pass_env
from .history_cmds import _Duration


@cli.group()
def limit() -> None:
    """Show or set QUEUE's flow control: rate limits, the concurrency cap."""


def _rate_text(rate: RateLimit | None) -> str:
    if rate is None:
        return "-"
    text = f"{rate.max_jobs} per {rate.per_ms} ms"
    if rate.burst is not None and rate.burst < rate.max_jobs:
        text += f", {rate.burst} at once"
    return text


def limits_lines(limits: Limits) -> list[tuple[str, str]]:
    """The rows ``emq limit show`` and ``emq stats`` print for a queue's limits."""
    cap = limits.concurrency
    held = limits.limited_for_ms
    return [
        ("rate limit", _rate_text(limits.rate)),
        ("starts in window", str(limits.starts_in_window) if limits.rate else "-"),
        ("concurrency cap", "-" if cap is None else f"{limits.active} of {cap} active"),
        ("lane default", _rate_text(limits.group_rate_default)),
        ("held by a handler", f"{held} ms more" if held else "no"),
        ("lanes held", str(limits.held_lanes)),
        ("limited now", "yes" if limits.rate_limited else "no"),
    ]


def _emit_limits(env: Env, queue: str, limits: Limits) -> None:
    def show() -> None:
        env.heading(f"flow control of {queue} {env.on_server()}")
        table = Table("limit", "now")
        for name, value in limits_lines(limits):
            table.add_row(name, value)
        env.out.print(table)

    env.emit({"queue": queue, **limits.as_dict()}, show)


def _either(values: tuple[Any, ...], clear: bool, what: str) -> None:
    given = all(v is not None for v in values)
    if given == clear or (not given and any(v is not None for v in values)):
        raise click.UsageError(f"give either {what} or --clear")


@limit.command("show")
@click.argument("queue")
@pass_env
def show_limits(env: Env, queue: str) -> None:
    """QUEUE's limits, the starts in its rate window and what holds it now."""
    _emit_limits(env, queue, env.queue(queue).limits())


@limit.command("rate")
@click.argument("queue")
@click.argument("max_jobs", type=click.IntRange(min=1), required=False)
@click.argument("per", type=_Duration(), required=False)
@click.option("--clear", is_flag=True, help="Remove the limit (and a handler's hold).")
@click.option(
    "--burst",
    type=click.IntRange(min=1),
    help="The most starts at once (default: a twentieth of MAX_JOBS; MAX_JOBS: all at once).",
)
@pass_env
def rate(
    env: Env, queue: str, max_jobs: int | None, per: int | None, clear: bool, burst: int | None
) -> None:
    """At most MAX_JOBS claims of QUEUE start in any window of PER (500ms, 1s, 1m ...),
    across every worker, spread BURST at a time (or --clear)."""
    _either((max_jobs, per), clear, "MAX_JOBS PER")
    q = env.queue(queue)
    if clear:
        q.clear_rate_limit()
    else:
        assert max_jobs is not None and per is not None
        q.set_rate_limit(max_jobs, per, burst=burst)
    _emit_limits(env, queue, q.limits())


@limit.command("concurrency")
@click.argument("queue")
@click.argument("n", type=click.IntRange(min=1), required=False)
@click.option("--clear", is_flag=True, help="Remove the cap.")
@pass_env
def concurrency(env: Env, queue: str, n: int | None, clear: bool) -> None:
    """At most N jobs of QUEUE active at once across every worker (or --clear)."""
    _either((n,), clear, "N")
    q = env.queue(queue)
    if clear:
        q.clear_concurrency()
    else:
        assert n is not None
        q.set_concurrency(n)
    _emit_limits(env, queue, q.limits())


@limit.command("group")
@click.argument("queue")
@click.argument("name", metavar="GROUP")
@click.argument("max_jobs", type=click.IntRange(min=1), required=False)
@click.argument("per", type=_Duration(), required=False)
@click.option("--clear", is_flag=True, help="Remove the lane's own limit.")
@pass_env
def group_rate(
    env: Env, queue: str, name: str, max_jobs: int | None, per: int | None, clear: bool
) -> None:
    """At most MAX_JOBS claims of GROUP start in any window of PER (or --clear)."""
    _either((max_jobs, per), clear, "MAX_JOBS PER")
    q = env.queue(queue)
    if clear:
        q.clear_group_rate_limit(name)
        env.emit(
            {"queue": queue, "group": name, "rate_limit": None}, f"no rate limit on group {name}"
        )
        return
    assert max_jobs is not None and per is not None
    q.set_group_rate_limit(name, max_jobs, per)
    doc = {"queue": queue, "group": name, "rate_limit": {"max_jobs": max_jobs, "per_ms": per}}
    env.emit(doc, f"group {name}: at most {max_jobs} starts per {per} ms")


@limit.command("group-default")
@click.argument("queue")
@click.argument("max_jobs", type=click.IntRange(min=1), required=False)
@click.argument("per", type=_Duration(), required=False)
@click.option("--clear", is_flag=True, help="Remove the default.")
@pass_env
def group_default(env: Env, queue: str, max_jobs: int | None, per: int | None, clear: bool) -> None:
    """Every lane of QUEUE without its own limit: at most MAX_JOBS starts per PER, each
    lane counted on its own (or --clear)."""
    _either((max_jobs, per), clear, "MAX_JOBS PER")
    q = env.queue(queue)
    if clear:
        q.clear_group_rate_default()
    else:
        assert max_jobs is not None and per is not None
        q.set_group_rate_default(max_jobs, per)
    _emit_limits(env, queue, q.limits())
