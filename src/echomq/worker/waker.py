"""The idle worker's wait on the wake list, on a connection of its own, as an explicit
state machine (:class:`WaitState`, its transitions in :data:`TRANSITIONS`)."""

from __future__ import annotations

import enum
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import redis

from ..scripts import Arg
from ..transport import HeldConnection

log = logging.getLogger("echomq.worker")

#: After the server refused the transaction as a whole (``EXECABORT``, e.g. ``OOM``
#: while queued on a server at ``maxmemory``), waits carry no claim for this long:
#: the caller claims plainly, which such a server still runs.
PLAIN_CLAIM_S = 10.0


class WaitState(enum.Enum):
    """Where the idle worker's wait stands, and so how a stopping worker ends it.

    ====================  ==============================================  =================
    state                 on the wire                                     a stop
    ====================  ==============================================  =================
    ``IDLE``              nothing                                         (nothing to end)
    ``READING_GATE``      ``CLIENT ID``, ``WATCH meta``, the gate read    cancels it
    ``WAITING_WITH_CLAIM`` ``BLPOP``; ``MULTI``, claim, ``EXEC`` behind    unblocks it
    ``WAITING``           ``BLPOP`` with the gate read behind, no claim   cancels it
    ``CLAIMING``          a claim ran, or runs next: its reply is read    lets it finish
    ====================  ==============================================  =================

    A wait with a claim behind it must be unblocked (``CLIENT UNBLOCK``), not
    cancelled: the claim then runs on the server and its reply must be read, or it
    would lease jobs no one serves. The transitions are :data:`TRANSITIONS`.
    """

    IDLE = "idle"
    READING_GATE = "reading_gate"
    WAITING_WITH_CLAIM = "waiting_with_claim"
    WAITING = "waiting"
    CLAIMING = "claiming"

    @property
    def to_end(self) -> Literal["cancel", "unblock", "finish"]:
        """How a stopping worker ends a wait in this state: ``"cancel"``,
        ``"unblock"`` or ``"finish"`` (let it end by itself)."""
        if self is WaitState.WAITING_WITH_CLAIM:
            return "unblock"
        if self is WaitState.CLAIMING:
            return "finish"
        return "cancel"


_S = WaitState
#: Every move a wait makes; any state may also fall back to ``IDLE`` (an error or a
#: cancel, the connection then dropped).
#:
#: ====================  =====================  ===========================================
#: from                  to                     when
#: ====================  =====================  ===========================================
#: IDLE                  READING_GATE           a wait starts on a plain client
#: IDLE                  WAITING                a wait starts on a cluster client (two commands)
#: READING_GATE          WAITING_WITH_CLAIM     the gate read open: the claim rides behind
#: READING_GATE          WAITING                the gate read closed, or claims go plainly
#: WAITING_WITH_CLAIM    CLAIMING               the BLPOP answered: the claim's reply follows
#: WAITING               CLAIMING               the BLPOP answered: the caller claims by the gate
#: CLAIMING              IDLE                   the claim's reply is read and handed over
#: ====================  =====================  ===========================================
TRANSITIONS: dict[WaitState, frozenset[WaitState]] = {
    _S.IDLE: frozenset({_S.READING_GATE, _S.WAITING}),
    _S.READING_GATE: frozenset({_S.WAITING_WITH_CLAIM, _S.WAITING, _S.IDLE}),
    _S.WAITING_WITH_CLAIM: frozenset({_S.CLAIMING, _S.IDLE}),
    _S.WAITING: frozenset({_S.CLAIMING, _S.IDLE}),
    _S.CLAIMING: frozenset({_S.IDLE}),
}


@dataclass
class WaitResult:
    """What a wait ended with.

    Attributes:
        claim_sent: whether a claim rode behind the ``BLPOP``.
        gate: without a claim: the pause-gate read made right after the ``BLPOP``;
            the caller claims, or not, by it.
        claim: with a claim: the claim script's reply (an error reply as an
            exception), ``None`` when ``WATCH`` dropped the transaction (the gate
            moved meanwhile: nothing was claimed).
        refused: with a claim: the server refused the transaction as a whole (the
            claim never ran); the caller claims plainly.
    """

    claim_sent: bool
    gate: Any = None
    claim: Any = None
    refused: Exception | None = None


