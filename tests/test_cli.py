"""``emq`` driven as a subprocess against the private server.

Each test runs the real command line (``python -m echomq.cli --url <private>``) and
checks its output, its exit status and the keys it leaves on the server. A few cases
that need a pretend terminal or a pretend default address run in-process.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import redis
from click.testing import CliRunner

from conftest import dump, queue_keys
from echomq import Queue, ids
from echomq.cli import app as cli_app
from echomq.cli import exits
from echomq.cli.times import utc_text
from echomq.discovery import server_label
from echomq.embedded import EmbeddedServer, free_port, server_answers
from echomq.errors import REASONS
from echomq.results import Counts

pytestmark = pytest.mark.both_servers

ROOT = Path(__file__).resolve().parents[1]
BAD_ID = "JOB-not-an-id"


def _env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "EMQ_URL"}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), env.get("PYTHONPATH", "")])
    env.update(extra or {})
    return env


def emq_at(
    url: str, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run ``emq --url URL ARGS`` with stdin off a terminal."""
    return subprocess.run(
        [sys.executable, "-m", "echomq.cli", "--url", url, *args],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        env=_env(env),
        timeout=60,
    )


@pytest.fixture()
def emq(server: EmbeddedServer) -> Any:
    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return emq_at(server.url, *args)

    return run


@dataclass
class Ran:
    """What an in-process run printed and returned (the shape of a CompletedProcess)."""

    returncode: int
    stdout: str
    stderr: str


@pytest.fixture()
def fast(server: EmbeddedServer) -> Any:
    """The same command line run in-process (click's CliRunner): for the many cases
    where the subprocess start-up would only add time. stdin is not a terminal here
    either."""
    runner = CliRunner()

    def run(*args: str) -> Ran:
        res = runner.invoke(cli_app.cli, ["--url", server.url, *args])
        if res.exception is not None and not isinstance(res.exception, SystemExit):
            raise res.exception
        return Ran(res.exit_code, res.stdout, res.stderr)

    return run


def as_json(proc: Any) -> Any:
    return json.loads(proc.stdout)


def test_enqueue_stats_jobs_and_show(emq: Any, fast: Any, q: Queue, r: redis.Redis) -> None:
    b = q.keys.base
    p = emq("enqueue", q.name, '{"n": 1}')
    assert p.returncode == 0, p.stderr
    first = p.stdout.strip()
    assert re.fullmatch(r"JOB[0-9A-Za-z]{11}", first)
    p = fast(
        "--json", "enqueue", q.name, "[1, 2]",
        "--name", "resize", "--priority", "5", "--group", "g1", "--max-attempts", "2",
    )  # fmt: skip
    assert p.returncode == 0, p.stderr
    doc = as_json(p)
    assert set(doc) == {"queue", "id"} and doc["queue"] == q.name
    grouped = doc["id"]
    later = as_json(fast("--json", "enqueue", q.name, '"x"', "--delay-ms", "60000"))["id"]
    assert r.hget(b + "job:" + first, "payload") == '{"n":1}'
    assert r.hmget(b + "job:" + grouped, "name", "group", "priority", "max_attempts") == [
        "resize", "g1", "5", "2",
    ]  # fmt: skip
    assert r.zrange(b + "pending", 0, -1) == [first]
    assert r.zrange(b + "g:g1:pending", 0, -1) == [grouped]
    assert r.zrange(b + "schedule", 0, -1) == [later]

    stats = as_json(emq("--json", "stats", q.name))
    assert isinstance(stats.pop("latency_ms"), int)  # an age: timing alone
    assert stats.pop("limits") == {
        "rate": None, "concurrency": None, "group_rate_default": None, "limited_for_ms": 0,
        "starts_in_window": 0, "active": 0, "held_lanes": 0, "next_start_in_ms": 0,
        "rate_limited": False,
    }  # fmt: skip
    assert stats == {
        "queue": q.name,
        "pending": 2, "active": 0, "scheduled": 1, "dead": 0, "completed": 0, "failed": 0,
        "paused": False, "kept": 0, "waiting_children": 0,
        "groups": [
            {"name": "g1", "depth": 1, "in_flight": 0, "limit": None, "weight": 1, "paused": False,
             "rate_limit": None, "held_until_ms": None}
        ],
        "group_count": 1, "workers": 0, "stranded": True,
    }  # fmt: skip
    text = fast("stats", q.name)
    assert text.returncode == 0 and "pending" in text.stdout and "g1" in text.stdout
    assert "0 live" in text.stdout
    assert "warning: 2 pending but no live workers" in text.stdout

    page = as_json(fast("--json", "jobs", q.name, "pending"))
    # the flat pending set in run order; a lane is listed with --group
    assert [j["id"] for j in page["jobs"]] == [first] and page["order"] == "run"
    assert page["total"] == 1 and "payload" not in page["jobs"][0]
    lane = as_json(fast("--json", "jobs", q.name, "pending", "--group", "g1"))
    assert [j["id"] for j in lane["jobs"]] == [grouped]
    assert lane["jobs"][0]["name"] == "resize" and lane["jobs"][0]["priority"] == 5
    assert lane["jobs"][0]["attempts"] == 0  # numbers as numbers
    noted = fast("jobs", q.name, "pending")
    assert "1 more pending jobs wait in lanes" in noted.stderr
    one = as_json(fast("--json", "jobs", q.name, "pending", "--limit", "1", "--offset", "1"))
    assert one["jobs"] == [] and one["total"] == 1
    listing = fast("jobs", q.name, "scheduled")
    assert listing.returncode == 0 and later in listing.stdout
    assert "no dead jobs" in fast("jobs", q.name, "dead").stdout

    shown = as_json(fast("--json", "job", "show", q.name, first))
    assert shown == {"id": first, "state": "pending", "attempts": 0, "data": {"n": 1}}
    human = fast("job", "show", q.name, first)
    assert human.returncode == 0 and "pending" in human.stdout and '{"n": 1}' in human.stdout
    assert queue_keys(r, q) == {
        b + "pending", b + "schedule", b + "groups", b + "ring", b + "wake", b + "g:g1:pending",
        b + "gindex", b + "job:" + first, b + "job:" + grouped, b + "job:" + later,
        b + "seq",  # the enqueue sequence
    }  # fmt: skip


