"""The exit statuses of ``emq``: one per outcome an operator's script may branch on.

``docs/cli.md`` prints this table; a test checks the two agree.
"""

from __future__ import annotations

OK = 0
#: An unexpected error: a script failure, a keyspace version mismatch, ...
FAILURE = 1
#: A usage error: an unknown option, malformed JSON, an argument out of range.
USAGE = 2
#: No server answers at the URL (or at the default address when none is given).
NO_SERVER = 3
#: A malformed job id, queue, group, dedup or repeat name; nothing was sent.
MALFORMED = 4
#: A destructive verb was not confirmed (no ``--yes`` off a terminal, or answered no).
NOT_CONFIRMED = 5
#: An optional extra (the console) is not installed.
MISSING_EXTRA = 6
#: ``emq demo``: a step did not behave as the runbook says.
DEMO_FAILED = 7
#: No queue of that name has a key on the server (a typo?); nothing was sent but reads.
NO_QUEUE = 8
#: Interrupted (Ctrl-C) before the command finished.
INTERRUPTED = 130

#: A refusal (nothing changed) exits with the status of its reason.
REFUSED: dict[str, int] = {
    "gone": 10,
    "locked": 11,
    "not_dead": 12,
    "not_pending": 13,
    "not_paused": 14,
    "active": 15,
    "stale": 16,
    "not_scheduled": 17,
    "not_active": 18,
    "not_finished": 20,
    "not_waiting": 21,
}
_REASON_MEANING = {
    "gone": "no such job",
    "locked": "a worker holds the job (job remove)",
    "not_dead": "the job is not dead (job reprocess)",
    "not_pending": "the job is not pending (group reassign)",
    "not_paused": "the queue is not paused (obliterate)",
    "active": "jobs are in flight; --force deletes them too (obliterate)",
    "stale": "the fencing token is not the current one",
    "not_scheduled": "the job is not scheduled (job promote)",
    "not_active": "the job is not running (job cancel)",
    "not_finished": "the job is neither completed nor dead (job rerun)",
    "not_waiting": "the job is not waiting for its children (flow release, fail, cancel)",
}
#: A refusal whose reason this table does not know (a newer server script).
REFUSED_OTHER = 19


def meaning(reason: str) -> str:
    """What a refusal's reason means, in words (``another reason`` when unknown)."""
    return _REASON_MEANING.get(reason, "another reason")


def for_reason(reason: str) -> int:
    """The exit status of a refusal with ``reason``."""
    return REFUSED.get(reason, REFUSED_OTHER)


def table() -> list[tuple[int, str]]:
    """Every status with what it means, in order (the table ``docs/cli.md`` shows)."""
    rows = [
        (OK, "success"),
        (FAILURE, "unexpected error (script error, keyspace version mismatch, ...)"),
        (
            USAGE,
            "usage error: unknown option, an option given twice, malformed JSON, "
            "argument out of range",
        ),
        (NO_SERVER, "no server answers at the URL"),
        (MALFORMED, "malformed job id, queue, group, dedup or repeat name (nothing sent)"),
        (NOT_CONFIRMED, "destructive verb not confirmed (no --yes off a terminal, or declined)"),
        (MISSING_EXTRA, "optional extra not installed (console)"),
        (DEMO_FAILED, "a demo step did not behave as the runbook says"),
        (NO_QUEUE, "no queue of that name on the server (--create to make one; nothing sent)"),
    ]
    rows += [
        (code, f"refused: {reason}: {_REASON_MEANING[reason]}") for reason, code in REFUSED.items()
    ]
    rows += [(REFUSED_OTHER, "refused: another reason"), (INTERRUPTED, "interrupted (Ctrl-C)")]
    return rows
