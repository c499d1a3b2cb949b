"""The old home of the operator-plane commands of issues 13 and 16, now kept by
subject: ``emq audit`` in :mod:`.audit_cmds`, ``emq bulk`` in :mod:`.bulk_cmds`,
``emq job promote|cancel`` in :mod:`.job_cmds`, ``emq workers`` in
:mod:`.runtime_cmds`, ``emq reindex`` in :mod:`.group_cmds` and ``emq retention`` in
:mod:`.history_cmds`. Their names stay importable from here."""

from __future__ import annotations

from .audit_cmds import audit
from .bulk_cmds import bulk, bulk_clean, bulk_promote, bulk_remove, bulk_reprocess
from .group_cmds import reindex
from .history_cmds import retention
from .job_cmds import job_cancel, job_promote
from .runtime_cmds import workers

__all__ = [
    "audit",
    "bulk",
    "bulk_clean",
    "bulk_promote",
    "bulk_remove",
    "bulk_reprocess",
    "job_cancel",
    "job_promote",
    "reindex",
    "retention",
    "workers",
]
