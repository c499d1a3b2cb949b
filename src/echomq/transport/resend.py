"""Which scripts the transport may send again when a reply was lost.

:data:`RESEND` is the one table of that rule (a line per script, with the reason);
:func:`resendable` reads it for an operation.
"""

from __future__ import annotations

from ..scripts import Cmd, Eval

# Whether each script may be sent again when its outcome is unknown (written, no
# reply). True only where a repeat cannot change anything a first run did not, and
# answers what the verb documents. A script missing here is never re-sent.
RESEND: dict[str, bool] = {
    # the settled tombstone and the row check answer a repeat "duplicate"
    "enqueue": True,
    # the claim request id answers a repeat with the same jobs
    "claim": True,
    # a repeat finds no row: JobGone, which the worker reads as settled
    "complete": True,
    # a later deadline again, fenced by the token
    "extend_lock": True,
    # set / clear a flag
    "pause": True,
    "resume": True,
    "pause_group": True,
    "resume_group": True,
    "set_group_limit": True,
    "set_group_weight": True,
    "lock_job": True,
    # a repeat finds no lock: 0 ("no lock was held"), true of the moment it answers
    "unlock_job": True,
    # bounded sweeps: a repeat is one more sweep
    "promote": True,
    "reap": True,
    # bounded and "call again until True": a repeat is the next call
    "obliterate": True,
    # writes only the lanes' index, toward what the lanes hold: a repeated step finds
    # nothing more to do (its counts then leave out what the lost reply carried)
    "reindex": True,
    # compare-and-set on the slot: a repeat answers 0 ("fired already"), one job made
    "fire_due": True,
    # the same cadence keeps the record as it is
    "repeat": True,
    # sets the same limits again; its trim is one more bounded sweep
    "set_retention": True,
    # replaces a value with the same value (progress publishes its event again)
    "update_data": True,
    "update_progress": True,
    # reads
    "counts": True,
    "browse": True,
    "groups": True,
    "get_job_logs": True,
    "get_job_log_entries": True,
    "fire_due_list": True,
    # NOT re-sent: a repeat would answer "refused" for a change that happened, count
    # twice, or lose the first call's answer
    "retry": False,
    "delay": False,
    "release": False,
    "remove_job": False,
    "reprocess_job": False,
    "add_log": False,
    "drain": False,
    "drain_group": False,
    "reassign": False,
    "check_stalled": False,
    "cancel_repeat": False,
    # bulk steps: a repeat would walk from a cursor the first call already moved past,
    # and count (or delete) again; promote_job would answer "not scheduled"
    "bulk_reprocess": False,
    "bulk_remove": False,
    "bulk_promote": False,
    "bulk_clean": False,
    "promote_job": False,
    # a repeat finds the request made: 0 ("already asked"), true of the moment it answers
    "cancel_job": True,
    # a repeat finds it paused (or not paused): 0, true of the moment it answers
    "pause_repeat": True,
    "resume_repeat": True,
    # NOT re-sent: a repeat would make the slot due again, and its caller fire a 2nd job
    "run_repeat": False,
    # the registry: a beat again writes the same record; a leave again finds none (0);
    # the read's trim removes only entries whose record is gone
    "worker_beat": True,
    "worker_leave": True,
    "workers": True,
}


def resendable(op: Eval | Cmd) -> bool:
    """Whether ``op`` may be sent again after a write with no reply. A plain command
    is a read (plans send every write as a script)."""
    if isinstance(op, Cmd):
        return True
    return RESEND.get(op.script.name, False)
