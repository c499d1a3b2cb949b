"""The console's read routes: ``GET`` endpoints over the handlers' reads (queues, one
queue, jobs and search, one job, groups, repeatables, throughput, workers, audit,
health, which queue holds a job). Each answers only a request that may read."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from starlette.requests import Request

from ..views import SEARCH_BUDGET
from .handlers import GROUPS_PAGE, Console
from .safety import Safety
from .web import Body, Encoded, Endpoint, encoded, json_endpoint, param, query_int, query_text


def reading(safety: Safety, fn: Callable[[Request], Awaitable[Body]]) -> Endpoint:
    """A read: refused without the token (when one is set), else ``fn``'s dict as JSON."""

    async def guarded(request: Request) -> Body:
        safety.check_read(request)
        return await fn(request)

    return json_endpoint(guarded)


class ReadRoutes:
    """The read endpoints of one console (wrap each with :func:`reading`); the reads of
    a queue (and the queue list) go through the console's shared reads."""

    def __init__(self, console: Console) -> None:
        self.console = console

    @staticmethod
    def shared(
        view: str, fn: Callable[[ReadRoutes, Request], Awaitable[dict[str, Any]]]
    ) -> Callable[[ReadRoutes, Request], Awaitable[Encoded]]:
        """A read shared between identical requests (see :mod:`.shared_reads`), kept
        as the JSON it is sent as (written once, however many requests share it)."""

        async def read(self: ReadRoutes, request: Request) -> Encoded:
            queue = request.path_params.get("queue", "")
            key = (queue, view, *request.path_params.values(), str(request.query_params))

            async def make() -> Encoded:
                return encoded(await fn(self, request))

            got: Encoded = await self.console.shared_reads.read(key, make)
            return got

        return read

    async def health(self, request: Request) -> dict[str, Any]:
        """``GET /api/health``: whether the server answers."""
        return await self.console.health()

    async def queues(self, request: Request) -> dict[str, Any]:
        """``GET /api/queues``: every queue found so far with its counts."""
        return await self.console.list_queues()

    async def queue(self, request: Request) -> dict[str, Any]:
        """``GET /api/queues/{q}``: one queue's summary."""
        return await self.console.queue_summary(param(request, "queue"))

    async def jobs(self, request: Request) -> dict[str, Any]:
        """``GET /api/queues/{q}/jobs``: a page of one state, or a search step (``q``,
        ``since``, ``until``)."""
        state = request.query_params.get("state", "pending")
        n = query_int(request, "n", 20)
        group = query_text(request, "group")
        text = query_text(request, "q")
        since = query_text(request, "since")
        until = query_text(request, "until")
        if text is None and (since is not None or until is not None):
            text = ""  # a search by time alone
        if text is None:
            offset = query_int(request, "offset", 0)
            return await self.console.list_jobs(param(request, "queue"), state, n, offset, group)
        fields = request.query_params.getlist("field") or None
        return await self.console.find_jobs(
            param(request, "queue"),
            state,
            text,
            fields,
            n=n,
            cursor=query_int(request, "cursor", 0),
            budget=query_int(request, "budget", SEARCH_BUDGET),
            group=group,
            since_ms=None if since is None else query_int(request, "since", 0),
            until_ms=None if until is None else query_int(request, "until", 0),
        )

    async def job(self, request: Request) -> dict[str, Any]:
        """``GET /api/queues/{q}/jobs/{id}``: one job."""
        return await self.console.job_detail(param(request, "queue"), param(request, "job"))

    async def flow(self, request: Request) -> dict[str, Any]:
        """``GET /api/queues/{q}/jobs/{id}/flow``: the job's flow tree (bounded)."""
        return await self.console.job_flow(param(request, "queue"), param(request, "job"))

    async def flow_impact(self, request: Request) -> dict[str, Any]:
        """``GET /api/queues/{q}/flow_impact``: what a drain or an obliterate does to the
        flows that cross the queue (bounded; drain's and obliterate's confirmations)."""
        return await self.console.flow_impact(param(request, "queue"))

    async def groups(self, request: Request) -> dict[str, Any]:
        """``GET /api/queues/{q}/groups``: the groups table (``sort``, ``desc``,
        ``filter``, ``offset``, ``n``), or with ``cursor`` one ``SSCAN`` page of them."""
        n = query_int(request, "n", GROUPS_PAGE)
        cursor = request.query_params.get("cursor")
        if cursor is not None:
            return await self.console.list_groups(param(request, "queue"), cursor or "0", n)
        return await self.console.group_table(
            param(request, "queue"),
            sort=request.query_params.get("sort") or "depth",
            desc=request.query_params.get("desc", "1") not in ("0", "false"),
            text=request.query_params.get("filter") or "",
            offset=query_int(request, "offset", 0),
            n=n,
        )

    async def repeats(self, request: Request) -> dict[str, Any]:
        """``GET /api/queues/{q}/repeats``: the queue's repeatables."""
        return await self.console.repeats(param(request, "queue"))

    async def metrics(self, request: Request) -> dict[str, Any]:
        """``GET /api/queues/{q}/metrics``: throughput per minute."""
        minutes = query_int(request, "minutes", 60)
        return await self.console.metrics(param(request, "queue"), minutes)

    async def history(self, request: Request) -> dict[str, Any]:
        """``GET /api/queues/{q}/history?range=1h|24h|7d``: the history series."""
        span = request.query_params.get("range") or "1h"
        return await self.console.history(param(request, "queue"), span)

    async def workers(self, request: Request) -> dict[str, Any]:
        """``GET /api/queues/{q}/workers``: the live workers."""
        n = query_int(request, "n", 100)
        return await self.console.workers(param(request, "queue"), n)

    async def audit(self, request: Request) -> dict[str, Any]:
        """``GET /api/queues/{q}/audit``: the audit journal, newest first."""
        n = query_int(request, "n", 50)
        return await self.console.audit(param(request, "queue"), n)

    async def locate(self, request: Request) -> dict[str, Any]:
        """``GET /api/jobs/{id}``: which queue holds the job."""
        return await self.console.locate_job(param(request, "job"))


for _view in ("queues", "queue", "jobs", "groups", "repeats", "metrics", "workers", "audit"):
    setattr(ReadRoutes, _view, ReadRoutes.shared(_view, getattr(ReadRoutes, _view)))
