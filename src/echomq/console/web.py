"""The console's HTTP plumbing: JSON replies, errors as statuses, reading a body and
the query string, and the guard every request passes (``Host`` and security headers)."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

import redis
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
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
from ..views import to_json
from .core import ReadOnly
from .safety import Denied, Safety

#: The largest request body accepted (a payload edit is the biggest).
MAX_BODY = 8 * 1024 * 1024

#: The headers every reply carries (no framing, no sniffing, nothing from elsewhere).
SECURITY_HEADERS = [
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


class Encoded(bytes):
    """A reply already written as JSON: a shared read's, written once and sent as it is
    to every request that shares the read (fifty operators, one encoding)."""


#: What a JSON endpoint's handler answers: a document, or one already written.
Body = dict[str, Any] | Encoded


def encoded(doc: Any) -> Encoded:
    """``doc`` written as JSON by the tools' one codec."""
    return Encoded(to_json(doc).encode("utf-8"))


class JsonDoc(Response):
    """A JSON reply written by the tools' one codec (:func:`echomq.views.to_json`)."""

    media_type = "application/json"

    def render(self, content: Any) -> bytes:
        if isinstance(content, Encoded):
            return content
        return to_json(content).encode("utf-8")


def error_reply(exc: Exception) -> Response:
    """The JSON reply and status for an error a handler or a check raised."""
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


async def read_json(request: Request) -> dict[str, Any]:
    """The request's JSON object (an empty body reads as ``{}``).

    Raises:
        Denied: over ``MAX_BODY`` (413), not JSON or not an object (400).
    """
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


class Guard:
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
                message["headers"] = [*message.get("headers", []), *SECURITY_HEADERS]
            await send(message)

        await self.app(scope, receive, send_with_headers)


Endpoint = Callable[[Request], Awaitable[Response]]


def json_endpoint(fn: Callable[[Request], Awaitable[Body]]) -> Endpoint:
    """Wrap a handler call: its dict as JSON, its typed error as a typed reply."""

    async def endpoint(request: Request) -> Response:
        try:
            body = await fn(request)
        except (EchoMQError, Denied, redis.RedisError) as exc:
            return error_reply(exc)
        return JsonDoc(body, headers={"cache-control": "no-store"})

    return endpoint


def param(request: Request, name: str) -> str:
    """Path parameter ``name``."""
    value: str = request.path_params[name]
    return value


def query_int(request: Request, name: str, default: int) -> int:
    """Query parameter ``name`` as an integer (absent or empty: ``default``).

    Raises:
        InvalidArgument: it is not an integer.
    """
    text = request.query_params.get(name)
    if text is None or text == "":
        return default
    try:
        return int(text)
    except ValueError:
        raise InvalidArgument(f"{name} must be an integer, got {text!r}") from None


def query_text(request: Request, name: str) -> str | None:
    """Query parameter ``name`` (absent or empty: ``None``)."""
    return request.query_params.get(name) or None


async def http_error(request: Request, exc: Exception) -> Response:
    """Starlette's own errors (no such route, wrong method) as the console's JSON."""
    assert isinstance(exc, HTTPException)
    reason = {404: "not_found", 405: "method"}.get(exc.status_code, "http")
    body = {"error": "invalid", "reason": reason, "message": exc.detail}
    return JsonDoc(body, status_code=exc.status_code, headers=exc.headers)
