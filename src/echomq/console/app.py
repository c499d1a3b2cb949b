"""The console's HTTP adapter: Starlette routes over :mod:`echomq.console.handlers`.

This module owns everything HTTP: routes, status codes, the static page, server-sent
events, and the safety model:

- the console binds to loopback by default; on a loopback bind every request must
  name a loopback ``Host`` (a DNS-rebinding page cannot reach it under another name);
- a change is a ``POST`` with a JSON body, a custom header (``X-EMQ-Token`` or
  ``X-Requested-With``: a browser cannot send either cross-site without a CORS
  preflight, which this app never approves), and no foreign ``Origin`` / ``Referer``
  / ``Sec-Fetch-Site``;
- with a token configured (``EMQ_CONSOLE_TOKEN``, a file named by ``--token-file`` or
  ``EMQ_CONSOLE_TOKEN_FILE``, or the discouraged ``--token``) every request for data
  (reads, event streams, changes) must carry it: ``X-EMQ-Token``, ``Authorization:
  Bearer`` or ``Basic`` (any user, the token as password), or the session cookie
  ``POST /api/login`` sets (HttpOnly, SameSite=Strict); only the page itself,
  its static files, ``/api/config`` and ``/api/login`` answer without it;
- a non-loopback bind without a token refuses to start;
- event streams are capped per client address (``STREAMS_PER_CLIENT``) and in all
  (``MAX_STREAMS``); a refused stream answers 429 and the page polls instead;
- a read-only console refuses every change with 403;
- every change names its actor in the queue's audit journal:
  ``console:<user>@<client address>``, the user being the Basic user, the name given
  at login (carried in the signed session cookie), ``token`` for a bare token, or
  ``local`` on a console without a token.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import hmac
import ipaddress
import json
import os
import re
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import redis
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import FileResponse, Response, StreamingResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..errors import (
    EchoMQError,
    InvalidArgument,
    InvalidJobId,
    InvalidName,
    JobGone,
    Refused,
    ServerUnavailable,
)
from ..observability.console import metrics_endpoint
from ..views import SEARCH_BUDGET, to_json
from .handlers import (
    BULK_VERBS,
    GROUP_VERBS,
    GROUPS_PAGE,
    JOB_VERBS,
    MAX_STREAMS,
    QUEUE_VERBS,
    REPEAT_VERBS,
    STREAMS_PER_CLIENT,
    Console,
    ReadOnly,
    UnsafeBind,
    acting_as,
)

#: The environment variable a token may come from.
TOKEN_ENV = "EMQ_CONSOLE_TOKEN"
#: The environment variable naming a file the token is read from.
TOKEN_FILE_ENV = "EMQ_CONSOLE_TOKEN_FILE"
#: The session cookie ``POST /api/login`` sets.
SESSION_COOKIE = "emq_session"
#: Seconds between two beats on an event stream (the page's live dot reads them).
BEAT_S = 1.0
#: The largest request body accepted (a payload edit is the biggest).
MAX_BODY = 8 * 1024 * 1024
STATIC = Path(__file__).parent / "static"

_SECURITY_HEADERS = [
    (
        b"content-security-policy",
        b"default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        b"connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
    ),
    (b"x-frame-options", b"DENY"),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"cross-origin-resource-policy", b"same-origin"),
]


class Denied(Exception):
    """A request the safety model turns away before any handler runs."""

    def __init__(self, status: int, error: str, reason: str, message: str) -> None:
        super().__init__(message)
        self.status, self.error, self.reason = status, error, reason


def is_loopback(host: str) -> bool:
    """Whether ``host`` (a name or an address, brackets allowed) is loopback only."""
    name = host.strip().strip("[]").lower()
    if name == "localhost" or name.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def resolve_token(token: str | None = None, token_file: str | None = None) -> str | None:
    """The console's token: the option, else the file (``token_file`` or
    ``EMQ_CONSOLE_TOKEN_FILE``; surrounding whitespace dropped), else
    ``EMQ_CONSOLE_TOKEN``. Empty means none.

    Raises:
        UnsafeBind: the token file cannot be read or is empty.
    """
    if token is None:
        path = token_file or os.environ.get(TOKEN_FILE_ENV)
        if path:
            try:
                with open(path, encoding="utf-8") as f:
                    token = f.read().strip()
            except OSError as exc:
                raise UnsafeBind(f"cannot read the token file {path!r}: {exc}") from None
            if not token:
                raise UnsafeBind(f"the token file {path!r} is empty")
        else:
            token = os.environ.get(TOKEN_ENV)
    return token or None


#: A user name as the console journals it (login names and Basic users are cut to it).
USER_RE = re.compile(r"[A-Za-z0-9._-]{1,64}")


def user_name(given: Any, default: str = "operator") -> str:
    """``given`` as a journaled user name: ``[A-Za-z0-9._-]``, at most 64 characters
    (anything else is replaced by ``_``); ``default`` when empty."""
    if not isinstance(given, str) or not given.strip():
        return default
    return re.sub(r"[^A-Za-z0-9._-]", "_", given.strip())[:64]


def session_value(token: str, user: str = "operator") -> str:
    """The session cookie's value for ``token`` and ``user``: the user and a keyed
    digest of it (never the token), so the cookie names who logged in and cannot be
    made without the token."""
    mac = hmac.new(token.encode(), b"echomq-console-session:" + user.encode(), hashlib.sha256)
    return f"{user}.{mac.hexdigest()}"


def _session_user(cookie: str, token: str) -> str | None:
    user, _, _ = cookie.rpartition(".")
    if USER_RE.fullmatch(user) is None:
        return None
    return user if _same(cookie, session_value(token, user)) else None


def _same(given: str, expected: str) -> bool:
    return hmac.compare_digest(given.encode(), expected.encode())


@dataclass(frozen=True)
class Safety:
    """The safety settings one app enforces.

    Attributes:
        token: the token every change must carry, or ``None``.
        read_only: refuse every change.
        loopback: the app is bound to loopback, so ``Host`` must be loopback too.
    """

    token: str | None
    read_only: bool
    loopback: bool

    def check_host(self, host_header: str) -> None:
        """Refuse a non-loopback ``Host`` on a loopback bind (DNS rebinding)."""
        if not self.loopback:
            return
        name = urlsplit("//" + host_header).hostname or ""
        if not is_loopback(name):
            raise Denied(403, "forbidden", "host", f"host {host_header!r} is not loopback")

    def check_change(self, request: Request) -> None:
        """Every gate a state-changing request passes before its handler runs.

        Raises:
            Denied: cross-site (403), wrong content type (415), no custom header
                (403), read-only (403), missing or wrong token (401).
        """
        headers = request.headers
        host = headers.get("host", "").lower()
        site = headers.get("sec-fetch-site")
        if site is not None and site not in ("same-origin", "none"):
            raise Denied(403, "forbidden", "cross_site", f"Sec-Fetch-Site is {site}")
        source = headers.get("origin") or headers.get("referer")
        if source is not None and urlsplit(source).netloc.lower() != host:
            raise Denied(403, "forbidden", "cross_site", f"request from {source!r}")
        ctype = headers.get("content-type", "").split(";")[0].strip().lower()
        if ctype != "application/json":
            raise Denied(415, "forbidden", "content_type", "a change must be application/json")
        if "x-emq-token" not in headers and "x-requested-with" not in headers:
            raise Denied(403, "forbidden", "header", "a change needs X-Requested-With")
        self.check_read(request)
        if self.read_only:
            raise Denied(403, "forbidden", "read_only", "the console is read-only")

    def authenticated(self, request: Request) -> bool:
        """Whether the request carries the token (always true without one)."""
        return self.user(request) is not None

    def user(self, request: Request) -> str | None:
        """Who the request is: the Basic user, the session's user, ``token`` for a bare
        token, ``local`` on a console without one; ``None`` when unauthenticated."""
        if self.token is None:
            return "local"
        headers = request.headers
        given = headers.get("x-emq-token")
        if given is not None:
            return "token" if _same(given, self.token) else None
        scheme, _, value = headers.get("authorization", "").partition(" ")
        if scheme.lower() == "bearer":
            return "token" if _same(value.strip(), self.token) else None
        if scheme.lower() == "basic":
            try:
                pair = base64.b64decode(value.strip(), validate=True).decode()
            except ValueError:
                return None
            name, _, secret = pair.partition(":")
            return user_name(name, "token") if _same(secret, self.token) else None
        cookie = request.cookies.get(SESSION_COOKIE)
        return None if cookie is None else _session_user(cookie, self.token)

    def actor(self, request: Request) -> str:
        """The actor a change journals: ``console:<user>@<client address>``."""
        peer = request.client.host if request.client is not None else "?"
        return f"console:{self.user(request) or 'anonymous'}@{peer}"

    def check_read(self, request: Request) -> None:
        """Refuse a request for data without the token (when one is set).

        Raises:
            Denied: 401 (``X-EMQ-Token``, ``Authorization: Bearer`` or ``Basic`` with
                the token as password, or the session cookie, let it through).
        """
        if not self.authenticated(request):
            raise Denied(401, "unauthorized", "token", "a valid token is required")


# --------------------------------------------------------------------------- errors
class JsonDoc(Response):
    """A JSON reply written by the tools' one codec (:func:`echomq.views.to_json`)."""

    media_type = "application/json"

    def render(self, content: Any) -> bytes:
        return to_json(content).encode("utf-8")


