"""The dedup id in the operator's tools: ``emq dedup owner|release``, ``emq job show``'s
mode and owner, and the console's job detail. Each asserts the output and the keys left.
"""

from __future__ import annotations

import json
from typing import Any

import redis
from click.testing import CliRunner

from conftest import dump
from echomq import Dedup, Queue
from echomq.cli import app as cli_app
from echomq.console import Console
from echomq.embedded import EmbeddedServer


def emq(server: EmbeddedServer, *args: str) -> tuple[int, str]:
    res = CliRunner().invoke(cli_app.cli, ["--url", server.url, *args])
    if res.exception is not None and not isinstance(res.exception, SystemExit):
        raise res.exception
    return res.exit_code, res.stdout


def test_dedup_owner_and_release(server: EmbeddedServer, q: Queue, r: redis.Redis) -> None:
    a = q.enqueue(1, dedup=Dedup("t", mode="throttle", ttl_ms=60_000))
    code, out = emq(server, "--json", "dedup", "owner", q.name, "t")
    doc = json.loads(out)
    assert code == 0 and doc["owner"] == a and doc["mode"] == "throttle"
    assert doc["state"] == "pending" and 0 < doc["window_ms"] <= 60_000
    code, out = emq(server, "dedup", "owner", q.name, "free-id")
    assert code == 0 and "is free" in out
    # release asks first; without --yes and no terminal it refuses and changes nothing
    before = dump(r, q)
    code, _ = emq(server, "dedup", "release", q.name, "t")
    assert code != 0 and dump(r, q) == before
    code, out = emq(server, "--json", "dedup", "release", q.name, "t", "--yes")
    assert code == 0 and json.loads(out) == {"dedup": "t", "released": a}
    assert r.exists(q.keys.dedup("t")) == 0 and r.exists(q.keys.job(a)) == 1
    assert q.audit()[0].verb == "release_dedup"


def test_job_show_has_the_dedup_mode_and_owner(
    server: EmbeddedServer, q: Queue, r: redis.Redis
) -> None:
    spec = Dedup("k", mode="keep_last")
    a = q.enqueue(1, dedup=spec)
    c = q.claim()
    assert c is not None
    b = q.enqueue(2, dedup=spec)
    code, out = emq(server, "--json", "job", "show", q.name, a)
    shown: dict[str, Any] = json.loads(out)
    assert code == 0 and shown["dedup"] == "k" and shown["dedup_mode"] == "keep_last"
    assert shown["dedup_owner"] == b  # the held job holds the id now
    code, out = emq(server, "--json", "job", "show", q.name, b)
    shown = json.loads(out)
    assert shown["dedup_behind"] == a and shown["dedup_owner"] == b
    plain = q.enqueue(3, dedup_id="s")
    code, out = emq(server, "job", "show", q.name, plain)
    assert code == 0 and "simple" in out and "dedup_owner" in out


async def test_console_job_detail_has_the_dedup_owner(server: EmbeddedServer, q: Queue) -> None:
    a = q.enqueue(1, dedup=Dedup("d", mode="debounce", delay_ms=60_000))
    plain = q.enqueue(2)
    console = Console(server.url)
    try:
        detail = await console.job_detail(q.name, a)
        assert detail["dedup_owner"] == a and detail["job"]["dedup_mode"] == "debounce"
        q.release_dedup("d")
        assert (await console.job_detail(q.name, a))["dedup_owner"] is None
        assert (await console.job_detail(q.name, plain))["dedup_owner"] is None
    finally:
        await console.aclose()


def test_emq_enqueue_takes_a_dedup_mode(server: EmbeddedServer, q: Queue, r: redis.Redis) -> None:
    args = ("--dedup-id", "t", "--dedup-mode", "throttle", "--dedup-ttl-ms", "60000")
    code, first = emq(server, "enqueue", q.name, "1", *args)
    assert code == 0
    code, second = emq(server, "enqueue", q.name, "2", *args)
    assert code == 0 and second == first
    assert r.hget(q.keys.job(first.strip()), "dedup_mode") == "throttle"
    assert r.pttl(q.keys.dedup("t")) > 0
    before = dump(r, q)
    code, _ = emq(server, "enqueue", q.name, "3", "--dedup-mode", "keep_last")
    assert code != 0 and dump(r, q) == before  # a mode needs an id: nothing sent
