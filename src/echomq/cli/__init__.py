"""The ``emq`` command line: the operator plane in a terminal.

One subcommand per verb, the same verbs as :class:`echomq.Queue`; ``--url`` (or
``EMQ_URL``) picks the server, ``--json`` prints machine-readable output. See
``docs/cli.md`` for every command and the table of exit statuses.
"""

from __future__ import annotations

from ..observability import cli as obs_cmds
from . import group_cmds, job_cmds, native_cmds, ops_cmds, queue_cmds, repeat_cmds, runtime_cmds
from .app import Env, cli, main

__all__ = [
    "Env",
    "cli",
    "group_cmds",
    "job_cmds",
    "main",
    "native_cmds",
    "obs_cmds",
    "ops_cmds",
    "queue_cmds",
    "repeat_cmds",
    "runtime_cmds",
]
