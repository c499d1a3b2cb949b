"""The console's bounds and defaults: budgets, pages, pools, streams, timeouts.

One place for the numbers the handlers and the HTTP adapter share, so a limit is
read (and changed) where it is written down.
"""

from __future__ import annotations

#: Obliterate: the default and the largest budget (jobs per server call) per request.
OBLITERATE_BUDGET = 1000
MAX_OBLITERATE_BUDGET = 10000
#: Drain: the default and the largest budget (jobs per server call) per request.
DRAIN_BUDGET = 1000
MAX_DRAIN_BUDGET = 10000
#: The throughput chart's default and longest window, in minutes (buckets live a day).
METRIC_MINUTES = 60
MAX_METRIC_MINUTES = 1440
#: How long one read of a queue's history series is shared by every request, per span
#: (seconds): a 7-day view reads 168 hour keys, and only its last point still moves.
HISTORY_TTL_S = {"1h": 5.0, "24h": 30.0, "7d": 60.0}
#: The busiest lanes the History panel lists with each range's series.
HISTORY_LANES = 10
#: Seconds an event relay waits for a message before it yields a heartbeat.
HEARTBEAT_S = 10.0
#: Event streams open at once: each holds one server connection for its life.
MAX_STREAMS = 64
#: Event streams one client address may hold at once (a page holds one per tab);
#: past it the stream is refused with 429 and the page polls instead.
STREAMS_PER_CLIENT = 8
#: Server connections in all: the streams plus room for requests. A request waits
#: (up to ``POOL_WAIT_S``) for a free one rather than failing.
POOL_SIZE = MAX_STREAMS + 64
POOL_WAIT_S = 10.0
#: Queues whose counts the queue list reads at once.
SUMMARY_CONCURRENCY = 16
#: Queues kept in the facade cache (a queue is cheap to rebuild; the cap bounds memory).
QUEUE_CACHE = 256
#: How long the groups table's walk of a queue's groups is shared (seconds), and the
#: most groups one walk reads (in bounded pages).
GROUPS_TTL_S = 2.0
#: Up to this age (seconds) a walk past ``GROUPS_TTL_S`` is still answered while a new
#: one runs in the background; an older one is waited for.
GROUPS_STALE_S = 10.0
MAX_GROUPS_WALK = 10_000
#: Groups per page of the groups table.
GROUPS_PAGE = 50
#: Seconds a health answer (one PING) is reused by every stream and request.
HEALTH_TTL_S = 0.5
#: Seconds a health PING may take before the server counts as down.
HEALTH_TIMEOUT_S = 1.0
#: Audit entries one read answers at most.
MAX_AUDIT = 500
#: Server calls one bulk request makes at most; the page calls again with the cursor,
#: which is how it draws a progress bar (and no request holds a worker for long).
BULK_CALLS = 8
#: The actor journaled when no request set one.
DEFAULT_ACTOR = "console"
#: Queues one "which queue holds this job" lookup checks at most.
MAX_LOOKUP = 1000
#: Discovery chunks one lookup may advance (until a full pass is done).
LOOKUP_CHUNKS = 10
