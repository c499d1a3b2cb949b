"""End to end: the console page in headless Chromium, driving live queues.

The console is served by uvicorn on a free loopback port (in a thread) over the private
server; Playwright drives Debian's ``chromium`` (never a downloaded browser). Each test
acts through the page and then checks the keys on the server.

Screenshots of the main pages are written by ``test_screenshots`` when
``EMQ_CONSOLE_SCREENSHOTS`` names a directory::

    EMQ_CONSOLE_SCREENSHOTS=docs/screenshots .venv/bin/pytest tests/test_console_e2e.py
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import redis
from playwright.sync_api import Browser, Page, Request, sync_playwright

from conftest import dump, plant_lane, queue_keys
from console_support import serving as serving_port
from echomq import Queue, registry
from echomq.cli.times import utc_text
from echomq.embedded import EmbeddedServer


def find_chromium() -> str | None:
    """The system Chromium: ``EMQ_CHROMIUM``, else ``chromium`` on PATH or in /usr/bin."""
    env = os.environ.get("EMQ_CHROMIUM")
    if env:
        return env
    for name in ("chromium", "chromium-browser"):
        found = shutil.which(name)
        if found:
            return found
    return "/usr/bin/chromium" if os.path.exists("/usr/bin/chromium") else None


CHROMIUM = find_chromium()
pytestmark = [
    pytest.mark.skipif(
        CHROMIUM is None,
        reason="no chromium found (install Debian's `chromium`: scripts/setup test does it)",
    ),
    pytest.mark.slow,
]
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@contextmanager
def serving(url: str, **kw: Any) -> Iterator[str]:
    """The console over ``url``, served on a free loopback port: its address."""
    with serving_port(url, **kw) as port:
        yield f"http://127.0.0.1:{port}/"


@pytest.fixture(scope="module")
def console_url(server: EmbeddedServer) -> Iterator[str]:
    with serving(server.url) as url:
        yield url


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    assert CHROMIUM is not None
    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS, chromium_sandbox=False)
        yield b
        b.close()


@pytest.fixture()
def open_page(browser: Browser) -> Iterator[Callable[[str], Page]]:
    """Factory: a fresh page at a URL; any script error on it fails the test."""
    contexts = []
    errors: list[str] = []

    def open_(url: str) -> Page:
        context = browser.new_context(viewport={"width": 1280, "height": 900})
        contexts.append(context)
        page = context.new_page()
        # generous: every step waits on the very thing it needs, so the bound only
        # matters when it never comes; a browser on a loaded 2-core machine is slow
        page.set_default_timeout(30000)
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.goto(url)
        return page

    yield open_
    for context in contexts:
        context.close()
    assert errors == []


def dead_job(q: Queue, payload: Any, error: str, priority: int = -(10**6)) -> str:
    """A job moved to dead through the real claim/retry path (by default ahead of
    anything already pending, so the claim takes it)."""
    jid = q.enqueue(payload, max_attempts=1, priority=priority)
    claimed = q.claim()
    assert claimed is not None and claimed.id == jid
    assert q.retry(jid, claimed.token, error) == "dead"
    return jid


# ------------------------------------------------------------------------- the verbs
def test_pause_a_queue_through_the_page(
    open_page: Callable[[str], Page], console_url: str, q: Queue, r: redis.Redis
) -> None:
    for i in range(3):
        q.enqueue({"i": i})
    pending = r.zrange(q.keys.pending, 0, -1, withscores=True)
    page = open_page(f"{console_url}#/q/{q.name}")
    page.wait_for_selector(".card[data-state=pending] .value:text('3')")
    page.click("#btn-pause")
    page.wait_for_selector(".head .badge.paused")
    assert r.hget(q.keys.meta, "paused") == "1"
    assert r.zrange(q.keys.pending, 0, -1, withscores=True) == pending
    assert q.claim() is None
    page.click("#btn-pause")  # now labelled Resume
    page.wait_for_selector(".head .badge.running")
    assert not r.hexists(q.keys.meta, "paused")
    assert r.zrange(q.keys.pending, 0, -1, withscores=True) == pending


def test_reprocess_a_dead_job_through_the_page(
    open_page: Callable[[str], Page], console_url: str, q: Queue, r: redis.Redis
) -> None:
    jid = dead_job(q, {"to": "x@example.com"}, "SMTP 550: no such user")
    page = open_page(f"{console_url}#/q/{q.name}")
    page.click(".tab[data-state=dead]")
    page.click(f"tr[data-job={jid}] a")
    page.wait_for_selector("#job-state[data-state=dead]")
    assert "SMTP 550: no such user" in page.inner_text("#last-error")
    page.click("#btn-reprocess")
    page.wait_for_selector("#job-state[data-state=pending]")
    row = r.hgetall(q.keys.job(jid))
    assert row["state"] == "pending" and "last_error" not in row
    assert (row["attempts"], row["failures"]) == ("1", "1")
    assert r.zscore(q.keys.pending, jid) is not None and r.zscore(q.keys.dead, jid) is None
    assert page.query_selector("#last-error") is None


def test_rerun_a_dead_job_as_a_copy_through_the_page(
    open_page: Callable[[str], Page], console_url: str, q: Queue, r: redis.Redis
) -> None:
    jid = dead_job(q, {"to": "x@example.com"}, "SMTP 550: no such user")
    page = open_page(f"{console_url}#/q/{q.name}/job/{jid}")
    page.wait_for_selector("#job-state[data-state=dead]")
    page.click("#btn-rerun")
    page.click("#modal-ok")
    page.wait_for_selector("#job-rerun-as a")
    copy = r.hget(q.keys.job(jid), "rerun_as")
    assert copy and page.inner_text("#job-rerun-as") == copy
    assert r.zrange(q.keys.pending, 0, -1) == [copy]
    assert r.hget(q.keys.job(jid), "state") == "dead"  # the original stays as it was
    page.click("#job-rerun-as a")  # the link leads to the copy, which links back
    page.wait_for_selector("#job-state[data-state=pending]")
    assert page.inner_text("#job-rerun-of") == jid
    assert page.query_selector("#btn-rerun") is None  # not finished: nothing to rerun


def test_obliterate_a_queue_through_the_page(
    open_page: Callable[[str], Page],
    console_url: str,
    make_queue: Callable[..., Queue],
    qname: str,
    r: redis.Redis,
) -> None:
    q, other = make_queue(qname), make_queue(qname + "-other")
    for i in range(20):
        jid = q.enqueue({"i": i}, group="g" if i % 2 else None)
    q.add_log(jid, "a line")
    dead_job(q, {"d": 1}, "boom")
    q.enqueue({"later": 1}, delay_ms=60000)
    q.pause()
    other.enqueue({"keep": 1})
    other_before = dump(r, other)

    page = open_page(f"{console_url}#/q/{q.name}")
    calls: list[Request] = []
    page.on("request", lambda req: calls.append(req) if req.url.endswith("/obliterate") else None)
    page.wait_for_selector(".head .badge.paused")
    page.click("#btn-obliterate")
    page.fill("#oblit-budget", "4")
    assert page.is_disabled("#modal-ok")  # the name is not typed yet
    page.fill("#oblit-confirm", q.name)
    page.click("#modal-ok")
    page.wait_for_selector(".toast:has-text('obliterated')")
    assert queue_keys(r, q) == set()
    assert len(calls) >= 6  # 22 jobs at 4 per call: the page looped on bounded calls
    assert all(req.method == "POST" for req in calls)
    assert dump(r, other) == other_before
    page.wait_for_selector("table.queues")  # back on the list, where it is gone
    assert page.query_selector(f"tr[data-queue='{q.name}']") is None


def test_refusal_shows_its_typed_reason(
    open_page: Callable[[str], Page], console_url: str, q: Queue, r: redis.Redis
) -> None:
    q.enqueue({"x": 1})
    before = dump(r, q)
    page = open_page(f"{console_url}#/q/{q.name}")
    page.wait_for_selector(".head .badge.running")
    page.click("#btn-obliterate")
    assert "not paused" in page.inner_text("#modal-body")
    page.fill("#oblit-confirm", q.name)
    page.click("#modal-ok")
    toast = page.wait_for_selector(".toast[data-reason=not_paused]")
    assert toast is not None and "Refused" in toast.inner_text()
    assert dump(r, q) == before


def test_a_bad_name_is_shown_in_place(open_page: Callable[[str], Page], console_url: str) -> None:
    page = open_page(f"{console_url}#/q/bad*name")
    banner = page.wait_for_selector(".problem")
    assert banner is not None and "name" in banner.inner_text()
    assert page.query_selector(".toast") is None


def test_edit_payload_and_live_progress(
    open_page: Callable[[str], Page], console_url: str, q: Queue, r: redis.Redis
) -> None:
    jid = q.enqueue({"old": True})
    page = open_page(f"{console_url}#/q/{q.name}/job/{jid}")
    page.wait_for_selector("#job-state[data-state=pending]")
    page.fill("#payload", '{"new": [1, 2, 3]}')
    page.click("#btn-save")
    page.wait_for_selector(".toast:has-text('Payload saved')")
    assert r.hget(q.keys.job(jid), "payload") == '{"new":[1,2,3]}'
    q.update_progress(jid, 75)  # a worker reports: the page hears it live
    page.wait_for_selector("dd:has-text('75')")
    page.fill("#log-line", "checked by an operator")
    page.click("#btn-log")
    page.wait_for_selector("ol.logs li:has-text('checked by an operator')")
    assert r.lrange(q.keys.logs(jid), 0, -1) == ["checked by an operator"]


def test_the_log_panel_shows_each_line_with_its_time(
    open_page: Callable[[str], Page], console_url: str, q: Queue, r: redis.Redis
) -> None:
    jid = q.enqueue({"x": 1})
    r.rpush(q.keys.logs(jid), "written before log times")
    q.add_log(jid, "<b>bold?</b> no: text")
    (stamp,) = r.lrange(q.keys.logtimes(jid), 0, -1)
    before = dump(r, q)
    page = open_page(f"{console_url}#/q/{q.name}/job/{jid}")
    page.wait_for_selector("ol.logs li time.log-time")
    items = page.query_selector_all("ol.logs li")
    assert len(items) == 2
    assert items[0].query_selector("time") is None  # an untimed line shows no time
    assert items[0].inner_text() == "written before log times"
    shown = utc_text(int(stamp))  # ISO 8601 UTC with ms, as the CLI prints it
    time_el = items[1].query_selector("time")
    assert time_el is not None and time_el.inner_text() == shown
    assert time_el.get_attribute("datetime") == shown
    assert "<b>bold?</b> no: text" in items[1].inner_text()  # job text stays text
    assert page.query_selector("ol.logs b") is None
    assert dump(r, q) == before


def test_token_is_asked_for_before_any_read(
    open_page: Callable[[str], Page], server: EmbeddedServer, q: Queue, r: redis.Redis
) -> None:
    q.enqueue({"x": 1})
    with serving(server.url, token="letmein") as url:
        page = open_page(f"{url}#/q/{q.name}")
        # nothing is read before the login: the dialog asks first
        page.wait_for_selector("#token-input")
        assert page.query_selector(".head .badge.running") is None
        page.fill("#token-input", "wrong")
        page.click("#modal-ok")
        page.wait_for_selector("#token-wrong")
        page.fill("#token-input", "letmein")
        page.click("#modal-ok")
        page.wait_for_selector(".head .badge.running")
        assert page.evaluate("document.cookie") == ""  # HttpOnly: no script sees it
        before = dump(r, q)
        # the session goes (a restarted browser): the click that needs it is kept
        page.context.clear_cookies()
        page.click("#btn-pause")
        page.wait_for_selector("#token-input")
        assert dump(r, q) == before
        page.fill("#token-input", "letmein")
        page.click("#modal-ok")
        page.wait_for_selector(".head .badge.paused")  # no second click
        assert r.hget(q.keys.meta, "paused") == "1"
        page.close()
        # a token handed over in the URL fragment logs in too, and leaves the URL
        handed = open_page(f"{url}#token=letmein")
        handed.wait_for_selector("table.queues")
        assert handed.evaluate("location.hash") == "#/"
        handed.goto(f"{url}#/q/{q.name}")
        handed.click("#btn-pause")  # now labelled Resume
        handed.wait_for_selector(".head .badge.running")
        assert not r.hexists(q.keys.meta, "paused")
        handed.close()


def test_roles_in_the_browser(
    open_page: Callable[[str], Page], server: EmbeddedServer, q: Queue, r: redis.Redis
) -> None:
    q.enqueue({"x": 1}, group="g")
    with serving(
        server.url, token="admin-t", operator_token="oper-t", viewer_token="view-t"
    ) as url:
        # a viewer reads every page; every verb is disabled
        page = open_page(f"{url}#token=view-t")
        page.wait_for_selector("table.queues")
        page.goto(f"{url}#/q/{q.name}")
        page.wait_for_selector("#btn-pause")
        assert "viewer" in page.inner_text("#mode")
        for button in ("#btn-pause", "#btn-drain", "#btn-obliterate"):
            assert page.is_disabled(button)
        page.close()
        # an operator pauses, but obliterate and a group's limit are an admin's
        page = open_page(f"{url}#token=oper-t")
        page.wait_for_selector("table.queues")
        page.goto(f"{url}#/q/{q.name}")
        page.wait_for_selector("#btn-pause:not([disabled])")
        assert page.is_disabled("#btn-obliterate")
        assert page.is_disabled("tr[data-group=g] button[data-admin]")
        page.click("#btn-pause")
        page.wait_for_selector(".head .badge.paused")
        assert r.hget(q.keys.meta, "paused") == "1"
        # logging out ends the session: the next read asks for a token again
        page.evaluate(
            "fetch('/api/logout', {method: 'POST', headers: {'Content-Type': 'application/json', "
            "'X-Requested-With': 'echomq-console'}, body: '{}'})"
        )
        page.reload()
        page.wait_for_selector("#token-input")
        page.close()
        # an admin may obliterate
        page = open_page(f"{url}#token=admin-t")
        page.wait_for_selector("table.queues")
        page.goto(f"{url}#/q/{q.name}")
        page.wait_for_selector("#btn-obliterate:not([disabled])")
        assert "admin" in page.inner_text("#mode")
        page.close()


def test_read_only_page_disables_every_verb(
    open_page: Callable[[str], Page], server: EmbeddedServer, q: Queue
) -> None:
    jid = dead_job(q, {"x": 1}, "boom")
    with serving(server.url, read_only=True) as url:
        page = open_page(f"{url}#/q/{q.name}/job/{jid}")
        page.wait_for_selector("#job-state[data-state=dead]")
        assert page.is_visible("#mode")
        for button in ("#btn-reprocess", "#btn-remove", "#btn-save", "#btn-log"):
            assert page.is_disabled(button)
        page.goto(f"{url}#/q/{q.name}")
        page.wait_for_selector("#btn-pause")
        for button in ("#btn-pause", "#btn-drain", "#btn-obliterate"):
            assert page.is_disabled(button)
        page.close()


# ----------------------------------------------------------------- second edition
HOSTILE = '<img src=x onerror="window.pwned=1">[bold]HTTPError: 404 [/v1/charges]\x1b]0;t\x07'


def test_job_text_renders_as_text(
    open_page: Callable[[str], Page], console_url: str, q: Queue, r: redis.Redis
) -> None:
    jid = dead_job(q, {"html": HOSTILE}, HOSTILE)
    r.hset(q.keys.job(jid), "name", HOSTILE)
    q.add_log(jid, HOSTILE)
    page = open_page(f"{console_url}#/q/{q.name}?state=dead")
    page.wait_for_selector(f"tr[data-job={jid}]")
    assert page.query_selector("main img") is None
    assert "[/v1/charges]" in page.inner_text(f"tr[data-job={jid}]")
    page.goto(f"{console_url}#/q/{q.name}/job/{jid}")
    page.wait_for_selector("#last-error")
    assert "<img src=x" in page.inner_text("#last-error")
    assert "<img src=x" in page.inner_text("ol.logs")
    assert page.query_selector("main img") is None
    assert page.evaluate("window.pwned === undefined")


def test_drain_runs_in_bounded_calls_with_progress(
    open_page: Callable[[str], Page], console_url: str, q: Queue, r: redis.Redis
) -> None:
    for i in range(30):
        q.enqueue({"i": i}, group=f"g{i % 3}" if i % 2 else None)
    later = q.enqueue({"later": 1}, delay_ms=60000)
    page = open_page(f"{console_url}#/q/{q.name}")
    calls: list[Request] = []
    page.on("request", lambda req: calls.append(req) if req.url.endswith("/drain") else None)
    page.wait_for_selector("#btn-drain:not([disabled])")
    page.click("#btn-drain")
    page.fill("#drain-budget", "4")
    page.click("#modal-ok")
    page.wait_for_selector("#drain-progress")
    page.wait_for_selector(".toast:has-text('Drained 30 jobs')")
    assert len(calls) >= 8  # 30 jobs at 4 per call: the page looped on bounded calls
    assert r.zcard(q.keys.pending) == 0 and r.zcard(q.keys.gindex) == 0
    assert r.zrange(q.keys.schedule, 0, -1) == [later]  # the schedule stays
    page.wait_for_selector("#btn-drain:not([disabled])")


def test_health_strip_warns_when_jobs_wait_with_no_worker(
    open_page: Callable[[str], Page], console_url: str, q: Queue, r: redis.Redis
) -> None:
    q.enqueue({"x": 1})
    page = open_page(f"{console_url}#/q/{q.name}")
    page.wait_for_selector("#health-warning:has-text('1 pending but no live workers')")
    # at the top of the page, above the cards
    top = page.evaluate("document.querySelector('#health-warning').getBoundingClientRect().top")
    assert top < page.evaluate("document.querySelector('.cards').getBoundingClientRect().top")
    assert "0 live workers" in page.inner_text("#health")
    page.goto(f"{console_url}#/")
    page.wait_for_selector(f"tr[data-queue='{q.name}'] [data-stranded]")
    assert page.inner_text(f"tr[data-queue='{q.name}'] td[data-col=workers]") == "0"
    r.hset(q.keys.worker("0123456789abcdef"), mapping={"host": "h", "beat": "1"})
    r.zadd(q.keys.workers, {"0123456789abcdef": 1})
    page.goto(f"{console_url}#/q/{q.name}")
    page.wait_for_selector("#health:has-text('1 live worker')")
    assert page.query_selector("#health-warning") is None


def test_the_groups_table_sorts_filters_and_counts(
    open_page: Callable[[str], Page], console_url: str, q: Queue
) -> None:
    for i in range(60):
        q.enqueue_many([{"i": i}] * (i % 5 + 1), group=f"t{i:02d}")
    page = open_page(f"{console_url}#/q/{q.name}")
    page.wait_for_selector("#groups-total:has-text('60 groups')")
    assert "180 pending in lanes" in page.inner_text("#groups-total")
    first = page.query_selector("tr[data-group]")
    assert first is not None and first.get_attribute("data-group") == "t59"  # deepest
    assert "1–50 of 60" in page.inner_text("#groups-range")
    page.click("th[data-sort=name] button")  # by name, a to z
    page.wait_for_selector("th[data-sort=name].sorted")
    page.wait_for_function("document.querySelector('tr[data-group]').dataset.group === 't00'")
    page.fill("#groups-filter", "t1")
    page.click("#btn-groups-filter")
    page.wait_for_selector("#groups-total:has-text('10 of 60 groups match')")
    names = [row.get_attribute("data-group") for row in page.query_selector_all("tr[data-group]")]
    assert names == [f"t1{i}" for i in range(10)]


def test_controls_and_bidi_are_escaped_and_the_traceback_is_full_width(
    open_page: Callable[[str], Page], console_url: str, q: Queue, r: redis.Redis
) -> None:
    trace = (
        "Traceback (most recent call last):\n" + "  File x.py\n" * 40 + "ValueError: " + "x" * 400
    )
    jid = dead_job(q, {"f": "invoice\u202egnp.exe"}, trace)
    r.hset(q.keys.job(jid), "name", "invoice\u202egnp.exe\x1b[2J")
    page = open_page(f"{console_url}#/q/{q.name}?state=dead")
    page.wait_for_selector(f"tr[data-job={jid}]")
    text = page.inner_text(f"tr[data-job={jid}]")
    assert "invoice\\u202egnp.exe\\x1b[2J" in text and "\u202e" not in text
    page.goto(f"{console_url}#/q/{q.name}/job/{jid}")
    page.wait_for_selector("#last-error[open]")
    width = page.evaluate("document.querySelector('#last-error').getBoundingClientRect().width")
    assert width > 900  # the page's width, not a narrow column (viewport 1280)
    assert "ValueError" in page.inner_text("#last-error summary")
    page.click("#last-error summary")  # collapses
    page.wait_for_selector("#last-error:not([open])")
    # an active job offers Cancel, not Remove (the server would refuse it: locked)
    running = q.enqueue({"run": 1}, priority=-(2**20))
    got = q.claim()
    assert got is not None and got.id == running
    page.goto(f"{console_url}#/q/{q.name}/job/{running}")
    page.wait_for_selector("#btn-cancel")
    assert page.query_selector("#btn-remove") is None


def test_a_toast_stays_with_its_queue(
    open_page: Callable[[str], Page],
    console_url: str,
    make_queue: Callable[..., Queue],
    qname: str,
) -> None:
    a, b = make_queue(qname + "-a"), make_queue(qname + "-b")
    a.enqueue({"x": 1})
    b.enqueue({"x": 1})
    page = open_page(f"{console_url}#/q/{a.name}")
    page.wait_for_selector("#btn-pause:not([disabled])")
    page.click("#btn-pause")
    page.wait_for_selector(".toast:has-text('paused')")
    page.goto(f"{console_url}#/q/{b.name}")
    page.wait_for_selector(".head .badge.running")
    assert page.query_selector(".toast:has-text('paused')") is None


def test_the_pager_past_the_end_shows_the_last_page(
    open_page: Callable[[str], Page], console_url: str, q: Queue
) -> None:
    ids = [q.enqueue({"i": i}) for i in range(25)]
    page = open_page(f"{console_url}#/q/{q.name}?page=99")
    page.wait_for_selector(f"tr[data-job={ids[24]}]")
    assert page.inner_text("#page-range").startswith("21–25 of 25")
    assert "page=2" in page.evaluate("location.hash")


def test_find_on_pending_covers_the_lanes(
    open_page: Callable[[str], Page], console_url: str, q: Queue
) -> None:
    for i in range(6):
        q.enqueue({"i": i}, name="flat")
    hidden = q.enqueue({"x": 1}, name="needle", group="acme")
    page = open_page(f"{console_url}#/q/{q.name}")
    page.fill("#find-text", "needle")
    page.select_option("#find-field", "name")
    page.click("#btn-find")
    page.wait_for_selector(f"tr[data-job={hidden}]")
    status = page.inner_text("#find-status")
    assert "every job examined of 7 (flat and every lane)" in status


def test_tab_page_and_search_live_in_the_url(
    open_page: Callable[[str], Page], console_url: str, q: Queue
) -> None:
    ids = [q.enqueue({"i": i}, name="send" if i != 23 else "needle") for i in range(25)]
    page = open_page(f"{console_url}#/q/{q.name}")
    page.wait_for_selector(f"tr[data-job={ids[0]}]")  # run order: the oldest first
    first_row = page.query_selector(".jobs tbody tr")
    assert first_row is not None and first_row.get_attribute("data-job") == ids[0]
    page.click("#page-next")
    page.wait_for_selector(f"tr[data-job={ids[20]}]")
    assert "page=2" in page.evaluate("location.hash")
    page.click(".tab[data-state=dead]")
    page.wait_for_selector(".jobs .empty")
    assert "state=dead" in page.evaluate("location.hash")
    # a reload (or a shared link) lands on the same tab and page
    page.goto(f"{console_url}#/q/{q.name}?page=2")
    page.reload()
    page.wait_for_selector(f"tr[data-job={ids[24]}]")
    page.fill("#find-text", "needle")
    page.select_option("#find-field", "name")
    page.click("#btn-find")
    page.wait_for_selector("#find-status:has-text('every job examined')")
    rows = page.query_selector_all(".jobs tbody tr")
    assert [row.get_attribute("data-job") for row in rows] == [ids[23]]
    assert "find=needle" in page.evaluate("location.hash")
    page.fill("#find-text", ids[7])
    page.select_option("#find-field", "")
    page.click("#btn-find")  # an id jumps to the job
    page.wait_for_selector("#job-state[data-state=pending]")
    assert ids[7] in page.evaluate("location.hash")


def test_a_lane_is_listed_from_the_groups_table(
    open_page: Callable[[str], Page], console_url: str, q: Queue
) -> None:
    q.enqueue({"flat": 1})
    lane = q.enqueue({"g": 1}, group="acme")
    page = open_page(f"{console_url}#/q/{q.name}")
    page.wait_for_selector("#lane-note:has-text('1 more pending job')")
    page.click("tr[data-group=acme] a")
    page.wait_for_selector(f"tr[data-job={lane}]")
    assert "group=acme" in page.evaluate("location.hash")


def test_a_mistyped_queue_offers_no_verbs(
    open_page: Callable[[str], Page], console_url: str
) -> None:
    page = open_page(f"{console_url}#/q/no-such-queue-anywhere")
    page.wait_for_selector("#no-such-queue")
    assert "No queue named no-such-queue-anywhere" in page.inner_text("#no-such-queue")
    for button in ("#btn-drain", "#btn-obliterate", "#btn-pause"):
        assert page.query_selector(button) is None


def test_reprocess_is_offered_on_dead_jobs_only(
    open_page: Callable[[str], Page], console_url: str, q: Queue
) -> None:
    q.enqueue({"x": 1})
    got = q.claim()
    assert got is not None
    page = open_page(f"{console_url}#/q/{q.name}/job/{got.id}")
    page.wait_for_selector("#job-state[data-state=active]")
    assert page.query_selector("#btn-reprocess") is None


def test_run_a_scheduled_job_now_through_the_page(
    open_page: Callable[[str], Page], console_url: str, q: Queue, r: redis.Redis
) -> None:
    jid = q.enqueue({"x": 1}, delay_ms=3_600_000)
    page = open_page(f"{console_url}#/q/{q.name}/job/{jid}")
    page.wait_for_selector("#job-state[data-state=scheduled]")
    page.click("#btn-run-now")
    page.wait_for_selector("#job-state[data-state=pending]")
    assert page.query_selector("#btn-run-now") is None
    assert r.zscore(q.keys.pending, jid) is not None and r.zscore(q.keys.schedule, jid) is None


def test_the_live_dot_tells_the_truth(open_page: Callable[[str], Page]) -> None:
    own = EmbeddedServer().start()  # a server of its own, to stop under the page
    try:
        Queue("live", url=own.url).enqueue({"x": 1})
        with serving(own.url) as url:
            page = open_page(f"{url}#/q/live")
            page.wait_for_selector("#live[data-state=on]")
            own.stop()
            started = time.monotonic()
            # 2 s by design (the figure is printed, not asserted: a loaded machine is slow)
            page.wait_for_selector("#live:not([data-state=on])")
            elapsed = time.monotonic() - started
            print(f"live dot left green {elapsed:.2f} s after the server stopped")
    finally:
        own.stop()


def test_a_refused_stream_falls_back_to_polling(
    open_page: Callable[[str], Page], server: EmbeddedServer, q: Queue
) -> None:
    q.enqueue({"x": 1})
    with serving(server.url, streams_per_client=0) as url:
        page = open_page(f"{url}#/q/{q.name}")
        page.wait_for_selector("#live[data-state=poll]")
        q.enqueue({"x": 2})  # polling still shows changes
        page.wait_for_selector(".card[data-state=pending] .value:text('2')")


# ------------------------------------------------------------------------ screenshots
def _demo(url: str, r: redis.Redis) -> tuple[str, str]:
    """Queues that look like a day at work; returns a busy job's id and a dead one's."""
    emails = Queue("emails", url=url)
    dead = [  # first: a claim alternates flat and grouped work
        dead_job(
            emails,
            {"to": f"bounce{i}@example"},
            "SMTPRecipientsRefused: 550 5.1.1 no such user",
            priority=0,
        )
        for i in range(3)
    ]
    emails.add_log(dead[0], "smtp said: 550 5.1.1 <bounce0@example>: no such user")
    for i in range(46):
        emails.enqueue({"to": f"user{i}@example.com", "template": "welcome"}, name="send")
    for tenant, n in (("acme", 7), ("globex", 4), ("initech", 9)):
        for i in range(n):
            emails.enqueue({"tenant": tenant, "digest": i}, name="digest", group=tenant)
    emails.set_group_limit("acme", 2)
    emails.set_group_weight("globex", 3)
    emails.pause_group("initech")
    emails.repeat("nightly-digest", cron="0 3 * * *", job_name="digest")
    emails.repeat("heartbeat", every_ms=60000, first_in_ms=30000)
    for i in range(4):
        emails.enqueue({"to": f"later{i}@example.com"}, name="reminder", delay_ms=(i + 1) * 600000)
    busy = emails.claim_many(2, lease_ms=120000)
    shown = busy[0].id
    emails.update_progress(shown, 60)
    for line in (
        "rendering template welcome",
        "connecting to smtp.example.com:587",
        "sent 6 of 10",
    ):
        emails.add_log(shown, line)
    # an hour of throughput, as the completion scripts would have counted it per minute
    sec, _ = r.time()
    minute = int(sec) // 60
    for back in range(60):
        done = 40 + (back * 37) % 55 + (25 if 20 < back < 30 else 0)
        failed = ((back * 7) % 5 == 0 and 3) or 0
        r.hincrby(emails.keys.metrics_completed, str(minute - back), done)
        r.hincrby(emails.keys.metrics_completed, "count", done)
        if failed:
            r.hincrby(emails.keys.metrics_failed, str(minute - back), failed)
            r.hincrby(emails.keys.metrics_failed, "count", failed)
    reports = Queue("reports", url=url)
    for i in range(12):
        reports.enqueue({"report": i})
    reports.pause()
    thumbs = Queue("thumbnails", url=url)
    for i in range(5):
        thumbs.enqueue({"image": f"img{i}.png"})
    dead_job(thumbs, {"image": "broken.png"}, "PIL.UnidentifiedImageError")
    webhooks = Queue("webhooks", url=url)
    webhooks.enqueue({"hook": 1}, delay_ms=30000)
    # a queue that keeps history: a job that failed once, then completed with a result
    invoices = Queue("invoices", url=url)
    invoices.set_retention(completed=1000, completed_age_ms=7 * 86_400_000)
    kept = invoices.enqueue({"invoice": 1042, "customer": "acme"}, name="render")
    got = invoices.claim()
    assert got is not None
    invoices.add_log(kept, "rendering invoice 1042")
    invoices.retry(kept, got.token, "TimeoutError: pdf service did not answer in 30 s")
    invoices.promote_job(kept)
    got = invoices.claim()
    assert got is not None
    invoices.add_log(kept, "rendered 3 pages")
    invoices.complete(kept, got.token, result={"pdf": "s3://invoices/1042.pdf", "pages": 3})
    # two worker processes in the registry, as their beats write them
    for wid, host, pid, held in (
        ("5f0c2a9d41e7b3c8", "mail-1", 4120, [b.id for b in busy]),
        ("a81d6e02c4f9b7e3", "mail-2", 4133, []),
    ):
        _beat(emails, wid, {"host": host, "pid": pid, "queues": ["emails"], "concurrency": 8,
                            "jobs": len(held), "job_ids": held, "interval_ms": 1000,
                            "completed": 1840 + pid % 50, "failed": 3})  # fmt: skip
        r.hset(emails.keys.worker(wid), "started", str(int(sec) * 1000 - 3_600_000 - pid))
    return shown, dead[0]


def _beat(q: Queue, wid: str, fields: dict[str, Any]) -> None:
    """Write a worker's registry record with the worker's own beat script."""

    def plan() -> Any:
        return (yield registry.beat_op(q.ctx, wid, 3_600_000, registry.record_fields(fields), []))

    q.runner.drive(plan())


@pytest.mark.skipif(
    not os.environ.get("EMQ_CONSOLE_SCREENSHOTS"),
    reason="set EMQ_CONSOLE_SCREENSHOTS=<dir> to write the screenshots",
)
def test_screenshots(browser: Browser) -> None:
    out = Path(os.environ["EMQ_CONSOLE_SCREENSHOTS"])
    out.mkdir(parents=True, exist_ok=True)
    with EmbeddedServer() as own:  # a server of its own: only the demo queues show
        r = redis.Redis.from_url(own.url, decode_responses=True)
        shown, dead = _demo(own.url, r)
        with serving(own.url) as url:
            context = browser.new_context(viewport={"width": 1280, "height": 800})
            page = context.new_page()
            page.goto(url)
            page.wait_for_selector("table.queues tr[data-queue=emails]")
            page.wait_for_selector("#live.on")
            page.screenshot(path=str(out / "queues.png"), full_page=True)
            page.goto(f"{url}#/q/emails")
            page.wait_for_selector(".jobs table")
            page.wait_for_selector("#live.on")
            emails = Queue("emails", url=own.url)
            for value in (70, 80):  # a worker reports; the page hears it live
                emails.update_progress(shown, value)
            new = emails.enqueue({"to": "new@example.com"}, name="send")
            emails.pause_group("acme")
            page.wait_for_selector("ul.events li:has-text('paused')")
            page.wait_for_selector(f"ul.events li:has-text('{new}')")
            page.wait_for_selector("tr[data-group=acme] .badge.paused")  # refreshed live
            page.screenshot(path=str(out / "queue.png"), full_page=True)
            page.goto(f"{url}#/q/emails?state=dead")
            page.wait_for_selector(f"tr[data-job={dead}]")
            page.click("#btn-bulk")
            page.select_option("#bulk-verb", "reprocess")
            page.fill("#bulk-error", "550 5.1.1")
            page.click("#bulk-dry-run")
            page.wait_for_selector("#bulk-count:has-text('3 jobs match')")
            page.screenshot(path=str(out / "bulk.png"))
            page.click("#modal-cancel")
            page.goto(f"{url}#/q/reports")
            page.wait_for_selector(".head .badge.paused")
            page.click("#btn-obliterate")
            page.fill("#oblit-budget", "500")
            page.fill("#oblit-confirm", "reports")
            page.screenshot(path=str(out / "obliterate.png"))
            page.click("#modal-cancel")
            emails.close()
            page.goto(f"{url}#/q/emails/job/{shown}")
            page.wait_for_selector("#job-state")
            page.wait_for_selector("#live.on")
            page.screenshot(path=str(out / "job.png"), full_page=True)
            page.goto(f"{url}#/q/emails/job/{dead}")
            page.wait_for_selector("#last-error")
            page.screenshot(path=str(out / "job-dead.png"), full_page=True)
            page.goto(f"{url}#/q/invoices?state=completed")
            page.wait_for_selector(".jobs tbody tr a")
            page.click(".jobs tbody tr a")
            page.wait_for_selector("#job-result")
            page.screenshot(path=str(out / "job-completed.png"), full_page=True)
            context.close()
        r.close()
    assert {p.name for p in out.glob("*.png")} >= {
        "queues.png",
        "queue.png",
        "bulk.png",
        "job-completed.png",
        "job.png",
        "obliterate.png",
    }


def test_the_history_charts_and_their_range_picker(
    open_page: Callable[[str], Page], console_url: str, q: Queue, r: redis.Redis
) -> None:
    for i in range(3):
        q.enqueue({"i": i})
    for _ in range(3):
        c = q.claim()
        assert c is not None
        q.complete(c.id, c.token)
    dead_job(q, {"x": 1}, "\u202eexe.png")
    before = dump(r, q)
    page = open_page(f"{console_url}#/q/{q.name}")
    page.wait_for_selector("#history-throughput svg.chart rect.c")
    caption = page.inner_text("#history-throughput figcaption")
    assert "Jobs ended per minute" in caption and "3 completed, 1 dead-lettered" in caption
    assert page.locator("#history-wait svg.chart circle.dot").count() >= 1
    assert page.locator("#history-run svg.chart circle.dot").count() >= 1
    assert page.get_attribute("button.range[data-range='1h']", "aria-pressed") == "true"
    # the range picker: 7 days, per hour; in the URL, so a reload keeps it
    caption = "#history-throughput figcaption"
    page.click("button.range[data-range='7d']")
    page.locator(caption, has_text="per hour").wait_for()
    assert "range=7d" in page.url
    assert page.get_attribute("button.range[data-range='7d']", "aria-pressed") == "true"
    page.reload()
    page.wait_for_selector(caption)
    page.locator(caption, has_text="per hour").wait_for()
    assert "-1d" in page.inner_text("#history-throughput")
    page.click("button.range[data-range='24h']")
    page.locator(caption, has_text="per 15 minutes").wait_for()
    # plain SVG, no canvas, nothing fetched from elsewhere; reading wrote nothing
    assert page.locator("canvas").count() == 0
    assert dump(r, q) == before


def test_the_history_panel_lists_the_busiest_lanes(
    open_page: Callable[[str], Page], console_url: str, q: Queue, r: redis.Redis
) -> None:
    for g in ("tenant-a", "tenant-b", "tenant-a"):
        q.enqueue({"g": g}, group=g)
    for c in q.claim_many(3, lock_ms=60_000):
        q.complete(c.id, c.token)
    # a lane name no enqueue would take, written by someone else: shown as text
    sec, usec = r.time()
    now = int(sec) * 1000 + int(usec) // 1000
    plant_lane(r, q, now // 3_600_000, 7, "<img src=x onerror=alert(1)>\u202e", (1, 1, 1, 5), now)
    before = dump(r, q)
    page = open_page(f"{console_url}#/q/{q.name}")
    page.wait_for_selector("#history-lanes table tbody tr")
    rows = page.locator("#history-lanes tbody tr")
    assert rows.count() == 3
    first = rows.nth(0).inner_text()
    assert "tenant-a" in first and "2" in first
    assert page.locator("#history-lanes img").count() == 0
    assert "<img src=x" in page.inner_text("#history-lanes")
    assert "\u202e" not in page.inner_text("#history-lanes")
    assert "3 lanes seen" in page.inner_text("#history-lanes figcaption")
    page.click("button.range[data-range='7d']")
    page.locator("#history-throughput figcaption", has_text="per hour").wait_for()
    page.wait_for_selector("#history-lanes tbody tr")
    assert dump(r, q) == before
