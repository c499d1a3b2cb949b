"""The console's reads of jobs: a page of one state, a bounded search step, one job."""

from __future__ import annotations

from dataclasses import asdict

from ..errors import JobGone
from ..schema import HIDDEN_ROW_FIELDS
from ..views import SEARCH_BUDGET, SEARCH_FIELDS
from .body import Reply
from .core import ConsoleCore

#: Nodes a job page's flow tree shows.
CONSOLE_FLOW_NODES = 200


class JobReads(ConsoleCore):
    """Reads of jobs (bounded: see :mod:`echomq.views`)."""

    async def list_jobs(
        self, queue: str, state: str, n: int = 20, offset: int = 0, group: str | None = None
    ) -> Reply:
        """A page of jobs in ``state`` in the operator's order (see :mod:`echomq.views`).

        Pending is in run order, scheduled soonest first, active and dead newest
        first; ``group`` pages that group's lane (pending only).

        Returns:
            ``{"state", "group", "order", "n", "offset", "total", "now_ms", "jobs"}``.

        Raises:
            InvalidArgument: unknown state or a bad page; InvalidName: a bad group.
        """
        return asdict(await self.queue(queue).job_page(state, n, offset, group))

    async def find_jobs(
        self,
        queue: str,
        state: str,
        text: str,
        fields: list[str] | None = None,
        n: int = 20,
        cursor: int = 0,
        budget: int = SEARCH_BUDGET,
        group: str | None = None,
        since_ms: int | None = None,
        until_ms: int | None = None,
    ) -> Reply:
        """One bounded search step in ``state`` (at most ``budget`` jobs examined);
        ``since_ms``/``until_ms`` keep jobs created in that range (``text`` may then be
        empty).

        Returns:
            ``{"state", "text", "fields", "scanned", "cursor", "now_ms", "jobs"}``;
            ``cursor`` is where the next step starts, ``None`` at the end.
        """
        found = await self.queue(queue).find_jobs(
            state,
            text,
            fields=fields or SEARCH_FIELDS,
            n=n,
            cursor=cursor,
            budget=budget,
            group=group,
            since_ms=since_ms,
            until_ms=until_ms,
        )
        return asdict(found)

    async def job_detail(self, queue: str, job_id: str) -> Reply:
        """One job: its row (``data`` = the parsed payload), newest logs (with
        ``log_times``: the server ms each line was written, aligned with ``logs``;
        ``null`` for a line older than log times), lock and score; for a job with a
        dedup id, ``dedup_owner``: the job that holds the id now (``null``: free).

        Raises:
            InvalidJobId: a malformed id (before any I/O).
            JobGone: no such job.
        """
        view = await self.queue(queue).job_view(job_id)
        if view is None:
            raise JobGone(f"job {job_id} is gone", job_id=job_id)
        return {
            "job": {k: v for k, v in view.row.items() if k not in HIDDEN_ROW_FIELDS},
            "logs": view.logs,
            "log_times": view.log_times,
            "log_count": view.log_count,
            "locked": view.locked,
            "score": view.score,
            "now_ms": view.now_ms,
            "errors": [asdict(e) for e in view.errors],
            "result": view.result,
            "dedup_owner": view.dedup_owner,
        }

    async def job_flow(self, queue: str, job_id: str, limit: int = CONSOLE_FLOW_NODES) -> Reply:
        """The job's flow (:meth:`echomq.Queue.flow`): its parents up to the root and the
        tree under it, each node with its state and what its parent recorded, bounded
        (``limit`` nodes). A read-only console reads without relaying first.

        Returns:
            ``{"flow": {...}}`` (``FlowTree.as_dict``; a job of no flow is a tree of
            one node).

        Raises:
            InvalidJobId: a malformed id (before any I/O).
            JobGone: no such job.
        """
        tree = await self.queue(queue).flow(job_id, limit=limit, relay=not self.read_only)
        if tree is None:
            raise JobGone(f"job {job_id} is gone", job_id=job_id)
        return {"flow": tree.as_dict()}

    async def flow_impact(self, queue: str) -> Reply:
        """What a drain or an obliterate of ``queue`` does to flows
        (:meth:`echomq.Queue.flow_impact`): ``{"waiting", "examined", "backlog",
        "children", "elsewhere", "exact"}``."""
        got = await self.queue(queue).flow_impact()
        return got.as_dict()
