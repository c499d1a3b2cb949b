"""The console's API, independent of any HTTP framework.

:class:`Console` holds one ``redis.asyncio`` client and an :class:`~echomq.AsyncQueue`
per queue it has served. Each handler is a plain coroutine: it takes parsed input
(names from the path, a JSON body already decoded to a mapping) and returns a plain,
JSON-ready dict, or raises a typed error:

- :class:`~echomq.errors.Refused` (and its subclasses) when a transition declined,
  with ``.reason``; nothing changed on the server;
- ``InvalidName`` / ``InvalidJobId`` / ``InvalidArgument`` for malformed input,
  raised before any I/O;
- :class:`ReadOnly` for any change asked of a read-only console.

The HTTP adapter (:mod:`echomq.console.app`) maps those to status codes; another
adapter (a test, a different framework) can call the handlers directly.

The handlers live by subject, each group a class over :class:`~.core.ConsoleCore`
(the client, the facades, who acts: :func:`acting_as`): reads of queues
(:mod:`.queue_reads`) and of jobs (:mod:`.job_reads`), the event relay
(:mod:`.event_relay`), changes to a queue, a lane or a repeatable
(:mod:`.queue_verbs`), to one job (:mod:`.job_verbs`) and by filter
(:mod:`.bulk_verbs`). This module puts them together and names the verbs each
``POST`` route may call.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from .body import Body, Reply
from .bulk_verbs import BULK_VERBS, BulkVerbs
from .core import ConsoleCore, ReadOnly, UnsafeBind, acting_as
from .event_relay import EventRelay
from .group_reads import GROUP_SORTS, GroupReads
from .job_reads import JobReads
from .job_verbs import JobVerbs
from .limits import (
    BULK_CALLS,
    DEFAULT_ACTOR,
    GROUPS_PAGE,
    HEALTH_TIMEOUT_S,
    HEALTH_TTL_S,
    HEARTBEAT_S,
    LOOKUP_CHUNKS,
    MAX_AUDIT,
    MAX_LOOKUP,
    MAX_METRIC_MINUTES,
    MAX_OBLITERATE_BUDGET,
    MAX_STREAMS,
    METRIC_MINUTES,
    OBLITERATE_BUDGET,
    POOL_SIZE,
    POOL_WAIT_S,
    QUEUE_CACHE,
    STREAMS_PER_CLIENT,
    SUMMARY_CONCURRENCY,
)
from .queue_reads import QueueReads
from .queue_verbs import GroupVerbs, QueueVerbs, RepeatVerbs

__all__ = [
    "BULK_CALLS",
    "BULK_VERBS",
    "DEFAULT_ACTOR",
    "GROUPS_PAGE",
    "GROUP_SORTS",
    "GROUP_VERBS",
    "HEALTH_TIMEOUT_S",
    "HEALTH_TTL_S",
    "HEARTBEAT_S",
    "JOB_VERBS",
    "LOOKUP_CHUNKS",
    "MAX_AUDIT",
    "MAX_LOOKUP",
    "MAX_METRIC_MINUTES",
    "MAX_OBLITERATE_BUDGET",
    "MAX_STREAMS",
    "METRIC_MINUTES",
    "OBLITERATE_BUDGET",
    "POOL_SIZE",
    "POOL_WAIT_S",
    "QUEUE_CACHE",
    "QUEUE_VERBS",
    "REPEAT_VERBS",
    "STREAMS_PER_CLIENT",
    "SUMMARY_CONCURRENCY",
    "Body",
    "Console",
    "ConsoleCore",
    "GroupVerb",
    "QueueVerb",
    "ReadOnly",
    "Reply",
    "UnsafeBind",
    "acting_as",
]


class Console(
    QueueReads,
    GroupReads,
    JobReads,
    EventRelay,
    QueueVerbs,
    GroupVerbs,
    RepeatVerbs,
    JobVerbs,
    BulkVerbs,
):
    """The console's handlers over one server.

    Args:
        url: the server URL (default ``redis://127.0.0.1:6379/0``); ignored with ``client``.
        client: a ``redis.asyncio.Redis`` created with ``decode_responses=True``.
        read_only: refuse every change with :class:`ReadOnly`.
    """


QueueVerb = Callable[[Console, str, Body], Awaitable[Reply]]
GroupVerb = Callable[[Console, str, str, Body], Awaitable[Reply]]

#: POST /api/queues/{q}/<verb>
QUEUE_VERBS: dict[str, QueueVerb] = {
    "pause": Console.pause,
    "resume": Console.resume,
    "drain": Console.drain,
    "obliterate": Console.obliterate,
}
#: POST /api/queues/{q}/groups/{g}/<verb>
GROUP_VERBS: dict[str, GroupVerb] = {
    "pause": Console.pause_group,
    "resume": Console.resume_group,
    "limit": Console.limit_group,
    "weight": Console.weight_group,
    "drain": Console.drain_group,
}
#: POST /api/queues/{q}/repeats/{name}/<verb>
REPEAT_VERBS: dict[str, GroupVerb] = {
    "cancel": Console.cancel_repeat,
    "pause": Console.pause_repeat,
    "resume": Console.resume_repeat,
    "run": Console.run_repeat,
}
#: POST /api/queues/{q}/jobs/{id}/<verb>
JOB_VERBS: dict[str, GroupVerb] = {
    "data": Console.update_data,
    "progress": Console.update_progress,
    "log": Console.add_log,
    "remove": Console.remove_job,
    "reprocess": Console.reprocess_job,
    "rerun": Console.rerun_job,
    "promote": Console.promote_job,
    "cancel": Console.cancel_job,
    "release_parent": Console.release_parent,
    "fail_parent": Console.fail_parent,
    "cancel_flow": Console.cancel_flow,
}
