"""The console's bulk verbs by filter, one bounded piece per request (the page calls
again with the cursor, drawing its progress bar)."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from ..bulk import DEFAULT_CLEAN_BUDGET, DEFAULT_SCAN, MAX_SCAN, BulkResult
from ..errors import InvalidArgument
from .body import Body, Reply, check_keys, flag_field, int_field, text_field
from .core import ConsoleCore
from .limits import BULK_CALLS

#: POST /api/queues/{q}/bulk/<verb>
BULK_VERBS = ("reprocess", "remove", "promote", "clean")


class BulkVerbs(ConsoleCore):
    """``POST /api/queues/{q}/bulk/<verb>``: reprocess, remove, promote, clean."""

    async def bulk(self, queue: str, verb: str, body: Body) -> Reply:
        """One bounded piece of a bulk verb by filter: at most ``BULK_CALLS`` server
        calls, then the cursor to go on from (the page loops, drawing its progress).

        Body: ``state`` (``remove`` only: pending, scheduled or dead), the filter
        (``name``, ``group``, ``error``, ``since_ms``, ``until_ms``), ``dry_run``,
        ``cursor`` (from the last reply), ``scan`` (1..5000); ``clean`` takes
        ``older_than_ms`` and ``dry_run`` instead (and runs to its end: each of its
        calls deletes the oldest 500 that qualify).

        Returns:
            ``{"ok", "verb", "matched", "examined", "locked", "calls", "cursor",
            "dry_run", "done"}``: ``matched`` counts this piece only.

        Raises:
            InvalidArgument, InvalidName: a bad verb, state or filter (before any I/O).
            JobLocked: ``remove`` of ``active`` jobs (held by their workers).
            ReadOnly: a read-only console (a dry run too: it is the first step of a change).
        """
        if verb not in BULK_VERBS:
            raise InvalidArgument(f"unknown bulk verb {verb!r}")
        self._writable()
        q = self.queue(queue)
        dry = flag_field(body, "dry_run")
        if verb == "clean":
            check_keys(body, ("older_than_ms", "dry_run"))
            age = int_field(body, "older_than_ms", None, 0)
            res: BulkResult = await q.clean(age, dry_run=dry, budget=DEFAULT_CLEAN_BUDGET)
            return {"ok": True, **asdict(res), "done": res.done}
        filters = ("name", "group", "error", "since_ms", "until_ms")
        check_keys(body, ("state", "dry_run", "cursor", "scan", *filters))
        kw: dict[str, Any] = {k: body[k] for k in filters if body.get(k) not in (None, "")}
        cursor = body.get("cursor")
        if cursor is not None and not isinstance(cursor, str):
            raise InvalidArgument(f"cursor must be a string, got {cursor!r}")
        scan = int_field(body, "scan", DEFAULT_SCAN, 1, MAX_SCAN)
        common: dict[str, Any] = {
            "dry_run": dry,
            "cursor": cursor,
            "scan": scan,
            "max_calls": BULK_CALLS,
        }
        if verb == "remove":
            state = text_field(body, "state")
            res = await q.remove_jobs(state, **kw, **common)
        elif verb == "reprocess":
            check_keys(body, ("dry_run", "cursor", "scan", *filters))
            res = await q.reprocess_jobs(**kw, **common)
        else:
            check_keys(body, ("dry_run", "cursor", "scan", *filters))
            res = await q.promote_jobs(**kw, **common)
        return {"ok": True, **asdict(res), "done": res.done}
