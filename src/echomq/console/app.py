"""The console's HTTP adapter: Starlette routes over :mod:`echomq.console.handlers`.

This module owns everything HTTP: routes, status codes, the static page, server-sent
events, and the safety model:

- the console binds to loopback by default; on a loopback bind every request must
  name a loopback ``Host`` (a DNS-rebinding page cannot reach it under another name);
- a change is a ``POST`` with a JSON body, a custom header (``X-EMQ-Token`` or
  ``X-Requested-With``: a browser cannot send either cross-site without a CORS
  preflight, which this app never approves), and no foreign ``Origin`` / ``Referer``
  / ``Sec-Fetch-Site``;
- with a credential configured (the admin token ``EMQ_CONSOLE_TOKEN``, a file named by
  ``--token-file`` or ``EMQ_CONSOLE_TOKEN_FILE``, or the discouraged ``--token``; the
  per-role tokens; a users file: see :mod:`.access`) every request for data (reads,
  event streams, changes) must carry one: ``X-EMQ-Token``, ``Authorization: Bearer``
  or ``Basic`` (the token as password), or the cookie of a session ``POST /api/login``
  opened (HttpOnly, SameSite=Strict, expiring, revoked at logout); only the page
  itself, its static files, ``/api/config`` and ``/api/login`` answer without it;
- roles: a viewer reads, an operator acts, an admin alone obliterates and changes
  limits;
- a non-loopback bind without a token refuses to start;
- event streams are capped per client address (``STREAMS_PER_CLIENT``) and in all
  (``MAX_STREAMS``); a refused stream answers 429 and the page polls instead;
- a read-only console refuses every change with 403;
- every change names its actor in the queue's audit journal:
  ``console:<user>@<client address>``, the user being the Basic user, the name given
  at login (carried in the signed session cookie), ``token`` for a bare token, or
  ``local`` on a console without a token.

The pieces live by subject: the safety model in :mod:`.safety`, the HTTP plumbing
(replies, errors, the guard) in :mod:`.web`, the routes in :mod:`.session_routes`,
:mod:`.read_routes`, :mod:`.change_routes` and :mod:`.event_stream`. This module
builds the app: the route table, the guard around it, and :func:`serve`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import FileResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp

from ..observability.console import metrics_endpoint
from .access import (
    OPERATOR_TOKEN_ENV,
    ROLES,
    SESSION_TTL_S,
    USERS_FILE_ENV,
    VIEWER_TOKEN_ENV,
    Sessions,
    credentials,
)
from .change_routes import ChangeRoutes, acting
from .event_stream import BEAT_S, EventStreams
from .handlers import STREAMS_PER_CLIENT, Console, UnsafeBind
from .read_routes import ReadRoutes, reading
from .safety import (
    SESSION_COOKIE,
    TOKEN_ENV,
    TOKEN_FILE_ENV,
    USER_RE,
    Denied,
    Safety,
    cookie_name,
    is_loopback,
    resolve_token,
    user_name,
)
from .session_routes import SessionRoutes
from .web import MAX_BODY, Guard, JsonDoc, error_reply, http_error, json_endpoint

__all__ = [
    "BEAT_S",
    "MAX_BODY",
    "OPERATOR_TOKEN_ENV",
    "ROLES",
    "SESSION_COOKIE",
    "SESSION_TTL_S",
    "STATIC",
    "TOKEN_ENV",
    "TOKEN_FILE_ENV",
    "USERS_FILE_ENV",
    "USER_RE",
    "VIEWER_TOKEN_ENV",
    "Denied",
    "JsonDoc",
    "Safety",
    "cookie_name",
    "create_app",
    "error_reply",
    "is_loopback",
    "resolve_token",
    "serve",
    "user_name",
]

STATIC = Path(__file__).parent / "static"


async def index(request: Request) -> Response:
    """The page itself."""
    return FileResponse(STATIC / "index.html", headers={"cache-control": "no-store"})


def _routes(console: Console, safety: Safety, per_client: int) -> list[Route | Mount]:
    """Every route, in matching order; reads pass :func:`reading`, changes :func:`acting`."""
    session = SessionRoutes(console, safety, per_client)
    reads = ReadRoutes(console)
    changes = ChangeRoutes(console, safety)
    events = EventStreams(console, safety, per_client).events

    def change(fn: Any) -> Any:
        return acting(safety, fn, console)

    q = "/api/queues/{queue}"
    return [
        Route("/", index),
        Mount("/static", StaticFiles(directory=STATIC), name="static"),
        Route("/api/config", json_endpoint(session.config)),
        Route("/api/login", session.login, methods=["POST"]),
        Route("/api/logout", session.logout, methods=["POST"]),
        Route("/api/health", reading(safety, reads.health)),
        Route("/metrics", metrics_endpoint(console, safety.check_read, error_reply)),
        Route("/api/queues", reading(safety, reads.queues)),
        Route("/api/events", events),
        Route("/api/jobs/{job}", reading(safety, reads.locate)),
        Route(q, reading(safety, reads.queue)),
        Route(q + "/jobs", reading(safety, reads.jobs)),
        Route(q + "/groups", reading(safety, reads.groups)),
        Route(q + "/repeats", reading(safety, reads.repeats)),
        Route(q + "/metrics", reading(safety, reads.metrics)),
        Route(q + "/history", reading(safety, reads.history)),
        Route(q + "/workers", reading(safety, reads.workers)),
        Route(q + "/audit", reading(safety, reads.audit)),
        Route(q + "/flow_impact", reading(safety, reads.flow_impact)),
        Route(q + "/events", events),
        Route(q + "/jobs/{job}", reading(safety, reads.job)),
        Route(q + "/jobs/{job}/flow", reading(safety, reads.flow)),
        Route(q + "/{verb}", change(changes.queue_verb), methods=["POST"]),
        Route(q + "/groups/{group}/{verb}", change(changes.group_verb), methods=["POST"]),
        Route(q + "/jobs/{job}/{verb}", change(changes.job_verb), methods=["POST"]),
        Route(q + "/repeats/{name}/{verb}", change(changes.repeat_verb), methods=["POST"]),
        Route(q + "/bulk/{verb}", change(changes.bulk_verb), methods=["POST"]),
    ]


def create_app(
    url: str | None = None,
    *,
    host: str = "127.0.0.1",
    token: str | None = None,
    read_only: bool = False,
    client: Any = None,
    token_file: str | None = None,
    streams_per_client: int = STREAMS_PER_CLIENT,
    operator_token: str | None = None,
    viewer_token: str | None = None,
    users_file: str | None = None,
    session_ttl_s: float = SESSION_TTL_S,
    shared_reads_s: float = 0.0,
) -> ASGIApp:
    """Build the console as an ASGI app.

    Args:
        url: the Valkey/Redis server URL (default ``redis://127.0.0.1:6379/0``).
        host: the address the app will be served on; a non-loopback one requires a
            token and turns off the loopback ``Host`` check.
        token: required for every read and change (default: the file
            ``token_file`` or ``EMQ_CONSOLE_TOKEN_FILE`` names, else the
            ``EMQ_CONSOLE_TOKEN`` environment variable; empty means none).
        read_only: refuse every change with 403.
        client: a ``redis.asyncio.Redis`` with ``decode_responses=True`` to use
            instead of connecting to ``url``.
        token_file: a file holding the token (whitespace around it dropped).
        streams_per_client: event streams one client address may hold at once.
        operator_token, viewer_token: tokens granting those roles (default: the
            ``EMQ_CONSOLE_OPERATOR_TOKEN`` / ``EMQ_CONSOLE_VIEWER_TOKEN`` variables);
            the console token is an admin's.
        users_file: a file of ``NAME ROLE sha256:HEX`` lines (default:
            ``EMQ_CONSOLE_USERS_FILE``); see :mod:`echomq.console.access`.
        session_ttl_s: how long a login's session lives.
        shared_reads_s: share each queue view's read between identical requests for
            this long (0: every request reads; see :mod:`.shared_reads`).

    Returns:
        The ASGI application (a Starlette app behind the host/headers guard).

    Raises:
        UnsafeBind: ``host`` is not loopback and no token is configured, or the
            token file cannot be read.
    """
    secret = resolve_token(token, token_file)
    creds = credentials(
        secret, operator_token=operator_token, viewer_token=viewer_token, users_file=users_file
    )
    loopback = is_loopback(host)
    if not loopback and not creds:
        raise UnsafeBind(
            f"refusing to serve on {host!r} without a token: set {TOKEN_ENV} "
            f"or pass --token-file (or set {TOKEN_FILE_ENV}), or a users file"
        )
    safety = Safety(
        credentials=creds, read_only=read_only, loopback=loopback, sessions=Sessions(session_ttl_s)
    )
    console = Console(url, client=client, read_only=read_only)
    console.shared_reads.ttl_s = shared_reads_s

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        yield
        await console.aclose()

    app = Starlette(
        routes=_routes(console, safety, streams_per_client),
        exception_handlers={HTTPException: http_error},
        lifespan=lifespan,
    )
    app.state.console = console
    app.state.safety = safety
    return Guard(app, safety)


def serve(
    url: str | None = None,
    host: str = "127.0.0.1",
    port: int = 8765,
    token: str | None = None,
    read_only: bool = False,
    token_file: str | None = None,
    users_file: str | None = None,
    shared_reads_s: float = 1.0,
) -> None:
    """Serve the console with uvicorn until interrupted.

    Args:
        url: the Valkey/Redis server URL.
        host: the address to bind (loopback by default).
        port: the TCP port.
        token: required for every read and change (default: the token file, else
            ``EMQ_CONSOLE_TOKEN``).
        read_only: refuse every change.
        token_file: a file holding the token.
        users_file: a file of ``NAME ROLE sha256:HEX`` lines (users with roles).
        shared_reads_s: how long identical reads share one server read (1 s: fifty
            operators on one queue page cost one page's reads).

    Raises:
        UnsafeBind: ``host`` is not loopback and no token is configured.
    """
    import uvicorn

    app = create_app(
        url,
        host=host,
        token=token,
        read_only=read_only,
        token_file=token_file,
        users_file=users_file,
        shared_reads_s=shared_reads_s,
    )
    # uvicorn's access log would print every poll; warnings and errors only
    uvicorn.run(app, host=host, port=port, log_level="warning", timeout_graceful_shutdown=2)
