"""Settled history: ``emq retention`` (how many completed and dead jobs a queue keeps,
and for how long)."""

from __future__ import annotations

from typing import Any

import click
from rich.table import Table

from .app import Env, cli, pass_env
from .times import UNITS_MS


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
