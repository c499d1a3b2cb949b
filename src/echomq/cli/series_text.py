"""The history series as ``emq stats --history`` prints it: a table of the points that
saw jobs end (times in UTC, durations readable; ``--raw``: ms), and the JSON shape; with
``--lanes``, the busiest lanes over the same span (lane names are job text: escaped)."""

from __future__ import annotations

from typing import Any

from rich.table import Table

from ..results import BusiestLanes, History
from .app import Env
from .text import clean
from .times import duration_text, utc_text


def history_json(hist: History) -> dict[str, Any]:
    """The series as JSON: every point (empty ones too), oldest first, each with its start
    (ms since the epoch), counts, summed and mean wait and run in ms (``null``: no job
    ended in it)."""
    waits, runs = hist.averages()
    points = [
        {
            "at_ms": (hist.first_minute + i * hist.step) * 60_000,
            "completed": hist.completed[i],
            "dead": hist.dead[i],
            "wait_ms": hist.wait_ms[i],
            "run_ms": hist.run_ms[i],
            "mean_wait_ms": None if waits[i] is None else round(waits[i] or 0.0, 1),
            "mean_run_ms": None if runs[i] is None else round(runs[i] or 0.0, 1),
        }
        for i in range(len(hist.completed))
    ]
    return {
        "span": hist.span,
        "step_minutes": hist.step,
        "first_minute": hist.first_minute,
        "end_minute": hist.end_minute,
        "completed": sum(hist.completed),
        "dead": sum(hist.dead),
        "points": points,
    }


def _ms(env: Env, value: float | None) -> str:
    if value is None:
        return "-"
    return f"{round(value)}" if env.raw else duration_text(round(value))


def print_history(env: Env, hist: History) -> None:
    """The points where jobs ended, and a totals line."""
    data = history_json(hist)
    step = f"{hist.step} min" if hist.step < 60 else "hour"
    table = Table(
        f"{'at (ms)' if env.raw else 'from (UTC)'}", "completed", "dead", "mean wait", "mean run"
    )
    for p in data["points"]:
        if not (p["completed"] or p["dead"]):
            continue
        at = str(p["at_ms"]) if env.raw else utc_text(p["at_ms"])[:16].replace("T", " ")
        table.add_row(
            at,
            str(p["completed"]),
            str(p["dead"]),
            _ms(env, p["mean_wait_ms"]),
            _ms(env, p["mean_run_ms"]),
        )
    env.heading(f"history over {hist.span}, a row per {step} that saw jobs end")
    if table.row_count:
        env.out.print(table)
    ended = data["completed"] + data["dead"]
    wait = sum(hist.wait_ms) / ended if ended else None
    run = sum(hist.run_ms) / ended if ended else None
    env.say(
        f"{data['completed']} completed, {data['dead']} dead over {hist.span}; "
        f"mean wait {_ms(env, wait)}, mean run {_ms(env, run)}"
    )


def lanes_json(busy: BusiestLanes) -> dict[str, Any]:
    """The busiest lanes as JSON: the window's whole hours (ms since the epoch, the last
    one's end), and each lane, most endings first, with its counts, summed and mean
    wait and run in ms."""
    lanes = []
    for lane in busy.lanes:
        wait, run = lane.averages()
        lanes.append(
            {
                "lane": lane.lane,
                "completed": lane.completed,
                "dead": lane.dead,
                "wait_ms": lane.wait_ms,
                "run_ms": lane.run_ms,
                "mean_wait_ms": None if wait is None else round(wait, 1),
                "mean_run_ms": None if run is None else round(run, 1),
            }
        )
    return {
        "span": busy.span,
        "from_ms": busy.first_hour * 3_600_000,
        "until_ms": (busy.end_hour + 1) * 3_600_000,
        "lanes_seen": busy.lanes_seen,
        "lanes": lanes,
    }


def print_lanes(env: Env, busy: BusiestLanes) -> None:
    """The busiest lanes' table (lane names escaped: they are job text)."""
    since = busy.first_hour * 3_600_000
    start = str(since) if env.raw else utc_text(since)[:16].replace("T", " ")
    env.heading(
        f"busiest lanes over {busy.span} (whole hours from {start}"
        f"{'' if env.raw else ' UTC'}; {busy.lanes_seen} lanes seen)"
    )
    if not busy.lanes:
        env.say("no grouped job ended")
        return
    table = Table("lane", "completed", "dead", "mean wait", "mean run")
    for lane in busy.lanes:
        wait, run = lane.averages()
        table.add_row(
            clean(lane.lane), str(lane.completed), str(lane.dead), _ms(env, wait), _ms(env, run)
        )
    env.out.print(table)
