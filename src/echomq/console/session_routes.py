"""The console's session routes: ``/api/config`` (what the page needs: whether it must
log in, and the user's role), ``POST /api/login`` (a session and its cookie) and
``POST /api/logout`` (the session ends on the server)."""

from __future__ import annotations

import math
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from .access import Principal
from .handlers import Console
from .safety import Denied, Safety, cookie_name, user_name
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
        who = self.safety.who(request)
        if who is None:
            return {"token_required": True, "authenticated": False}
        reply = self.console.config()
        reply["token_required"] = self.safety.token_required
        reply["authenticated"] = True
        reply["actor"] = self.safety.actor(request)
        reply["user"] = who.user
        reply["role"] = who.role
        reply["streams_per_client"] = self.per_client
        return reply

    async def login(self, request: Request) -> Response:
        """``POST /api/login``: check the token, open a session, set its cookie."""
        try:
            headers = request.headers
            site = headers.get("sec-fetch-site")
            if site is not None and site not in ("same-origin", "none"):
                raise Denied(403, "forbidden", "cross_site", f"Sec-Fetch-Site is {site}")
            if "x-requested-with" not in headers:
                raise Denied(403, "forbidden", "header", "a login needs X-Requested-With")
            body = await read_json(request)
            given = body.get("token")
            if not self.safety.token_required:
                return JsonDoc({"ok": True, "token_required": False})
            found = self.safety.credentials.match(given) if isinstance(given, str) else None
            if found is None:
                raise Denied(401, "unauthorized", "token", "wrong token")
        except Denied as exc:
            return error_reply(exc)
        # a users file names its user; a role token takes the name the page gives
        who = Principal(found.user or user_name(body.get("user")), found.role)
        sessions = self.safety.sessions
        old = request.cookies.get(cookie_name(request))
        if old is not None:
            sessions.revoke(old)  # a second login replaces the first session
        sid = sessions.open(who)
        shown = who.capped(self.safety.read_only)
        reply = JsonDoc(
            {"ok": True, "token_required": True, "user": shown.user, "role": shown.role},
            headers={"cache-control": "no-store"},
        )
        reply.set_cookie(
            cookie_name(request),
            sid,
            max_age=max(1, math.ceil(sessions.ttl_s)),  # the browser forgets it too
            httponly=True,
            samesite="strict",
            secure=request.url.scheme == "https",
            path="/",
        )
        return reply

    async def logout(self, request: Request) -> Response:
        """``POST /api/logout``: end the session on the server and drop its cookie (a
        copy of the cookie no longer opens anything)."""
        sid = request.cookies.get(cookie_name(request))
        revoked = self.safety.sessions.revoke(sid) if sid is not None else False
        reply = JsonDoc({"ok": True, "revoked": revoked})
        reply.delete_cookie(cookie_name(request), path="/", httponly=True, samesite="strict")
        return reply
