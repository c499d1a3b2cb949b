"""``emq`` at 3 a.m.: a mistyped queue is refused, not made; a retention that deletes
asks first; every error (usage ones too) is a JSON document with ``--json``.

Run in-process through :func:`echomq.cli.app.main` (the ``--json``/``--create``
hoisting and the usage errors live there), against the private server.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pytest
import redis

from conftest import dump, queue_keys
from echomq import Queue, ids
from echomq.cli import app as cli_app
from echomq.cli import exits
from echomq.cli.times import duration_text, utc_text
from echomq.discovery import server_label
from echomq.embedded import EmbeddedServer
from operator_support import put_job


@dataclass
class Ran:
    code: int
    stdout: str
    stderr: str

    @property
    def doc(self) -> Any:
        return json.loads(self.stdout)


@pytest.fixture()
def emq(server: EmbeddedServer, capsys: pytest.CaptureFixture[str]) -> Any:
    def run(*args: str) -> Ran:
        capsys.readouterr()
        code = cli_app.main(["--url", server.url, *args])
        out, err = capsys.readouterr()
        return Ran(code, out, err)

    return run


#: Every verb that must not act on a queue with no key (the queue name is filled in).
TYPO_VERBS: list[tuple[str, ...]] = [
    ("stats", "{q}"),
    ("pause", "{q}"),
    ("resume", "{q}"),
    ("drain", "{q}", "--yes"),
    ("obliterate", "{q}", "--yes"),
    ("retention", "{q}", "--dead", "10"),
    ("jobs", "{q}", "pending"),
    ("audit", "{q}"),
    ("workers", "{q}"),
    ("group", "list", "{q}"),
    ("group", "pause", "{q}", "g"),
    ("group", "limit", "{q}", "g", "2"),
    ("group", "drain", "{q}", "g", "--yes"),
    ("job", "show", "{q}", "{id}"),
    ("job", "remove", "{q}", "{id}", "--yes"),
    ("job", "rerun", "{q}", "{id}", "--yes"),
    ("bulk", "remove", "{q}", "dead", "--yes"),
    ("bulk", "clean", "{q}", "--older-than-ms", "0", "--yes"),
    ("repeat", "list", "{q}"),
    ("repeat", "cancel", "{q}", "tick"),
]


def test_a_mistyped_queue_is_refused_by_every_verb(
    emq: Any, server: EmbeddedServer, make_queue: Any, qname: str, r: redis.Redis
) -> None:
    real = make_queue(qname + "-orders")
    real.enqueue({"n": 1})
    typo = make_queue(qname + "-ordres")
    before = dump(r, real)
    jid = ids.new_id()
    for verb in TYPO_VERBS:
        args = [a.format(q=typo.name, id=jid) for a in verb]
        got = emq(*args)
        assert got.code == exits.NO_QUEUE == 8, (verb, got.stderr)
        assert got.stderr.strip() == (
            f"error: no queue named {typo.name} on {server_label(server.url)} "
            f"(did you mean {real.name}?); --create acts on it anyway"
        ), verb
        assert got.stdout == ""
        assert queue_keys(r, typo) == set(), verb  # nothing made
    assert dump(r, real) == before
    # --json: the one error document, the suggestion as data
    got = emq("pause", typo.name, "--json")
    assert got.code == 8 and got.doc == {
        "ok": False,
        "error": "no_queue",
        "message": got.stderr.strip(),
        "exit": 8,
        "queue": typo.name,
        "suggestion": real.name,
    }
    assert queue_keys(r, typo) == set()


def test_create_enqueue_and_the_waiting_verbs(emq: Any, q: Queue, r: redis.Redis) -> None:
    # --create anywhere on the line: the rare intent (pre-pause a queue)
    got = emq("pause", q.name, "--create")
    assert got.code == 0 and got.stdout.strip() == f"paused {q.name}"
    assert r.hgetall(q.keys.meta) == {"paused": "1"}
    assert emq("stats", q.name).code == 0  # a queue now
    # a malformed id is still gated before anything is sent (the check comes after)
    other = q.name + "-new"
    got = emq("job", "show", other, "JOB-bad")
    assert got.code == exits.MALFORMED
    # enqueue and repeat add make queues, as a producer does
    fresh = Queue(other, client=r)
    got = emq("enqueue", other, "{}")
    assert got.code == 0 and r.zrange(fresh.keys.pending, 0, -1) == [got.stdout.strip()]
    got = emq("repeat", "add", other + "-r", "tick", "--every-ms", "60000")
    assert got.code == 0
    # events may wait for a queue to appear: a note, not a refusal
    got = emq("events", other + "-later", "--timeout", "0.1")
    assert got.code == 0
    assert f"note: no queue named {other}-later" in got.stderr
    assert "waiting for it to appear" in got.stderr
    assert queue_keys(r, Queue(other + "-later", client=r)) == set()


def test_retention_asks_and_dry_runs_before_deleting(emq: Any, q: Queue, r: redis.Redis) -> None:
    dead = [put_job(q, "dead")[0] for _ in range(5)]
    before = dump(r, q)
    dry = emq("--json", "retention", q.name, "--dead", "2", "--dry-run")
    assert dry.code == 0
    assert dry.doc == {
        "queue": q.name,
        "completed": None,
        "completed_age_ms": None,
        "dead": 2,
        "dead_age_ms": None,
        "dry_run": True,
        "would_trim": {"completed": 0, "dead": 3},
    }
    text = emq("retention", q.name, "--dead", "2", "--dry-run")
    assert "would delete 0 completed and 3 dead jobs now; nothing changed" in text.stdout
    ages = emq("--json", "retention", q.name, "--dead-age", "1ms", "--dead", "4", "--dry-run")
    assert ages.doc["would_trim"] == {"completed": 0, "dead": 5}  # the age takes them all
    # off a terminal, no --yes: nothing changes
    refused = emq("retention", q.name, "--dead", "2")
    assert refused.code == exits.NOT_CONFIRMED
    assert dump(r, q) == before
    done = emq("--json", "retention", q.name, "--dead", "2", "--yes")
    assert done.code == 0 and done.doc["trimmed"] == 3
    assert r.zrange(q.keys.dead, 0, -1) == dead[3:]
    # a limit that deletes nothing now asks nothing
    assert emq("retention", q.name, "--dead", "10").code == 0
    assert r.hget(q.keys.meta, "keep_dead") == "10"


def test_every_destructive_trim_asks_and_dry_runs(emq: Any, q: Queue, r: redis.Redis) -> None:
    # issue 29: retention (above), bulk remove, bulk clean, drain and group drain each
    # count what they would delete with --dry-run and ask first (exit 5 off a terminal)
    for _ in range(3):
        put_job(q, "dead")
    q.enqueue({"x": 1})
    q.enqueue({"x": 2}, group="g")
    q.enqueue({"x": 3}, group="g")
    q.enqueue({"x": 4}, delay_ms=60_000)
    before = dump(r, q)
    dry = {
        ("bulk", "remove", q.name, "dead"): ("matched", 3),
        ("bulk", "clean", q.name, "--older-than-ms", "0"): ("matched", 3),
        ("drain", q.name): ("would_drain", 3),
        ("drain", q.name, "--include-schedule"): ("would_drain", 4),
        ("group", "drain", q.name, "g"): ("would_drain", 2),
    }
    for args, (field, count) in dry.items():
        got = emq("--json", *args, "--dry-run")
        assert got.code == 0, (args, got.stderr)
        assert got.doc["dry_run"] is True and got.doc[field] == count, (args, got.doc)
        text = emq(*args, "--dry-run").stdout
        assert text.startswith("dry run: ") and "nothing changed" in text, (args, text)
        asked = emq(*args)
        assert asked.code == exits.NOT_CONFIRMED, (args, asked.stderr)
    assert dump(r, q) == before
    done = emq("--json", "group", "drain", q.name, "g", "--yes")
    assert done.code == 0 and done.doc["drained"] == 2
    assert not r.exists(q.keys.lane("g"))


@pytest.mark.parametrize(
    "args",
    [
        ("jobs", "{q}", "pending", "--since", "notatime"),
        ("retention", "{q}", "--completed", "-1"),
        ("stats", "{q}", "--no-such-option"),
        ("enqueue", "{q}", "[not json"),
        ("no-such-command",),
        ("enqueue", "{q}"),  # a missing argument
    ],
)
def test_json_usage_errors_print_a_document(
    emq: Any, q: Queue, r: redis.Redis, args: tuple[str, ...]
) -> None:
    q.enqueue("present")
    before = dump(r, q)
    got = emq("--json", *(a.format(q=q.name) for a in args))
    assert got.code == exits.USAGE == 2
    doc = got.doc
    assert doc["ok"] is False and doc["error"] == "usage" and doc["exit"] == 2
    assert doc["message"] and doc["message"] in got.stderr
    assert dump(r, q) == before
    # without --json, stdout stays empty
    plain = emq(*(a.format(q=q.name) for a in args))
    assert plain.code == 2 and plain.stdout == ""


def test_stats_summarises_many_lanes_and_warns_without_workers(
    emq: Any, q: Queue, r: redis.Redis
) -> None:
    for i in range(30):
        for _ in range(i % 4 + 1):
            q.enqueue({"i": i}, group=f"g{i:02d}")
    q.pause_group("g00")
    before = dump(r, q)
    text = emq("stats", q.name, "--top", "3")
    assert text.code == 0
    lines = text.stdout.splitlines()
    assert len(lines) < 40  # a summary, not a line per lane
    assert "warning: 73 pending but no live workers" in text.stdout
    # the deepest first (depth 4: g03, g07, ...), the rest in one line
    rows = [ln for ln in lines if ln.startswith("│ g")]
    assert [row.split("│")[1].strip() for row in rows] == ["g03", "g07", "g11"]
    assert "... and 27 more of 30 lanes (61 pending, 0 in flight, 1 paused)" in text.stdout
    doc = emq("--json", "stats", q.name, "--top", "0").doc
    assert doc["group_count"] == 30 and len(doc["groups"]) == 30
    assert doc["workers"] == 0 and doc["stranded"] is True
    assert [g["depth"] for g in doc["groups"]] == sorted(
        (g["depth"] for g in doc["groups"]), reverse=True
    )
    # paused: jobs wait on purpose, no warning
    q.pause()
    assert "warning" not in emq("stats", q.name).stdout
    q.resume()
    before = dump(r, q)  # the pause and resume are journaled
    # a live worker: no warning, and it is counted
    r.hset(q.keys.worker("0123456789abcdef"), mapping={"host": "h", "pid": "1", "beat": "1"})
    r.zadd(q.keys.workers, {"0123456789abcdef": 1})
    doc = emq("--json", "stats", q.name).doc
    assert doc["workers"] == 1 and doc["stranded"] is False and len(doc["groups"]) == 10
    r.delete(q.keys.worker("0123456789abcdef"), q.keys.workers)
    assert dump(r, q) == before


def test_readable_times_durations_and_refusals(emq: Any, q: Queue, r: redis.Redis) -> None:
    assert [duration_text(ms) for ms in (250, 1500, 90_000, 3_600_000, 604_800_000, 5_400_000)] == [
        "250ms", "1.5s", "1m 30s", "1h", "7d", "1h 30m",
    ]  # fmt: skip
    jid = q.enqueue({"n": 1}, keep_ms=60_000)
    got = q.claim()
    assert got is not None
    q.complete(jid, got.token)
    shown = emq("job", "show", q.name, jid).stdout
    enqueued = int(r.hget(q.keys.job(jid), "enqueued_at"))
    assert utc_text(enqueued) in shown and " ago)" in shown  # ISO UTC and how long ago
    assert str(enqueued) not in shown
    assert str(enqueued) in emq("--raw", "job", "show", q.name, jid).stdout
    assert emq("--json", "job", "show", q.name, jid).doc["enqueued_at"] == enqueued
    # a refusal says what its reason means, not the script's internal code
    refused = emq("obliterate", q.name, "--yes")
    assert refused.code == exits.REFUSED["not_paused"]
    assert refused.stderr.strip() == "refused: not_paused: the queue is not paused (obliterate)"
    assert "EMQ" not in refused.stderr
