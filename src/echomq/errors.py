"""The echomq error tree.

Every error echomq raises derives from :class:`EchoMQError`. A *refusal* (a fenced
transition that declined to run and changed nothing) derives from :class:`Refused`
and carries a stable ``.reason`` string::

    EchoMQError
    ├── InvalidArgument        an argument is out of range or of the wrong type (no I/O)
    │   ├── InvalidName        a queue, group, dedup or repeat name failed the gate
    │   ├── InvalidJobId       a job id is not a branded JOB id
    │   └── InvalidPayload     a payload does not serialize as strict JSON / UTF-8 text
    ├── VersionMismatch        the server's {emq}:version differs from this client's
    ├── NativeUnavailable      executor="native" on a server without the echomq module
    ├── JobCancelled           raised in a handler whose job was cancelled (echomq.worker.job)
    ├── RateLimited            raised BY a handler: put the job back, hold the queue or its lane
    ├── JobFailure             a job its batch handler marked failed: job.fail("why")
    ├── ScriptError            a script failed in a way that is not a refusal
    ├── ServerUnavailable      no server answers at the configured address
    │   ├── OutcomeUnknown     a write was sent and no reply came; it is never sent again
    │   ├── ServerFull         the server is out of memory and refused a write (nothing written)
    │   └── EnqueuePartial     enqueue_many stopped part-way; .landed holds the ids written
    ├── ResultError            Queue.result() has no value to answer
    │   ├── JobFailed          the kept job is dead; .error is its last error
    │   ├── JobNotKept         the job keeps no history (or is gone): answered at once
    │   └── ResultTimeout      the job did not settle within timeout_s (a TimeoutError)
    └── Refused                .reason names why; nothing was written
        ├── JobGone            gone        no such job row
        ├── JobLocked          locked      a worker holds the job's lock
        ├── JobNotDead         not_dead    reprocess of a job that is not dead
        ├── JobNotPending      not_pending reassign of a job that is not pending
        ├── JobNotScheduled    not_scheduled promote_job of a job that is not scheduled
        ├── JobNotActive       not_active  cancel_job of a job that is not running
        ├── JobNotFinished     not_finished rerun_job of a job neither completed nor dead
        ├── JobNotWaiting      not_waiting release/fail_parent of a job not waiting_children
        ├── QueueNotPaused     not_paused  obliterate of a queue that is not paused
        ├── QueueHasActiveJobs active      obliterate (unforced) with jobs in flight
        └── StaleToken         stale       the fencing token is not the current one

Scripts refuse with an error reply whose first words are a stable code
(``EMQSTALE``, ``EMQSTATE not paused``, ...) or with the sentinel integer ``-1``
(:data:`GONE`, no such row). :data:`REPLY_CODES` is the one table mapping codes to
classes, by exact code; the one reader of replies (:mod:`echomq.replies`) applies it
(and turns ``-1`` into ``JobGone``) for every reply, with the job id of the op
attached, so no plan parses a message.

Every class here is exported from ``echomq``. Two more live with their callers: the
worker's ``JobCancelled`` and ``JobFailure`` (drawn above, exported too) and the console's own
``ReadOnly`` and ``UnsafeBind`` (:mod:`echomq.console`).
"""

from __future__ import annotations

from .schema import GONE as SCHEMA_GONE
from .schema import REFUSAL_CODES


class EchoMQError(Exception):
    """Base of every error raised by echomq."""


class InvalidArgument(EchoMQError, ValueError):
    """An argument (a budget, a lease, a priority, ...) is out of range; nothing was sent.

    Every input error derives from it (the limits: ``echomq.checks``)."""


class InvalidName(InvalidArgument):
    """A queue, group, dedup or repeat name is malformed; nothing was sent."""


class InvalidJobId(InvalidArgument):
    """A job id is not a branded ``JOB`` id; nothing was sent."""


class InvalidPayload(InvalidArgument):
    """A payload does not serialize (strict JSON by default) or is not valid UTF-8 text;
    nothing was sent."""


class VersionMismatch(EchoMQError):
    """The server's keyspace version differs from the one this client speaks."""


class NativeUnavailable(EchoMQError):
    """``executor="native"`` on a server that has not loaded the echomq module."""