class Waker:
    """The idle worker's wait on the wake list, on a connection of its own.

    On a plain client the wait takes two round trips, and a job that arrives costs
    the worker no client round trip at all after the wake:

    1. ``WATCH meta`` and the pause-gate read (``HEXISTS meta paused``), made before
       the wait: the separate gate, read in its own round trip.
    2. While the gate reads open: ``BLPOP`` on the wake list with ``MULTI``, the claim
       script call and ``EXEC`` written right behind it. The server runs them the
       moment the ``BLPOP`` returns (a client's commands run in order). The claim
       script is the plain one, with no pause logic; the ``WATCH`` drops the whole
       transaction if the gate moved since it was read, so a claim never runs on a
       queue paused after the read. The caller then reads the gate again.

    While the gate reads closed, the wait is ``BLPOP`` with the gate read behind it,
    and no claim rides along. A cluster client (no single pool) gets that form too,
    as two commands (``BLPOP``, then the gate read). So does every wait for
    :data:`PLAIN_CLAIM_S` after the server refused the transaction as a whole.

    ``state`` (a :class:`WaitState`) tells a stopping worker how to end a wait.
    """

    def __init__(self, blocker: Any, wake_key: str, gate: tuple[Arg, ...]) -> None:
        """``gate`` is the pause-gate read (``lifecycle.claim_gate``): a read of the meta
        hash, which is the key watched."""
        self.blocker = blocker
        self.wake_key, self.gate = wake_key, gate
        self.meta_key = gate[1]
        self.state = WaitState.IDLE
        # the kept connection's (read when it is new), for CLIENT UNBLOCK
        self.client_id: int | None = None
        self._conn: HeldConnection | None = None  # the connection the waits keep
        self.plain_until = 0.0  # monotonic time until which waits carry no claim

    def _enter(self, new: WaitState) -> None:
        if new is not WaitState.IDLE and new not in TRANSITIONS[self.state]:
            raise AssertionError(f"wait state {self.state.name} -> {new.name}")
        self.state = new

    def done(self) -> None:
        """The caller has read (or dropped) what the wait ended with."""
        self._enter(WaitState.IDLE)

    async def wait(self, timeout_s: float, claim: Sequence[Arg]) -> WaitResult:
        """Wait for a wake token or ``timeout_s``; send ``claim`` behind it if the gate
        is open. The state is ``CLAIMING`` when this returns; call :meth:`done` once
        the claim's reply is handed over."""
        pool = getattr(self.blocker, "connection_pool", None)
        if pool is None:
            return await self._on_cluster(timeout_s)
        try:
            self._enter(WaitState.READING_GATE)
            conn, gate = await self._read_gate(pool)
            if not isinstance(gate, Exception) and not int(gate) and self._with_claim():
                return await self._with_claim_behind(conn, timeout_s, claim)
            # closed (or claims go plainly): no claim behind, the gate read again after
            self._enter(WaitState.WAITING)
            await conn.send(("UNWATCH",), ("BLPOP", self.wake_key, timeout_s), self.gate)
            _, _, gate = await conn.read(3)
            self._enter(WaitState.CLAIMING)
            return WaitResult(claim_sent=False, gate=gate)
        except BaseException:
            # cancelled or cut off between replies: the held connection is dropped
            self._enter(WaitState.IDLE)
            await self.close()
            raise

    async def _read_gate(self, pool: Any) -> tuple[HeldConnection, Any]:
        """``WATCH meta`` and the gate read on the connection the waits keep (its
        ``CLIENT ID`` read when it is new). The connection stays held from one wait to
        the next: taking it from the pool and giving it back each time cost the wake
        path the pool's bookkeeping, where the claim's reply waits. A kept connection
        the server closed meanwhile (a restart, an idle timeout) is replaced once: this
        exchange only reads, so it goes again on a fresh one."""
        for fresh in (self._conn is None, True):
            if self._conn is None:
                self._conn = await HeldConnection(pool).take()
            conn = self._conn
            cmds: tuple[Sequence[Arg], ...] = (("WATCH", self.meta_key), self.gate)
            try:
                if fresh:
                    await conn.send(("CLIENT", "ID"), *cmds)
                    client_id, watched, gate = await conn.read(3)
                    if isinstance(client_id, Exception):
                        raise client_id
                    self.client_id = int(client_id)
                else:
                    await conn.send(*cmds)
                    watched, gate = await conn.read(2)
            except (OSError, redis.ConnectionError, redis.TimeoutError):
                await self.close()
                if fresh:
                    raise
                continue
            if isinstance(watched, Exception):
                raise watched
            return conn, gate
        raise AssertionError("unreachable")  # the second pass is fresh: it returns or raises

    async def close(self) -> None:
        """Drop the connection the waits keep (the next wait takes a fresh one)."""
        held, self._conn = self._conn, None
        if held is not None:
            await held.give_back(broken=True)

    def _with_claim(self) -> bool:
        return time.monotonic() >= self.plain_until

    async def _with_claim_behind(
        self, conn: HeldConnection, timeout_s: float, claim: Sequence[Arg]
    ) -> WaitResult:
        self._enter(WaitState.WAITING_WITH_CLAIM)
        await conn.send(("BLPOP", self.wake_key, timeout_s), ("MULTI",), claim, ("EXEC",))
        await conn.read(1)  # the token, or nil after the timeout or an unblock
        self._enter(WaitState.CLAIMING)  # the claim has run: its reply must be read
        _, queued, replies = await conn.read(3)  # OK, QUEUED, the EXEC reply
        if isinstance(replies, Exception):
            # refused as a whole (EXECABORT: the claim was refused when queued, e.g.
            # OOM at maxmemory): nothing ran; claim plainly for a while
            self.plain_until = time.monotonic() + PLAIN_CLAIM_S
            reason = queued if isinstance(queued, Exception) else replies
            log.debug("claim behind the wait refused (%r); claiming plainly", reason)
            return WaitResult(claim_sent=True, refused=reason)
        return WaitResult(claim_sent=True, claim=None if replies is None else replies[0])

    async def _on_cluster(self, timeout_s: float) -> WaitResult:
        self._enter(WaitState.WAITING)
        try:
            # two commands, not a pipeline: redis-py 5's asyncio cluster pipeline makes
            # no attempt at all when the client's retries are off (echomq.connect)
            await self.blocker.blpop([self.wake_key], timeout=timeout_s)
            gate = await self.blocker.execute_command(*self.gate)
        except BaseException:
            self._enter(WaitState.IDLE)
            raise
        self._enter(WaitState.CLAIMING)
        return WaitResult(claim_sent=False, gate=gate)

    async def unblock(self, client: Any) -> None:
        """End a wait with a claim behind it now (as if it timed out): its claim runs
        and is read."""
        if self.state is WaitState.WAITING_WITH_CLAIM and self.client_id is not None:
            await client.client_unblock(self.client_id)