def error_reply(exc: Exception) -> Response:
    """The JSON reply and status for an error a handler or a gate raised."""
    if isinstance(exc, Denied):
        status, body = exc.status, {"error": exc.error, "reason": exc.reason}
    elif isinstance(exc, ReadOnly):
        status, body = 403, {"error": "forbidden", "reason": "read_only"}
    elif isinstance(exc, JobGone):
        status, body = 404, {"error": "refused", "reason": exc.reason}
    elif isinstance(exc, Refused):
        status, body = 409, {"error": "refused", "reason": exc.reason}
    elif isinstance(exc, (InvalidName, InvalidJobId, InvalidArgument)):
        kind = {InvalidName: "name", InvalidJobId: "job_id"}.get(type(exc), "argument")
        status, body = 400, {"error": "invalid", "reason": kind}
    elif isinstance(exc, (ServerUnavailable, redis.ConnectionError, redis.TimeoutError)):
        status, body = 503, {"error": "unavailable", "reason": "server"}
    else:
        status, body = 500, {"error": "internal", "reason": type(exc).__name__}
    body["message"] = str(exc)
    headers = {"cache-control": "no-store"}
    if status == 401:
        # Bearer, not Basic: a browser would pop its own password prompt over the page
        # (``curl -u :TOKEN`` still sends Basic on its own)
        headers["www-authenticate"] = 'Bearer realm="echomq console"'
    if status == 429:
        headers["retry-after"] = "10"
    return JsonDoc(body, status_code=status, headers=headers)