class RateLimited(EchoMQError):
    """Raise it from a handler when the service it calls says "too many requests"
    (e.g. an HTTP 429 with a Retry-After): the worker puts the job back where it came
    from (its place in the run order, no failure counted) and holds the whole queue,
    or with ``group=True`` only the job's lane, for ``retry_after_ms``. A job with no
    group holds the queue.

    Args:
        retry_after_ms: how long to hold, in ms (``1 .. 86400000``).
        group: hold only the job's lane (its tenant), not the queue.

    Raises:
        InvalidArgument: ``retry_after_ms`` is not an int in range, or ``group`` not a
            bool (raised where it is constructed, in the handler).
    """

    def __init__(self, retry_after_ms: int, *, group: bool = False) -> None:
        # checked here, not in echomq.checks (which imports this module)
        if type(retry_after_ms) is not int or not 1 <= retry_after_ms <= 86_400_000:
            raise InvalidArgument(
                f"retry_after_ms must be an integer within 1..86400000, got {retry_after_ms!r:.80}"
            )
        if not isinstance(group, bool):
            raise InvalidArgument(f"group must be True or False, got {group!r:.80}")
        self.retry_after_ms = retry_after_ms
        self.group = group
        scope = "its lane" if group else "the queue"
        super().__init__(f"rate limited: hold {scope} for {self.retry_after_ms} ms")


class ScriptError(EchoMQError):
    """A script failed for a reason that is not a typed refusal."""


class ServerUnavailable(EchoMQError):
    """No Valkey/Redis server answers at the configured address."""


class OutcomeUnknown(ServerUnavailable):
    """A transition was written to the server and no reply came back (connection reset,
    timeout after the write). It may or may not have run; echomq does not send it again.
    Look at the job before acting again.

    Attributes:
        job_id: the job the transition was about, or ``None`` (a queue-scope verb).
        job_ids: every job whose outcome is unknown (a pipelined batch may hold several).
        verb: the script name of the transition.
    """

    def __init__(
        self,
        message: str = "",
        *,
        job_id: str | None = None,
        job_ids: tuple[str, ...] = (),
        verb: str | None = None,
    ) -> None:
        super().__init__(message or f"outcome of {verb or 'a write'} unknown")
        self.job_id = job_id if job_id is not None else (job_ids[0] if job_ids else None)
        self.job_ids = job_ids or ((job_id,) if job_id is not None else ())
        self.verb = verb


class ServerFull(ServerUnavailable):
    """The server is out of memory (``maxmemory`` with ``noeviction``) and refused a
    write before it made one: nothing changed. Verbs that free or keep memory (complete,
    retry, remove, drain, obliterate, pause, resume, extend, ...) still run."""


class EnqueuePartial(ServerUnavailable):
    """``enqueue_many`` stopped part-way (a full server, or a lost server).

    Attributes:
        landed: the ids that were written, in the order of the payloads given.
        cause: the first error of a chunk that did not land.
    """

    def __init__(self, message: str, *, landed: list[str], cause: BaseException) -> None:
        super().__init__(message)
        self.landed = landed
        self.cause = cause


class ResultError(EchoMQError):
    """``Queue.result()`` has no value to answer for a job.

    Attributes:
        job_id: the job asked about.
    """

    def __init__(self, message: str = "", *, job_id: str | None = None) -> None:
        super().__init__(message or f"no result for {job_id}")
        self.job_id = job_id


class JobFailed(ResultError):
    """The kept job is dead: it failed ``max_attempts`` times (or stalled too often).

    Attributes:
        job_id: the job.
        error: its last error text (``None`` if the row recorded none).
        attempt: the token of its last failed run (0 when unknown).
    """

    def __init__(
        self,
        message: str = "",
        *,
        job_id: str | None = None,
        error: str | None = None,
        attempt: int = 0,
    ) -> None:
        super().__init__(message or f"job {job_id} is dead: {error}", job_id=job_id)
        self.error = error
        self.attempt = attempt


class JobNotKept(ResultError):
    """The job keeps no history (its queue had no retention when it was enqueued and it
    asked for no ``keep_ms``), or no row of it exists (never enqueued, removed, or
    trimmed from the history): there is no result to wait for."""


