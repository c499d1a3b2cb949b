"""Structured logs: the worker's and the operator's records carry queue, job id,
attempt and token as extra fields; the JSON formatter; ``emq worker --log-format json
--metrics-port P`` end to end; the console's ``/metrics``."""

from __future__ import annotations

import dataclasses
import io
import json
import logging
import os
import subprocess
import sys
import textwrap
import time
import urllib.request
import warnings
from collections.abc import Callable
from pathlib import Path

import pytest

from echomq import JobContext, JobNotDead, Queue, Worker, WorkerConfig
from echomq.embedded import EmbeddedServer, free_port
from echomq.errors import InvalidArgument
from echomq.observability import logs
from worker_support import FAST, running, wait_until


def test_worker_records_carry_queue_job_attempt_and_token(
    q: Queue, caplog: pytest.LogCaptureFixture
) -> None:
    ok = q.enqueue({"ok": True})
    bad = q.enqueue({"ok": False}, max_attempts=1)

    def handle(job: JobContext) -> None:
        if not job.data["ok"]:
            raise RuntimeError("nope")

    caplog.set_level(logging.DEBUG, logger="echomq.worker")
    with running(Worker(q, handle, config=FAST)):
        wait_until(lambda: q.counts().dead == 1 and q.counts().completed == 1)
    mine = [r for r in caplog.records if getattr(r, "queue", None) == q.name]
    by = {
        (r.job_id, r.getMessage().split()[-1] if r.levelno == logging.DEBUG else "failed"): r
        for r in mine
    }  # type: ignore[attr-defined]
    started = by[(ok, "started")]
    assert (started.queue, started.job_id, started.attempt, started.token) == (q.name, ok, 1, 1)
    done = by[(ok, "completed")]
    assert done.outcome == "completed" and done.duration_ms >= 0
    failed = by[(bad, "failed")]
    assert failed.levelno == logging.WARNING and failed.outcome == "failed"
    assert (failed.error, failed.error_type, failed.attempt) == (
        "RuntimeError: nope",
        "RuntimeError",
        1,
    )
    assert failed.getMessage() == f"job {bad} failed (attempt 1): RuntimeError: nope"
    # one line by default; with DEBUG on, the traceback comes as a record of its own
    assert failed.exc_info is None
    tb = by[(bad, "traceback")]
    assert tb.levelno == logging.DEBUG and tb.exc_info is not None and "nope" in str(tb.exc_info[1])


def test_operator_verbs_log_their_outcome(q: Queue, caplog: pytest.LogCaptureFixture) -> None:
    jid = q.enqueue({"a": 1})
    caplog.set_level(logging.INFO, logger="echomq.operator")
    q.pause()
    with pytest.raises(JobNotDead):
        q.reprocess_job(jid)
    q.counts()  # reads are not logged
    recs = [r for r in caplog.records if r.name == "echomq.operator"]
    got = [(r.verb, r.queue, r.outcome, getattr(r, "job_id", None)) for r in recs]  # type: ignore[attr-defined]
    assert got == [("pause", q.name, "ok", None), ("reprocess_job", q.name, "not_dead", jid)]


def test_the_json_formatter_writes_one_object_per_record_with_the_extras() -> None:
    out = io.StringIO()
    handler = logs.configure("json", logging.DEBUG, out)
    try:
        logging.getLogger("echomq.worker").warning(
            "job %s failed",
            "JOB1",
            extra={"queue": "q", "job_id": "JOB1", "attempt": 2, "token": 2},
        )
        try:
            raise ValueError("x")
        except ValueError:
            logging.getLogger("echomq.operator").exception("oops", extra={"queue": "q"})
    finally:
        logging.getLogger("echomq").removeHandler(handler)
        logging.getLogger("echomq").propagate = True
        logging.getLogger("echomq").setLevel(logging.NOTSET)
    first, second = (json.loads(line) for line in out.getvalue().splitlines())
    assert first["level"] == "warning" and first["logger"] == "echomq.worker"
    assert first["msg"] == "job JOB1 failed"
    assert (first["queue"], first["job_id"], first["attempt"], first["token"]) == (
        "q",
        "JOB1",
        2,
        2,
    )
    assert first["ts"].endswith("+00:00")
    assert second["queue"] == "q" and "ValueError: x" in second["exc"]


