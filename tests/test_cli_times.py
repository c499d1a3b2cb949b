"""Times on the command line: ``emq jobs --since/--until`` (an ISO 8601 time, an age
or epoch ms, one parser shared with the bulk commands' ``--since/--until``, aliases of
``--since-ms/--until-ms``), and ``emq job logs`` printing each line's time.

Every command runs against the private server; a bad time is a usage error (exit 2)
found before any connection is made.
"""

from __future__ import annotations

import json
import time
from datetime import datetime, timezone
from typing import Any

import pytest
import redis
from click.testing import CliRunner

from conftest import dump
from echomq import Queue, ids
from echomq.checks import MAX_RUN_AT_MS
from echomq.cli import app as cli_app
from echomq.cli.times import parse_time_ms, utc_text
from echomq.embedded import EmbeddedServer

SHIFT = ids.NODE_BITS + ids.SEQ_BITS


def id_at(ms: int, seq: int = 0) -> str:
    """A job id minted at ``ms`` (the creation time the range reads)."""
    return ids.encode(((ms - ids.EPOCH_MS) << SHIFT) | seq)


def at(text: str) -> int:
    return int(datetime.fromisoformat(text).replace(tzinfo=timezone.utc).timestamp() * 1000)


class Cli:
    """``emq --url <private> ...`` in-process; ``connections`` counts the server's
    accepted connections, so a test can show that a command sent nothing."""

    def __init__(self, server: EmbeddedServer, r: redis.Redis) -> None:
        self.url, self.r, self.runner = server.url, r, CliRunner()

    def __call__(self, *args: str) -> Any:
        return self.runner.invoke(cli_app.cli, ["--url", self.url, *args])

    def connections(self) -> int:
        return int(self.r.info("stats")["total_connections_received"])


@pytest.fixture()
def emq(server: EmbeddedServer, r: redis.Redis) -> Cli:
    return Cli(server, r)


def listed(res: Any) -> list[str]:
    assert res.exit_code == 0, res.output
    return [j["id"] for j in json.loads(res.stdout)["jobs"]]


# ---------------------------------------------------------------- the parser


def test_parse_time_ms_reads_the_three_forms() -> None:
    now = at("2026-12-01T12:00:00")
    assert parse_time_ms("1764590400000", now) == 1_764_590_400_000
    assert parse_time_ms("0", now) == 0
    assert parse_time_ms("90s", now) == now - 90_000
    assert parse_time_ms("15m", now) == now - 15 * 60_000
    assert parse_time_ms("2h", now) == now - 2 * 3_600_000
    assert parse_time_ms("3d", now) == now - 3 * 86_400_000
    assert parse_time_ms("500ms", now) == now - 500
    assert parse_time_ms(" 2H ", now) == now - 2 * 3_600_000
    assert parse_time_ms("2026-12-01", now) == at("2026-12-01T00:00:00")
    assert parse_time_ms("2026-12-01T11:30", now) == at("2026-12-01T11:30:00")
    assert parse_time_ms("2026-12-01T11:30:00.125Z", now) == at("2026-12-01T11:30:00") + 125
    assert parse_time_ms("2026-12-01T13:30:00+02:00", now) == at("2026-12-01T11:30:00")
    assert parse_time_ms("2026-12-01 11:30:00", now) == at("2026-12-01T11:30:00")


@pytest.mark.parametrize(
    "bad",
    ["", "yesterday", "2026-13-01", "-5", "10x", "1.5h", "h", "3 days", "9" * 16, "1969-12-31"],
)
def test_parse_time_ms_refuses_anything_else(bad: str) -> None:
    with pytest.raises(ValueError):
        parse_time_ms(bad, at("2026-12-01T12:00:00"))


def test_utc_text_is_iso_8601_utc_with_ms() -> None:
    assert utc_text(at("2026-12-01T11:30:00") + 7) == "2026-12-01T11:30:00.007Z"
    assert utc_text(0) == "1970-01-01T00:00:00.000Z"
    assert parse_time_ms(utc_text(MAX_RUN_AT_MS), 0) == MAX_RUN_AT_MS


# ---------------------------------------------------------------- emq jobs --since/--until


def test_jobs_by_an_absolute_range(emq: Cli, q: Queue, r: redis.Redis) -> None:
    a = q.enqueue("a", job_id=id_at(at("2026-01-01T00:00:00")))
    b = q.enqueue("b", job_id=id_at(at("2026-01-02T12:00:00")))
    c = q.enqueue("c", job_id=id_at(at("2026-01-03T00:00:00")))
    before = dump(r, q)
    day = emq("--json", "jobs", q.name, "pending", "--since", "2026-01-02", "--until",
              "2026-01-02T23:59:59.999Z")  # fmt: skip
    assert listed(day) == [b]
    doc = json.loads(day.stdout)
    assert (doc["since_ms"], doc["until_ms"]) == (
        at("2026-01-02T00:00:00"),
        at("2026-01-03T00:00:00") - 1,
    )
    # an offset is honoured: 13:00+02:00 is 11:00 UTC, before b
    assert listed(
        emq("--json", "jobs", q.name, "pending", "--since", "2026-01-02T13:00+02:00")
    ) == [
        b,
        c,
    ]
    # epoch ms, inclusive at both ends
    ms = str(ids.minted_at_ms(a))
    assert listed(emq("--json", "jobs", q.name, "pending", "--until", ms)) == [a]
    assert listed(emq("--json", "jobs", q.name, "pending", "--since", ms, "--until", ms)) == [a]
    # with --find, both filter
    assert listed(emq("--json", "jobs", q.name, "pending", "--since", "2026-01-02",
                      "--find", c, "--field", "id")) == [c]  # fmt: skip
    # the text table shows the time the range is on
    text = emq("jobs", q.name, "pending", "--since", "2026-01-02T12:00:00")
    assert text.exit_code == 0, text.output
    assert "created (UTC)" in text.stdout and "2026-01-02T12:00:00.000Z" in text.stdout
    assert a not in text.stdout and b in text.stdout and c in text.stdout
    assert dump(r, q) == before  # a read