async def _read_json(request: Request) -> dict[str, Any]:
    raw = bytearray()
    async for chunk in request.stream():
        raw += chunk
        if len(raw) > MAX_BODY:
            raise Denied(413, "invalid", "too_large", f"body over {MAX_BODY} bytes")
    if not raw.strip():
        return {}
    try:
        body = json.loads(raw)
    except ValueError as exc:
        raise Denied(400, "invalid", "json", f"body is not JSON: {exc}") from None
    if not isinstance(body, dict):
        raise Denied(400, "invalid", "json", "body must be a JSON object")
    return body


# --------------------------------------------------------------------- middleware
class _Guard:
    """Checks ``Host`` on every request and adds the security headers to every reply."""

    def __init__(self, app: ASGIApp, safety: Safety) -> None:
        self.app, self.safety = app, safety

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        host = dict(scope["headers"]).get(b"host", b"").decode("latin-1")
        try:
            self.safety.check_host(host)
        except Denied as exc:
            await error_reply(exc)(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), *_SECURITY_HEADERS]
            await send(message)

        await self.app(scope, receive, send_with_headers)


# ------------------------------------------------------------------------- routes
Endpoint = Callable[[Request], Awaitable[Response]]


def _json(fn: Callable[[Request], Awaitable[dict[str, Any]]]) -> Endpoint:
    """Wrap a handler call: its dict as JSON, its typed error as a typed reply."""

    async def endpoint(request: Request) -> Response:
        try:
            body = await fn(request)
        except (EchoMQError, Denied, redis.RedisError) as exc:
            return error_reply(exc)
        return JsonDoc(body, headers={"cache-control": "no-store"})

    return endpoint