def test_the_text_formatter_escapes_job_text() -> None:
    # a handler's exception text and a job's fields are data: an ESC sequence, a bell,
    # a bidi override or a line break must not reach the terminal tailing the log
    out = io.StringIO()
    handler = logs.configure("text", logging.DEBUG, out)
    hostile = "boom\x1b]0;owned\x07\x1b[2J\u202e\nFAKE WARNING echomq.worker: forged"
    try:
        try:
            raise RuntimeError(hostile)
        except RuntimeError as exc:
            logging.getLogger("echomq.worker").warning(
                "job %s failed: %s",
                "JOB1",
                exc,
                extra={"queue": "q", "job_name": "n\x1b[31m"},
                exc_info=exc,
            )
    finally:
        logging.getLogger("echomq").removeHandler(handler)
        logging.getLogger("echomq").propagate = True
        logging.getLogger("echomq").setLevel(logging.NOTSET)
    text = out.getvalue()
    assert not any(ch in text for ch in "\x1b\x07\u202e")
    lines = text.splitlines()
    # the message stays one line; the traceback keeps its own lines, each escaped
    assert "boom\\x1b]0;owned\\x07\\x1b[2J\\u202e\\nFAKE WARNING" in lines[0]
    assert lines[0].endswith("[queue=q job_name=n\\x1b[31m]")
    assert lines[1] == "Traceback (most recent call last):"
    assert lines[-2].startswith("RuntimeError: boom\\x1b]0;owned")
    assert lines[-1] == "FAKE WARNING echomq.worker: forged"  # a line break in the text


HANDLER = """
def handle(job):
    if job.data.get("fail"):
        raise ValueError("planned")
"""


def test_emq_worker_logs_json_and_serves_its_metrics(
    server: EmbeddedServer, make_queue: Callable[..., Queue], qname: str, tmp_path: Path
) -> None:
    pytest.importorskip("prometheus_client")
    (tmp_path / "obs_handler.py").write_text(textwrap.dedent(HANDLER))
    q = make_queue(qname)
    q.enqueue({"ok": 1})
    q.enqueue({"fail": 1}, max_attempts=1)
    port = free_port()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([*sys.path, str(tmp_path)])}
    cmd = [sys.executable, "-m", "echomq.cli", "--url", server.url, "worker", "obs_handler:handle"]
    cmd += ["--queue", q.name, "--log-format", "json", "--metrics-port", str(port)]
    cmd += ["--failure-level", "error", "--log-tracebacks"]
    proc = subprocess.Popen(cmd, cwd=tmp_path, env=env, stderr=subprocess.PIPE, text=True)
    try:
        wait_until(lambda: q.counts().dead == 1 and q.counts().completed == 1, timeout=30)
        body, count = "", "echomq_job_duration_seconds_count"

        # the worker records an outcome once the server answered it, a moment after
        # the server counted it: wait until the page shows every line asserted
        expected = [
            f'{count}{{outcome="failed",queue="{q.name}"}} 1.0',
            f'{count}{{outcome="completed",queue="{q.name}"}} 1.0',
            f'echomq_worker_jobs_claimed_total{{queue="{q.name}"}} 2.0',
            f'echomq_worker_jobs_in_hand{{queue="{q.name}"}} 0.0',
        ]

        def scraped() -> bool:
            nonlocal body
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as r:
                    body = r.read().decode()
            except OSError:
                return False
            return all(line in body for line in expected)

        wait_until(scraped, timeout=10)
        assert all(line in body for line in expected), body
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=20)
    records = [json.loads(line) for line in err.splitlines() if line.startswith("{")]
    failed = [r for r in records if r.get("outcome") == "failed"]
    assert len(failed) == 1 and failed[0]["queue"] == q.name and failed[0]["attempt"] == 1
    assert failed[0]["job_id"].startswith("JOB") and "planned" in failed[0]["error"]
    # --failure-level error --log-tracebacks: the line at ERROR, its traceback on it
    assert failed[0]["level"] == "error" and "planned" in failed[0]["exc"]


