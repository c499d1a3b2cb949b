"""Browsing jobs: ``emq jobs`` (a page of one state in the operator's order, or a
bounded search by text and creation time)."""

from __future__ import annotations

from typing import Any

import click
from rich.table import Table

from .. import ids
from ..views import (
    ASKED_ORDERS,
    MAX_PAGE,
    MAX_SEARCH_BUDGET,
    PAGE_STATES,
    SEARCH_BUDGET,
    SEARCH_FIELDS,
    JobLine,
)
from .app import Env, cli, pass_env
from .text import clean
from .times import TIME_FORMS, TimePoint, check_range, utc_text

#: Jobs ``emq jobs --find`` examines in all before it stops (each server call examines
#: at most ``--budget``).
FIND_SCAN_LIMIT = 100_000


@cli.command()
@click.argument("queue")
@click.argument("state", type=click.Choice(PAGE_STATES))
@click.option("--limit", type=click.IntRange(1, MAX_PAGE), default=20, show_default=True)
@click.option("--offset", type=click.IntRange(min=0), default=0, show_default=True)
@click.option("--group", help="List this group's lane (pending only).")
@click.option("--find", "text", metavar="TEXT", help="Only jobs whose fields contain TEXT.")
@click.option(
    "--field",
    "fields",
    type=click.Choice(SEARCH_FIELDS),
    multiple=True,
    help="Where --find looks (repeatable; default: everywhere).",
)
@click.option(
    "--budget",
    type=click.IntRange(1, MAX_SEARCH_BUDGET),
    default=SEARCH_BUDGET,
    show_default=True,
    help="Jobs one --find server call examines.",
)
@click.option(
    "--order",
    type=click.Choice(ASKED_ORDERS),
    help="run: the order claims take (scheduled soonest first, dead oldest first); "
    "newest: newest first. Default: pending run, scheduled soonest, active and dead newest.",
)
@click.option(
    "--since",
    "since_ms",
    type=TimePoint(),
    help="Only jobs created at or after this time (the job's id: when its producer "
    f"minted it, i.e. enqueued it, on the producer's clock): {TIME_FORMS}.",
)
@click.option(
    "--until",
    "until_ms",
    type=TimePoint(),
    help="Only jobs created at or before this time (as --since).",
)
@pass_env
def jobs(
    env: Env,
    queue: str,
    state: str,
    limit: int,
    offset: int,
    group: str | None,
    text: str | None,
    fields: tuple[str, ...],
    budget: int,
    order: str | None,
    since_ms: int | None,
    until_ms: int | None,
) -> None:
    """A page of the jobs of QUEUE in STATE: pending in run order, scheduled soonest
    first, active and dead newest first (--order run|newest for another).

    Pending lists the flat set; each group's lane is listed with --group. With
    --find, --since or --until, jobs are examined --budget per server call from
    --offset on, until --limit match (or 100,000 were examined); pending without
    --group searches the flat set, then every lane. The time range is on the job's
    creation time, read from its id (no row is read for a job outside it).
    """
    check_range(since_ms, until_ms)
    q = env.queue(queue)
    doc: dict[str, Any] = {"queue": queue, "state": state, "group": group, "offset": offset}
    rows: list[JobLine]
    ranged = since_ms is not None or until_ms is not None
    if text is None and not ranged:
        page = q.job_page(state, limit, offset, group, order)
        rows = page.jobs
        doc.update(order=page.order, total=page.total)
        if state == "pending" and group is None and not env.json:
            in_lanes = q.counts().pending - page.total
            if in_lanes > 0:
                env.note(f"{in_lanes} more pending jobs wait in lanes: list one with --group")
    else:
        rows, cursor, examined, total = [], offset, 0, 0
        while len(rows) < limit and examined < FIND_SCAN_LIMIT:
            found = q.find_jobs(
                state,
                text or "",
                fields=fields or SEARCH_FIELDS,
                n=limit - len(rows),
                cursor=cursor,
                budget=budget,
                group=group,
                order=order,
                since_ms=since_ms,
                until_ms=until_ms,
            )
            rows += found.jobs
            examined, total = examined + found.scanned, found.total
            if found.cursor is None:
                cursor = -1
                break
            cursor = found.cursor
        doc.update(find=text, examined=examined, next_offset=None if cursor < 0 else cursor)
        doc.update(total=total)  # the jobs the walk covers (pending: flat and every lane)
        if cursor >= 0 and not env.json:
            env.note(
                f"examined {examined} of {total} {state} jobs from offset {offset}; "
                f"go on with --offset {cursor}"
            )
        doc.update(since_ms=since_ms, until_ms=until_ms)
    doc["jobs"] = rows

    def show() -> None:
        where = f"{queue}" + (f" group {group}" if group else "")
        if not rows:
            env.out.print(f"no {state} jobs in {where}", markup=False)
            return
        env.heading(f"{state} jobs of {where} {env.on_server()}")
        table = Table("id", "name", "group", "attempts", "progress", "last error")
        if ranged:  # the time the range is on
            table.add_column("created (UTC)")
        for row in rows:
            error = (row.last_error or "").splitlines()
            created = [utc_text(ids.minted_at_ms(row.id))] if ranged else []
            table.add_row(
                row.id,
                clean(row.name),
                clean(row.group),
                str(row.attempts),
                clean(row.progress),
                clean(error[-1][:60] if error else ""),
                *created,
            )
        env.out.print(table)

    env.emit(doc, show)
