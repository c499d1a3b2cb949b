"""The claim in explicit pieces, composed alike by ``claim_many`` and the worker, and
the idle wait as an explicit state machine (``echomq.worker.waker``).

The pieces are ``lifecycle.claim_gate`` (the pause-gate read), ``lifecycle.claim_op`` (the claim
script call) and ``lifecycle.decode_claimed`` (its one reply decoder). Each test below
swaps the decoder (or the op builder) for a recording one: a claimer that stopped
using the shared piece would be missing from the record.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from typing import Any

import pytest
import redis
import redis.asyncio

from conftest import claim_records, native
from echomq import AsyncQueue, JobContext, Queue, Worker, WorkerConfig, lifecycle
from echomq.context import Context
from echomq.errors import InvalidArgument, ServerFull
from echomq.lifecycle import claiming
from echomq.scripts import command
from echomq.transport.exchange import is_noscript
from echomq.worker import plans
from echomq.worker.waker import TRANSITIONS, WaitResult, WaitState, Waker
from worker_support import running, wait_until

SLOW_BEAT = WorkerConfig(lease_ms=20_000, beat_ms=4_000, grace_ms=2_000)


@pytest.fixture()
def decoded(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[list[str]]]:
    """Every call of the shared decoder, as the ids it decoded."""
    calls: list[list[str]] = []
    real = lifecycle.decode_claimed

    def recording(ctx: Context, reply: Any) -> list[lifecycle.Claimed]:
        got = real(ctx, reply)
        calls.append([c.id for c in got])
        return got

    for module in (lifecycle, claiming):  # the worker's plans, and claim_many
        monkeypatch.setattr(module, "decode_claimed", recording)
    yield calls


@pytest.fixture()
def built(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """Every claim script call built, as its ``count``."""
    calls: list[int] = []
    real = lifecycle.claim_op

    def recording(ctx: Context, count: int, lease_ms: int, lock_ms: int, **kw: Any) -> Any:
        calls.append(count)
        return real(ctx, count, lease_ms, lock_ms, **kw)

    for module in (lifecycle, claiming):  # the worker's plans, and claim_many
        monkeypatch.setattr(module, "claim_op", recording)
    yield calls


def active_ids(r: redis.Redis, q: Queue) -> list[str]:
    return list(r.zrange(q.keys.active, 0, -1))


def test_claim_many_composes_the_shared_pieces(
    q: Queue, r: redis.Redis, decoded: list[list[str]], built: list[int]
) -> None:
    a, b = q.enqueue("a"), q.enqueue("b")
    got = q.claim_many(5)
    assert [c.id for c in got] == [a, b] and [c.token for c in got] == [1, 1]
    assert decoded == [[a, b]] and built == [5]
    assert sorted(active_ids(r, q)) == sorted([a, b]) and r.zcard(q.keys.pending) == 0
    q.pause()  # the gate reads closed: no script call is built, nothing decoded
    assert q.claim_many(5) == [] and decoded == [[a, b]] and built == [5]


def test_complete_and_claim_composes_the_shared_pieces(
    q: Queue, r: redis.Redis, decoded: list[list[str]], built: list[int]
) -> None:
    a, b = q.enqueue("a"), q.enqueue("b")
    claimed = q.claim()
    assert claimed is not None and claimed.id == a
    got = q.runner.drive(plans.complete_and_claim(q.ctx, [(a, 1)], 3, 1000, 0))
    assert got == plans.ClaimRound([], [], got.claimed) and [c.id for c in got.claimed] == [b]
    assert decoded == [[a], [b]] and built == [1, 3]
    assert q.job_state(a) is None and active_ids(r, q) == [b]
    assert q.metrics()["completed"]["count"] == 1


def test_claim_after_wait_decodes_with_the_shared_decoder(
    q: Queue, r: redis.Redis, decoded: list[list[str]]
) -> None:
    a, b = q.enqueue("a"), q.enqueue("b")
    # a claim that rode behind the wait: its raw reply, decoded by the one decoder
    op = lifecycle.claim_op(q.ctx, 1, 1000, 0)
    r.script_load(op.script.body)
    raw = r.execute_command(*command(op))
    got = q.runner.drive(plans.claim_after_wait(q.ctx, WaitResult(True, claim=raw), 1, 1000, 0))
    assert [c.id for c in got] == [a] and decoded == [[a]]
    # no claim rode along: the gate read behind the wait decides, then the same pieces
    got = q.runner.drive(plans.claim_after_wait(q.ctx, WaitResult(False, gate=0), 1, 1000, 0))
    assert [c.id for c in got] == [b] and decoded == [[a], [b]]
    assert sorted(active_ids(r, q)) == sorted([a, b])
    # dropped by WATCH (the gate moved): nothing claimed, nothing decoded
    assert q.runner.drive(plans.claim_after_wait(q.ctx, WaitResult(True), 1, 1000, 0)) == []
    assert decoded == [[a], [b]]


def test_claim_after_wait_reads_error_replies_as_the_runner_does(q: Queue) -> None:
    # the claim's error reply and the gate read's, typed by the one reader
    bad = WaitResult(True, claim=redis.ResponseError("EMQARG count must be positive"))
    with pytest.raises(InvalidArgument):
        q.runner.drive(plans.claim_after_wait(q.ctx, bad, 1, 1000, 0))
    full = WaitResult(False, gate=redis.exceptions.OutOfMemoryError("command not allowed"))
    with pytest.raises(ServerFull):
        q.runner.drive(plans.claim_after_wait(q.ctx, full, 1, 1000, 0))


def test_the_wake_path_decodes_what_rode_along_and_only_that(
    q: Queue, r: redis.Redis, decoded: list[list[str]]
) -> None:
    a = q.enqueue("a")
    op = lifecycle.claim_op(q.ctx, 1, 1000, 0, recorded=False)
    r.script_load(op.script.body)
    raw = r.execute_command(*command(op))
    # what rode along: decoded at once, by the one decoder, with no server call
    got = plans.claimed_behind_wait(q.ctx, WaitResult(True, claim=raw))
    assert got is not None and [c.id for c in got] == [a] and decoded == [[a]]
    assert plans.claimed_behind_wait(q.ctx, WaitResult(True)) == []  # dropped by WATCH
    # a claim is still to be made: none rode along, it was refused, or never ran
    for woke in (
        WaitResult(False, gate=0),
        WaitResult(True, refused=redis.ResponseError("EXECABORT Transaction discarded")),
        WaitResult(True, claim=redis.ResponseError("NOSCRIPT No matching script")),
    ):
        assert plans.claimed_behind_wait(q.ctx, woke) is None
    bad = WaitResult(True, claim=redis.ResponseError("EMQARG count must be positive"))
    with pytest.raises(InvalidArgument):
        plans.claimed_behind_wait(q.ctx, bad)
    assert decoded == [[a]] and active_ids(r, q) == [a]  # nothing else claimed
    assert r.hget(q.keys.job(a), "attempts") == "1"


def test_claim_after_a_refused_transaction_claims_plainly(q: Queue, r: redis.Redis) -> None:
    a = q.enqueue("a")
    refused = WaitResult(True, refused=redis.ResponseError("EXECABORT Transaction discarded"))
    got = q.runner.drive(plans.claim_after_wait(q.ctx, refused, 1, 1000, 0))
    assert [c.id for c in got] == [a] and active_ids(r, q) == [a]
    assert r.hget(q.keys.job(a), "attempts") == "1"
    q.pause()  # plainly still means through the gate
    b = q.enqueue("b")
    assert q.runner.drive(plans.claim_after_wait(q.ctx, refused, 1, 1000, 0)) == []
    assert q.job_state(b) == "pending" and active_ids(r, q) == [a]


def test_the_worker_claims_through_the_shared_decoder(
    q: Queue, r: redis.Redis, decoded: list[list[str]]
) -> None:
    async def handle(job: JobContext) -> None:
        pass

    with running(Worker(q, handle, config=SLOW_BEAT)) as w:
        wait_until(lambda: w._engine._waker is not None)
        wait_until(lambda: w._engine._waker.state is WaitState.WAITING_WITH_CLAIM)
        jid = q.enqueue("x")  # served by the claim behind the wait
        wait_until(lambda: w.stats.completed == 1)
    assert [jid] in decoded
    assert q.job_state(jid) is None and r.zcard(q.keys.active) == 0


# ---- the wait's state machine ---------------------------------------------------------


def test_every_state_is_reachable_and_can_end() -> None:
    seen, todo = {WaitState.IDLE}, [WaitState.IDLE]
    while todo:
        for nxt in TRANSITIONS[todo.pop()]:
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    assert seen == set(WaitState)
    assert all(WaitState.IDLE in TRANSITIONS[s] for s in WaitState if s is not WaitState.IDLE)
    assert {s: s.to_end for s in WaitState} == {
        WaitState.IDLE: "cancel",
        WaitState.READING_GATE: "cancel",
        WaitState.WAITING_WITH_CLAIM: "unblock",
        WaitState.WAITING: "cancel",
        WaitState.CLAIMING: "finish",
    }


def test_a_move_not_in_the_table_is_refused() -> None:
    waker = Waker(None, "emq:{t}:wake", ("HEXISTS", "emq:{t}:meta", "paused"))
    with pytest.raises(AssertionError):
        waker._enter(WaitState.CLAIMING)  # IDLE cannot jump to CLAIMING
    assert waker.state is WaitState.IDLE
    waker._enter(WaitState.READING_GATE)
    with pytest.raises(AssertionError):
        waker._enter(WaitState.READING_GATE)
    waker._enter(WaitState.IDLE)  # any state may fall back to IDLE
    assert waker.state is WaitState.IDLE


class _Recording(Waker):
    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.path: list[WaitState] = []

    def _enter(self, new: WaitState) -> None:
        super()._enter(new)
        self.path.append(new)


async def _waker(aq: AsyncQueue, server_url: str) -> tuple[_Recording, Any]:
    blocker = redis.asyncio.Redis.from_url(server_url, decode_responses=True)
    return _Recording(blocker, aq.keys.wake, lifecycle.claim_gate(aq.ctx).args), blocker


async def test_the_wait_with_a_claim_behind_walks_its_states(
    aq: AsyncQueue, r: redis.Redis, server: Any
) -> None:
    waker, blocker = await _waker(aq, server.url)
    try:
        jid = await aq.enqueue("x")  # its wake token is waiting
        await aq.runner.fence()
        op = lifecycle.claim_op(aq.ctx, 2, 5000, 0)
        woke = await waker.wait(1.0, command(op))
        assert waker.state is WaitState.CLAIMING and woke.claim_sent and woke.refused is None
        got = await aq.runner.drive(plans.claim_after_wait(aq.ctx, woke, 2, 5000, 0))
        waker.done()
        assert [c.id for c in got] == [jid]
        assert waker.path == [
            WaitState.READING_GATE,
            WaitState.WAITING_WITH_CLAIM,
            WaitState.CLAIMING,
            WaitState.IDLE,
        ]
        assert r.zrange(aq.keys.active, 0, -1) == [jid] and r.llen(aq.keys.wake) == 0
    finally:
        await blocker.aclose()


async def test_a_paused_queue_waits_with_no_claim_behind(
    aq: AsyncQueue, r: redis.Redis, server: Any
) -> None:
    waker, blocker = await _waker(aq, server.url)
    try:
        await aq.pause()
        jid = await aq.enqueue("x")
        woke = await waker.wait(1.0, command(lifecycle.claim_op(aq.ctx, 1, 5000, 0)))
        assert not woke.claim_sent and int(woke.gate) == 1
        assert await aq.runner.drive(plans.claim_after_wait(aq.ctx, woke, 1, 5000, 0)) == []
        waker.done()
        assert waker.path == [
            WaitState.READING_GATE,
            WaitState.WAITING,
            WaitState.CLAIMING,
            WaitState.IDLE,
        ]
        assert r.zrange(aq.keys.pending, 0, -1) == [jid] and r.zcard(aq.keys.active) == 0
    finally:
        await blocker.aclose()


async def test_a_cancelled_wait_falls_back_to_idle(
    aq: AsyncQueue, r: redis.Redis, server: Any
) -> None:
    waker, blocker = await _waker(aq, server.url)
    try:
        await aq.pause()  # no claim behind: a cancel loses nothing
        task = asyncio.ensure_future(waker.wait(5.0, ("PING",)))
        deadline = time.monotonic() + 5
        while waker.state is not WaitState.WAITING and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        assert waker.state.to_end == "cancel"
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        assert waker.state is WaitState.IDLE and waker.path[-1] is WaitState.IDLE
        assert waker._conn is None  # dropped: its replies would be out of step
        assert r.zcard(aq.keys.active) == 0 and r.llen(aq.keys.wake) == 0
    finally:
        await blocker.aclose()


async def _wake_claim(waker: Waker, aq: AsyncQueue) -> list[str]:
    op = lifecycle.claim_op(aq.ctx, 1, 5000, 0, recorded=False)
    woke = await waker.wait(1.0, aq.runner.command(op))  # as the worker sends it
    assert woke.claim_sent and not is_noscript(woke.claim)  # not claimed again plainly
    got = await aq.runner.drive(plans.claim_after_wait(aq.ctx, woke, 1, 5000, 0))
    waker.done()
    return [c.id for c in got]


async def test_the_waits_keep_one_connection_and_replace_one_the_server_closed(
    aq: AsyncQueue, r: redis.Redis, server: Any
) -> None:
    waker, blocker = await _waker(aq, server.url)
    try:
        await aq.runner.fence()
        # the claim's library loaded (an empty claim): no "Function not found" here
        assert await aq.runner.execute(lifecycle.claim_op(aq.ctx, 1, 5000, 0)) == []
        first = await aq.enqueue("a")
        assert await _wake_claim(waker, aq) == [first]
        kept = waker.client_id
        second = await aq.enqueue("b")
        assert await _wake_claim(waker, aq) == [second]
        assert waker.client_id == kept  # the same connection, its id read once
        # the server closes it between waits (a restart, an idle timeout): the next wait
        # reads the gate again on a fresh connection, with no error
        assert r.client_kill_filter(_id=str(kept)) == 1
        third = await aq.enqueue("c")
        assert await _wake_claim(waker, aq) == [third]
        assert waker.client_id != kept and waker.state is WaitState.IDLE
        assert r.zrange(aq.keys.active, 0, -1) == sorted([first, second, third])
        assert r.llen(aq.keys.wake) == 0
        # the wait's claim is never re-sent: it leaves no request record
        assert claim_records(r, aq) == set() and not r.exists(aq.keys.claimreqs)
        ids = {int(c["id"]) for c in r.client_list()}
        assert waker.client_id in ids
        await waker.close()
        assert waker._conn is None
        wait_until(lambda: waker.client_id not in {int(c["id"]) for c in r.client_list()})
    finally:
        await blocker.aclose()


def test_a_recorded_claim_leaves_its_record_and_a_wait_claim_none(q: Queue, r: redis.Redis) -> None:
    q.enqueue("a")
    q.enqueue("b")
    recorded = lifecycle.claim_op(q.ctx, 1, 5000, 0)
    plain = lifecycle.claim_op(q.ctx, 1, 5000, 0, recorded=False)
    assert recorded.again is not None and len(recorded.args) == 5
    assert plain.again is None and len(plain.args) == 4
    q.runner.execute(plain)
    assert claim_records(r, q) == set() and r.zcard(q.keys.active) == 1
    q.runner.execute(recorded)
    assert len(claim_records(r, q)) == (0 if native(q) else 1) and r.zcard(q.keys.active) == 2


# ---- the wire: one gate read, then the claim script ------------------------------------


#: What the claim path sends: scripts by name, plain commands by verb.
_CLAIM_PATH = {"enqueue", "claim", "complete", "HEXISTS", "WATCH", "BLPOP"}
_KEYLESS = {"MULTI", "EXEC", "UNWATCH", "CLIENT ID"}


def _monitored(server: Any, q: Queue, act: Any) -> list[tuple[str, ...]]:
    """The commands this queue's clients sent while ``act()`` ran (MONITOR), as
    ``(command, first key-ish argument)``; a script call (``EVALSHA`` or ``FCALL``) as
    ``("SCRIPT", script name)``."""
    from echomq.scripts import all_scripts

    names = {s.sha: s.name for s in all_scripts()}
    names |= {s.library.name: s.name for s in all_scripts() if s.library}
    mon = redis.Redis.from_url(server.url, decode_responses=True)
    for s in all_scripts():  # no NOSCRIPT (or Function not found) retry in the picture
        mon.script_load(s.body)
        if s.library:
            mon.execute_command("FUNCTION", "LOAD", "REPLACE", s.library.code)
    seen: list[tuple[str, ...]] = []
    with mon.monitor() as m:
        act()
        r = redis.Redis.from_url(server.url, decode_responses=True)
        r.echo("end-of-test-" + q.name)
        for event in m.listen():
            cmd = event["command"]
            if cmd == "ECHO end-of-test-" + q.name:
                break
            if event.get("client_type") == "lua":
                continue  # a script's own commands
            words = cmd.split(" ")
            verb = words[0].upper()
            if verb in ("EVALSHA", "FCALL"):
                name = names.get(words[1].strip('"'), words[1])
                if name in _CLAIM_PATH:  # not the beat's (should a slow machine reach it)
                    seen.append(("SCRIPT", name))
            elif (verb in _CLAIM_PATH and q.name in cmd) or cmd in _KEYLESS:
                seen.append((verb,))
    return seen


def test_the_idle_claim_keeps_its_wire_exchange(q: Queue, server: Any) -> None:
    async def handle(job: JobContext) -> None:
        pass

    w = Worker(q, handle, config=SLOW_BEAT)
    with running(w):
        wait_until(lambda: w._engine._waker is not None)
        wait_until(lambda: w._engine._waker.state is WaitState.WAITING_WITH_CLAIM)

        def act() -> None:
            q.enqueue("x")
            wait_until(lambda: w.stats.completed == 1)
            wait_until(lambda: w._engine._waker.state is WaitState.WAITING_WITH_CLAIM)
            plain = redis.Redis.from_url(server.url, decode_responses=True)
            wait_until(lambda: any(c["cmd"] == "blpop" for c in plain.client_list()))

        seen = _monitored(server, q, act)
    # MONITOR logs the BLPOP when it blocks (before this window), not when a token
    # serves it; the commands queued behind it run right then: the claim rides behind
    # the wake with no round trip of its own. Then the completion (the wake claimed
    # fewer than it asked for: no claim behind it) and the next wait: WATCH and the gate
    # read, then BLPOP with the claim behind it, on the connection the waits keep (its
    # CLIENT ID was read when it was new, so no CLIENT now).
    assert seen == [
        ("SCRIPT", "enqueue"),
        ("MULTI",),
        ("SCRIPT", "claim"),
        ("EXEC",),
        ("SCRIPT", "complete"),
        ("WATCH",),
        ("HEXISTS",),
        ("BLPOP",),
    ]
    assert q.counts().active == 0 and q.metrics()["completed"]["count"] == 1


def test_claim_many_is_one_gate_read_then_the_claim_script(q: Queue, server: Any) -> None:
    q.enqueue("a")
    got: list[Any] = []
    seen = _monitored(server, q, lambda: got.extend(q.claim_many(3)))
    assert seen == [("HEXISTS",), ("SCRIPT", "claim")]
    assert len(got) == 1 and q.counts().active == 1
    q.pause()
    seen = _monitored(server, q, lambda: got.extend(q.claim_many(3)))
    assert seen == [("HEXISTS",)] and len(got) == 1 and q.counts().pending == 0
