"""What the operator's bulk verbs and the audit journal answer."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class BulkResult:
    """Where a bulk verb stands (the final answer, and each progress report).

    Attributes:
        verb: ``reprocess_jobs``, ``remove_jobs``, ``promote_jobs`` or ``clean``.
        matched: jobs acted on (on a dry run: that would be).
        examined: members the walk looked at.
        locked: matching jobs skipped because a worker holds them (``remove_jobs``).
        calls: server calls made.
        cursor: where to resume (``cursor=``), or ``None`` once the walk is done.
        dry_run: nothing was written.
    """

    verb: str
    matched: int = 0
    examined: int = 0
    locked: int = 0
    calls: int = 0
    cursor: str | None = None
    dry_run: bool = False

    @property
    def done(self) -> bool:
        """The walk reached the end."""
        return self.cursor is None


@dataclass(frozen=True)
class AuditEntry:
    """One journaled operator act.

    Attributes:
        id: the stream entry id (``<ms>-<seq>``).
        time_ms: the server's clock when the verb ran, in ms since the epoch.
        verb: the verb (``pause``, ``remove_job``, ``reprocess_jobs``, ...).
        args: the verb's arguments as the script recorded them.
        outcome: ``ok``; ``more`` or ``done`` for a bounded step; ``gone`` for the
            obliterate call that finished (journaled with ``keep_audit``).
        count: how many jobs (or settings) the call changed.
        actor: who the caller said it was (``""`` when not said).
    """

    id: str
    time_ms: int
    verb: str
    args: dict[str, Any]
    outcome: str
    count: int
    actor: str
