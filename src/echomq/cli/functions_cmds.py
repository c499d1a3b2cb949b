"""``emq functions``: the scripts' Functions libraries on the server (echomq.functions).

A queue sends its scripts as ``FCALL`` of a library per script, loaded once on the
server; a new echomq version (a changed script) loads new ones beside the old, which
stay (the server keeps them, and its replicas and dumps too) until deleted. ``list``
shows them, ``prune`` deletes those no script of this version uses: a client of an
older version still running loads its own again on its next call (``Function not
found``), so a prune never stops one.
"""

from __future__ import annotations

from typing import Any

import click

from ..connect import is_cluster
from ..functions import PREFIX
from ..replies import text
from ..scripts import all_scripts
from .app import Env, cli, confirm, pass_env


@cli.group()
def functions() -> None:
    """The scripts' Functions libraries on the server: list them, prune old ones."""


def _listed(env: Env) -> list[str]:
    """The names of echomq's libraries on the server, sorted."""
    client = env.client
    if is_cluster(client):  # a cluster client sends EVALSHA: no library is loaded
        return []
    raw: Any = client.execute_command("FUNCTION", "LIST", "LIBRARYNAME", PREFIX + "*")
    names = []
    for lib in raw or ():
        entry = lib if isinstance(lib, dict) else dict(zip(lib[::2], lib[1::2]))
        name = str(text(entry.get("library_name", entry.get(b"library_name", ""))))
        if name.startswith(PREFIX):
            names.append(name)
    return sorted(names)


def _current() -> set[str]:
    return {s.library.name for s in all_scripts() if s.library is not None}


@functions.command("list")
@pass_env
def list_(env: Env) -> None:
    """echomq's libraries on the server, each marked current (this version's) or old."""
    current = _current()
    rows = [{"library": n, "current": n in current} for n in _listed(env)]
    old = sum(1 for r in rows if not r["current"])
    lines = [f"{r['library']}  {'current' if r['current'] else 'old'}" for r in rows]
    summary = f"{len(rows)} libraries ({old} old) {env.on_server}"
    env.emit({"libraries": rows}, "\n".join([*lines, summary]))


@functions.command("prune")
@click.option("--all", "every", is_flag=True, help="Delete this version's libraries too.")
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
@pass_env
def prune(env: Env, every: bool, yes: bool) -> None:
    """Delete echomq's libraries that no script of this version uses (--all: every one;
    a running client loads what it needs again on its next call)."""
    current = set() if every else _current()
    old = [n for n in _listed(env) if n not in current]
    if old:
        confirm(env, yes, lambda: f"delete {len(old)} echomq libraries {env.on_server}?")
    deleted = []
    for name in old:
        try:
            env.client.execute_command("FUNCTION", "DELETE", name)
        except Exception as exc:  # deleted meanwhile by another prune: nothing to do
            if "not exist" not in str(exc):
                raise
        deleted.append(name)
    env.emit({"deleted": deleted}, f"deleted {len(deleted)} libraries {env.on_server}")
