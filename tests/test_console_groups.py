"""The console's groups table: sorted, filtered, counted and paged over bounded reads,
one shared walk per few seconds; and the shared reads of a queue's views."""

from __future__ import annotations

import json
import time
import warnings
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest
import redis

from conftest import dump
from echomq import Queue
from echomq.console import create_app
from echomq.console.app import TOKEN_ENV, TOKEN_FILE_ENV
from echomq.console.handlers import Console
from echomq.console.limits import GROUPS_STALE_S, GROUPS_TTL_S
from echomq.embedded import EmbeddedServer

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from starlette.testclient import TestClient

CHANGE = {"Content-Type": "application/json", "X-Requested-With": "echomq-console"}


@pytest.fixture()
def api(server: EmbeddedServer, monkeypatch: pytest.MonkeyPatch) -> Iterator[TestClient]:
    monkeypatch.delenv(TOKEN_ENV, raising=False)
    monkeypatch.delenv(TOKEN_FILE_ENV, raising=False)
    with TestClient(create_app(server.url), base_url="http://127.0.0.1:8765") as client:
        yield client


def table(api: TestClient, q: Queue, query: str = "") -> Any:
    reply = api.get(f"/api/queues/{q.name}/groups?{query}")
    assert reply.status_code == 200, reply.text
    return reply.json()


def test_groups_table_sorts_filters_counts_and_pages(
    api: TestClient, q: Queue, r: redis.Redis
) -> None:
    for i in range(120):
        q.enqueue_many([{"i": i}] * (i % 7 + 1), group=f"tenant-{i:03d}")
    q.pause_group("tenant-006")
    before = dump(r, q)
    got = table(api, q, "n=50")
    # deepest first (depth 7: every i with i % 7 == 6), names breaking ties
    assert got["total"] == 120 and got["matched"] == 120 and got["complete"] is True
    assert [g["depth"] for g in got["groups"]][:3] == [7, 7, 7]
    assert got["groups"][0]["name"] == "tenant-118"  # ties: names descending too
    assert got["pending"] == sum(i % 7 + 1 for i in range(120)) and got["paused"] == 1
    assert got["calls"] >= 2  # bounded pages of at most 100 groups, never one walk
    # the next page, and past the end: the last page
    nxt = table(api, q, "n=50&offset=50")
    assert nxt["offset"] == 50 and len(nxt["groups"]) == 50
    last = table(api, q, "n=50&offset=5000")
    assert last["offset"] == 100 and len(last["groups"]) == 20
    # sort by name ascending; a filter (case-insensitive) with its own totals
    by_name = table(api, q, "sort=name&desc=0&n=3")
    assert [g["name"] for g in by_name["groups"]] == ["tenant-000", "tenant-001", "tenant-002"]
    found = table(api, q, "filter=TENANT-01&sort=name&desc=0")
    assert found["matched"] == 10 and found["total"] == 120
    assert [g["name"] for g in found["groups"]][:2] == ["tenant-010", "tenant-011"]
    assert found["pending"] == sum(i % 7 + 1 for i in range(10, 20))
    none = table(api, q, "filter=acme")
    assert none["matched"] == 0 and none["groups"] == [] and none["offset"] == 0
    for bad in ("sort=secret", "n=0", "n=1000", "offset=-1", "filter=" + "x" * 300):
        reply = api.get(f"/api/queues/{q.name}/groups?{bad}")
        assert reply.status_code == 400, bad
    # the cursor page stays as it was (one SSCAN page)
    page = table(api, q, "cursor=0&n=10")
    assert set(page) == {"groups", "cursor"}
    assert dump(r, q) == before


def test_the_walk_is_shared_and_a_change_shows_at_once(
    api: TestClient, q: Queue, r: redis.Redis
) -> None:
    q.enqueue({"x": 1}, group="a")
    q.enqueue_many([{"x": 1}] * 3, group="b")
    first = table(api, q)
    assert [g["name"] for g in first["groups"]] == ["b", "a"]
    q.enqueue_many([{"x": 1}] * 5, group="a")  # not through the console
    again = table(api, q)
    assert again["age_ms"] <= GROUPS_TTL_S * 1000 + 500  # shared, not read again
    assert [g["name"] for g in again["groups"]] == ["b", "a"]
    # a change through the console drops the shared walk: the table shows it at once
    reply = api.post(f"/api/queues/{q.name}/groups/b/pause", content=json.dumps({}), headers=CHANGE)
    assert reply.status_code == 200
    fresh = table(api, q)
    assert [(g["name"], g["depth"], g["paused"]) for g in fresh["groups"]] == [
        ("a", 6, False),
        ("b", 3, True),
    ]


