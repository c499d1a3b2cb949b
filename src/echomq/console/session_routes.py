"""The console's session routes: ``/api/config`` (what the page needs, and whether it
must log in), ``POST /api/login`` (the session cookie) and ``POST /api/logout``."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from .handlers import Console
from .safety import SESSION_COOKIE, Denied, Safety, same_secret, session_value, user_name
from .web import JsonDoc, error_reply, read_json


class SessionRoutes:
    """The endpoints that answer without the token (the page must reach them to log in).

    Args:
        per_client: event streams one client address may hold (the page is told).
    """

    def __init__(self, console: Console, safety: Safety, per_client: int) -> None:
        self.console, self.safety, self.per_client = console, safety, per_client

    async def config(self, request: Request) -> dict[str, Any]:
        """``GET /api/config``: the console's settings, or only that a login is needed."""
        if not self.safety.authenticated(request):
            return {"token_required": True, "authenticated": False}
        reply = self.console.config()
        reply["token_required"] = self.safety.token is not None
        reply["authenticated"] = True
        reply["actor"] = self.safety.actor(request)
        reply["streams_per_client"] = self.per_client
        return reply

    async def login(self, request: Request) -> Response:
        """``POST /api/login``: check the token, set the session cookie."""
        try:
            headers = request.headers
            site = headers.get("sec-fetch-site")
            if site is not None and site not in ("same-origin", "none"):
                raise Denied(403, "forbidden", "cross_site", f"Sec-Fetch-Site is {site}")
            if "x-requested-with" not in headers:
                raise Denied(403, "forbidden", "header", "a login needs X-Requested-With")
            body = await read_json(request)
            given = body.get("token")
            if self.safety.token is None:
                return JsonDoc({"ok": True, "token_required": False})
            if not isinstance(given, str) or not same_secret(given, self.safety.token):
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
            session_value(self.safety.token, user),
            httponly=True,
            samesite="strict",
            secure=request.url.scheme == "https",
            path="/",
        )
        return reply

    async def logout(self, request: Request) -> Response:
        """``POST /api/logout``: drop the session cookie."""
        reply = JsonDoc({"ok": True})
        reply.delete_cookie(SESSION_COOKIE, path="/", httponly=True, samesite="strict")
        return reply
