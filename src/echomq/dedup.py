"""Deduplication: the :class:`Dedup` spec an enqueue takes, and the two verbs on a dedup
id itself (who holds it, and the operator's release).

A dedup key ``B + "de:" + id`` holds the id of the job that owns the dedup id. Every
ending of that job (complete, dead, remove, drain, obliterate, a bulk removal or clean,
a trim of kept history) releases it without scanning keys: the ending reads the row's
``dedup`` field and deletes the key when it still names the job. A key whose job is
gone (no row, or a completed or dead one) counts as free and is taken over by the next
enqueue (self-healing), so a missed release never blocks an id for good. The modes
(the enqueue script's header, ``lua/enqueue.lua``, is the contract; docs/dedup.md the
guide):

- ``simple``: while the owner lives, an enqueue answers its id and writes nothing;
- ``throttle``: one job per id per ``ttl_ms`` window, even after the job ended: the key
  carries the window as its TTL and no ending deletes it (listed in ``dedups`` so that
  obliterate finds it);
- ``debounce``: a newer enqueue replaces the waiting owner's payload and pushes its due
  time to now + ``delay_ms``, so the last of a burst runs, once; a running owner keeps
  its run and the newer enqueue makes a new job;
- ``keep_last``: while the owner waits, a newer enqueue replaces its payload (newest
  wins); while it runs, one newer job waits behind it (held in the schedule) and every
  later enqueue replaces that one's payload; the owner's ending lets it go.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from . import checks
from .context import Context, as_str
from .errors import InvalidArgument
from .results import DedupOwner
from .schema import DEDUP_MODES
from .scripts import Eval, Plan, script

Mode = Literal["simple", "throttle", "debounce", "keep_last"]


@dataclass(frozen=True)
class Dedup:
    """How an enqueue deduplicates: ``enqueue(payload, dedup=Dedup("user-7", ...))``.

    Args:
        id: the dedup id (1 .. 256 characters); ``dedup_id="x"`` is ``Dedup("x")``.
        mode: ``simple`` (default), ``throttle``, ``debounce`` or ``keep_last``
            (see :mod:`echomq.dedup`).
        ttl_ms: ``throttle`` only, and required there: the window in ms.
        delay_ms: the job's delay; ``debounce`` needs one (here or the enqueue's
            ``delay_ms``): the quiet time after the last enqueue of a burst.
    """

    id: str
    mode: Mode = "simple"
    ttl_ms: int | None = None
    delay_ms: int | None = None


@dataclass(frozen=True)
class DedupWire:
    """A checked :class:`Dedup` as the enqueue script takes it."""

    id: str
    mode: str  # '' for simple
    ttl: str  # '' unless throttle
    delay_ms: int | None  # the job's delay, the enqueue's or the spec's


def gate(
    dedup: Dedup | None, dedup_id: str | None, delay_ms: int | None, run_at_ms: int | None
) -> DedupWire | None:
    """Check an enqueue's dedup arguments before anything is sent.

    Returns:
        The wire form, or ``None`` for no dedup.

    Raises:
        InvalidName: a malformed dedup id.
        InvalidArgument: both ``dedup`` and ``dedup_id``; an unknown mode; ``ttl_ms``
            missing for a throttle or given for another mode; two different delays;
            a debounce with ``run_at_ms`` or without a positive delay.
    """
    if dedup is None:
        if dedup_id is None:
            return None
        return DedupWire(checks.dedup(dedup_id), "", "", delay_ms)
    if dedup_id is not None:
        raise InvalidArgument("pass dedup= or dedup_id=, not both")
    if not isinstance(dedup, Dedup):
        raise InvalidArgument(f"dedup must be a Dedup, got {type(dedup).__name__}")
    did = checks.dedup(dedup.id)
    if dedup.mode not in DEDUP_MODES:
        raise InvalidArgument(f"dedup mode must be one of {', '.join(DEDUP_MODES)}")
    ttl = ""
    if dedup.mode == "throttle":
        if dedup.ttl_ms is None:
            raise InvalidArgument("a throttle needs ttl_ms (its window)")
        ttl = str(checks.ms(dedup.ttl_ms, "ttl_ms"))
    elif dedup.ttl_ms is not None:
        raise InvalidArgument("ttl_ms is a throttle's window; other modes take none")
    delay = delay_ms
    if dedup.delay_ms is not None:
        own = checks.ms(dedup.delay_ms, "delay_ms", zero=True)
        if delay_ms is not None and delay_ms != own:
            raise InvalidArgument("two different delays (the enqueue's and the dedup's)")
        delay = own
    if dedup.mode == "debounce":
        if run_at_ms is not None:
            raise InvalidArgument("a debounce pushes a delay: run_at_ms does not apply")
        if not delay:
            raise InvalidArgument("a debounce needs delay_ms > 0 (its quiet time)")
    return DedupWire(did, "" if dedup.mode == "simple" else dedup.mode, ttl, delay)


def dedup_owner(ctx: Context, dedup_id: str) -> Plan[DedupOwner | None]:
    """Who holds a dedup id: the job an enqueue with it would answer.

    Args:
        dedup_id: the dedup id.

    Returns:
        A :class:`~echomq.results.DedupOwner`, or ``None`` when the id is free (no
        key, or a key whose job is gone and that is no throttle window: the next
        enqueue takes it over).

    Raises:
        InvalidName: a malformed dedup id, before any I/O.
    """
    did = checks.dedup(dedup_id)
    ctx.keys.dedup(did)
    reply = yield Eval(script("dedup_owner"), (ctx.keys.base,), (did,))
    if not isinstance(reply, list):
        return None
    job, state, mode, ttl = (as_str(x) for x in reply)
    return DedupOwner(
        job_id=job,
        state=state or None,
        mode=mode or "simple",
        window_ms=int(ttl) if int(ttl) >= 0 else None,
    )


def release_dedup(ctx: Context, dedup_id: str) -> Plan[str | None]:
    """Free a dedup id now, whoever holds it and whatever its mode (a throttle window
    too); journaled. The job that held it runs or waits as before: only the key goes.
    A ``keep_last`` job held behind a running one is let go (ready now).

    Args:
        dedup_id: the dedup id.

    Returns:
        The id of the job the key named, or ``None`` when it was free already.

    Raises:
        InvalidName: a malformed dedup id, before any I/O.
    """
    did = checks.dedup(dedup_id)
    ctx.keys.dedup(did)
    reply = yield Eval(script("release_dedup"), (ctx.keys.base,), (did, ctx.actor))
    return None if reply == 0 else as_str(reply)