def _routes(console: Console, safety: Safety, per_client: int) -> list[Route | Mount]:
    streams: Counter[str] = Counter()

    def param(request: Request, name: str) -> str:
        value: str = request.path_params[name]
        return value

    def query_int(request: Request, name: str, default: int) -> int:
        text = request.query_params.get(name)
        if text is None or text == "":
            return default
        try:
            return int(text)
        except ValueError:
            raise InvalidArgument(f"{name} must be an integer, got {text!r}") from None

    def query_text(request: Request, name: str) -> str | None:
        return request.query_params.get(name) or None

    def reading(fn: Callable[[Request], Awaitable[dict[str, Any]]]) -> Endpoint:
        async def guarded(request: Request) -> dict[str, Any]:
            safety.check_read(request)
            return await fn(request)

        return _json(guarded)

    async def config(request: Request) -> dict[str, Any]:
        if not safety.authenticated(request):
            return {"token_required": True, "authenticated": False}
        reply = console.config()
        reply["token_required"] = safety.token is not None
        reply["authenticated"] = True
        reply["actor"] = safety.actor(request)
        reply["streams_per_client"] = per_client
        return reply

    async def login(request: Request) -> Response:
        try:
            headers = request.headers
            site = headers.get("sec-fetch-site")
            if site is not None and site not in ("same-origin", "none"):
                raise Denied(403, "forbidden", "cross_site", f"Sec-Fetch-Site is {site}")
            if "x-requested-with" not in headers:
                raise Denied(403, "forbidden", "header", "a login needs X-Requested-With")
            body = await _read_json(request)
            given = body.get("token")
            if safety.token is None:
                return JsonDoc({"ok": True, "token_required": False})
            if not isinstance(given, str) or not _same(given, safety.token):
                raise Denied(401, "unauthorized", "token", "wrong token")
        except Denied as exc:
            return error_reply(exc)
        user = user_name(body.get("user"))
        reply = JsonDoc(
            {"ok": True, "token_required": True, "user": user},
            headers={"cache-control": "no-store"},
        )
        reply.set_cookie(
            SESSION_COOKIE,
            session_value(safety.token, user),
            httponly=True,
            samesite="strict",
            secure=request.url.scheme == "https",
            path="/",
        )
        return reply

    async def logout(request: Request) -> Response:
        reply = JsonDoc({"ok": True})
        reply.delete_cookie(SESSION_COOKIE, path="/", httponly=True, samesite="strict")
        return reply

    async def health(request: Request) -> dict[str, Any]:
        return await console.health()

    async def queues(request: Request) -> dict[str, Any]:
        return await console.list_queues()

    async def queue(request: Request) -> dict[str, Any]:
        return await console.queue_summary(param(request, "queue"))

    async def jobs(request: Request) -> dict[str, Any]:
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
            return await console.list_jobs(param(request, "queue"), state, n, offset, group)
        fields = request.query_params.getlist("field") or None
        return await console.find_jobs(
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

    async def job(request: Request) -> dict[str, Any]:
        return await console.job_detail(param(request, "queue"), param(request, "job"))

    async def groups(request: Request) -> dict[str, Any]:
        cursor = request.query_params.get("cursor") or "0"
        n = query_int(request, "n", GROUPS_PAGE)
        return await console.list_groups(param(request, "queue"), cursor, n)

    async def repeats(request: Request) -> dict[str, Any]:
        return await console.repeats(param(request, "queue"))

    async def metrics(request: Request) -> dict[str, Any]:
        minutes = query_int(request, "minutes", 60)
        return await console.metrics(param(request, "queue"), minutes)

    async def workers(request: Request) -> dict[str, Any]:
        n = query_int(request, "n", 100)
        return await console.workers(param(request, "queue"), n)

    async def audit(request: Request) -> dict[str, Any]:
        n = query_int(request, "n", 50)
        return await console.audit(param(request, "queue"), n)

    async def locate(request: Request) -> dict[str, Any]:
        return await console.locate_job(param(request, "job"))

    async def change(request: Request) -> tuple[str, dict[str, Any]]:
        safety.check_change(request)
        verb = param(request, "verb")
        return verb, await _read_json(request)

    def acting(fn: Callable[[Request], Awaitable[dict[str, Any]]]) -> Endpoint:
        """A change, journaled as the request's actor."""

        async def as_actor(request: Request) -> dict[str, Any]:
            with acting_as(safety.actor(request)):
                return await fn(request)

        return _json(as_actor)

    def unknown(verb: str) -> HTTPException:
        return HTTPException(404, f"no such verb: {verb}")

    async def queue_verb(request: Request) -> dict[str, Any]:
        verb, body = await change(request)
        if verb not in QUEUE_VERBS:
            raise unknown(verb)
        return await QUEUE_VERBS[verb](console, param(request, "queue"), body)

    async def group_verb(request: Request) -> dict[str, Any]:
        verb, body = await change(request)
        if verb not in GROUP_VERBS:
            raise unknown(verb)
        q, g = param(request, "queue"), param(request, "group")
        return await GROUP_VERBS[verb](console, q, g, body)

    async def job_verb(request: Request) -> dict[str, Any]:
        verb, body = await change(request)
        if verb not in JOB_VERBS:
            raise unknown(verb)
        q, j = param(request, "queue"), param(request, "job")
        return await JOB_VERBS[verb](console, q, j, body)

    async def bulk_verb(request: Request) -> dict[str, Any]:
        verb, body = await change(request)
        if verb not in BULK_VERBS:
            raise unknown(verb)
        return await console.bulk(param(request, "queue"), verb, body)

    async def repeat_verb(request: Request) -> dict[str, Any]:
        verb, body = await change(request)
        if verb not in REPEAT_VERBS:
            raise unknown(verb)
        q, name = param(request, "queue"), param(request, "name")
        return await REPEAT_VERBS[verb](console, q, name, body)

    async def events(request: Request) -> Response:
        name = request.path_params.get("queue")
        peer = request.client.host if request.client is not None else "?"
        try:
            safety.check_read(request)
            if name is not None:
                console.queue(name)  # gate the name before the stream starts
            if streams[peer] >= per_client:
                raise Denied(
                    429,
                    "unavailable",
                    "streams",
                    f"this client has {per_client} event streams open; poll instead",
                )
            if sum(streams.values()) >= MAX_STREAMS:
                raise Denied(503, "unavailable", "streams", "too many event streams; poll instead")
        except (EchoMQError, Denied) as exc:
            return error_reply(exc)
        return StreamingResponse(
            _sse(console, name, streams, peer),
            media_type="text/event-stream",
            headers={"cache-control": "no-store", "x-accel-buffering": "no"},
        )

    async def index(request: Request) -> Response:
        return FileResponse(STATIC / "index.html", headers={"cache-control": "no-store"})

    q = "/api/queues/{queue}"
    return [
        Route("/", index),
        Mount("/static", StaticFiles(directory=STATIC), name="static"),
        Route("/api/config", _json(config)),
        Route("/api/login", login, methods=["POST"]),
        Route("/api/logout", logout, methods=["POST"]),
        Route("/api/health", reading(health)),
        Route("/metrics", metrics_endpoint(console, safety.check_read, error_reply)),
        Route("/api/queues", reading(queues)),
        Route("/api/events", events),
        Route("/api/jobs/{job}", reading(locate)),
        Route(q, reading(queue)),
        Route(q + "/jobs", reading(jobs)),
        Route(q + "/groups", reading(groups)),
        Route(q + "/repeats", reading(repeats)),
        Route(q + "/metrics", reading(metrics)),
        Route(q + "/workers", reading(workers)),
        Route(q + "/audit", reading(audit)),
        Route(q + "/events", events),
        Route(q + "/jobs/{job}", reading(job)),
        Route(q + "/{verb}", acting(queue_verb), methods=["POST"]),
        Route(q + "/groups/{group}/{verb}", acting(group_verb), methods=["POST"]),
        Route(q + "/jobs/{job}/{verb}", acting(job_verb), methods=["POST"]),
        Route(q + "/repeats/{name}/{verb}", acting(repeat_verb), methods=["POST"]),
        Route(q + "/bulk/{verb}", acting(bulk_verb), methods=["POST"]),
    ]


def _release(streams: Counter[str], peer: str) -> None:
    streams[peer] -= 1
    if streams[peer] <= 0:
        del streams[peer]


async def _sse(
    console: Console, queue: str | None, streams: Counter[str], peer: str
) -> AsyncIterator[str]:
    """Server-sent events: one ``data:`` line per event, ``: ping`` once subscribed,
    and an ``event: beat`` every ``BEAT_S`` with the server's health, so the page's
    live dot tells the truth within two beats. A relay that fails (the server went
    away) ends the stream after a last beat; the browser reconnects on its own."""
    # counted from the generator's first step, so a stream never started never leaks
    streams[peer] += 1
    relay = console.events(queue)
    box: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue(maxsize=1024)

    async def pump() -> None:
        async for item in relay:
            await box.put(item)

    task = asyncio.create_task(pump())
    try:
        yield "retry: 2000\n\n"
        while True:
            try:
                item = await asyncio.wait_for(box.get(), BEAT_S)
            except asyncio.TimeoutError:
                beat = await console.health()
                yield "event: beat\ndata: " + to_json(beat) + "\n\n"
                if task.done():
                    return
                continue
            if item is None:
                yield ": ping\n\n"
            else:
                yield "data: " + to_json(item) + "\n\n"
    finally:
        _release(streams, peer)
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await task
        with contextlib.suppress(Exception):
            await relay.aclose()


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    reason = {404: "not_found", 405: "method"}.get(exc.status_code, "http")
    body = {"error": "invalid", "reason": reason, "message": exc.detail}
    return JsonDoc(body, status_code=exc.status_code, headers=exc.headers)


# -------------------------------------------------------------------------- build
def create_app(
    url: str | None = None,
    *,
    host: str = "127.0.0.1",
    token: str | None = None,
    read_only: bool = False,
    client: Any = None,
    token_file: str | None = None,
    streams_per_client: int = STREAMS_PER_CLIENT,
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

    Returns:
        The ASGI application (a Starlette app behind the host/headers guard).

    Raises:
        UnsafeBind: ``host`` is not loopback and no token is configured, or the
            token file cannot be read.
    """
    secret = resolve_token(token, token_file)
    loopback = is_loopback(host)
    if not loopback and secret is None:
        raise UnsafeBind(
            f"refusing to serve on {host!r} without a token: set {TOKEN_ENV} "
            f"or pass --token-file (or set {TOKEN_FILE_ENV})"
        )
    safety = Safety(token=secret, read_only=read_only, loopback=loopback)
    console = Console(url, client=client, read_only=read_only)

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        yield
        await console.aclose()

    app = Starlette(
        routes=_routes(console, safety, streams_per_client),
        exception_handlers={HTTPException: _http_error},
        lifespan=lifespan,
    )
    app.state.console = console
    app.state.safety = safety
    return _Guard(app, safety)


def serve(
    url: str | None = None,
    host: str = "127.0.0.1",
    port: int = 8765,
    token: str | None = None,
    read_only: bool = False,
    token_file: str | None = None,
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

    Raises:
        UnsafeBind: ``host`` is not loopback and no token is configured.
    """
    import uvicorn

    app = create_app(url, host=host, token=token, read_only=read_only, token_file=token_file)
    # uvicorn's access log would print every poll; warnings and errors only
    uvicorn.run(app, host=host, port=port, log_level="warning", timeout_graceful_shutdown=2)
