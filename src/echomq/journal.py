"""The audit journal: who did what to a queue, read back newest first.

Every operator verb's script appends one entry to the capped stream
``emq:{q}:audit`` (about the newest 10,000 entries are kept) after its last check, so
a refused call writes none and a done call cannot miss it (a call that
changed nothing, such as pausing a paused queue, writes none either). The entry id is the
server's clock; the fields are the verb, its arguments (JSON), the outcome, a count
and the actor the caller named (``Queue(actor=...)``, the CLI's ``user@host``, the
console's user). Worker-facing verbs (``update_progress``, ``add_log``, ``lock_job``,
``unlock_job``) and the lifecycle (enqueue, claim, settle, promote, reap) are not
journaled: they are the queue's traffic, not an operator's act.
"""

from __future__ import annotations

import getpass
import json
import os
import socket
from typing import Any

from .context import Context, as_str, positive
from .results import AuditEntry as AuditEntry
from .scripts import Cmd, Plan

#: How many entries ``audit()`` answers when the caller does not say.
DEFAULT_AUDIT_ENTRIES = 50


def default_actor() -> str:
    """``user@host:pid`` of this process (the actor when ``Queue(actor=...)`` is not set)."""
    try:
        user = getpass.getuser()
    except Exception:  # no login name (a container with no passwd entry)
        user = str(os.getuid()) if hasattr(os, "getuid") else "unknown"
    return f"{user}@{socket.gethostname()}:{os.getpid()}"


def request_id() -> str:
    """A fresh request id for one call of a re-sendable audited verb (16 hex digits):
    every send of that call carries it, so its audit entry is written once."""
    return os.urandom(8).hex()


def _entry(raw: Any) -> AuditEntry:
    eid, fields = as_str(raw[0]), raw[1]
    items = fields.items() if isinstance(fields, dict) else zip(fields[::2], fields[1::2])
    f = {as_str(k): as_str(v) for k, v in items}
    try:
        args = json.loads(f.get("args", "{}"))
    except ValueError:
        args = {"raw": f.get("args", "")}
    return AuditEntry(
        id=eid,
        time_ms=int(eid.split("-", 1)[0]),
        verb=f.get("verb", ""),
        args=args if isinstance(args, dict) else {"value": args},
        outcome=f.get("outcome", ""),
        count=int(f.get("count", "0") or 0),
        actor=f.get("actor", ""),
    )


def audit(ctx: Context, n: int = DEFAULT_AUDIT_ENTRIES) -> Plan[list[AuditEntry]]:
    """The newest ``n`` entries of the queue's audit journal, newest first. Read-only.

    Args:
        n: how many entries (at most).

    Raises:
        InvalidArgument: ``n`` below 1, before any I/O.
    """
    positive(n, "n")
    raw = yield Cmd(("XREVRANGE", ctx.keys.audit, "+", "-", "COUNT", str(n)))
    return [_entry(e) for e in raw or []]
