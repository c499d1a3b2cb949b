"""The console's safety model: loopback binds, tokens, sessions, who a request is, and
the gates a read and a change pass before any handler runs.

- the console binds to loopback by default; on a loopback bind every request must
  name a loopback ``Host`` (a DNS-rebinding page cannot reach it under another name);
- a change is a ``POST`` with a JSON body, a custom header (``X-EMQ-Token`` or
  ``X-Requested-With``: a browser cannot send either cross-site without a CORS
  preflight, which the app never approves), and no foreign ``Origin`` / ``Referer``
  / ``Sec-Fetch-Site``;
- with credentials configured (:mod:`.access`: the console token, per-role tokens, a
  users file) every request for data must carry one: ``X-EMQ-Token``,
  ``Authorization: Bearer`` or ``Basic`` (the token as password), or the session
  cookie ``POST /api/login`` sets; its role decides what it may change;
- every change names its actor: ``console:<user>@<client address>``.
"""

from __future__ import annotations

import base64
import functools
import hmac
import ipaddress
import os
import re
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from starlette.requests import Request

from .access import Credentials, Principal, Sessions, rank
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


@functools.lru_cache(maxsize=64)
def _loopback_host(host_header: str) -> bool:
    # every request asks with the same few Host values; a bounded cache answers them
    return is_loopback(urlsplit("//" + host_header).hostname or "")


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


def cookie_name(request: Request) -> str:
    """The session cookie's name on this console: ``emq_session_<port>``, so two
    consoles on one host (cookies ignore ports) never take each other's session."""
    # the port as ``request.url.port`` reads it (the Host header's, else the socket's),
    # without building the URL: this runs on every request that carries a session
    scope = request.scope
    host = request.headers.get("host")
    port = _host_port(host) if host else (scope.get("server") or ("", None))[1]
    return f"{SESSION_COOKIE}_{port or (443 if scope.get('scheme') == 'https' else 80)}"


def _host_port(host: str) -> int | None:
    """The port a ``Host`` header names (``name:port``, ``[v6]:port``), or ``None``."""
    _, sep, port = host.rsplit("]", 1)[-1].rpartition(":")
    return int(port) if sep and port.isascii() and port.isdigit() else None


def same_secret(given: str, expected: str) -> bool:
    """Whether ``given`` is ``expected``, compared in constant time."""
    return hmac.compare_digest(given.encode(), expected.encode())


@dataclass(frozen=True)
class Safety:
    """The safety settings one app enforces.

    Attributes:
        credentials: the tokens that open the console (none: everyone is ``local``,
            an admin, on loopback only).
        read_only: refuse every change (every role is capped at viewer).
        loopback: the app is bound to loopback, so ``Host`` must be loopback too.
        sessions: the sessions ``POST /api/login`` opened (this process only).
    """

    credentials: Credentials
    read_only: bool
    loopback: bool
    sessions: Sessions = field(default_factory=Sessions)

    @property
    def token_required(self) -> bool:
        """Whether a request for data must carry a credential."""
        return bool(self.credentials)

    def check_host(self, host_header: str) -> None:
        """Refuse a non-loopback ``Host`` on a loopback bind (DNS rebinding)."""
        if not self.loopback:
            return
        if not _loopback_host(host_header):
            raise Denied(403, "forbidden", "host", f"host {host_header!r} is not loopback")

    def check_change(self, request: Request, need: str = "operator") -> None:
        """Every check a state-changing request passes before its handler runs.

        Args:
            need: the least role the change takes (``operator``, or ``admin``).

        Raises:
            Denied: cross-site (403), wrong content type (415), no custom header
                (403), read-only (403), missing or wrong token (401), a role below
                ``need`` (403, reason ``role``).
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
        who = self.who(request)
        if who is not None and rank(who.role) < rank(need):
            raise Denied(
                403, "forbidden", "role", f"a {who.role} may not do this; it takes an {need}"
            )

    def authenticated(self, request: Request) -> bool:
        """Whether the request carries a credential (always true without any)."""
        return self.who(request) is not None

    def who(self, request: Request) -> Principal | None:
        """Who the request is, with its role (capped at viewer on a read-only console):
        the token's user (a users file names one) or the Basic user, the session's,
        ``token`` for a bare token, ``local`` on a console without credentials;
        ``None`` when unauthenticated."""
        found = self._who(request)
        return None if found is None else found.capped(self.read_only)

    def _who(self, request: Request) -> Principal | None:
        if not self.credentials:
            return Principal("local", "admin")
        headers = request.headers
        given = headers.get("x-emq-token")
        scheme, _, value = headers.get("authorization", "").partition(" ")
        if given is None and scheme.lower() == "bearer":
            given = value.strip()
        if given is not None:
            p = self.credentials.match(given)
            return None if p is None else Principal(p.user or "token", p.role)
        if scheme.lower() == "basic":
            try:
                pair = base64.b64decode(value.strip(), validate=True).decode()
            except ValueError:
                return None
            name, _, secret = pair.partition(":")
            p = self.credentials.match(secret)
            return None if p is None else Principal(p.user or user_name(name, "token"), p.role)
        sid = request.cookies.get(cookie_name(request))
        return None if sid is None else self.sessions.get(sid)

    def user(self, request: Request) -> str | None:
        """Who the request is (see :meth:`who`), ``None`` when unauthenticated."""
        who = self.who(request)
        return None if who is None else who.user

    def actor(self, request: Request) -> str:
        """The actor a change journals: ``console:<user>@<client address>``."""
        peer = request.client.host if request.client is not None else "?"
        return f"console:{self.user(request) or 'anonymous'}@{peer}"

    def check_read(self, request: Request) -> None:
        """Refuse a request for data without the token (when one is set).

        Raises:
            Denied: 401 (``X-EMQ-Token``, ``Authorization: Bearer`` or ``Basic`` with
                a token as password, or a session's cookie, let it through).
        """
        if not self.authenticated(request):
            raise Denied(401, "unauthorized", "token", "a valid token is required")