def test_shared_reads_serve_many_operators_and_a_change_shows_at_once(
    server: EmbeddedServer, q: Queue, r: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(TOKEN_ENV, raising=False)
    monkeypatch.delenv(TOKEN_FILE_ENV, raising=False)
    q.enqueue({"x": 1})
    app = create_app(server.url, shared_reads_s=30)
    with TestClient(app, base_url="http://127.0.0.1:8765") as api:
        path = f"/api/queues/{q.name}"
        assert api.get(path).json()["counts"]["pending"] == 1
        q.enqueue({"x": 2})  # not through the console: the shared read stands
        assert api.get(path).json()["counts"]["pending"] == 1
        assert api.get(path + "?fresh=1").json()["counts"]["pending"] == 2  # another read
        # a change through the console drops the queue's shared reads: the next is fresh
        reply = api.post(path + "/pause", content="{}", headers=CHANGE)
        assert reply.status_code == 200
        body = api.get(path).json()
        assert body["paused"] is True and body["counts"]["pending"] == 2
        # a refused change drops them too (it may have raced a change elsewhere)
        q.enqueue({"x": 3})
        refused = api.post(path + "/jobs/JOB00000000001/reprocess", content="{}", headers=CHANGE)
        assert refused.status_code == 404
        assert api.get(path).json()["counts"]["pending"] == 3
    # the default: every request reads the server
    with TestClient(create_app(server.url), base_url="http://127.0.0.1:8765") as api:
        before = api.get(f"/api/queues/{q.name}").json()["counts"]["pending"]
        q.enqueue({"x": 4})
        assert api.get(f"/api/queues/{q.name}").json()["counts"]["pending"] == before + 1


def _age(console: Console, queue: str, seconds: float) -> None:
    """Make the queue's shared walk ``seconds`` old (no sleeping in tests)."""
    walk = console.group_walks[queue]
    console.group_walks[queue] = replace(walk, at=time.monotonic() - seconds)


def _rows(table: dict[str, Any]) -> list[tuple[str, int]]:
    return [(g["name"], g["depth"]) for g in table["groups"]]


async def test_a_walk_past_its_interval_is_answered_while_one_runs_behind(
    server: EmbeddedServer, q: Queue, r: redis.Redis
) -> None:
    q.enqueue({"x": 1}, group="a")
    q.enqueue_many([{"x": 1}] * 3, group="b")
    console = Console(server.url)
    try:
        assert _rows(await console.group_table(q.name)) == [("b", 3), ("a", 1)]
        q.enqueue_many([{"x": 1}] * 5, group="a")  # not through the console
        before = dump(r, q)
        # past the interval, within GROUPS_STALE_S: the last walk at once, one walk behind
        _age(console, q.name, GROUPS_TTL_S + 0.5)
        stale = await console.group_table(q.name)
        assert _rows(stale) == [("b", 3), ("a", 1)] and stale["age_ms"] >= GROUPS_TTL_S * 1000
        behind = console.group_rewalks[q.name]
        assert _rows(await console.group_table(q.name)) == [("b", 3), ("a", 1)]
        assert console.group_rewalks == {q.name: behind}  # one walk, not one per request
        await behind
        assert console.group_rewalks == {}
        assert _rows(await console.group_table(q.name)) == [("a", 6), ("b", 3)]
        # older than GROUPS_STALE_S: the request waits for a fresh walk
        q.enqueue_many([{"x": 1}] * 10, group="b")
        before = dump(r, q)
        _age(console, q.name, GROUPS_STALE_S + 1)
        assert _rows(await console.group_table(q.name)) == [("b", 13), ("a", 6)]
        assert console.group_rewalks == {}
        # a change through the console while a walk runs behind: its answer is dropped
        _age(console, q.name, GROUPS_TTL_S + 0.5)
        await console.group_table(q.name)
        behind = console.group_rewalks[q.name]
        console.forget_groups(q.name)
        await behind
        assert q.name not in console.group_walks
    finally:
        await console.aclose()
    assert dump(r, q) == before  # reads only
