"""Finding the queues on a server: a bounded SCAN over ``emq:{*}:*``.

Job rows, logs and locks (``emq:{q}:job:...``) are the bulk of any keyspace, so the
match skips keys whose suffix starts with ``j``; every queue still shows through one
of its sets, its meta hash or its metrics.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..context import as_str
from ..keyspace import ANY_QUEUE_PATTERN, queue_of_key

#: Every key of every queue except job rows and their sub-keys (``job:...``).
QUEUE_KEYS_MATCH = ANY_QUEUE_PATTERN.removesuffix("*") + "[^j]*"
#: Keys examined per SCAN call.
SCAN_COUNT = 1000
#: Keys examined in all before the search stops (a bound on the server work).
DEFAULT_SCAN_LIMIT = 1_000_000


@dataclass(frozen=True)
class Discovery:
    """What a search found.

    Attributes:
        queues: the queue names, sorted.
        complete: ``False`` when the scan stopped at its limit before the end.
    """

    queues: list[str]
    complete: bool


def discover_queues(client: Any, scan_limit: int = DEFAULT_SCAN_LIMIT) -> Discovery:
    """Every queue with at least one key on the server, examining at most ``scan_limit`` keys.

    Args:
        client: a ``redis.Redis``.
        scan_limit: stop after this many keys were examined by the server.

    Returns:
        The names found and whether the scan reached the end.
    """
    found: set[str] = set()
    cursor: Any = 0
    examined = 0
    while True:
        count = min(SCAN_COUNT, scan_limit)
        cursor, keys = client.scan(cursor=cursor, match=QUEUE_KEYS_MATCH, count=count)
        examined += count
        for key in keys:
            name = queue_of_key(as_str(key))
            if name is not None:
                found.add(name)
        if int(cursor) == 0:
            return Discovery(sorted(found), True)
        if examined >= scan_limit:
            return Discovery(sorted(found), False)
