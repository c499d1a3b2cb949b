"""``emq`` with hostile job text and an unclear server: nothing styles or drives the
terminal, and every output says which server it speaks of.

Job names, errors, progress and log lines are written by producers and workers; the
operator's terminal must show them as text: no rich markup (``[/v1/charges]`` once
crashed ``emq jobs Q dead``), no ESC/OSC sequences (window title, clear screen,
clipboard writes, hyperlinks), no bidi overrides.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import redis
from click.testing import CliRunner

from conftest import dump
from echomq import Queue
from echomq.cli import app as cli_app
from echomq.cli import exits
from echomq.cli.app import hoist_json
from echomq.cli.text import clean
from echomq.discovery import server_label
from echomq.embedded import EmbeddedServer

ROOT = Path(__file__).resolve().parents[1]

MARKUP = "HTTPError: 404 Not Found [/v1/charges] [bold red]styled[/] :warning:"
TITLE = "\x1b]0;pwned\x07"  # OSC 0: set the window title
CLEAR = "\x1b[2J\x1b[H"  # clear the screen
CLIPBOARD = "\x1b]52;c;cm0gLXJmIH4=\x07"  # OSC 52: write the clipboard
LINK = "\x1b]8;;https://evil.example\x1b\\click\x1b]8;;\x1b\\"  # OSC 8: a hyperlink
BIDI = "invoice\u202eexe.pdf"  # right-to-left override
C1 = "\x9b31m"  # an 8-bit CSI


def emq(url: str | None, *args: str, env: dict[str, str] | None = None) -> Any:
    base = {k: v for k, v in os.environ.items() if k != "EMQ_URL"}
    base["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), base.get("PYTHONPATH", "")])
    base.update(env or {})
    prefix = [] if url is None else ["--url", url]
    return subprocess.run(
        [sys.executable, "-m", "echomq.cli", *prefix, *args],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        env=base,
        timeout=60,
    )


def hostile_dead_job(q: Queue) -> str:
    jid = q.enqueue({"x": TITLE}, name=f"[link=https://evil.example]{BIDI}[/link]", max_attempts=1)
    got = q.claim()
    assert got is not None and got.id == jid
    assert q.retry(jid, got.token, MARKUP + "\n" + TITLE) == "dead"
    q.update_progress(jid, CLEAR + "50%")
    for line in (TITLE, CLEAR, CLIPBOARD, LINK, BIDI, C1, "two\nlines", MARKUP):
        q.add_log(jid, line)
    return jid


def assert_inert(text: str) -> None:
    for raw in ("\x1b", "\x07", "\x9b", "\u202e"):
        assert raw not in text, f"{raw!r} reached the terminal"


def test_clean_escapes_every_control() -> None:
    assert clean(TITLE) == "\\x1b]0;pwned\\x07"
    assert clean("a\nb\tc\r") == "a\\nb\\tc\\r"
    assert clean(BIDI) == "invoice\\u202eexe.pdf"
    assert clean(C1) == "\\x9b31m"
    assert clean("plain [b]text[/b] é ✓") == "plain [b]text[/b] é ✓"
    assert clean(None) == ""


def test_hostile_job_text_is_shown_as_text(
    server: EmbeddedServer, q: Queue, r: redis.Redis
) -> None:
    jid = hostile_dead_job(q)
    before = dump(r, q)
    listing = emq(server.url, "jobs", q.name, "dead")
    assert listing.returncode == 0, listing.stderr  # once: MarkupError
    assert jid in listing.stdout and "[/v1/charges]" not in listing.stderr
    assert_inert(listing.stdout)
    shown = emq(server.url, "job", "show", q.name, jid)
    assert shown.returncode == 0, shown.stderr
    assert_inert(shown.stdout)
    assert "[/v1/charges]" in shown.stdout and "[bold red]styled[/]" in shown.stdout
    assert "\\x1b]0;pwned\\x07" in shown.stdout
    logs = emq(server.url, "job", "logs", q.name, jid)
    assert logs.returncode == 0, logs.stderr
    assert_inert(logs.stdout)
    # each line after the time it was written (ISO 8601 UTC, ms), the text escaped
    stamped = logs.stdout.splitlines()
    assert all(re.match(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z  ", s) for s in stamped)
    lines = [s[26:] for s in stamped]
    assert lines[0] == "\\x1b]0;pwned\\x07" and lines[1] == "\\x1b[2J\\x1b[H"
    assert "two\\nlines" in lines  # one line per log entry
    assert lines[-1] == MARKUP  # markup printed as it is
    found = emq(server.url, "jobs", q.name, "dead", "--find", "/v1/charges", "--field", "error")
    assert found.returncode == 0 and jid in found.stdout
    assert_inert(found.stdout)
    # --json keeps the exact text (JSON escapes it), for programs
    doc = json.loads(emq(server.url, "--json", "job", "logs", q.name, jid).stdout)
    assert doc["logs"][0] == TITLE
    assert doc["entries"][0]["line"] == TITLE and isinstance(doc["entries"][0]["time_ms"], int)
    assert dump(r, q) == before


def test_hostile_repeat_and_events_are_inert(
    server: EmbeddedServer, q: Queue, r: redis.Redis
) -> None:
    q.repeat("tick", every_ms=60000, job_name="tick")
    out = emq(server.url, "repeat", "list", q.name)
    assert out.returncode == 0 and "tick" in out.stdout
    jid = q.enqueue({"x": 1})
    proc = subprocess.Popen(
        [sys.executable, "-m", "echomq.cli", "--url", server.url, "events", q.name, "--count", "1"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT / "src")},
    )
    try:
        assert proc.stderr is not None
        assert "listening on" in proc.stderr.readline()
        q.update_progress(jid, TITLE + BIDI)
        stdout, _ = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert "progress" in stdout
    assert_inert(stdout)


def test_empty_url_is_an_error_and_unset_is_stated(
    server: EmbeddedServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    empty = emq(None, "queues", env={"EMQ_URL": ""})
    assert empty.returncode == exits.USAGE and "EMQ_URL" in empty.stderr and "empty" in empty.stderr
    assert emq("", "queues").returncode == exits.USAGE
    # unset: the default address is used and said (here: nothing answers there)
    monkeypatch.setattr(cli_app, "DEFAULT_URL", server.url)
    monkeypatch.delenv("EMQ_URL", raising=False)
    result = CliRunner().invoke(cli_app.cli, ["queues"])
    assert result.exit_code == 0, result.output
    assert "no --url and EMQ_URL is unset: using the default address" in result.output
    assert "(default address)" in result.output  # the table's title


def test_outputs_and_prompts_name_the_server(
    server: EmbeddedServer, q: Queue, monkeypatch: pytest.MonkeyPatch
) -> None:
    here = server_label(server.url)
    q.enqueue({"x": 1})
    assert f"on {here}" in emq(server.url, "queues").stdout
    assert f"on {here}" in emq(server.url, "stats", q.name).stdout
    assert f"on {here}" in emq(server.url, "jobs", q.name, "pending").stdout
    monkeypatch.setattr(cli_app, "stdin_is_terminal", lambda: True)
    no = CliRunner().invoke(cli_app.cli, ["--url", server.url, "obliterate", q.name], input="n\n")
    assert no.exit_code == exits.NOT_CONFIRMED and f"on {here}" in no.output
    assert server_label("redis://:secret@db.example:6380/3") == "db.example:6380/3"
    assert server_label("rediss://h/1") == "h:6379/1 (tls)"
    assert server_label("unix:///tmp/r.sock") == "unix:/tmp/r.sock"


def test_a_prompt_escapes_the_text_it_quotes(
    server: EmbeddedServer, q: Queue, r: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    hostile = "d\x1b[31m\u202eexe.png"  # an escape sequence and a bidi override
    q.enqueue({"x": 1}, dedup_id=hostile)
    before = dump(r, q)
    monkeypatch.setattr(cli_app, "stdin_is_terminal", lambda: True)
    no = CliRunner().invoke(
        cli_app.cli, ["--url", server.url, "dedup", "release", q.name, hostile], input="n\n"
    )
    assert no.exit_code == exits.NOT_CONFIRMED
    assert "\x1b" not in no.output and "\u202e" not in no.output
    assert clean(hostile) in no.output
    assert dump(r, q) == before


def test_json_anywhere_on_the_line(server: EmbeddedServer, q: Queue) -> None:
    q.enqueue({"x": 1}, priority=3)
    p = emq(server.url, "jobs", q.name, "pending", "--json")
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    assert doc["total"] == 1 and doc["jobs"][0]["priority"] == 3  # numbers as numbers
    p = emq(server.url, "stats", "--json", q.name)
    assert json.loads(p.stdout)["pending"] == 1
    assert hoist_json(["job", "log", "Q", "J", "--", "--json"]) == [
        "job",
        "log",
        "Q",
        "J",
        "--",
        "--json",
    ]
    assert hoist_json(["stats", "Q", "--json"]) == ["--json", "stats", "Q"]


def test_obliterate_counts_exactly(server: EmbeddedServer, q: Queue, r: redis.Redis) -> None:
    for i in range(9):
        q.enqueue({"i": i})
    q.pause()
    p = emq(server.url, "--json", "obliterate", q.name, "--budget", "4", "--yes")
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    assert doc["jobs"] == 9 and doc["calls"] >= 3 and doc["obliterated"] is True
    assert not r.exists(q.keys.pending)


def test_the_audit_journal_is_inert(server: EmbeddedServer, make_queue: Any, qname: str) -> None:
    q = make_queue(qname, actor=TITLE + "ops")
    q.pause()
    out = emq(server.url, "audit", q.name)
    assert out.returncode == 0, out.stderr
    assert "\\x1b]0;pwned\\x07ops" in out.stdout and f"on {server_label(server.url)}" in out.stdout
    assert_inert(out.stdout)
