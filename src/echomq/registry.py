"""The worker registry: which worker processes serve a queue, read back live.

Each :class:`~echomq.Worker` writes a record ``emq:{q}:worker:<wid>`` (a hash with a
ttl of a few beats) and its entry in the index ``emq:{q}:workers`` (a sorted set,
score = the last beat, server clock) on every beat, in the same round trip as its
lease extensions (``worker_beat.lua``); a stopping worker takes itself out
(``worker_leave.lua``), and a crashed one drops out when its record's ttl passes: the
read (``workers.lua``) answers live records only and trims the index entries whose
record is gone, a bounded number per call.

The record: ``host``, ``pid``, ``queues`` (JSON list), ``concurrency``, ``jobs`` (in
hand), ``job_ids`` (JSON, the first :data:`JOB_IDS_SHOWN`), ``version``, ``beat_ms``
(its interval), the counts so far (``claimed``, ``completed``, ``failed``,
``cancelled``), the server times ``started`` and ``beat``, and, when set, ``order``
(a worker over several queues: it is listed under each, with every queue in
``queues``) and ``batch`` (a batch worker's settings).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from . import checks
from .context import Context, as_str
from .keyspace import check_worker_id
from .results import WorkerInfo as WorkerInfo
from .scripts import Eval, Plan, script

#: Records ``workers()`` answers when the caller does not say (and the most it may ask).
DEFAULT_WORKERS, MAX_WORKERS = 100, 1000
#: Index entries (the oldest beats) each read checks for a dead worker and trims.
TRIM_PER_READ = 20
#: Job ids a record lists (``jobs`` is the full count).
JOB_IDS_SHOWN = 20


def _num(f: Mapping[str, str], key: str) -> int:
    try:
        return int(f.get(key) or 0)
    except ValueError:
        return 0


def _list(f: Mapping[str, str], key: str) -> list[str]:
    try:
        value = json.loads(f.get(key) or "[]")
    except ValueError:
        return []
    return [str(v) for v in value] if isinstance(value, list) else []


def _info(wid: str, raw: Any, now: int) -> WorkerInfo:
    items = raw.items() if isinstance(raw, dict) else zip(raw[::2], raw[1::2])
    f = {as_str(k): as_str(v) for k, v in items}
    beat = _num(f, "beat")
    return WorkerInfo(
        id=wid,
        host=f.get("host", ""),
        pid=_num(f, "pid"),
        queues=_list(f, "queues"),
        concurrency=_num(f, "concurrency"),
        jobs=_num(f, "jobs"),
        job_ids=_list(f, "job_ids"),
        started_ms=_num(f, "started"),
        beat_ms=beat,
        interval_ms=_num(f, "interval_ms"),
        version=f.get("version", ""),
        claimed=_num(f, "claimed"),
        completed=_num(f, "completed"),
        failed=_num(f, "failed"),
        cancelled=_num(f, "cancelled"),
        age_ms=max(0, now - beat),
        order=f.get("order", ""),
        batch=f.get("batch", ""),
    )


def workers(ctx: Context, n: int = DEFAULT_WORKERS) -> Plan[list[WorkerInfo]]:
    """The live workers of the queue, newest beat first (at most ``n``).

    A worker that stopped is gone at once; one that crashed drops out when its
    record's ttl (a few beats) passes. The read trims dead index entries as it goes
    (a bounded number per call).

    Args:
        n: the most records (1..1000).

    Returns:
        One :class:`WorkerInfo` per live worker.

    Raises:
        InvalidArgument: ``n`` out of range, before any I/O.
    """
    n = checks.integer(n, "n", 1, MAX_WORKERS)
    reply = yield Eval(script("workers"), (ctx.keys.base,), (str(n), str(TRIM_PER_READ)))
    now = int(reply[0])
    return [_info(as_str(reply[i]), reply[i + 1], now) for i in range(1, len(reply), 2)]


def beat_op(
    ctx: Context,
    wid: str,
    ttl_ms: int,
    fields: Mapping[str, str],
    held: Sequence[tuple[str, int]],
) -> Eval:
    """The beat's registry write and cancel read, as one op (the worker batches it with
    its lease extensions). Its reply: the held ids whose run was asked to cancel.

    Args:
        wid: the worker id.
        ttl_ms: how long the record lives without another beat.
        fields: the record's fields (never ``beat`` or ``started``: the script's).
        held: ``(job_id, token)`` of the jobs the worker holds.
    """
    args: list[str] = [check_worker_id(wid), str(checks.ms(ttl_ms, "ttl_ms")), str(len(fields))]
    for k, v in fields.items():
        args += [k, v]
    for job_id, token in held:
        ctx.keys.job(job_id)  # check the id
        args += [job_id, str(token)]
    return Eval(script("worker_beat"), (ctx.keys.base,), args)


def leave(ctx: Context, wid: str) -> Plan[bool]:
    """Take worker ``wid`` out of the registry (a worker does it as it stops).

    Returns:
        Whether it was registered.
    """
    reply = yield Eval(script("worker_leave"), (ctx.keys.base,), (check_worker_id(wid),))
    return bool(int(reply))


def record_fields(values: Mapping[str, Any]) -> dict[str, str]:
    """A record's fields as text: lists as JSON, the rest as ``str``."""
    return {
        k: json.dumps(v, separators=(",", ":")) if isinstance(v, list) else str(v)
        for k, v in values.items()
    }
