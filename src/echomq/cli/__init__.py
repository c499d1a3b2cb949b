"""The ``emq`` command line: the operator plane in a terminal.

One subcommand per verb, the same verbs as :class:`echomq.Queue`; ``--url`` (or
``EMQ_URL``) picks the server, ``--json`` prints machine-readable output. See
``docs/cli.md`` for every command and the table of exit statuses.

The commands live by subject, one module each (``*_cmds``); importing a module
registers its commands on :data:`~echomq.cli.app.cli`, so a new module is one line
in the import below.
"""

from __future__ import annotations

from . import (
    audit_cmds,  # emq audit
    browse_cmds,  # emq jobs
    bulk_cmds,  # emq bulk reprocess|remove|promote|clean
    dedup_cmds,  # emq dedup owner|release
    flow_cmds,  # emq flow show|release|fail|cancel|sweep
    functions_cmds,  # emq functions list|prune
    group_cmds,  # emq group ..., emq reindex
    history_cmds,  # emq retention
    job_cmds,  # emq job ...
    limit_cmds,  # emq limit show|rate|concurrency|group|group-default
    native_cmds,  # emq native build|path
    obs_cmds,
    ops_cmds,  # the old home of some of the above (re-exports)
    queue_cmds,  # emq queues, stats, pause, resume, drain, obliterate, enqueue
    repeat_cmds,  # emq repeat ...
    runtime_cmds,  # emq worker, server, console, demo, events, workers
)
from .app import Env, cli, main

__all__ = [
    "Env",
    "audit_cmds",
    "browse_cmds",
    "bulk_cmds",
    "cli",
    "dedup_cmds",
    "flow_cmds",
    "functions_cmds",
    "group_cmds",
    "history_cmds",
    "job_cmds",
    "limit_cmds",
    "main",
    "native_cmds",
    "obs_cmds",
    "ops_cmds",
    "queue_cmds",
    "repeat_cmds",
    "runtime_cmds",
]
