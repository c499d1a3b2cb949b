"""End to end, issue 27's flow tools in headless Chromium: a waiting parent's page shows
its flow as a tree (job text as text), its Release and Cancel flow buttons act, and the
waiting children tab lists it. The page acts; the server's keys are checked."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import redis
from playwright.sync_api import Page

from echomq import Flow, Queue
from test_console_e2e import HOSTILE, browser, console_url, open_page

pytestmark = pytest.mark.slow  # a browser

__all__ = ["browser", "console_url", "open_page"]  # the fixtures, for the tests below


def test_a_parent_page_shows_its_tree_and_releases_it(
    open_page: Callable[[str], Page], console_url: str, q: Queue, r: redis.Redis
) -> None:
    ids = q.enqueue_flow(Flow(payload=0, children=[Flow(payload=1, name=HOSTILE), Flow(payload=2)]))
    page = open_page(f"{console_url}#/q/{q.name}?state=waiting_children")
    page.wait_for_selector(f"tr[data-job={ids.id}]")
    page.goto(f"{console_url}#/q/{q.name}/job/{ids.id}")
    page.wait_for_selector("#job-state[data-state=waiting_children]")
    page.wait_for_selector(f"#flow-tree li[data-ref='{ids.children[0].ref}']")
    tree = page.inner_text("#flow-tree")
    assert ids.children[1].id in tree and "waiting for 2" in tree
    assert page.query_selector("#flow-tree img") is None  # a name is text, never markup
    page.click("#btn-release-parent")
    page.click("#modal-ok")
    page.wait_for_selector("#job-state[data-state=pending]")
    assert q.job_state(ids.id) == "pending" and r.zcard(q.keys.waiting) == 0
    assert q.audit(1)[0].verb == "release_parent"


def test_cancel_flow_through_the_page(
    open_page: Callable[[str], Page], console_url: str, q: Queue
) -> None:
    ids = q.enqueue_flow(Flow(payload=0, children=[Flow(payload=1), Flow(payload=2)]))
    page = open_page(f"{console_url}#/q/{q.name}/job/{ids.id}")
    page.wait_for_selector("#job-state[data-state=waiting_children]")
    page.click("#btn-cancel-flow")
    page.click("#modal-ok")
    page.wait_for_selector("#job-state[data-state=dead]")
    assert "cancelled by an operator" in page.inner_text("#last-error")
    assert [q.job_state(c.id) for c in ids.children] == [None, None]
    assert q.audit(1)[0].verb == "cancel_flow"
