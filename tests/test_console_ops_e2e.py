"""End to end, issue 16's operator tools in headless Chromium: bulk verbs by filter
(count, confirm, progress), cancelling a running job held by a real worker, the
workers and audit panels (job text and worker records rendered as text), the latency
card, and "go to job" from any page. The page acts; the server's keys are checked."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest
import redis
from playwright.sync_api import Page

from echomq import JobContext, Queue, Worker, ids, new_id
from test_console_e2e import HOSTILE, browser, console_url, dead_job, open_page
from worker_support import FAST, running, wait_until

pytestmark = pytest.mark.slow  # a browser

__all__ = ["browser", "console_url", "open_page"]  # the fixtures, for the tests below


def test_bulk_reprocess_by_filter_through_the_page(
    open_page: Callable[[str], Page], console_url: str, q: Queue, r: redis.Redis
) -> None:
    boom = [dead_job(q, {"n": n}, "HTTPError: 503 boom") for n in range(5)]
    other = [dead_job(q, {"n": n}, "ValueError: other") for n in range(2)]
    page = open_page(f"{console_url}#/q/{q.name}?state=dead")
    page.wait_for_selector(f"tr[data-job={boom[0]}]")
    page.click("#btn-bulk")
    page.select_option("#bulk-verb", "reprocess")
    page.fill("#bulk-error", "boom")
    assert page.is_disabled("#modal-ok")  # nothing counted yet
    page.click("#bulk-dry-run")
    page.wait_for_selector("#bulk-count:has-text('5 jobs match')")
    assert r.zcard(q.keys.dead) == 7  # the count is a dry run
    page.fill("#bulk-error", "boo")  # a changed filter must be counted again
    assert page.is_disabled("#modal-ok")
    page.click("#bulk-dry-run")
    page.wait_for_selector("#bulk-count:has-text('5 jobs match')")
    page.click("#modal-ok")
    page.wait_for_selector("#bulk-status:has-text('Done: 5 jobs')")
    assert set(r.zrange(q.keys.dead, 0, -1)) == set(other)
    assert all(q.job_state(j) == "pending" for j in boom)
    entries = q.audit(5)
    assert {e.verb for e in entries} == {"reprocess_jobs"}
    assert all(e.actor == "console:local@127.0.0.1" for e in entries)
    # the audit panel lists them, with the console's actor
    page.wait_for_selector("#audit td:has-text('reprocess_jobs')")
    assert "console:local@127.0.0.1" in page.inner_text("#audit")


def test_cancel_a_running_job_through_the_page(
    open_page: Callable[[str], Page], console_url: str, q: Queue
) -> None:
    started = threading.Event()

    def handle(job: JobContext) -> None:
        started.set()
        wait_until(lambda: job.cancelled, timeout=30)
        job.check_cancelled()

    with running(Worker(q, handle, config=FAST)) as w:
        jid = q.enqueue({"slow": True})
        assert started.wait(10)
        page = open_page(f"{console_url}#/q/{q.name}")
        # the worker shows in the Workers panel, holding the job
        page.wait_for_selector(f"#workers tr[data-worker='{w._engine.wid}'] a:has-text('{jid}')")
        page.click(f"#workers a:has-text('{jid}')")
        page.wait_for_selector("#job-state[data-state=active]")
        page.click("#btn-cancel")
        page.click("#modal-ok")
        page.wait_for_selector("#job-state[data-state=dead]")
        assert "JobCancelled: cancelled by an operator" in page.inner_text("#last-error")
        # the worker counts the run once the server's reply is back, after the row changed
        wait_until(lambda: w.stats.cancelled == 1)
    assert q.audit(1)[0].verb == "cancel_job"


def test_worker_records_and_audit_text_render_as_text(
    open_page: Callable[[str], Page], console_url: str, q: Queue, r: redis.Redis
) -> None:
    wid = "0123456789abcdef"
    r.hset(q.keys.worker(wid), mapping={"host": HOSTILE, "pid": "1", "beat": "1"})
    r.zadd(q.keys.workers, {wid: 1})
    jid = q.enqueue({"x": 1})
    q.update_data(jid, {"html": HOSTILE})  # journaled: its arguments name the job
    r.xadd(
        q.keys.audit,
        {"verb": HOSTILE, "args": "{}", "outcome": "ok", "count": "1", "actor": HOSTILE},
    )
    page = open_page(f"{console_url}#/q/{q.name}")
    page.wait_for_selector(f"#workers tr[data-worker='{wid}']")
    assert "<img src=x" in page.inner_text(f"#workers tr[data-worker='{wid}']")
    page.wait_for_selector("#audit td:has-text('update_data')")
    assert "<img src=x" in page.inner_text("#audit")
    assert page.query_selector("main img") is None
    assert page.evaluate("window.pwned === undefined")
    # the latency card tells how long the head of the backlog has waited
    assert page.inner_text("#latency .value") not in ("", "—")


def test_go_to_a_job_from_any_page(
    open_page: Callable[[str], Page], console_url: str, q: Queue
) -> None:
    jid = q.enqueue({"find": "me"})
    page = open_page(console_url)
    page.wait_for_selector("table.queues")
    page.fill("#goto-id", jid)
    page.press("#goto-id", "Enter")
    page.wait_for_selector("#job-state[data-state=pending]")
    assert page.evaluate("location.hash") == f"#/q/{q.name}/job/{jid}"
    page.fill("#goto-id", new_id())
    page.press("#goto-id", "Enter")
    page.wait_for_selector(".toast.error[data-reason=gone]")


def test_pause_resume_and_run_a_repeatable_through_the_page(
    open_page: Callable[[str], Page], console_url: str, q: Queue, r: redis.Redis
) -> None:
    q.repeat("digest", every_ms=3_600_000, first_in_ms=600_000)
    page = open_page(f"{console_url}#/q/{q.name}")
    row = "tr[data-repeat=digest]"
    page.wait_for_selector(f"{row}[data-paused='0']")
    page.click(f"{row} button:has-text('Pause')")
    page.wait_for_selector(f"{row}[data-paused='1'] .badge.paused")
    assert page.is_disabled(f"{row} button:has-text('Run now')")
    page.click(f"{row} button:has-text('Resume')")
    page.wait_for_selector(f"{row}[data-paused='0']")
    page.click(f"{row} button:has-text('Run now')")
    page.wait_for_selector(".toast.ok:has-text('made JOB')")
    assert r.zcard(q.keys.pending) == 1
    assert [e.verb for e in q.audit(3)] == ["run_repeat", "resume_repeat", "pause_repeat"]


def test_find_by_creation_time_through_the_page(
    open_page: Callable[[str], Page], console_url: str, q: Queue, r: redis.Redis
) -> None:
    sec, _ = r.time()
    old_ms = int(sec) * 1000 - 3 * 3_600_000
    shift = ids.NODE_BITS + ids.SEQ_BITS
    old = q.enqueue({"age": "old"}, job_id=ids.encode((old_ms - ids.EPOCH_MS) << shift))
    new = q.enqueue({"age": "new"})
    # the range lives in the URL: a shared link lands on the same search
    page = open_page(f"{console_url}#/q/{q.name}?until={old_ms + 60_000}")
    page.wait_for_selector(f"tr[data-job={old}]")
    assert page.query_selector(f"tr[data-job={new}]") is None
    assert page.input_value("#find-until") != ""
    # from the inputs: created from an hour ago on
    page.fill("#find-until", "")
    since = page.evaluate(
        "(ms) => { const d = new Date(ms - new Date(ms).getTimezoneOffset() * 60000);"
        " return d.toISOString().slice(0, 16); }",
        old_ms + 3_600_000,
    )
    page.fill("#find-since", since)
    page.click("#btn-find")
    page.wait_for_selector(f"tr[data-job={new}]")
    assert page.query_selector(f"tr[data-job={old}]") is None
    assert "since=" in page.evaluate("location.hash")


def test_a_kept_job_shows_its_timeline_result_and_errors(
    open_page: Callable[[str], Page], console_url: str, q: Queue
) -> None:
    q.set_retention(completed=100)
    jid = q.enqueue({"x": 1})
    got = q.claim()
    assert got is not None
    q.retry(jid, got.token, HOSTILE)
    q.promote_job(jid)
    got = q.claim()
    assert got is not None
    q.complete(jid, got.token, result={"html": HOSTILE})
    page = open_page(f"{console_url}#/q/{q.name}?state=completed")
    page.wait_for_selector(f"tr[data-job={jid}]")
    page.click(f"tr[data-job={jid}] a")
    page.wait_for_selector("#job-state[data-state=completed]")
    page.wait_for_selector("#job-finished")
    assert page.is_visible("#job-enqueued")
    assert "<img src=x" in page.inner_text("#job-result")
    assert "<img src=x" in page.inner_text("#job-errors")
    assert page.query_selector("main img") is None
    assert page.evaluate("window.pwned === undefined")
