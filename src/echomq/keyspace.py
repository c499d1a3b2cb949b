"""Every key echomq touches is built here, from the schema, and every name and id is checked here.

A queue ``q`` lives under the base ``emq:{q}:``; the hash tag ``{q}`` keeps all of a
queue's keys on one cluster slot. Names are checked before any I/O: a malformed one
raises :class:`~echomq.errors.InvalidName` (or ``InvalidJobId``) and nothing is sent.
"""

from __future__ import annotations

import re

from . import ids
from .checks import MAX_DEDUP_LEN as MAX_DEDUP_LEN
from .checks import NAME_RE as NAME_RE
from .checks import WORKER_ID_RE as WORKER_ID_RE
from .checks import check_dedup as check_dedup
from .checks import check_name as check_name
from .checks import check_worker_id as check_worker_id
from .checks import show
from .errors import InvalidName
from .schema import KEY, KEYS

#: The queue-wide keys (``B + suffix``), each an attribute of :class:`Keyspace`.
QUEUE_KEYS = tuple(k for k in KEYS if k.shape == "queue")
_JOB, _LOGS, _LOGTIMES = KEY["JOB"].suffix, KEY["LOGS"].suffix, KEY["LOGTIMES"].suffix
_LOCK, _ERRORS, _DEDUP = KEY["LOCK"].suffix, KEY["ERRORS"].suffix, KEY["DEDUP"].suffix
_DEPS, _KIDS, _KIDFAILS = KEY["DEPS"].suffix, KEY["KIDS"].suffix, KEY["KIDFAILS"].suffix
_CLAIMREQ, _WORKER = KEY["CLAIMREQ"].suffix, KEY["WORKER"].suffix
_LANE, _LANE_END = KEY["LANE"].suffix, KEY["LANE_END"].suffix
_REPEAT_RECORD, _GSTARTS = KEY["REPEAT_RECORD"].suffix, KEY["GSTARTS"].suffix
_HIST = KEY["HIST"].suffix

VERSION_KEY = "{emq}:version"
KEYSPACE_VERSION = "1"
#: The pattern matching every queue's meta hash, for discovering queues.
META_PATTERN = "emq:{*}:meta"
#: A SCAN pattern matching every key of every queue (a queue need not have a meta hash).
ANY_QUEUE_PATTERN = "emq:{*}:*"
#: A PSUBSCRIBE pattern matching every queue's events channel.
EVENTS_PATTERN = "emq:{*}:events"


