"""Every key echomq touches is built here, and every name and id is gated here.

A queue ``q`` lives under the base ``emq:{q}:``; the hash tag ``{q}`` keeps all of a
queue's keys on one cluster slot. Names are checked before any I/O: a malformed one
raises :class:`~echomq.errors.InvalidName` (or ``InvalidJobId``) and nothing is sent.
"""

from __future__ import annotations

import re

from . import ids
from .checks import show
from .errors import InvalidName

NAME_RE = re.compile(r"[A-Za-z0-9._-]{1,128}")
VERSION_KEY = "{emq}:version"
KEYSPACE_VERSION = "1"
#: The pattern matching every queue's meta hash, for discovering queues.
META_PATTERN = "emq:{*}:meta"
#: A SCAN pattern matching every key of every queue (a queue need not have a meta hash).
ANY_QUEUE_PATTERN = "emq:{*}:*"
#: A PSUBSCRIBE pattern matching every queue's events channel.
EVENTS_PATTERN = "emq:{*}:events"
MAX_DEDUP_LEN = 256


def check_name(name: str, what: str = "queue") -> str:
    """Return ``name`` if it matches ``[A-Za-z0-9._-]{1,128}`` and is not ``.`` or ``..``
    (a path segment a browser or a proxy would resolve away).

    Raises:
        InvalidName: it does not.
    """
    if not isinstance(name, str) or NAME_RE.fullmatch(name) is None or name in (".", ".."):
        raise InvalidName(f"invalid {what} name: {show(name)} (want [A-Za-z0-9._-]{{1,128}})")
    return name


WORKER_ID_RE = re.compile(r"[0-9a-f]{8,32}")


def check_worker_id(wid: str) -> str:
    """Return ``wid`` if it is a worker id (8 to 32 lowercase hex digits).

    Raises:
        InvalidName: it is not.
    """
    if not isinstance(wid, str) or WORKER_ID_RE.fullmatch(wid) is None:
        raise InvalidName(f"invalid worker id: {show(wid)} (want [0-9a-f]{{8,32}})")
    return wid


def check_dedup(dedup_id: str) -> str:
    """Return ``dedup_id`` if it is a non-empty string of at most 256 characters.

    Raises:
        InvalidName: it is not.
    """
    if not isinstance(dedup_id, str) or not 0 < len(dedup_id) <= MAX_DEDUP_LEN:
        raise InvalidName(f"invalid dedup id: {show(dedup_id)}")
    return dedup_id


class Keyspace:
    """The keys of one queue.

    Args:
        queue: the queue name, ``[A-Za-z0-9._-]{1,128}``.

    Raises:
        InvalidName: the queue name is malformed.
    """

    __slots__ = (
        "active",
        "audit",
        "base",
        "claimreqs",
        "completed",
        "dead",
        "events",
        "gactive",
        "gindex",
        "glimit",
        "gpaused",
        "groups",
        "gturn",
        "gweight",
        "keeps",
        "keepuntil",
        "meta",
        "metrics_completed",
        "metrics_failed",
        "name",
        "pending",
        "repeat",
        "ring",
        "schedule",
        "settled",
        "wake",
        "workers",
    )

    def __init__(self, queue: str) -> None:
        self.name = check_name(queue)
        b = f"emq:{{{queue}}}:"
        self.base = b
        self.pending = b + "pending"
        self.active = b + "active"
        self.schedule = b + "schedule"
        self.dead = b + "dead"
        self.meta = b + "meta"
        self.events = b + "events"
        self.wake = b + "wake"
        self.ring = b + "ring"
        self.groups = b + "groups"
        self.gactive = b + "gactive"
        self.gindex = b + "gindex"
        self.glimit = b + "glimit"
        self.gweight = b + "gweight"
        self.gpaused = b + "gpaused"
        self.gturn = b + "gturn"
        self.repeat = b + "repeat"
        self.metrics_completed = b + "metrics:completed"
        self.metrics_failed = b + "metrics:failed"
        self.audit = b + "audit"
        self.settled = b + "settled"  # tombstones of settled ids (issue 12)
        self.workers = b + "workers"  # the worker registry obliterate clears
        # the claim records' index (rid -> expiry ms), so obliterate finds them
        self.claimreqs = b + "claimreqs"
        # opt-in history: completed jobs kept (score = finish time), and the jobs
        # kept by their own keep_ms (score = when that runs out)
        self.completed = b + "completed"
        self.keepuntil = b + "keepuntil"
        # "1" while the queue has a retention (the limits are in meta): the enqueue
        # reads it in the one EXISTS it makes anyway, so a queue without history pays
        # no extra read
        self.keeps = b + "keeps"

    def job(self, job_id: str) -> str:
        """The row of ``job_id`` (gated)."""
        return self.base + "job:" + ids.validate(job_id)

    def logs(self, job_id: str) -> str:
        """The log list of ``job_id`` (gated)."""
        return self.job(job_id) + ":logs"

    def logtimes(self, job_id: str) -> str:
        """The server times (ms) of ``job_id``'s log lines (gated): aligned with
        :meth:`logs` at the newest end (lines written before times were kept have none)."""
        return self.job(job_id) + ":logtimes"

    def lock(self, job_id: str) -> str:
        """The worker lock of ``job_id`` (gated)."""
        return self.job(job_id) + ":lock"

    def errors(self, job_id: str) -> str:
        """The error history of a kept ``job_id`` (gated): a capped list, oldest first."""
        return self.job(job_id) + ":errors"

    def dedup(self, dedup_id: str) -> str:
        """The dedup key for ``dedup_id`` (gated)."""
        return self.base + "de:" + check_dedup(dedup_id)

    def claim_request(self, rid: str) -> str:
        """The record of one claim request: the ids it claimed, for a repeat to answer."""
        return self.base + "claimreq:" + rid

    def worker(self, wid: str) -> str:
        """The registry record of worker ``wid`` (gated: ``[0-9a-f]{8,32}``)."""
        return self.base + "worker:" + check_worker_id(wid)

    def lane(self, group: str) -> str:
        """The pending lane of ``group`` (gated)."""
        return self.base + "g:" + check_name(group, "group") + ":pending"

    def repeat_record(self, name: str) -> str:
        """The record of the repeatable ``name`` (gated)."""
        return self.base + "repeat:" + check_name(name, "repeat")

    def state_set(self, state: str) -> str:
        """The sorted set holding jobs in ``state`` (pending, active, scheduled, dead,
        completed: the kept ones)."""
        try:
            return {
                "pending": self.pending,
                "active": self.active,
                "scheduled": self.schedule,
                "schedule": self.schedule,
                "dead": self.dead,
                "completed": self.completed,
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
