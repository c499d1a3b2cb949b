"""Flow control's operator verbs: the queue's rate limit, its concurrency cap and the
lanes' rate limits (each journaled), and the read of them all.

Every limit is state in the queue's slot (``meta`` fields, ``grate``) that the claim
script reads and counts in the same atomic step as its pops (``lua/lib/limits.lua``),
so no number of workers can overshoot it. See ``docs/flow-control.md``.
"""

from __future__ import annotations

from typing import Any

from . import checks, journal
from .context import Context, as_str
from .keyspace import check_name
from .results import Limits, RateLimit
from .scripts import Batch, Cmd, Eval, Plan, script


def _set(ctx: Context, which: str, a: str, b: str, burst: str = "") -> Eval:
    argv = (which, a, b, ctx.actor, journal.request_id(), burst)
    return Eval(script("set_limits"), (ctx.keys.base,), argv)


#: The default burst: a twentieth of the limit (at least 1), so with a backlog every
#: window of ``per_ms`` holds between 95% and 100% of ``max_jobs`` starts.
BURST_SHARE = 20


def default_burst(max_jobs: int) -> int:
    """The burst :func:`set_rate_limit` uses when none is given."""
    return max(1, -(-max_jobs // BURST_SHARE))


def set_rate_limit(
    ctx: Context, max_jobs: int, per_ms: int, *, burst: int | None = None
) -> Plan[None]:
    """Let at most ``max_jobs`` claims of the queue start in any window of ``per_ms``
    ms of server time, across every worker (a sliding window: no window, at any edge,
    holds more). The starts are spread too: at most ``burst`` of them in any
    ``floor(0.9 * burst * per_ms / max_jobs)`` ms (90% of their share of the window, so
    that a worker's wake-up latency does not add up; the window of ``per_ms`` binds).
    A claim held back answers how long until the next start is allowed and the worker
    waits exactly that. Journaled.

    Args:
        max_jobs: starts per window, ``1 .. 100000``.
        per_ms: the window, ``1 .. 86400000`` ms.
        burst: the most starts at once, ``1 .. max_jobs``; default a twentieth of
            ``max_jobs`` (at least 1). ``burst=max_jobs`` lets a whole window's starts
            go at once (the plain sliding window).

    Raises:
        InvalidArgument: a value out of range (nothing is sent).
    """
    max_jobs, per_ms = checks.rate(max_jobs, per_ms)
    if burst is None:
        burst = default_burst(max_jobs)
    burst = checks.integer(burst, "burst", 1, max_jobs)
    yield _set(ctx, "rate", str(max_jobs), str(per_ms), str(burst))


def clear_rate_limit(ctx: Context) -> Plan[None]:
    """Remove the queue's rate limit, its start log and any hold a handler's
    ``RateLimited`` left on the queue. Journaled."""
    yield _set(ctx, "rate", "", "")


def rate_limit(ctx: Context) -> Plan[RateLimit | None]:
    """The queue's rate limit (with its burst), or ``None`` when it has none."""
    r = yield Cmd(("HMGET", ctx.keys.meta, "rate_max", "rate_ms", "rate_burst"))
    return _rate(r[0], r[1], r[2])


def set_concurrency(ctx: Context, n: int) -> Plan[None]:
    """Let at most ``n`` jobs of the queue be active at once across every worker,
    decided inside the claim (never overshooting). A job that ends frees its slot
    and wakes a waiting worker. Journaled.

    Args:
        n: the cap, a positive integer.

    Raises:
        InvalidArgument: before anything is sent.
    """
    n = checks.count(n, "n")
    yield _set(ctx, "concurrency", str(n), "")


def clear_concurrency(ctx: Context) -> Plan[None]:
    """Remove the queue's concurrency cap. Journaled."""
    yield _set(ctx, "concurrency", "", "")


def set_group_rate_limit(ctx: Context, group: str, max_jobs: int, per_ms: int) -> Plan[None]:
    """Let at most ``max_jobs`` claims of ``group`` start in any window of ``per_ms``
    ms. A lane whose window is full leaves the ring until it frees (the other lanes
    flow at full speed) and comes back at the ring's head. Journaled.

    Args:
        group: the group.
        max_jobs, per_ms: as for :func:`set_rate_limit`.

    Raises:
        InvalidName, InvalidArgument: before anything is sent.
    """
    group = check_name(group, "group")
    max_jobs, per_ms = checks.rate(max_jobs, per_ms)
    argv = (group, str(max_jobs), str(per_ms), ctx.actor, journal.request_id())
    yield Eval(script("set_group_rate"), (ctx.keys.base,), argv)


def clear_group_rate_limit(ctx: Context, group: str) -> Plan[None]:
    """Remove ``group``'s own rate limit (the queue's lane default, if any, applies
    again); a lane held by its window is served again at once. Journaled.

    Raises:
        InvalidName: before anything is sent.
    """
    group = check_name(group, "group")
    argv = (group, "", "", ctx.actor, journal.request_id())
    yield Eval(script("set_group_rate"), (ctx.keys.base,), argv)


def set_group_rate_default(ctx: Context, max_jobs: int, per_ms: int) -> Plan[None]:
    """Give every lane without its own limit a rate limit of ``max_jobs`` per
    ``per_ms`` ms, each lane counted on its own. Journaled.

    Raises:
        InvalidArgument: before anything is sent.
    """
    max_jobs, per_ms = checks.rate(max_jobs, per_ms)
    yield _set(ctx, "group_rate", str(max_jobs), str(per_ms))


def clear_group_rate_default(ctx: Context) -> Plan[None]:
    """Remove the lanes' default rate limit. Journaled."""
    yield _set(ctx, "group_rate", "", "")


def group_rate_limit(ctx: Context, group: str) -> Plan[RateLimit | None]:
    """``group``'s own rate limit, or ``None`` (the default may still apply).

    Raises:
        InvalidName: before anything is sent.
    """
    raw = yield Cmd(("HGET", ctx.keys.grate, check_name(group, "group")))
    if raw is None:
        return None
    m, _, p = as_str(raw).partition(":")
    return RateLimit(int(m), int(p))


def limits(ctx: Context) -> Plan[Limits]:
    """The queue's flow control at once: its limits, the starts in the rate window
    ending now (server clock), a handler's hold, the active jobs, the held lanes and
    when the next start is allowed. One round trip (the read the metrics scrape makes,
    beside the limits in meta)."""
    meta = (
        "rate_max",
        "rate_ms",
        "concurrency",
        "limited_until",
        "group_rate_max",
        "group_rate_ms",
        "rate_burst",
    )
    k = ctx.keys
    # the scrape's read (obs_queue) counts the window and its wait on the server's clock
    r, obs = yield Batch((Cmd(("HMGET", k.meta, *meta)), Eval(script("obs_queue"), (k.base,))))
    now, active, held = int(obs[9]), int(obs[1]), int(obs[12])
    rate = _rate(r[0], r[1], r[6])
    starts = int(obs[13])
    until = int(as_str(r[3])) if r[3] is not None else 0
    next_start = int(obs[11])
    return Limits(
        rate=rate,
        concurrency=int(as_str(r[2])) if r[2] is not None else None,
        group_rate_default=_rate(r[4], r[5]),
        limited_for_ms=max(0, until - now),
        starts_in_window=starts,
        active=int(active),
        held_lanes=int(held),
        next_start_in_ms=next_start,
    )


def _rate(m: Any, p: Any, b: Any = None) -> RateLimit | None:
    if m is None or p is None:
        return None
    return RateLimit(int(as_str(m)), int(as_str(p)), int(as_str(b)) if b is not None else None)
