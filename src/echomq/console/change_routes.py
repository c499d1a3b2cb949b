"""The console's change routes: ``POST /api/queues/{q}/.../<verb>``, each through every
check of a change (:meth:`~.safety.Safety.check_change`), journaled as the request's
actor, then the verb the handlers' tables name (an unknown verb is 404)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from starlette.exceptions import HTTPException
from starlette.requests import Request

from .access import ADMIN_VERBS
from .handlers import (
    BULK_VERBS,
    GROUP_VERBS,
    JOB_VERBS,
    QUEUE_VERBS,
    REPEAT_VERBS,
    Console,
    acting_as,
)
from .safety import Safety
from .web import Endpoint, json_endpoint, param, read_json


def acting(
    safety: Safety,
    fn: Callable[[Request], Awaitable[dict[str, Any]]],
    console: Console | None = None,
) -> Endpoint:
    """A change, journaled as the request's actor; afterwards (done or refused) the
    queue's shared reads are dropped, so the next read shows what it did."""

    async def as_actor(request: Request) -> dict[str, Any]:
        try:
            with acting_as(safety.actor(request)):
                return await fn(request)
        finally:
            if console is not None:
                console.forget_reads(request.path_params.get("queue", ""))

    return json_endpoint(as_actor)


def unknown(verb: str) -> HTTPException:
    """The 404 of a verb no table names."""
    return HTTPException(404, f"no such verb: {verb}")


class ChangeRoutes:
    """The change endpoints of one console (wrap each with :func:`acting`)."""

    def __init__(self, console: Console, safety: Safety) -> None:
        self.console, self.safety = console, safety

    async def change(self, request: Request, scope: str) -> tuple[str, dict[str, Any]]:
        """Pass the gates of a change (an admin's for :data:`~.access.ADMIN_VERBS`, an
        operator's for the rest); the verb named in the path and the JSON body."""
        verb = param(request, "verb")
        need = "admin" if (scope, verb) in ADMIN_VERBS else "operator"
        self.safety.check_change(request, need)
        return verb, await read_json(request)

    async def queue_verb(self, request: Request) -> dict[str, Any]:
        """``POST /api/queues/{q}/<verb>``."""
        verb, body = await self.change(request, "queue")
        if verb not in QUEUE_VERBS:
            raise unknown(verb)
        return await QUEUE_VERBS[verb](self.console, param(request, "queue"), body)

    async def group_verb(self, request: Request) -> dict[str, Any]:
        """``POST /api/queues/{q}/groups/{g}/<verb>``."""
        verb, body = await self.change(request, "group")
        if verb not in GROUP_VERBS:
            raise unknown(verb)
        q, g = param(request, "queue"), param(request, "group")
        return await GROUP_VERBS[verb](self.console, q, g, body)

    async def job_verb(self, request: Request) -> dict[str, Any]:
        """``POST /api/queues/{q}/jobs/{id}/<verb>``."""
        verb, body = await self.change(request, "job")
        if verb not in JOB_VERBS:
            raise unknown(verb)
        q, j = param(request, "queue"), param(request, "job")
        return await JOB_VERBS[verb](self.console, q, j, body)

    async def bulk_verb(self, request: Request) -> dict[str, Any]:
        """``POST /api/queues/{q}/bulk/<verb>``."""
        verb, body = await self.change(request, "bulk")
        if verb not in BULK_VERBS:
            raise unknown(verb)
        return await self.console.bulk(param(request, "queue"), verb, body)

    async def repeat_verb(self, request: Request) -> dict[str, Any]:
        """``POST /api/queues/{q}/repeats/{name}/<verb>``."""
        verb, body = await self.change(request, "repeat")
        if verb not in REPEAT_VERBS:
            raise unknown(verb)
        q, name = param(request, "queue"), param(request, "name")
        return await REPEAT_VERBS[verb](self.console, q, name, body)