def test_usage_errors_write_nothing(emq: Any, fast: Any, q: Queue, r: redis.Redis) -> None:
    q.enqueue({"keep": True})
    before = dump(r, q)
    bad_json = fast("enqueue", q.name, "{not json")
    assert bad_json.returncode == exits.USAGE and "not valid JSON" in bad_json.stderr
    bad_state = fast("jobs", q.name, "finished")
    assert bad_state.returncode == exits.USAGE
    bad_name = emq("--json", "enqueue", "no spaces allowed", "{}")
    assert bad_name.returncode == exits.MALFORMED
    assert "invalid queue name" in bad_name.stderr
    assert as_json(bad_name)["error"] == "malformed"
    bad_group = fast("enqueue", q.name, "{}", "--group", "a/b")
    assert bad_group.returncode == exits.MALFORMED and "invalid group name" in bad_group.stderr
    assert dump(r, q) == before


def test_queues_finds_every_queue(
    emq: Any, fast: Any, make_queue: Any, qname: str, r: redis.Redis
) -> None:
    flat, only_scheduled, paused = (make_queue(f"{qname}-{i}") for i in range(3))
    flat.enqueue(1)
    flat.enqueue(2)
    only_scheduled.enqueue(3, delay_ms=60000)  # a queue with no meta hash and no pending
    paused.enqueue(4, group="g")
    paused.pause()
    doc = as_json(emq("--json", "queues"))
    assert doc["complete"] is True
    found = {row["queue"]: row for row in doc["queues"]}
    assert found[flat.name] == {
        "queue": flat.name, "pending": 2, "active": 0, "scheduled": 0, "dead": 0,
        "completed": 0, "failed": 0, "paused": False, "kept": 0, "waiting_children": 0,
    }  # fmt: skip
    assert found[only_scheduled.name]["scheduled"] == 1
    assert found[paused.name]["paused"] is True and found[paused.name]["pending"] == 1
    text = fast("queues")
    assert text.returncode == 0
    assert all(name in text.stdout for name in (flat.name, only_scheduled.name, paused.name))


def test_pause_and_resume(emq: Any, fast: Any, q: Queue, r: redis.Redis) -> None:
    jid = q.enqueue("x")
    pending_before = r.dump(q.keys.pending)
    p = emq("--json", "pause", q.name)
    assert p.returncode == 0 and as_json(p) == {"queue": q.name, "paused": True}
    assert r.hget(q.keys.meta, "paused") == "1"
    assert q.claim() is None
    assert r.dump(q.keys.pending) == pending_before
    again = fast("pause", q.name)  # idempotent
    assert again.returncode == 0 and again.stdout.strip() == f"paused {q.name}"
    p = fast("--json", "resume", q.name)
    assert p.returncode == 0 and as_json(p) == {"queue": q.name, "paused": False}
    assert r.hexists(q.keys.meta, "paused") is False
    got = q.claim()
    assert got is not None and got.id == jid


def test_drain_refuses_without_yes_and_drains_with_it(
    emq: Any, fast: Any, q: Queue, r: redis.Redis
) -> None:
    running = q.enqueue("running")
    got = q.claim()
    assert got is not None and got.id == running
    for i in range(3):
        q.enqueue(i, dedup_id=f"d{i}")
    q.enqueue("later", delay_ms=60000)
    q.enqueue("lane", group="g")
    before = dump(r, q)
    p = emq("drain", q.name)
    assert p.returncode == exits.NOT_CONFIRMED
    assert "pass --yes" in p.stderr
    assert dump(r, q) == before

    p = emq("--json", "drain", q.name, "--yes", "--budget", "2")
    assert p.returncode == 0, p.stderr
    doc = as_json(p)
    # bounded calls: 4 jobs at 2 per server call
    assert doc["queue"] == q.name and doc["drained"] == 4 and doc["calls"] >= 2
    counts = q.counts()
    assert counts.pending == 0 and counts.active == 1 and counts.scheduled == 1
    assert not r.keys(q.keys.base + "de:*")
    assert r.exists(q.keys.job(running)) == 1
    p = fast("drain", q.name, "--include-schedule", "-y")
    assert p.returncode == 0 and p.stdout.strip().startswith(f"drained 1 jobs from {q.name} on ")
    assert q.counts().scheduled == 0 and r.exists(q.keys.schedule) == 0


