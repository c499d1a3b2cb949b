"""The worker's side of flow control: what a claim held back by the queue's limits
asks of the next one (:class:`Throttle`), and a handler's :class:`~echomq.RateLimited`
turned into its transition (:func:`rate_limited`).

The limits are decided by the claim script (``lua/lib/limits.lua``); a claim held back
answers a :class:`~echomq.results.ClaimHold`, and the worker waits exactly as it says:

- ``rate`` / ``blocked``: no claim can start a job for ``wait_ms``, whatever is
  enqueued meanwhile, so the worker sleeps that long without listening to the wake
  list (an enqueue would wake it for nothing), then claims;
- ``lanes``: some lane is held; the worker waits on the wake list as usual (work for
  the other lanes or the flat backlog wakes it at once), at most until the first held
  lane is due again;
- ``concurrency``: the cap is reached; the worker waits on the wake list, where every
  ending of a job of the queue pushes a token while a cap is set.
"""

from __future__ import annotations

import asyncio
from typing import Any

from ..context import Context
from ..errors import JobGone, RateLimited, StaleToken
from ..scripts import Eval, Plan, script
from .job import JobContext
from .stats import WorkerStats

#: The shortest wait on the wake list (``BLPOP`` reads a timeout of 0 as "forever").
MIN_WAIT_S = 0.002


class Throttle:
    """What the last claim's hold asks of the next claim. Times are the event loop's
    (``loop.time()``); the loop's thread only.

    Attributes:
        not_before: no claim before this time (a full rate window or a handler's hold).
        lane_wait_s: wait on the wake list at most this long (a held lane is due
            again then), or ``None``.
    """

    def __init__(self) -> None:
        self.not_before = 0.0
        self.lane_wait_s: float | None = None

    def note(self, got: Any, now: float) -> bool:
        """Read a claim's answer (its ``hold``, if any); True when it was held back by
        the queue's limits (the worker then stops claiming until its wait is over)."""
        hold = getattr(got, "hold", None)
        self.lane_wait_s = None
        if hold is None:
            return False
        if hold.scope in ("rate", "blocked"):
            self.not_before = now + hold.wait_ms / 1000
        elif hold.scope == "lanes":
            self.lane_wait_s = max(MIN_WAIT_S, hold.wait_ms / 1000)
            return False
        return True

    def delay(self, now: float) -> float:
        """How long the next claim must wait (0: it may go now)."""
        return max(0.0, self.not_before - now)

    async def wait_out(self, stats: WorkerStats) -> bool:
        """Sleep out the wait a held claim answered, if any (no start is allowed before
        then, whatever is enqueued); a stop cancels the sleep. True when it slept."""
        delay = self.delay(asyncio.get_running_loop().time())
        if delay <= 0:
            return False
        await asyncio.sleep(delay)
        stats.limited_ms += round(delay * 1000)
        return True

    def timeout(self, beat_s: float) -> float:
        """The wake-list wait: the beat, or less while a held lane is due sooner."""
        if self.lane_wait_s is None:
            return beat_s
        return min(beat_s, self.lane_wait_s)


def rate_limited(
    ctx: Context, job_id: str, token: int, retry_after_ms: int, group: bool
) -> Plan[None]:
    """A handler raised ``RateLimited``: its job goes back to its old place (its run
    order), spending no failure, and the queue (or, with ``group``, only the job's
    lane) is held for ``retry_after_ms``.

    Raises:
        JobGone, StaleToken: refused (the lease was lost); nothing changed.
    """
    keys = (ctx.keys.base, ctx.keys.job(job_id))
    argv = (job_id, str(token), str(retry_after_ms), "g" if group else "q")
    yield Eval(script("rate_limited"), keys, argv, job=job_id)


async def hand_back(aq: Any, job: JobContext, exc: RateLimited, stats: WorkerStats) -> None:
    """Send a handler's ``RateLimited`` (:func:`rate_limited`) and count it: in
    ``stats.rate_limited``, or ``stats.stale`` when the job moved on (removed, or its
    lease lost). A server error is raised: the caller sends it again."""
    plan = rate_limited(aq.ctx, job.id, job.attempt, exc.retry_after_ms, exc.group)
    try:
        await aq.runner.drive(plan)
    except (JobGone, StaleToken):
        stats.stale += 1
    else:
        stats.rate_limited += 1
