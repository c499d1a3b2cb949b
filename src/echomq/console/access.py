"""Who may do what on the console: roles, the credentials that grant them, sessions.

**Roles**, each allowing what the one before it does: ``viewer`` reads (every page,
stream and ``/metrics``); ``operator`` also acts (pause, drain, retry, remove, bulk
verbs, group pause and weight, repeatables); ``admin`` alone obliterates a queue and
changes its limits (:data:`ADMIN_VERBS`). A read-only console caps every role at
``viewer``; a console with no credential at all lets everyone in as ``local``, an
admin (on loopback only: a wider bind refuses to start without a credential).

**Credentials**: the console token (``EMQ_CONSOLE_TOKEN``, a token file) is an admin's;
``EMQ_CONSOLE_OPERATOR_TOKEN`` and ``EMQ_CONSOLE_VIEWER_TOKEN`` grant those roles; a
users file names people: one ``NAME ROLE sha256:HEX`` per line, ``HEX`` the SHA-256 of
that user's token (``printf %s "$TOKEN" | sha256sum``), so the file holds no token.
In memory too only digests are kept, and no token is ever logged or echoed.

**Sessions**: ``POST /api/login`` opens one: a random id (never derived from the token)
kept by this console process with its user, role and expiry (``SESSION_TTL_S``); the
cookie carries the id alone, is named after the console's port (two consoles on one
host keep their own) and dies with the session: at its expiry, at logout (revoked on
the server, so a copied cookie stops working too) or when the console restarts.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
import time
from collections import OrderedDict
from dataclasses import dataclass

from .core import UnsafeBind

#: The roles, least first.
ROLES = ("viewer", "operator", "admin")
#: The changes only an admin makes: ``(scope, verb)`` of the change routes.
ADMIN_VERBS = frozenset({("queue", "obliterate"), ("group", "limit")})
#: The environment variables of the per-role tokens and of the users file.
VIEWER_TOKEN_ENV = "EMQ_CONSOLE_VIEWER_TOKEN"
OPERATOR_TOKEN_ENV = "EMQ_CONSOLE_OPERATOR_TOKEN"
USERS_FILE_ENV = "EMQ_CONSOLE_USERS_FILE"
#: How long a session lives (seconds): a working day.
SESSION_TTL_S = 12 * 3600.0
#: Sessions one console keeps at most (the oldest goes first).
MAX_SESSIONS = 10_000


def rank(role: str) -> int:
    """A role's place in :data:`ROLES` (what it may do grows with it)."""
    return ROLES.index(role)


def digest(token: str) -> str:
    """The SHA-256 of a token, hex: what the console keeps instead of the token."""
    return hashlib.sha256(token.encode()).hexdigest()


@dataclass(frozen=True)
class Principal:
    """Who a request is: a user name (``None``: the credential names nobody) and a role."""

    user: str | None
    role: str

    def capped(self, read_only: bool) -> Principal:
        """This principal on a read-only console: at most a viewer."""
        return Principal(self.user, "viewer") if read_only else self


class Credentials:
    """The tokens that open the console, kept as digests, each with its principal."""

    def __init__(self) -> None:
        self._by_digest: dict[str, Principal] = {}

    def __bool__(self) -> bool:
        return bool(self._by_digest)

    def add(self, token_digest: str, principal: Principal) -> None:
        """Grant ``principal`` to the token whose SHA-256 is ``token_digest``."""
        if principal.role not in ROLES:
            raise UnsafeBind(f"unknown role {principal.role!r} (want one of {', '.join(ROLES)})")
        self._by_digest[token_digest.lower()] = principal

    def match(self, given: str) -> Principal | None:
        """The principal of token ``given``, or ``None``; every digest is compared in
        constant time."""
        mine = digest(given)
        found = None
        for known, principal in self._by_digest.items():
            if hmac.compare_digest(known, mine):
                found = principal
        return found


def load_users(path: str, into: Credentials) -> None:
    """Read a users file (``NAME ROLE sha256:HEX`` per line; ``#`` comments) into ``into``.

    Raises:
        UnsafeBind: the file cannot be read, or a line is malformed (named by number).
    """
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except OSError as exc:
        raise UnsafeBind(f"cannot read the users file {path!r}: {exc}") from None
    count = 0
    for number, raw in enumerate(lines, 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        parts = line.split()
        hexed = parts[2][len("sha256:") :] if len(parts) == 3 else ""
        if (
            len(parts) != 3
            or not parts[2].startswith("sha256:")
            or len(hexed) != 64
            or any(c not in "0123456789abcdefABCDEF" for c in hexed)
            or parts[1] not in ROLES
            or not parts[0].replace(".", "").replace("_", "").replace("-", "").isalnum()
            or len(parts[0]) > 64
        ):
            raise UnsafeBind(
                f"users file {path!r} line {number}: want NAME ROLE sha256:HEX "
                f"(ROLE one of {', '.join(ROLES)})"
            )
        into.add(hexed, Principal(parts[0], parts[1]))
        count += 1
    if not count:
        raise UnsafeBind(f"the users file {path!r} names no user")


def credentials(
    admin_token: str | None,
    *,
    operator_token: str | None = None,
    viewer_token: str | None = None,
    users_file: str | None = None,
) -> Credentials:
    """Every credential of one console: the admin token, the per-role tokens (given,
    else from the environment) and the users file (given, else ``EMQ_CONSOLE_USERS_FILE``).

    Raises:
        UnsafeBind: an unreadable or malformed users file.
    """
    creds = Credentials()
    operator_token = operator_token or os.environ.get(OPERATOR_TOKEN_ENV) or None
    viewer_token = viewer_token or os.environ.get(VIEWER_TOKEN_ENV) or None
    for token, role in ((viewer_token, "viewer"), (operator_token, "operator")):
        if token:
            creds.add(digest(token), Principal(None, role))
    if admin_token:
        creds.add(digest(admin_token), Principal(None, "admin"))
    path = users_file or os.environ.get(USERS_FILE_ENV)
    if path:
        load_users(path, creds)
    return creds


class Sessions:
    """The sessions one console process holds: id -> (principal, expiry), bounded."""

    def __init__(self, ttl_s: float = SESSION_TTL_S, limit: int = MAX_SESSIONS) -> None:
        self.ttl_s, self.limit = ttl_s, limit
        self._open: OrderedDict[str, tuple[Principal, float]] = OrderedDict()

    def open(self, principal: Principal) -> str:
        """A new session for ``principal``; answers its id (the cookie's value)."""
        sid = secrets.token_urlsafe(32)
        self._open[sid] = (principal, time.monotonic() + self.ttl_s)
        while len(self._open) > self.limit:
            self._open.popitem(last=False)
        return sid

    def get(self, sid: str) -> Principal | None:
        """The session's principal, or ``None`` (unknown, revoked or expired)."""
        held = self._open.get(sid)
        if held is None:
            return None
        principal, until = held
        if time.monotonic() >= until:
            del self._open[sid]
            return None
        return principal

    def revoke(self, sid: str) -> bool:
        """End a session (logout); answers whether it was open."""
        return self._open.pop(sid, None) is not None