class ResultTimeout(ResultError, TimeoutError):
    """The kept job did not complete or die within ``timeout_s``."""


class Refused(EchoMQError):
    """A transition refused to run; the server's keys are exactly as they were.

    Attributes:
        reason: a stable code (``gone``, ``locked``, ``not_dead``, ``not_pending``,
            ``not_scheduled``, ``not_active``, ``not_finished``, ``not_paused``, ``active``,
            ``stale``).
    """

    reason: str = "refused"

    def __init__(self, message: str = "", *, job_id: str | None = None) -> None:
        super().__init__(message or self.reason)
        self.job_id = job_id


class JobGone(Refused):
    """No row exists for this job id."""

    reason = "gone"


class JobLocked(Refused):
    """A worker holds the job (its ``:lock`` key or ``lock`` field is present)."""

    reason = "locked"


class JobNotDead(Refused):
    """Reprocess was asked of a job that is not in the dead set."""

    reason = "not_dead"


class JobNotPending(Refused):
    """Reassign was asked of a job that is not pending."""

    reason = "not_pending"


class JobNotScheduled(Refused):
    """``promote_job`` was asked of a job that is not in the schedule."""

    reason = "not_scheduled"


class JobNotActive(Refused):
    """``cancel_job`` was asked of a job that is not active (nothing runs to cancel)."""

    reason = "not_active"


class JobNotFinished(Refused):
    """``rerun_job`` was asked of a job that is neither completed nor dead (it is
    pending, scheduled or active: it has not run to its end)."""

    reason = "not_finished"


class JobNotWaiting(Refused):
    """``release_parent`` or ``fail_parent`` was asked of a job that is not waiting for
    its children (state ``waiting_children``)."""

    reason = "not_waiting"


class QueueNotPaused(Refused):
    """Obliterate was asked of a queue that is not paused."""

    reason = "not_paused"


class QueueHasActiveJobs(Refused):
    """Obliterate (unforced) was asked of a queue with jobs in flight."""

    reason = "active"


class StaleToken(Refused):
    """The fencing token presented is not the job's current ``attempts``."""

    reason = "stale"


#: The error replies the scripts (and their native twins) answer, by exact code: a fixed
#: message is its own code (``EMQSTATE not dead``); a message that carries details is
#: coded by its first word (``EMQSTALE token 3 is not current``). The missing row is no
#: error reply but the integer :data:`GONE`, which the runner turns into
#: :class:`JobGone` for an op that names its job.
#: Each refusal class by its ``.reason`` (for replies that name a reason, such as the
#: per-job answers of ``extend_lock``).
BY_REASON: dict[str, type[Refused]] = {c.reason: c for c in Refused.__subclasses__()}

REPLY_CODES: dict[str, type[EchoMQError]] = {
    # the refusals: each code's reason is the schema's (echomq.schema.REFUSAL_CODES)
    **{code: BY_REASON[reason] for code, reason in REFUSAL_CODES.items()},
    # not a refusal: a script's own check of a malformed argument (a raw client's)
    "EMQARG": InvalidArgument,
    # the server's own refusal of a write while over maxmemory (noeviction)
    "OOM": ServerFull,
}

#: The reply of a script on one job whose row does not exist.
GONE = SCHEMA_GONE

#: Every refusal reason, for CLI exit codes and the console: the schema's, and ``gone``.
REASONS: tuple[str, ...] = ("gone", *dict.fromkeys(REFUSAL_CODES.values()))


def from_reply(message: str, job_id: str | None = None) -> EchoMQError | None:
    """The error an error reply codes (a refusal carries ``job_id``); ``None`` if it is
    not ours."""
    cls = REPLY_CODES.get(message) or REPLY_CODES.get(message.split(" ", 1)[0])
    if cls is None:
        return None
    if issubclass(cls, Refused):
        return cls(message, job_id=job_id)
    return cls(message)


def gone(job_id: str | None) -> JobGone:
    """The refusal of a script that answered :data:`GONE` for ``job_id``."""
    return JobGone(f"job {job_id} is gone", job_id=job_id)