def test_obliterate_refusals_then_budgeted_loop(
    emq: Any, fast: Any, q: Queue, make_queue: Any, qname: str, r: redis.Redis
) -> None:
    other = make_queue(qname + "-other")
    other.enqueue("bystander")
    other_before = dump(r, other)
    ids = [q.enqueue(i) for i in range(6)]
    q.enqueue("g", group="g1")
    q.add_log(ids[0], "a line")
    held = q.claim()
    assert held is not None
    before = dump(r, q)

    p = emq("--json", "obliterate", q.name, "--yes")
    assert p.returncode == exits.REFUSED["not_paused"] == 14
    assert p.stderr.startswith("refused: not_paused")
    assert as_json(p) == {
        "ok": False, "error": "refused", "reason": "not_paused",
        "message": p.stderr.strip(), "exit": 14,
    }  # fmt: skip
    assert dump(r, q) == before

    q.pause()
    before = dump(r, q)
    p = fast("obliterate", q.name, "--yes")
    assert p.returncode == exits.REFUSED["active"] == 15
    assert p.stderr.startswith("refused: active")
    assert dump(r, q) == before

    p = emq("--json", "obliterate", q.name, "--yes", "--force", "--budget", "2")
    assert p.returncode == 0, p.stderr
    doc = as_json(p)
    assert doc["obliterated"] is True and doc["jobs"] == 7 and doc["calls"] >= 4
    assert queue_keys(r, q) == set()
    assert dump(r, other) == other_before

    gone = fast("obliterate", q.name, "--yes")  # every key went: no such queue now
    assert gone.returncode == exits.NO_QUEUE == 8 and queue_keys(r, q) == set()
    gone = fast("--create", "obliterate", q.name, "--yes")  # the meta hash went: not paused
    assert gone.returncode == 14 and queue_keys(r, q) == set()
    text = fast("obliterate", other.name)
    assert text.returncode == exits.NOT_CONFIRMED and dump(r, other) == other_before


def test_job_verbs(emq: Any, fast: Any, q: Queue, r: redis.Redis) -> None:
    jid = q.enqueue({"v": 1}, dedup_id="once")
    row = q.keys.job(jid)

    p = fast("--json", "job", "data", q.name, jid, '{"v": 2}')
    assert p.returncode == 0 and as_json(p) == {"id": jid, "data": {"v": 2}}
    assert r.hget(row, "payload") == '{"v":2}'

    for value, stored, shown in (("50", "50", 50), ("halfway", "halfway", "halfway")):
        p = emq("--json", "job", "progress", q.name, jid, value)
        assert p.returncode == 0 and as_json(p) == {"id": jid, "progress": shown}
        assert r.hget(row, "progress") == stored

    assert as_json(fast("--json", "job", "log", q.name, jid, "one")) == {"id": jid, "lines": 1}
    assert fast("job", "log", q.name, jid, "two").stdout.strip() == f"{jid} keeps 2 log line(s)"
    p = fast("--json", "job", "log", q.name, jid, "three", "--keep", "2")
    assert as_json(p) == {"id": jid, "lines": 2}
    assert r.lrange(row + ":logs", 0, -1) == ["two", "three"]
    stamps = [int(t) for t in r.lrange(row + ":logtimes", 0, -1)]
    assert len(stamps) == 2
    assert as_json(fast("--json", "job", "logs", q.name, jid)) == {
        "id": jid,
        "logs": ["two", "three"],
        "entries": [{"time_ms": stamps[0], "line": "two"}, {"time_ms": stamps[1], "line": "three"}],
    }
    assert fast("job", "logs", q.name, jid).stdout.splitlines() == [
        f"{utc_text(stamps[0])}  two",
        f"{utc_text(stamps[1])}  three",
    ]

    before = dump(r, q)
    p = fast("job", "reprocess", q.name, jid)
    assert p.returncode == exits.REFUSED["not_dead"] and p.stderr.startswith("refused: not_dead")
    p = fast("job", "remove", q.name, jid)
    assert p.returncode == exits.NOT_CONFIRMED
    assert dump(r, q) == before

    p = emq("--json", "job", "remove", q.name, jid, "--dedup-id", "once", "--yes")
    assert p.returncode == 0 and as_json(p) == {"id": jid, "removed": True}
    assert r.zscore(q.keys.settled, jid) is not None  # the settled tombstone
    assert queue_keys(r, q) == {q.keys.base + "wake", q.keys.audit, q.keys.settled, q.keys.seq}

    gone_before = dump(r, q)
    for args in (("job", "show"), ("job", "logs"), ("job", "reprocess")):
        p = fast(*args, q.name, jid)
        assert p.returncode == exits.REFUSED["gone"] == 10, args
        assert p.stderr.startswith("refused: gone")
    for args in (
        ("job", "show", q.name, BAD_ID),
        ("job", "data", q.name, BAD_ID, "{}"),
        ("job", "progress", q.name, BAD_ID, "1"),
        ("job", "log", q.name, BAD_ID, "x"),
        ("job", "remove", q.name, BAD_ID, "--yes"),
        ("job", "reprocess", q.name, BAD_ID),
    ):
        p = fast(*args)
        assert p.returncode == exits.MALFORMED == 4, args
        assert "not a job id" in p.stderr
    assert dump(r, q) == gone_before