def test_the_console_serves_metrics(server: EmbeddedServer, q: Queue) -> None:
    pytest.importorskip("prometheus_client")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from starlette.testclient import TestClient
    from prometheus_client.parser import text_string_to_metric_families

    from echomq.console import create_app

    q.enqueue({"a": 1}, group="tenant")
    with TestClient(create_app(server.url), base_url="http://127.0.0.1:8765") as client:
        deadline = time.monotonic() + 20
        while True:  # the console's directory finds queues a bounded SCAN at a time
            resp = client.get("/metrics")
            assert resp.status_code == 200
            assert resp.headers["content-type"].startswith("text/plain")
            if f'queue="{q.name}"' in resp.text or time.monotonic() > deadline:
                break
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for f in text_string_to_metric_families(resp.text)
        for s in f.samples
    }
    assert samples[("echomq_queue_jobs", (("queue", q.name), ("state", "pending")))] == 1
    key = ("echomq_group_jobs", (("group", "tenant"), ("queue", q.name), ("state", "pending")))
    assert samples[key] == 1


def test_the_console_metrics_sit_behind_its_read_login(
    server: EmbeddedServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("prometheus_client")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from starlette.testclient import TestClient

    from echomq.console import create_app

    monkeypatch.delenv("EMQ_CONSOLE_TOKEN", raising=False)
    app = create_app(server.url, token="s3cret")
    with TestClient(app, base_url="http://127.0.0.1:8765") as client:
        assert client.get("/metrics").status_code == 401
        wrong = client.get("/metrics", headers={"Authorization": "Bearer nope"})
        assert wrong.status_code == 401
        ok = client.get("/metrics", headers={"Authorization": "Bearer s3cret"})
        assert ok.status_code == 200 and ok.headers["content-type"].startswith("text/plain")


def test_without_debug_or_metrics_a_failure_is_still_logged_with_its_job(
    q: Queue, caplog: pytest.LogCaptureFixture
) -> None:
    bad = q.enqueue({"ok": False}, max_attempts=1)
    q.enqueue({"ok": True})

    async def handle(job: JobContext) -> None:
        if not job.data["ok"]:
            raise KeyError("k")

    caplog.set_level(logging.WARNING, logger="echomq.worker")
    with running(Worker(q, handle, config=FAST)):
        wait_until(lambda: q.counts().dead == 1 and q.counts().completed == 1)
    recs = [r for r in caplog.records if getattr(r, "queue", None) == q.name]
    assert [(r.job_id, r.attempt, r.token, r.outcome) for r in recs] == [(bad, 1, 1, "failed")]  # type: ignore[attr-defined]
    assert recs[0].levelno == logging.WARNING and recs[0].exc_info is None
    assert recs[0].error == "KeyError: 'k'"  # type: ignore[attr-defined]


@pytest.mark.parametrize("tracebacks", [False, True])
def test_failures_log_at_the_chosen_level_with_the_traceback_when_asked(
    q: Queue, caplog: pytest.LogCaptureFixture, tracebacks: bool
) -> None:
    bad = q.enqueue({"ok": False}, max_attempts=1)

    def handle(job: JobContext) -> None:
        raise ValueError("by design")

    config = dataclasses.replace(FAST, failure_log_level=logging.INFO, log_tracebacks=tracebacks)
    caplog.set_level(logging.INFO, logger="echomq.worker")
    with running(Worker(q, handle, config=config)):
        wait_until(lambda: q.counts().dead == 1)
    recs = [r for r in caplog.records if getattr(r, "queue", None) == q.name]
    assert [(r.levelno, r.job_id, r.error) for r in recs] == [  # type: ignore[attr-defined]
        (logging.INFO, bad, "ValueError: by design")
    ]
    assert (recs[0].exc_info is not None) is tracebacks
    assert q.job_state(bad) == "dead"


def test_failure_log_settings_are_checked() -> None:
    with pytest.raises(InvalidArgument):
        WorkerConfig(failure_log_level=12345)
    with pytest.raises(InvalidArgument):
        WorkerConfig(log_tracebacks="yes")  # type: ignore[arg-type]
