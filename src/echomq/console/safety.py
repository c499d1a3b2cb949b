"""The console's safety model: loopback binds, tokens, sessions, who a request is, and
the gates a read and a change pass before any handler runs.

- the console binds to loopback by default; on a loopback bind every request must
  name a loopback ``Host`` (a DNS-rebinding page cannot reach it under another name);
- a change is a ``POST`` with a JSON body, a custom header (``X-EMQ-Token`` or
  ``X-Requested-With``: a browser cannot send either cross-site without a CORS
  preflight, which the app never approves), and no foreign ``Origin`` / ``Referer``
  / ``Sec-Fetch-Site``;
- with a token configured every request for data must carry it: ``X-EMQ-Token``,
  ``Authorization: Bearer`` or ``Basic`` (any user, the token as password), or the
  session cookie ``POST /api/login`` sets;
- every change names its actor: ``console:<user>@<client address>``.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import ipaddress
import os
import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from starlette.requests import Request

from .core import UnsafeBind

#: The environment variable a token may come from.
TOKEN_ENV = "EMQ_CONSOLE_TOKEN"
#: The environment variable naming a file the token is read from.
TOKEN_FILE_ENV = "EMQ_CONSOLE_TOKEN_FILE"
#: The session cookie ``POST /api/login`` sets.
SESSION_COOKIE = "emq_session"


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
    return user if same_secret(cookie, session_value(token, user)) else None


def same_secret(given: str, expected: str) -> bool:
    """Whether ``given`` is ``expected``, compared in constant time."""
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
        """Every check a state-changing request passes before its handler runs.

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
            return "token" if same_secret(given, self.token) else None
        scheme, _, value = headers.get("authorization", "").partition(" ")
        if scheme.lower() == "bearer":
            return "token" if same_secret(value.strip(), self.token) else None
        if scheme.lower() == "basic":
            try:
                pair = base64.b64decode(value.strip(), validate=True).decode()
            except ValueError:
                return None
            name, _, secret = pair.partition(":")
            return user_name(name, "token") if same_secret(secret, self.token) else None
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