def test_job_remove_locked_and_reprocess_dead(
    emq: Any, fast: Any, q: Queue, r: redis.Redis
) -> None:
    held = q.enqueue("held")
    c = q.claim()
    assert c is not None and c.id == held
    q.lock_job(held, c.token)
    before = dump(r, q)
    p = emq("--json", "job", "remove", q.name, held, "--yes")
    assert p.returncode == exits.REFUSED["locked"] == 11
    assert as_json(p)["reason"] == "locked"
    assert dump(r, q) == before

    assert q.retry(held, c.token, "boom", max_attempts=1) == "dead"
    assert r.hget(q.keys.job(held), "last_error") == "boom"
    q.unlock_job(held, c.token)
    p = fast("--json", "job", "reprocess", q.name, held)
    assert p.returncode == 0 and as_json(p) == {"id": held, "reprocessed": True}
    assert r.zrange(q.keys.pending, 0, -1) == [held]
    assert r.hget(q.keys.job(held), "last_error") is None
    assert r.hget(q.keys.job(held), "state") == "pending"


def test_job_rerun_asks_then_copies_a_dead_job(
    emq: Any, fast: Any, q: Queue, r: redis.Redis
) -> None:
    live = q.enqueue("live")
    dead = q.enqueue({"n": 1}, name="report", max_attempts=1)
    c = q.claim()
    assert c is not None and c.id == live
    before = dump(r, q)
    p = fast("job", "rerun", q.name, live, "--yes")  # active: not finished
    assert p.returncode == exits.REFUSED["not_finished"] == 20
    assert p.stderr.startswith("refused: not_finished")
    p = fast("job", "rerun", q.name, ids.new_id(), "--yes")
    assert p.returncode == exits.REFUSED["gone"]
    p = fast("job", "rerun", q.name, BAD_ID, "--yes")
    assert p.returncode == exits.MALFORMED
    assert dump(r, q) == before

    q.complete(live, c.token)
    c = q.claim()
    assert c is not None and q.retry(dead, c.token, "boom") == "dead"
    before = dump(r, q)
    p = fast("job", "rerun", q.name, dead)  # off a terminal, no --yes: not asked, not run
    assert p.returncode == exits.NOT_CONFIRMED
    assert dump(r, q) == before
    p = emq("--json", "job", "rerun", q.name, dead, "--yes")
    assert p.returncode == 0
    doc = as_json(p)
    copy = doc["copy"]
    assert doc == {"id": dead, "copy": copy} and copy != dead
    assert r.zrange(q.keys.pending, 0, -1) == [copy]
    assert r.hget(q.keys.job(dead), "rerun_as") == copy
    assert r.hget(q.keys.job(copy), "rerun_of") == dead
    assert r.hget(q.keys.job(copy), "name") == "report"
    assert fast("job", "rerun", q.name, dead, "-y").stdout.startswith(f"reran {dead} as JOB")


def test_group_verbs(emq: Any, fast: Any, q: Queue, r: redis.Redis) -> None:
    b = q.keys.base
    for i in range(3):
        q.enqueue(i, group="g1")
    q.enqueue("other", group="g2")
    assert fast("group", "pause", q.name, "g1").returncode == 0
    assert r.sismember(b + "gpaused", "g1")
    assert as_json(emq("--json", "group", "limit", q.name, "g1", "2")) == {
        "queue": q.name, "group": "g1", "limit": 2,
    }  # fmt: skip
    assert r.hget(b + "glimit", "g1") == "2"
    assert fast("group", "weight", q.name, "g1", "3").returncode == 0
    assert r.hget(b + "gweight", "g1") == "3"
    listing = as_json(fast("--json", "group", "list", q.name))
    assert listing["groups"] == [
        {"name": "g1", "depth": 3, "in_flight": 0, "limit": 2, "weight": 3, "paused": True,
         "rate_limit": None, "held_until_ms": None},
        {"name": "g2", "depth": 1, "in_flight": 0, "limit": None, "weight": 1, "paused": False,
         "rate_limit": None, "held_until_ms": None},
    ]  # fmt: skip
    assert "g2" in fast("group", "list", q.name).stdout
    assert fast("group", "limit", q.name, "g1", "--clear").returncode == 0
    assert r.hexists(b + "glimit", "g1") is False
    both = fast("group", "limit", q.name, "g1")
    assert both.returncode == exits.USAGE
    p = fast("--json", "group", "resume", q.name, "g1")
    assert as_json(p) == {"queue": q.name, "group": "g1", "paused": False}
    assert not r.sismember(b + "gpaused", "g1")

    before = dump(r, q)
    assert fast("group", "drain", q.name, "g1").returncode == exits.NOT_CONFIRMED
    assert fast("group", "drain", q.name, "bad/group", "--yes").returncode == exits.MALFORMED
    assert dump(r, q) == before
    p = fast("--json", "group", "drain", q.name, "g1", "--yes")
    assert as_json(p) == {"queue": q.name, "group": "g1", "drained": 3}
    assert r.exists(b + "g:g1:pending") == 0 and r.zcard(b + "g:g2:pending") == 1


