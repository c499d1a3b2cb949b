"""The server's transitions: one declaration per Lua script under ``lua/``.

A transition is one script, atomic on the server. What is true of the script wherever
it is called from is declared here, once:

- ``resend``: whether the transport may send the call once more after a write whose
  reply was lost (``why``: the reason, or why not). A transition that is not re-sent
  raises :class:`~echomq.errors.OutcomeUnknown` on a lost reply.
- ``native``: the module command that stands for the script (its *twin*, same keys,
  arguments, replies and writes; see docs/native.md), if any; ``gated`` when the
  command reads the queue's pause itself (the claim plan then skips its own read).
- ``journals``: the script writes one audit entry (``audit(...)`` in its body).

The verbs that run these transitions are declared in :mod:`echomq.verbs`; the transport's
re-send table, the native executor's table and the tests' enumerations are derived from
both. ``tests/test_verb_table.py`` holds this table to the scripts themselves (every file
declared, every ``audit(...)`` call declared, every twin's command registered by the
module's source).

This module imports nothing of echomq's: the lowest layers read it.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Transition:
    """One Lua script's facts (see the module's docstring)."""

    script: str
    resend: bool
    why: str
    native: str | None = None
    gated: bool = False
    journals: bool = False


def _t(
    script: str,
    resend: bool,
    why: str,
    *,
    native: str | None = None,
    gated: bool = False,
    journals: bool = False,
) -> Transition:
    return Transition(script, resend, why, native, gated, journals)


_ONE_MORE_SWEEP = "bounded sweep: a repeat is one more sweep"
_FLAG = "sets or clears a flag: a repeat finds it so"
_READ = "a read"
_REQUEST = "its request id answers a repeat with the first run's reply (lib/requests)"
_BULK = (
    "a bulk step: a repeat would walk from a cursor the first call moved past and count "
    "(or delete) again"
)

#: Every transition, by script name.
TRANSITIONS: dict[str, Transition] = {
    t.script: t
    for t in (
        # ---- the lifecycle (producer and worker paths)
        _t(
            "enqueue",
            True,
            "the settled tombstone and the row check answer a repeat 'duplicate'",
            native="EMQ.ENQUEUE",
        ),
        _t(
            "claim",
            True,
            "the claim request id answers a repeat with the same jobs",
            native="EMQ.CLAIM",
            gated=True,
        ),
        _t(
            "complete",
            True,
            "a repeat finds no row: JobGone, which the worker reads as settled",
            native="EMQ.COMPLETE",
        ),
        _t(
            "retry",
            False,
            "a repeat would count a second failure or answer stale for a change that happened",
            native="EMQ.RETRY",
        ),
        _t("delay", False, "a repeat answers stale for a change that happened"),
        _t("rate_limited", False, "a repeat answers stale for a change that happened"),
        _t("release", False, "a repeat answers stale for a change that happened"),
        _t(
            "extend_lock",
            True,
            "a later deadline again, fenced by the token",
            native="EMQ.EXTEND",
        ),
        _t("promote", True, _ONE_MORE_SWEEP),
        _t("reap", True, _ONE_MORE_SWEEP),
        _t("check_stalled", False, "a repeat would count a stall twice"),
        # ---- flows
        _t(
            "resolve_child",
            True,
            "keyed by child ref: a repeat finds the refs gone from the parent's deps and "
            "writes nothing",
        ),
        _t(
            "enqueue_flow",
            False,
            "a repeat would write the part's jobs again (their ids are in the call, but a "
            "child may have run and gone since)",
        ),
        _t("outbox_read", True, _READ),
        # ---- flows: the operator plane (docs/flows-operations.md)
        _t("flow_nodes", True, _READ),
        _t("flow_impact", True, _READ),
        _t(
            "release_parent",
            False,
            "a repeat answers not_waiting for a change that happened",
            journals=True,
        ),
        _t(
            "fail_parent",
            False,
            "a repeat answers not_waiting for a change that happened",
            journals=True,
        ),
        _t(
            "cancel_flow",
            False,
            "the root's call: a repeat answers not_waiting for a change that happened",
            journals=True,
        ),
        _t("outbox_done", True, "removes by child id: a repeat finds them gone"),
        # ---- reads
        _t("counts", True, _READ),
        _t("browse", True, _READ),
        _t("groups", True, _READ),
        _t("get_job_logs", True, _READ),
        _t("get_job_log_entries", True, _READ),
        _t("obs_queue", True, _READ),
        _t("obs_groups", True, _READ),
        # ---- the operator plane: queue scope
        _t("pause", True, _FLAG, journals=True),
        _t("resume", True, _FLAG, journals=True),
        _t("drain", False, "a repeat would lose the first call's count", journals=True),
        _t(
            "obliterate",
            True,
            "bounded and 'call again until True': a repeat is the next call",
            journals=True,
        ),
        _t(
            "set_retention",
            True,
            "sets the same limits again; its trim is one more bounded sweep",
            journals=True,
        ),
        # ---- flow control
        _t("set_limits", True, _FLAG, journals=True),
        _t("set_group_rate", True, _FLAG, journals=True),
        # ---- the operator plane: job scope
        _t("update_data", True, "replaces a value with the same value", journals=True),
        _t(
            "update_progress",
            True,
            "replaces a value with the same value (its event is published again)",
        ),
        _t("add_log", False, "a repeat would append the line twice"),
        _t("remove_job", True, _REQUEST, journals=True),
        _t(
            "reprocess_job",
            False,
            "a repeat answers not_dead for a change that happened",
            native="EMQ.REPROCESS",
            journals=True,
        ),
        _t(
            "rerun_job",
            True,
            "the copy's id is in the call: a repeat finds the original linked to it and "
            "answers it, writing nothing",
            journals=True,
        ),
        _t(
            "release_dedup",
            True,
            "a repeat finds the key free: 0, true of the moment it answers",
            journals=True,
        ),
        _t("dedup_owner", True, _READ),
        _t("lock_job", True, _FLAG),
        _t("unlock_job", True, "a repeat finds no lock: 0, true of the moment it answers"),
        _t(
            "cancel_job",
            True,
            "a repeat finds the request made: 0, true of the moment it answers",
            journals=True,
        ),
        _t("promote_job", False, "a repeat answers not_scheduled", journals=True),
        # ---- bulk verbs by filter
        _t("bulk_reprocess", False, _BULK, journals=True),
        _t("bulk_remove", True, _REQUEST, journals=True),
        _t("bulk_promote", False, _BULK, journals=True),
        _t("bulk_clean", True, _REQUEST, journals=True),
        # ---- lanes
        _t("pause_group", True, _FLAG, journals=True),
        _t("resume_group", True, _FLAG, journals=True),
        _t("set_group_limit", True, _FLAG, journals=True),
        _t("set_group_weight", True, _FLAG, journals=True),
        _t("drain_group", False, "a repeat would lose the first call's count", journals=True),
        _t("reassign", False, "a repeat would move the job again", journals=True),
        _t(
            "reindex",
            True,
            "writes only the lanes' index, toward what the lanes hold: a repeated step "
            "finds nothing more to do",
            journals=True,
        ),
        # ---- repeatables
        _t("repeat", True, "the same cadence keeps the record as it is", journals=True),
        _t("cancel_repeat", False, "a repeat answers 'no such repeatable'", journals=True),
        _t("pause_repeat", True, _FLAG, journals=True),
        _t("resume_repeat", True, _FLAG, journals=True),
        _t(
            "run_repeat",
            False,
            "a repeat would make the slot due again, and its caller fire a second job",
            journals=True,
        ),
        _t(
            "fire_due",
            True,
            "compare-and-set on the slot: a repeat answers 0 ('fired already')",
        ),
        _t("fire_due_list", True, _READ),
        # ---- the worker registry
        _t("worker_beat", True, "a beat again writes the same record"),
        _t("worker_leave", True, "a leave again finds no record: 0"),
        _t("workers", True, "a read whose trim removes only entries whose record is gone"),
    )
}

#: Script name -> whether a call may be sent again after a lost reply.
RESEND: dict[str, bool] = {name: t.resend for name, t in TRANSITIONS.items()}
#: Script name -> the module command that stands for it.
NATIVE: dict[str, str] = {name: t.native for name, t in TRANSITIONS.items() if t.native}
#: The module commands that read the queue's pause themselves.
GATED: frozenset[str] = frozenset(t.native for t in TRANSITIONS.values() if t.native and t.gated)
