"""Check before write (issue 12, Deliver 2): the bad-input cases the issue lists, each
refused with a typed error before anything is sent, and the enqueue script that checks
its own numbers before its first write. The hostile-input property test is
``test_hostile.py``."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import redis
from click.testing import CliRunner

from conftest import dump
from echomq import (
    Backoff,
    EchoMQError,
    InvalidArgument,
    InvalidJobId,
    InvalidName,
    InvalidPayload,
    Queue,
    checks,
    errors,
)
from echomq.backoff import spec_text
from echomq.cli import app as cli_app
from echomq.cli import exits
from echomq.embedded import EmbeddedServer
from echomq.scripts import Eval, script
from echomq.worker import Worker, WorkerConfig
from test_lifecycle import CountingConnection, counting_client, run_score


@pytest.fixture()
def cq(server: EmbeddedServer, qname: str) -> Iterator[Queue]:
    """A queue whose client counts every write to the server."""
    client = counting_client(server.url)
    queue = Queue(qname, client=client)
    yield queue
    client.close()


def refused_before_io(q: Queue, r: redis.Redis, call: Any, cls: type[Exception]) -> None:
    """``call()`` raises ``cls``, sends nothing and leaves every key as it was."""
    before, writes = dump(r, q), CountingConnection.writes
    with pytest.raises(cls):
        call()
    assert CountingConnection.writes == writes, "a command was sent"
    assert dump(r, q) == before


def test_every_input_error_is_an_invalid_argument() -> None:
    for cls in (InvalidName, InvalidJobId, InvalidPayload):
        assert issubclass(cls, InvalidArgument)
        assert issubclass(cls, ValueError)
    assert issubclass(InvalidArgument, EchoMQError)
    assert errors.REPLY_CODES["EMQARG"] is InvalidArgument


def test_a_huge_priority_half_writes_nothing(cq: Queue, r: redis.Redis) -> None:
    # issue 12, item 2: the row was written, then the ZADD failed
    jid = cq.enqueue("seed")
    huge = (2**1100, 2**53 + 1, -(2**53) - 1, 2**63, 2**20 + 1, -(2**20) - 1)
    for bad in (*huge, float("inf"), float("nan"), 1.5, True):
        refused_before_io(cq, r, lambda b=bad: cq.enqueue("x", priority=b), InvalidArgument)
        refused_before_io(cq, r, lambda b=bad: cq.enqueue_many(["x"], priority=b), InvalidArgument)
        refused_before_io(
            cq, r, lambda b=bad: cq.repeat("r", every_ms=10, priority=b), InvalidArgument
        )
    # the edges of the range are exact scores: priority * 2**32 + seq (seed took seq 0)
    top = cq.enqueue("top", priority=-(2**20))
    low = cq.enqueue("low", priority=2**20)
    assert r.zscore(cq.keys.pending, top) == run_score(-(2**20), 1)
    assert r.zscore(cq.keys.pending, low) == run_score(2**20, 2)
    assert r.zrange(cq.keys.pending, 0, -1) == [top, jid, low]


@pytest.mark.parametrize(
    ("field", "slot"),
    [("priority", 0), ("max_attempts", 3), ("delay_ms", 4), ("run_at_ms", 5)],
)
def test_the_enqueue_script_checks_its_numbers_before_its_first_write(
    q: Queue, r: redis.Redis, field: str, slot: int
) -> None:
    # a raw caller past the Python gate: with a dedup id (the first write of a job is
    # its SET NX), the script still refuses before writing anything
    q.enqueue("seed")
    before = dump(r, q)
    opts = [""] * 7
    opts[slot] = "1e400"
    op = Eval(script("enqueue"), (q.keys.base,), ("1", "4", "JOB00000000042", '"x"', "d", "1"))
    op = Eval(op.script, op.keys, (*op.args, *opts))
    with pytest.raises(InvalidArgument, match=field):
        q.runner.execute(op)
    assert dump(r, q) == before


@pytest.mark.parametrize("priority", ["1048577", "-1048577", "9007199254740992"])
def test_the_enqueue_script_refuses_a_priority_past_its_range_before_writing(
    q: Queue, r: redis.Redis, priority: str
) -> None:
    # the run order's score (priority * 2**32 + seq) is exact only within +-2**20
    q.enqueue("seed")
    before = dump(r, q)
    args = ("1", "4", "JOB00000000042", '"x"', "d", "1", priority)
    with pytest.raises(InvalidArgument, match=r"priority is not within -1048576\.\.1048576"):
        q.runner.execute(Eval(script("enqueue"), (q.keys.base,), args))
    assert dump(r, q) == before
    # the edges are taken
    edge = "-1048576" if priority.startswith("-") else "1048576"
    args = ("1", "2", "JOB00000000043", '"x"', edge)
    assert q.runner.execute(Eval(script("enqueue"), (q.keys.base,), args)) == 1


def test_the_enqueue_script_refuses_a_short_argument_list_before_writing(
    q: Queue, r: redis.Redis
) -> None:
    q.enqueue("seed")
    before = dump(r, q)
    # three jobs announced, the arguments of two sent: the first two rows must not land
    op = Eval(script("enqueue"), (q.keys.base,), ("3", "2", "JOB00000000001", '"a"'))
    op = Eval(op.script, op.keys, (*op.args, "JOB00000000002", '"b"'))
    with pytest.raises(InvalidArgument, match="arguments"):
        q.runner.execute(op)
    for bad_n in ("x", "-1", "inf"):
        with pytest.raises(InvalidArgument):
            q.runner.execute(Eval(op.script, op.keys, (bad_n, "2")))
    assert dump(r, q) == before


def test_budgets_counts_and_pages_past_the_limits(cq: Queue, r: redis.Redis) -> None:
    jid = cq.enqueue("seed")
    calls = [
        lambda v: cq.promote(v),
        lambda v: cq.reap(v),
        lambda v: cq.check_stalled(budget=v),
        lambda v: cq.check_stalled(max_stalled=v),
        lambda v: cq.drain(budget=v),
        lambda v: cq.obliterate(budget=v),
        lambda v: cq.claim_many(v),
        lambda v: cq.browse("pending", n=v),
        lambda v: cq.browse("pending", offset=v),
        lambda v: cq.groups(page=v),
        lambda v: cq.drain_group("g", budget=v),
        lambda v: cq.repeats(v),
        lambda v: cq.set_group_limit("g", v),
        lambda v: cq.set_group_weight("g", v),
        lambda v: cq.add_log(jid, "line", keep=v),
        lambda v: cq.complete(jid, v),
        lambda v: cq.lock_job(jid, 1, ttl_ms=v),
    ]
    for call in calls:
        for bad in (2**63, 2**64, 10**5000, -1, float("nan"), "5", None):
            refused_before_io(cq, r, lambda c=call, b=bad: c(b), InvalidArgument)
    # the limits themselves pass
    assert cq.promote(checks.MAX_BATCH) == 0
    assert cq.browse("pending", n=checks.MAX_BATCH, offset=checks.MAX_COUNT) == []


def test_delays_and_due_times_stay_within_the_horizon(cq: Queue, r: redis.Redis) -> None:
    for bad in (checks.HORIZON_MS + 1, 10**308, 1e308, float("inf"), -1):
        refused_before_io(cq, r, lambda b=bad: cq.enqueue("x", delay_ms=b), InvalidArgument)
        refused_before_io(cq, r, lambda b=bad: cq.claim(b), InvalidArgument)
        refused_before_io(cq, r, lambda b=bad: cq.repeat("r", every_ms=b), InvalidArgument)
    for bad in (checks.MAX_RUN_AT_MS + 1, -1, 1e12):
        refused_before_io(cq, r, lambda b=bad: cq.enqueue("x", run_at_ms=b), InvalidArgument)
    far = cq.enqueue("x", delay_ms=checks.HORIZON_MS)
    last = cq.enqueue("y", run_at_ms=checks.MAX_RUN_AT_MS)
    assert r.zscore(cq.keys.schedule, last) == checks.MAX_RUN_AT_MS
    assert r.zmscore(cq.keys.schedule, [far, last])[0] is not None


def test_payloads_must_be_strict_json_and_valid_utf8(cq: Queue, r: redis.Redis) -> None:
    jid = cq.enqueue("seed")
    bad_payloads: list[Any] = [
        float("nan"),
        {"x": float("inf")},
        [float("-inf")],
        "\ud800",
        {"k\udfff": 1},
        {1, 2},
        b"bytes",
        object(),
        10**5000,
        _deep(5000),
    ]
    for bad in bad_payloads:
        refused_before_io(cq, r, lambda b=bad: cq.enqueue(b), InvalidPayload)
        refused_before_io(cq, r, lambda b=bad: cq.enqueue_many(["ok", b]), InvalidPayload)
        refused_before_io(cq, r, lambda b=bad: cq.update_data(jid, b), InvalidPayload)
        refused_before_io(
            cq, r, lambda b=bad: cq.repeat("r", every_ms=10, payload=b), InvalidPayload
        )
    for bad in ("text", b"bytes", {"a": 1}, 5):
        refused_before_io(cq, r, lambda b=bad: cq.enqueue_many(b), InvalidArgument)
    # NUL and the whole of Unicode are fine
    odd = cq.enqueue({"s": "a\x00b\U0001f600é"})
    assert cq.get_job(odd).data == {"s": "a\x00b\U0001f600é"}  # type: ignore[union-attr]


def _deep(n: int) -> Any:
    doc: Any = 0
    for _ in range(n):
        doc = [doc]
    return doc


def test_text_arguments_must_be_valid_utf8(cq: Queue, r: redis.Redis) -> None:
    jid = cq.enqueue("seed")
    refused_before_io(cq, r, lambda: cq.enqueue("x", name="n\ud800"), InvalidArgument)
    refused_before_io(cq, r, lambda: cq.enqueue("x", dedup_id="d\ud800"), InvalidName)
    refused_before_io(cq, r, lambda: cq.remove_job(jid, dedup_id="d\ud800"), InvalidName)
    refused_before_io(cq, r, lambda: cq.add_log(jid, "l\ud800"), InvalidArgument)
    refused_before_io(cq, r, lambda: cq.add_log(jid, 5), InvalidArgument)  # type: ignore[arg-type]
    refused_before_io(cq, r, lambda: cq.update_progress(jid, "p\ud800"), InvalidArgument)
    refused_before_io(cq, r, lambda: cq.update_progress(jid, ["\ud800"]), InvalidArgument)
    refused_before_io(cq, r, lambda: cq.update_progress(jid, 10**5000), InvalidArgument)
    refused_before_io(cq, r, lambda: cq.browse([]), InvalidArgument)  # type: ignore[arg-type]
    refused_before_io(cq, r, lambda: cq.obliterate(force="no"), InvalidArgument)  # type: ignore[arg-type]
    refused_before_io(cq, r, lambda: cq.drain(include_schedule=1), InvalidArgument)  # type: ignore[arg-type]


def test_a_failure_text_is_kept_even_when_it_is_not_valid_utf8(q: Queue, r: redis.Redis) -> None:
    # refusing it would lose the failure: the bad code point is escaped instead
    jid = q.enqueue("x")
    c = q.claim()
    assert c is not None
    assert q.retry(jid, c.token, "boom \ud800 here") == "scheduled"
    assert r.hget(q.keys.job(jid), "last_error") == "boom \\ud800 here"
    assert r.hget(q.keys.job(jid), "state") == "scheduled"


def test_pairs_are_checked_before_anything_is_sent(cq: Queue, r: redis.Redis) -> None:
    jid = cq.enqueue("seed")
    for bad in ([(jid,)], [jid], "ab", [(jid, 2**64)], [(jid, True)], [(5, 1)], 7):
        cls = InvalidJobId if bad == [(5, 1)] else InvalidArgument
        refused_before_io(cq, r, lambda b=bad: cq.complete_many(b), cls)
        refused_before_io(cq, r, lambda b=bad: cq.extend_locks(b, 1000), cls)
    many = [(jid, 1)] * (checks.MAX_BATCH + 1)
    refused_before_io(cq, r, lambda: cq.extend_locks(many, 1000), InvalidArgument)
    assert cq.extend_locks([], 1000) == []
    refused_before_io(cq, r, lambda: cq.extend_locks([], 0), InvalidArgument)


def test_a_bad_cron_is_refused_before_anything_is_sent(cq: Queue, r: redis.Redis) -> None:
    for bad in ("nonsense", "0 0 30 2 *", "* " * 200, "\ud800", "", 5):
        refused_before_io(cq, r, lambda b=bad: cq.repeat("r", cron=b), InvalidArgument)


@pytest.mark.parametrize(
    "url", ["notaurl", "redis://h:port/0", "redis://h:99999/0", "http://127.0.0.1/"]
)
def test_emq_with_a_malformed_url_is_a_usage_error(url: str) -> None:
    runner = CliRunner()
    res = runner.invoke(cli_app.cli, ["--url", url, "stats", "q"])
    assert isinstance(res.exception, SystemExit) and res.exit_code == exits.USAGE
    assert "invalid --url" in res.stderr and "Traceback" not in res.stderr
    res = runner.invoke(cli_app.cli, ["--json", "--url", url, "pause", "q"])
    assert res.exit_code == exits.USAGE
    assert '"error": "usage"' in res.stdout


def test_checks_pass_good_values_through() -> None:
    assert checks.priority(-5) == -5
    assert checks.ms(0, "delay_ms", zero=True) == 0
    assert spec_text(Backoff.fixed(5)) == '{"type":"fixed","delay":5}'
    assert spec_text("250") == "250"
    assert spec_text(None) is None
    assert checks.error_text(ValueError("x")) == "x"
    assert checks.url("redis://127.0.0.1:1/0") == "redis://127.0.0.1:1/0"


def test_worker_settings_stay_within_the_limits_of_the_verbs_they_feed() -> None:
    # a bad setting fails the constructor, not every turn of the worker's loop
    for bad in (
        {"lease_ms": checks.HORIZON_MS},  # its derived lock would pass the horizon
        {"lease_ms": 2**63},
        {"concurrency": 2**63},
        {"claim_batch": checks.MAX_BATCH + 1},
        {"lock_ms": checks.HORIZON_MS + 1},
        {"job_timeout_ms": float("inf")},
        {"max_stalled": True},
        {"maintenance_budget": 0},
    ):
        with pytest.raises(InvalidArgument):
            WorkerConfig(**bad)
    with pytest.raises(InvalidArgument):
        Worker("q", lambda job: None, lease_ms=2**63)
    top = WorkerConfig(lease_ms=checks.HORIZON_MS // 2, claim_batch=checks.MAX_BATCH)
    assert top.lock == 2 * (checks.HORIZON_MS // 2) <= checks.HORIZON_MS