@pytest.mark.single_node("counts plain subscribers (PUBSUB NUMSUB); a cluster's are sharded")
def test_events_tail_receives_progress_and_pause(
    server: EmbeddedServer, q: Queue, r: redis.Redis
) -> None:
    jid = q.enqueue("x")
    tail = subprocess.Popen(
        [sys.executable, "-m", "echomq.cli", "--url", server.url, "--json",
         "events", q.name, "--count", "2", "--timeout", "20"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
        text=True, env=_env(),
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 15
        while r.pubsub_numsub(q.keys.events)[0][1] < 1:
            assert time.monotonic() < deadline, "the tail never subscribed"
            time.sleep(0.02)
        q.update_progress(jid, 42)
        q.pause()
        out, err = tail.communicate(timeout=20)
    finally:
        tail.kill()
    assert tail.returncode == 0, err
    assert "listening on" in err
    lines = [json.loads(line) for line in out.splitlines()]
    assert lines == [{"event": "progress", "job": jid, "progress": 42}, {"event": "paused"}]
    assert r.hget(q.keys.job(jid), "progress") == "42"


def test_events_human_lines_and_timeout(fast: Any, q: Queue) -> None:
    p = fast("events", q.name, "--timeout", "0.3")
    assert p.returncode == 0 and p.stdout == "" and "listening on" in p.stderr


def test_no_server_is_a_clear_error(q: Queue) -> None:
    nowhere = f"redis://127.0.0.1:{free_port()}/0"
    p = emq_at(nowhere, "--json", "stats", "somequeue")
    assert p.returncode == exits.NO_SERVER == 3
    assert f"no server at {nowhere}" in p.stderr
    assert as_json(p)["error"] == "no_server"
    p = emq_at(nowhere, "pause", "bad name")  # the name is gated before any connection
    assert p.returncode == exits.MALFORMED


def test_no_url_names_the_default_address(monkeypatch: pytest.MonkeyPatch) -> None:
    # Pretend the default address is a free port, so the default path runs without
    # touching the real 127.0.0.1:6379.
    nowhere = f"redis://127.0.0.1:{free_port()}/0"
    monkeypatch.setattr(cli_app, "DEFAULT_URL", nowhere)
    monkeypatch.delenv("EMQ_URL", raising=False)
    result = CliRunner().invoke(cli_app.cli, ["stats", "somequeue"])
    assert result.exit_code == exits.NO_SERVER
    assert f"no server at {nowhere} (the default address)" in result.output
    assert "run `emq server` or pass --url" in result.output


def test_confirmation_on_a_terminal(
    server: EmbeddedServer, q: Queue, r: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(cli_app, "stdin_is_terminal", lambda: True)
    jid = q.enqueue("x")
    q.enqueue("y")
    before = dump(r, q)
    runner = CliRunner()
    args = ["--url", server.url, "drain", q.name]
    no = runner.invoke(cli_app.cli, args, input="n\n")
    assert no.exit_code == exits.NOT_CONFIRMED
    here = server_label(server.url)  # every destructive prompt names the server
    assert f"drain every pending job of {q.name} on {here} (2 pending" in no.output
    assert dump(r, q) == before
    no = runner.invoke(cli_app.cli, ["--url", server.url, "job", "remove", q.name, jid], input="\n")
    assert no.exit_code == exits.NOT_CONFIRMED and "(pending)" in no.output and here in no.output
    assert dump(r, q) == before
    yes = runner.invoke(cli_app.cli, args, input="y\n")
    assert yes.exit_code == 0 and "drained 2 jobs" in yes.output
    assert queue_keys(r, q) <= {q.keys.base + "wake", q.keys.audit, q.keys.seq}


def test_server_command_serves_until_interrupted() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "echomq.cli", "--json", "server"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
        text=True, env=_env(),
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        doc = json.loads(proc.stdout.readline())
        url = doc["url"]
        assert url.startswith("redis://127.0.0.1:") and not url.endswith(":6379/0")
        assert server_answers(url)
        queue = Queue("served", url=url)
        queue.enqueue("hello")
        assert queue.counts().pending == 1
        queue.close()
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=15)
    finally:
        proc.kill()
    assert proc.returncode == 0, err
    assert "server stopped" in err
    assert not server_answers(url)


def test_console_without_its_extra(server: EmbeddedServer, monkeypatch: pytest.MonkeyPatch) -> None:
    from echomq.cli import runtime_cmds

    def missing() -> Any:
        raise ModuleNotFoundError("No module named 'starlette'", name="starlette")

    monkeypatch.setattr(runtime_cmds, "load_console", missing)
    result = CliRunner().invoke(cli_app.cli, ["--url", server.url, "console"])
    assert result.exit_code == exits.MISSING_EXTRA
    assert "pip install 'echomq[console]'" in result.output
    assert "No module named 'starlette'" in result.output


def test_exit_statuses_cover_every_reason_and_are_documented() -> None:
    assert set(exits.REFUSED) == set(REASONS)
    codes = [code for code, _ in exits.table()]
    assert len(codes) == len(set(codes)), "two outcomes share an exit status"
    doc = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    documented = dict(re.findall(r"^\| `(\d+)` \| (.+?) \|$", doc, re.MULTILINE))
    assert documented == {str(code): meaning for code, meaning in exits.table()}


HANDLER_MODULE = """
def handle(job):
    if job.data.get("fail"):
        raise RuntimeError("asked to fail")
    job.log("handled " + str(job.data["n"]))
"""


def test_worker_command_serves_until_interrupted(
    server: EmbeddedServer, q: Queue, r: redis.Redis, tmp_path: Path
) -> None:
    (tmp_path / "emq_test_handlers.py").write_text(HANDLER_MODULE, encoding="utf-8")
    for n in range(3):
        q.enqueue({"n": n})
    doomed = q.enqueue({"n": 9, "fail": True}, max_attempts=1)
    proc = subprocess.Popen(
        [sys.executable, "-m", "echomq.cli", "--url", server.url, "--json",
         "worker", "emq_test_handlers:handle", "--queue", q.name, "--concurrency", "2"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
        text=True, env=_env(), cwd=tmp_path,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 20
        while q.counts().completed < 3 or q.job_state(doomed) != "dead":
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the worker did not serve the queue"
            time.sleep(0.05)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=20)
    finally:
        proc.kill()
    assert proc.returncode == 0, err
    assert f"worker on {q.name}" in err and "worker stopped" in err
    stats = json.loads(out)["stats"]
    assert stats["completed"] == 3 and stats["dead"] == 1 and stats["claimed"] == 4
    assert q.counts() == Counts(
        pending=0, active=0, scheduled=0, dead=1, completed=3, failed=1, paused=False
    )
    assert "asked to fail" in (r.hget(q.keys.job(doomed), "last_error") or "")
    assert not r.exists(q.keys.lock(doomed))


def test_worker_command_rejects_a_bad_handler(fast: Any, q: Queue, r: redis.Redis) -> None:
    q.enqueue("untouched")
    before = dump(r, q)
    for spec in ("no_colon", "no_such_module_xyz:handle", "json:no_such_function"):
        p = fast("worker", spec, "--queue", q.name)
        assert p.returncode == exits.USAGE, spec
    p = fast("worker", "json:loads", "--queue", "bad name")
    assert p.returncode == exits.MALFORMED
    assert dump(r, q) == before


def test_queues_scan_limit_reports_an_incomplete_search(
    fast: Any, make_queue: Any, qname: str
) -> None:
    for i in range(20):
        make_queue(f"{qname}-{i}").enqueue(i)
    p = fast("--json", "queues", "--scan-limit", "1")
    assert p.returncode == 0
    assert as_json(p)["complete"] is False
    assert "the scan stopped after 1 keys" in p.stderr


def test_console_command_serves_the_console(server: EmbeddedServer, q: Queue) -> None:
    import urllib.request

    q.enqueue("visible")
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "echomq.cli", "--url", server.url, "console", "--port", str(port),
         "--read-only"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
        text=True, env=_env(),
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 20
        while True:
            assert proc.poll() is None, proc.communicate()
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=1) as resp:
                    assert resp.status == 200
                    break
            except OSError:
                assert time.monotonic() < deadline, "the console never answered"
                time.sleep(0.1)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=20)
    finally:
        proc.kill()
    assert f"console at http://127.0.0.1:{port}/ for {server_label(server.url)}" in err


# --- group reassign and repeatables -------------------------------------------------------


def _server_ms(r: redis.Redis) -> int:
    seconds, micros = r.time()
    return int(seconds) * 1000 + int(micros) // 1000


def test_group_reassign(emq: Any, fast: Any, q: Queue, r: redis.Redis) -> None:
    b = q.keys.base
    flat = q.enqueue("flat", priority=5)
    grouped = q.enqueue("grouped", group="g1")
    flat_score = r.zscore(b + "pending", flat)
    p = fast("--json", "group", "reassign", q.name, flat, "g2")
    assert p.returncode == 0, p.stderr
    assert as_json(p) == {"queue": q.name, "id": flat, "group": "g2"}
    assert r.exists(b + "pending") == 0
    assert r.zrange(b + "g:g2:pending", 0, -1, withscores=True) == [(flat, flat_score)]
    assert r.hget(b + "job:" + flat, "group") == "g2"
    assert r.smembers(b + "groups") == {"g1", "g2"}

    p = emq("group", "reassign", q.name, grouped, "--flat")
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == f"reassigned {grouped} to the flat pending set"
    assert r.zrange(b + "pending", 0, -1) == [grouped]
    assert r.exists(b + "g:g1:pending") == 0
    assert r.hexists(b + "job:" + grouped, "group") is False
    assert fast("group", "reassign", q.name, grouped, "g2").stdout.strip() == (
        f"reassigned {grouped} to group g2"
    )
    # Each keeps its priority score: priority 0 runs before priority 5.
    assert r.zrange(b + "g:g2:pending", 0, -1) == [grouped, flat]
    assert r.exists(b + "pending") == 0

    later = q.enqueue("later", delay_ms=60000)
    before = dump(r, q)
    p = emq("--json", "group", "reassign", q.name, later, "g1")
    assert p.returncode == exits.REFUSED["not_pending"] == 13
    assert p.stderr.startswith("refused: not_pending")
    assert as_json(p)["reason"] == "not_pending"
    p = fast("group", "reassign", q.name, ids.new_id(), "--flat")
    assert p.returncode == exits.REFUSED["gone"] == 10 and p.stderr.startswith("refused: gone")
    for args, code in (
        ((BAD_ID, "g1"), exits.MALFORMED),
        ((flat, "a/b"), exits.MALFORMED),
        ((flat,), exits.USAGE),  # neither GROUP nor --flat
        ((flat, "g1", "--flat"), exits.USAGE),  # both
    ):
        p = fast("group", "reassign", q.name, *args)
        assert p.returncode == code, args
    assert dump(r, q) == before


def test_repeat_add_list_cancel(emq: Any, fast: Any, q: Queue, r: redis.Redis) -> None:
    b = q.keys.base
    empty = fast("--create", "repeat", "list", q.name)
    assert empty.returncode == 0 and empty.stdout.strip() == f"no repeatables in {q.name}"
    doc = as_json(fast("--json", "--create", "repeat", "list", q.name))
    assert doc == {"queue": q.name, "repeats": []}

    start = _server_ms(r)
    p = fast(
        "--json", "repeat", "add", q.name, "tick", "--every-ms", "5000", "--payload", '{"n": 1}',
        "--first-in-ms", "60000", "--job-name", "tock", "--group", "g1", "--priority", "3",
        "--max-attempts", "2",
    )  # fmt: skip
    assert p.returncode == 0, p.stderr
    doc = as_json(p)
    tick_next = doc["next_run_ms"]
    assert doc == {"queue": q.name, "name": "tick", "next_run_ms": tick_next}
    assert start + 60000 <= tick_next <= _server_ms(r) + 60000
    assert r.zscore(b + "repeat", "tick") == tick_next
    assert r.hgetall(b + "repeat:tick") == {
        "kind": "every", "spec": "5000", "payload": '{"n":1}', "count": "0",
        "job_name": "tock", "group": "g1", "priority": "3", "max_attempts": "2",
    }  # fmt: skip

    p = emq("repeat", "add", q.name, "nightly", "--cron", "0 3 * * *")
    assert p.returncode == 0, p.stderr
    assert re.fullmatch(
        r"repeat nightly: next run \d{4}-\d\d-\d\dT03:00:00\.000Z", p.stdout.strip()
    )
    nightly_next = int(r.zscore(b + "repeat", "nightly") or 0)
    assert nightly_next % 86_400_000 == 3 * 3_600_000 and nightly_next > start
    assert r.hgetall(b + "repeat:nightly") == {
        "kind": "cron", "spec": "0 3 * * *", "payload": "null", "count": "0",
    }  # fmt: skip

    # The same cadence again keeps the next run; the template is replaced.
    p = fast("--json", "repeat", "add", q.name, "tick", "--every-ms", "5000", "--payload", "2")
    assert as_json(p)["next_run_ms"] == tick_next
    assert r.hgetall(b + "repeat:tick") == {
        "kind": "every", "spec": "5000", "payload": "2", "count": "0",
    }  # fmt: skip
    assert queue_keys(r, q) == {
        b + "repeat", b + "repeat:tick", b + "repeat:nightly", b + "audit",
    }  # fmt: skip

    listing = as_json(fast("--json", "repeat", "list", q.name))
    by_name = {row["name"]: row for row in listing["repeats"]}
    soonest_first = sorted(by_name, key=lambda n: by_name[n]["next_run_ms"])
    assert [row["name"] for row in listing["repeats"]] == soonest_first
    assert by_name["tick"] == {
        "name": "tick", "every_ms": 5000, "cron": None, "next_run_ms": tick_next, "payload": 2,
        "job_name": "tick", "group": None, "priority": 0, "max_attempts": None,
        "backoff": None, "count": 0, "last_run_ms": None, "paused": False,
    }  # fmt: skip
    assert by_name["nightly"]["cron"] == "0 3 * * *"
    assert by_name["nightly"]["next_run_ms"] == nightly_next
    assert len(as_json(fast("--json", "repeat", "list", q.name, "--limit", "1"))["repeats"]) == 1
    text = fast("repeat", "list", q.name).stdout
    assert "every 5s" in text and "cron 0 3 * * *" in text  # a readable cadence
    assert "every 5000 ms" in fast("--raw", "repeat", "list", q.name).stdout  # --raw: ms

    before = dump(r, q)
    for args, code in (
        (("add", q.name, "x"), exits.USAGE),  # no cadence
        (("add", q.name, "x", "--every-ms", "5", "--cron", "* * * * *"), exits.USAGE),
        (("add", q.name, "x", "--cron", "not a cron"), exits.USAGE),
        (("add", q.name, "x", "--every-ms", "0"), exits.USAGE),
        (("add", q.name, "x", "--every-ms", "5", "--payload", "{no"), exits.USAGE),
        (("add", q.name, "bad/name", "--every-ms", "5"), exits.MALFORMED),
        (("add", q.name, "x", "--every-ms", "5", "--group", "a b"), exits.MALFORMED),
        (("cancel", q.name, "bad/name"), exits.MALFORMED),
        (("list", "bad name"), exits.MALFORMED),
    ):
        p = fast("repeat", *args)
        assert p.returncode == code, args
    assert "invalid repeat name" in fast("repeat", "cancel", q.name, "a/b").stderr
    assert dump(r, q) == before

    p = fast("--json", "repeat", "cancel", q.name, "tick")
    assert p.returncode == 0 and as_json(p) == {"queue": q.name, "name": "tick", "cancelled": True}
    assert r.zrange(b + "repeat", 0, -1) == ["nightly"]
    assert r.exists(b + "repeat:tick") == 0

    # Cancelling an unknown name is not an error: nothing changes, the output says so.
    before = dump(r, q)
    p = emq("repeat", "cancel", q.name, "tick")
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == f"no repeat tick in {q.name}; nothing changed"
    p = fast("--json", "repeat", "cancel", q.name, "tick")
    assert p.returncode == 0 and as_json(p)["cancelled"] is False
    assert dump(r, q) == before

    assert fast("repeat", "cancel", q.name, "nightly").stdout.strip() == "cancelled repeat nightly"
    assert queue_keys(r, q) == {q.keys.audit}  # the journal keeps who did it


def test_new_commands_gate_names_before_connecting() -> None:
    nowhere = f"redis://127.0.0.1:{free_port()}/0"
    runner = CliRunner()
    for args in (
        ["group", "reassign", "q", BAD_ID, "g"],
        ["group", "reassign", "q", ids.new_id(), "a/b"],
        ["repeat", "add", "q", "bad/name", "--every-ms", "5"],
        ["repeat", "cancel", "q", "bad/name"],
        ["repeat", "list", "bad name"],
    ):
        result = runner.invoke(cli_app.cli, ["--url", nowhere, *args])
        assert result.exit_code == exits.MALFORMED, args
    result = runner.invoke(cli_app.cli, ["--url", nowhere, "repeat", "list", "q"])
    assert result.exit_code == exits.NO_SERVER  # a well-formed command does try the server


def test_retention_shows_sets_merges_and_clears(fast: Any, q: Queue, r: redis.Redis) -> None:
    typo = fast("retention", q.name, "--completed", "100")
    assert typo.returncode == exits.NO_QUEUE and queue_keys(r, q) == set()
    shown = fast("--create", "retention", q.name)
    assert shown.returncode == 0 and "keeps no history" in shown.stdout
    q.enqueue("makes the queue")
    doc = as_json(fast("--json", "retention", q.name, "--completed", "100", "--dead-age", "7d"))
    assert doc == {
        "queue": q.name,
        "completed": 100,
        "completed_age_ms": None,
        "dead": None,
        "dead_age_ms": 7 * 86_400_000,
        "trimmed": 0,
    }
    # an option given replaces that limit only; 0 clears it
    fast("retention", q.name, "--completed-age", "90s", "--completed", "0")
    assert r.hgetall(q.keys.meta) == {"keep_completed_ms": "90000", "keep_dead_ms": "604800000"}
    text = fast("retention", q.name).stdout
    assert "completed" in text and "1m 30s" in text and "7d" in text  # readable ages
    raw = fast("--raw", "retention", q.name).stdout
    assert "90000" in raw and "604800000" in raw
    bad = fast("retention", q.name, "--dead-age", "soon")
    assert bad.returncode == 2 and r.hgetall(q.keys.meta)["keep_dead_ms"] == "604800000"
    assert [e.verb for e in q.audit(5)] == ["set_retention", "set_retention"]


def test_job_show_carries_a_kept_job_history(fast: Any, q: Queue) -> None:
    jid = q.enqueue({"n": 1}, keep_ms=60_000, max_attempts=3)
    got = q.claim()
    assert got is not None
    q.retry(jid, got.token, "boom \x1b[31m")
    q.promote()
    got = q.claim()
    assert got is not None
    q.complete(jid, got.token, result={"ok": True})
    doc = as_json(fast("--json", "job", "show", q.name, jid))
    assert doc["state"] == "completed" and doc["keep"] == 60_000
    assert doc["result"] == '{"ok":true}' and isinstance(doc["finished_at"], int)
    assert [(e["attempt"], e["error"]) for e in doc["errors"]] == [(1, "boom \x1b[31m")]
    text = fast("job", "show", q.name, jid).stdout
    assert "error (attempt 1)" in text and "\x1b" not in text
    done = as_json(fast("--json", "jobs", q.name, "completed"))
    assert [j["id"] for j in done["jobs"]] == [jid]
    assert as_json(fast("--json", "bulk", "clean", q.name, "--older-than-ms", "0",
                        "--state", "completed", "--yes"))["matched"] == 1  # fmt: skip
