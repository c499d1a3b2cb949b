"""Settled history: ``emq retention`` (how many completed and dead jobs a queue keeps,
and for how long)."""

from __future__ import annotations

from typing import Any

import click
from rich.table import Table

from ..queue import Queue
from ..results import Retention
from .app import Env, cli, confirm, pass_env
from .times import UNITS_MS, duration_text


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


def would_trim(q: Queue, limits: dict[str, int | None]) -> dict[str, int]:
    """How many settled jobs the retention ``limits`` exceed now, per set.

    Both rules keep a set's newest jobs (the sets are scored by their time of
    settling), so what a set loses is the larger of its excess over the count and its
    jobs older than the age: ``ZCARD`` (from the counts) and a dry-run ``clean``.
    """
    counts = q.counts()
    out: dict[str, int] = {}
    for name, size in (("completed", counts.kept), ("dead", counts.dead)):
        n, age = limits[name], limits[name + "_age_ms"]
        over = max(0, size - n) if n else 0
        old = q.clean(age, name, dry_run=True).matched if age else 0
        out[name] = max(over, old)
    return out


@cli.command()
@click.argument("queue")
@click.option("--completed", type=click.IntRange(min=0), help="Keep the newest N completed jobs.")
@click.option("--completed-age", type=_Duration(), help="Keep completed jobs younger than this.")
@click.option("--dead", type=click.IntRange(min=0), help="Keep only the newest N dead jobs.")
@click.option("--dead-age", type=_Duration(), help="Keep only dead jobs younger than this.")
@click.option(
    "--dry-run", is_flag=True, help="Say how many settled jobs the new limits would delete."
)
@click.option("--yes", "-y", is_flag=True, help="Do not ask before deleting settled jobs.")
@pass_env
def retention(
    env: Env,
    queue: str,
    completed: int | None,
    completed_age: int | None,
    dead: int | None,
    dead_age: int | None,
    dry_run: bool,
    yes: bool,
) -> None:
    """Show or set how much settled history QUEUE keeps.

    With no option, shows the retention. Each option given replaces that limit (0
    clears it); the others stay as they are. Ages take 500ms, 30s, 15m, 12h, 7d or ms.
    When the new limits would delete settled jobs now, asks first (or --yes);
    --dry-run only counts them.
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
        doomed = would_trim(q, merged)
        if dry_run:
            _dry_run(env, queue, merged, doomed)
            return
        if sum(doomed.values()):
            confirm(
                env,
                yes,
                lambda: (
                    f"set the retention of {queue} {env.on_server()} and delete "
                    f"{doomed['completed']} completed and {doomed['dead']} dead jobs now?"
                ),
            )
        trimmed = q.set_retention(**merged)
        current = q.retention()
    elif dry_run:
        _dry_run(env, queue, current.as_dict(), {"completed": 0, "dead": 0})
        return

    def show() -> None:
        if not current.keeps:
            env.out.print(f"{queue} keeps no history", markup=False)
        else:
            env.heading(f"retention of {queue} {env.on_server()}")
            table = Table("set", "newest N", "younger than (ms)" if env.raw else "younger than")
            for name in ("completed", "dead"):
                n, age = getattr(current, name), getattr(current, name + "_age_ms")
                shown = "-" if age is None else str(age) if env.raw else duration_text(age)
                table.add_row(name, "-" if n is None else str(n), shown)
            env.out.print(table)
        if trimmed:
            env.out.print(f"trimmed {trimmed} settled jobs", markup=False)

    env.emit({"queue": queue, **current.as_dict(), "trimmed": trimmed or 0}, show)


def _dry_run(env: Env, queue: str, limits: dict[str, int | None], doomed: dict[str, int]) -> None:
    kept = Retention(**{k: v or None for k, v in limits.items()})  # 0 clears a limit
    doc = {"queue": queue, **kept.as_dict(), "dry_run": True, "would_trim": doomed}
    env.emit(
        doc,
        f"dry run: the new retention of {queue} would delete {doomed['completed']} completed "
        f"and {doomed['dead']} dead jobs now; nothing changed",
    )