def test_jobs_by_age(emq: Cli, q: Queue, r: redis.Redis) -> None:
    now = int(time.time() * 1000)
    old = q.enqueue("old", job_id=id_at(now - 3 * 3_600_000), max_attempts=1)
    recent = q.enqueue("recent", job_id=id_at(now - 10 * 60_000), max_attempts=1)
    dead = q.enqueue("dead-recent", job_id=id_at(now - 60_000), max_attempts=1)
    got = q.claim_many(3)
    assert {j.id for j in got} == {old, recent, dead}
    for j in got:
        assert q.retry(j.id, j.token, "boom") == "dead"
    assert listed(emq("--json", "jobs", q.name, "dead", "--since", "1h")) == [dead, recent]
    assert listed(emq("--json", "jobs", q.name, "dead", "--until", "2h")) == [old]
    assert listed(emq("--json", "jobs", q.name, "dead", "--since", "4h", "--until", "5m")) == [
        recent,
        old,
    ]
    assert listed(emq("--json", "jobs", q.name, "dead", "--since", "30s")) == []


@pytest.mark.parametrize(
    "args",
    [
        ["--since", "yesterday"],
        ["--until", "2026-02-30"],
        ["--since", "-5"],
        ["--since", "15 minutes"],
        ["--until", "99999999999999999"],
        ["--since", "2026-01-02", "--until", "2026-01-01"],  # a range that ends first
    ],
)
def test_a_bad_time_is_a_usage_error_and_sends_nothing(
    emq: Cli, q: Queue, r: redis.Redis, args: list[str]
) -> None:
    q.enqueue("x")
    before, conns = dump(r, q), emq.connections()
    res = emq("jobs", q.name, "pending", *args)
    assert res.exit_code == 2, res.output
    assert "--since" in res.stderr or "--until" in res.stderr
    assert emq.connections() == conns  # no connection was made
    assert dump(r, q) == before
    bulk = emq("bulk", "reprocess", q.name, *args, "--yes")
    assert bulk.exit_code == 2, bulk.output
    assert emq.connections() == conns
    assert dump(r, q) == before


# ---------------------------------------------------------------- the bulk commands


def test_bulk_since_until_are_aliases_of_the_ms_options(emq: Cli, q: Queue, r: redis.Redis) -> None:
    made = [
        q.enqueue(n, job_id=id_at(at(t)), max_attempts=1)
        for n, t in (("a", "2026-01-01T00:00:00"), ("b", "2026-01-02T00:00:00"),
                     ("c", "2026-01-03T00:00:00"))
    ]  # fmt: skip
    for j in q.claim_many(3):
        assert q.retry(j.id, j.token, "boom") == "dead"
    dry = emq("--json", "bulk", "reprocess", q.name, "--since", "2026-01-02", "--dry-run")
    assert dry.exit_code == 0, dry.output
    assert json.loads(dry.stdout)["matched"] == 2
    ms = emq("--json", "bulk", "reprocess", q.name, "--since-ms", str(at("2026-01-02T00:00:00")),
             "--until-ms", "2026-01-02T23:00Z", "--dry-run")  # fmt: skip
    assert json.loads(ms.stdout)["matched"] == 1
    res = emq("--json", "bulk", "remove", q.name, "dead", "--until", "2026-01-02T00:00Z", "--yes")
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["matched"] == 2
    assert list(r.zrange(q.keys.dead, 0, -1)) == [made[2]]
    assert not r.exists(q.keys.job(made[0]), q.keys.job(made[1]))


# ---------------------------------------------------------------- emq job logs


def test_job_logs_print_each_time_and_escape_the_text(emq: Cli, q: Queue, r: redis.Redis) -> None:
    jid = q.enqueue("x")
    r.rpush(q.keys.logs(jid), "written before log times")
    q.add_log(jid, "\x1b]0;pwned\x07 title")
    q.add_log(jid, "[bold red]styled[/] text")
    stamps = [int(t) for t in r.lrange(q.keys.logtimes(jid), 0, -1)]
    before = dump(r, q)
    res = emq("job", "logs", q.name, jid)
    assert res.exit_code == 0, res.output
    assert res.stdout.splitlines() == [
        "-" + " " * 23 + "  written before log times",
        f"{utc_text(stamps[0])}  \\x1b]0;pwned\\x07 title",
        f"{utc_text(stamps[1])}  [bold red]styled[/] text",
    ]
    assert "\x1b" not in res.stdout
    doc = json.loads(emq("--json", "job", "logs", q.name, jid).stdout)
    assert doc == {
        "id": jid,
        "logs": ["written before log times", "\x1b]0;pwned\x07 title", "[bold red]styled[/] text"],
        "entries": [
            {"time_ms": None, "line": "written before log times"},
            {"time_ms": stamps[0], "line": "\x1b]0;pwned\x07 title"},
            {"time_ms": stamps[1], "line": "[bold red]styled[/] text"},
        ],
    }
    assert dump(r, q) == before