class Keyspace:
    """The keys of one queue.

    Args:
        queue: the queue name, ``[A-Za-z0-9._-]{1,128}``.

    Raises:
        InvalidName: the queue name is malformed.
    """

    __slots__ = ("base", "name", *(k.attr for k in QUEUE_KEYS))

    # one attribute per queue-wide key of the schema (``pending``, ``meta`` ...),
    # declared for the type checker; :meth:`__init__` sets them all from the schema
    active: str
    audit: str
    claimreqs: str
    completed: str
    dead: str
    events: str
    gactive: str
    gindex: str
    glimit: str
    gpaused: str
    grate: str
    groups: str
    gturn: str
    gwait: str
    gweight: str
    keeps: str
    keepuntil: str
    lanenames: str
    meta: str
    metrics_completed: str
    metrics_failed: str
    outbox: str
    outmsg: str
    pending: str
    rate: str
    repeat: str
    ring: str
    schedule: str
    settled: str
    waiting: str
    wake: str
    workers: str

    def __init__(self, queue: str) -> None:
        self.name = check_name(queue)
        b = f"emq:{{{queue}}}:"
        self.base = b
        for key in QUEUE_KEYS:
            setattr(self, key.attr, b + key.suffix)

    def job(self, job_id: str) -> str:
        """The row of ``job_id`` (checked)."""
        return self.base + _JOB + ids.validate(job_id)

    def logs(self, job_id: str) -> str:
        """The log list of ``job_id`` (checked)."""
        return self.job(job_id) + _LOGS

    def logtimes(self, job_id: str) -> str:
        """The server times (ms) of ``job_id``'s log lines (checked): aligned with
        :meth:`logs` at the newest end (lines written before times were kept have none)."""
        return self.job(job_id) + _LOGTIMES

    def lock(self, job_id: str) -> str:
        """The worker lock of ``job_id`` (checked)."""
        return self.job(job_id) + _LOCK

    def errors(self, job_id: str) -> str:
        """The error history of a kept ``job_id`` (checked): a capped list, oldest first."""
        return self.job(job_id) + _ERRORS

    def deps(self, job_id: str) -> str:
        """A flow parent's unresolved children, ``queue:id`` (checked)."""
        return self.job(job_id) + _DEPS

    def kids(self, job_id: str) -> str:
        """A flow parent's completed children: ``queue:id`` -> result (checked)."""
        return self.job(job_id) + _KIDS

    def kidfails(self, job_id: str) -> str:
        """A flow parent's children that ended otherwise: ``queue:id`` -> JSON (checked)."""
        return self.job(job_id) + _KIDFAILS

    def dedup(self, dedup_id: str) -> str:
        """The dedup key for ``dedup_id`` (checked)."""
        return self.base + _DEDUP + check_dedup(dedup_id)

    def claim_request(self, rid: str) -> str:
        """The record of one claim request: the ids it claimed, for a repeat to answer."""
        return self.base + _CLAIMREQ + rid

    def worker(self, wid: str) -> str:
        """The registry record of worker ``wid`` (checked: ``[0-9a-f]{8,32}``)."""
        return self.base + _WORKER + check_worker_id(wid)

    def lane(self, group: str) -> str:
        """The pending lane of ``group`` (checked)."""
        return self.base + _LANE + check_name(group, "group") + _LANE_END

    def lane_starts(self, group: str) -> str:
        """The start log of ``group``'s lane (checked): its rate limit's sliding window."""
        return self.base + _GSTARTS + check_name(group, "group")

    def repeat_record(self, name: str) -> str:
        """The record of the repeatable ``name`` (checked)."""
        return self.base + _REPEAT_RECORD + check_name(name, "repeat")

    def hist(self, hour: int) -> str:
        """The history key of one hour (server ms // 3600000): ``schema.HIST_FIELDS``."""
        return self.base + _HIST + str(int(hour))

    def state_set(self, state: str) -> str:
        """The sorted set holding jobs in ``state`` (pending, active, scheduled, dead,
        completed: the kept ones, waiting_children: flow parents)."""
        try:
            return {
                "pending": self.pending,
                "active": self.active,
                "scheduled": self.schedule,
                "schedule": self.schedule,
                "dead": self.dead,
                "completed": self.completed,
                "waiting_children": self.waiting,
            }[state]
        except KeyError:
            raise InvalidName(f"unknown state: {show(state)}") from None

    def pattern(self) -> str:
        """A SCAN pattern matching every key of this queue."""
        return "emq:{" + _glob_escape(self.name) + "}:*"


def _glob_escape(text: str) -> str:
    # Queue names admit none of * ? [ ] \, but escape defensively for SCAN MATCH.
    return re.sub(r"([*?\[\]\\])", r"\\\1", text)


def queue_of_meta(meta_key: str) -> str | None:
    """The queue name inside a meta key ``emq:{q}:meta``, or ``None``."""
    m = re.fullmatch(r"emq:\{([A-Za-z0-9._-]{1,128})\}:meta", meta_key)
    return m.group(1) if m else None


def queue_of_key(key: str) -> str | None:
    """The queue name of any key or channel ``emq:{q}:...``, or ``None``."""
    m = re.match(r"emq:\{([A-Za-z0-9._-]{1,128})\}:", key)
    return m.group(1) if m else None
