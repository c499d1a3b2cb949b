"""What a handler receives: the job, and a line back to the queue while it runs.

``progress()`` and ``log()`` work from both kinds of handler:

- in an ``async def`` handler they return an awaitable: ``await job.progress(50)``.
  The write is already scheduled when the call returns, so forgetting the ``await``
  still writes (its error, if any, is then only logged);
- in a plain handler (running in the worker's thread pool) they block until the
  write is done and return an already finished awaitable you can ignore.

Cancellation is cooperative. The worker cancels a job when its shutdown grace is
over, when it runs past the job timeout, when the beat finds its lease gone, or when
an operator asked for it (``q.cancel_job(id)``, ``emq job cancel``, the console; seen
on the worker's next beat). ``job.cancelled`` turns true; ``job.check_cancelled()``
(and ``progress()``/``log()``) then raise :class:`JobCancelled`, which the handler may
simply let propagate. An ``async def`` handler is also cancelled at its next
``await``. A job stopped on an operator's cancel goes dead with the error
``JobCancelled: cancelled by an operator``; a handler that returns normally all the
same completes it.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Awaitable, Callable, Generator
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from ..errors import EchoMQError
from ..flows.results import ChildrenResults
from ..lifecycle import Claimed

if TYPE_CHECKING:
    from ..queue import AsyncQueue

T = TypeVar("T")
log = logging.getLogger("echomq.worker")

#: Why a job was cancelled (``JobContext.cancel_reason``).
SHUTDOWN, TIMEOUT, LEASE_LOST, CANCELLED = "shutdown", "timeout", "lease_lost", "cancelled"


class JobCancelled(EchoMQError):
    """Raised inside a handler whose job was cancelled; let it propagate.

    Attributes:
        reason: ``"shutdown"``, ``"timeout"``, ``"lease_lost"`` or ``"cancelled"`` (an
            operator's ``cancel_job``).
    """

    def __init__(self, reason: str) -> None:
        super().__init__(f"job cancelled: {reason}")
        self.reason = reason


class JobFailure(EchoMQError):
    """The error of a job its handler marked failed with a message (``job.fail("...")``)."""


class _Finished(Generic[T]):
    """An awaitable that is already done (what a sync caller gets back)."""

    __slots__ = ("value",)

    def __init__(self, value: T) -> None:
        self.value = value

    def __await__(self) -> Generator[Any, None, T]:
        yield from ()
        return self.value


class JobContext:
    """A running job, as its handler sees it.

    Attributes:
        id: the job id.
        data: the deserialized payload.
        name: the job's name, or ``None``.
        attempt: this run's fencing token (1 for the first claim; a released or
            stalled job counts up too).
        group: the job's group, or ``None`` for a flat job.
        queue: the queue name.
    """

    __slots__ = (
        "_aq",
        "_loop",
        "_marked",
        "_reason",
        "_thread",
        "attempt",
        "data",
        "group",
        "id",
        "name",
    )

    def __init__(
        self, claimed: Claimed, aq: AsyncQueue, loop: asyncio.AbstractEventLoop, thread: int
    ) -> None:
        self.id = claimed.id
        self.data = claimed.payload
        self.name = claimed.name
        self.attempt = claimed.token
        self.group = claimed.group
        self._aq, self._loop, self._thread = aq, loop, thread
        self._reason: str | None = None
        self._marked: BaseException | None = None

    @property
    def queue(self) -> str:
        """The queue name."""
        return self._aq.name

    @property
    def cancelled(self) -> bool:
        """Whether the worker asked this job to stop."""
        return self._reason is not None

    @property
    def cancel_reason(self) -> str | None:
        """``"shutdown"``, ``"timeout"``, ``"lease_lost"``, ``"cancelled"`` (an operator's
        ``cancel_job``), or ``None``."""
        return self._reason

    def check_cancelled(self) -> None:
        """Raise :class:`JobCancelled` if the job was cancelled (a cheap check point)."""
        if self._reason is not None:
            raise JobCancelled(self._reason)

    def progress(self, value: Any) -> Awaitable[None]:
        """Write the job's progress and publish a ``progress`` event.

        Args:
            value: a number, a string, or any JSON-serializable value.

        Raises:
            JobCancelled: the job was cancelled (nothing written).
        """
        return self._call(lambda: self._aq.update_progress(self.id, value))

    def log(self, line: str, keep: int = 0) -> Awaitable[int]:
        """Append a line to the job's logs (with the server time it was written: see
        ``Queue.get_job_log_entries``).

        Args:
            line: the text.
            keep: when > 0, keep only the newest ``keep`` lines.

        Returns:
            (awaited) the number of lines kept.

        Raises:
            JobCancelled: the job was cancelled (nothing written).
        """
        return self._call(lambda: self._aq.add_log(self.id, line, keep))

    def children_results(self) -> Awaitable[ChildrenResults]:
        """This flow parent's children's endings, in one bounded read: completed
        children's results (deserialized) and the other endings with their errors, by
        child ref ``queue:id`` (see ``Queue.children_results``).

        Returns:
            (awaited) a :class:`~echomq.flows.ChildrenResults`.
        """
        return self._call(lambda: self._aq.children_results(self.id))

    def fail(self, error: BaseException | str) -> None:
        """Mark this job failed, whatever the handler then returns: it is retried by
        its own backoff (or dead-lettered at ``max_attempts``) with ``error`` as its
        ``last_error``. Meant for a batch handler settling each job on its own; a
        plain handler may simply raise.

        Args:
            error: an exception, or a message (kept as ``JobFailure: message``).
        """
        self._marked = error if isinstance(error, BaseException) else JobFailure(str(error))

    @property
    def marked(self) -> BaseException | None:
        """The error :meth:`fail` marked this job with, or ``None``."""
        return self._marked

    def raise_marked(self) -> None:
        """Raise the error :meth:`fail` marked, if any (the worker calls it)."""
        if self._marked is not None:
            raise self._marked

    def _call(self, write: Callable[[], Awaitable[T]]) -> Awaitable[T]:
        if self._reason is not None:
            raise JobCancelled(self._reason)
        coro = _as_coroutine(write())
        if threading.get_ident() == self._thread:
            task = self._loop.create_task(coro)
            task.add_done_callback(_note_failure)
            return task
        return _Finished(asyncio.run_coroutine_threadsafe(coro, self._loop).result())

    def _cancel(self, reason: str) -> None:
        if self._reason is None:
            self._reason = reason

    def __repr__(self) -> str:
        return f"<JobContext {self.id} attempt={self.attempt} name={self.name!r}>"


async def _as_coroutine(aw: Awaitable[T]) -> T:
    return await aw


def _note_failure(task: asyncio.Task[Any]) -> None:
    # Retrieve the exception so an un-awaited write that failed is logged, not lost.
    if not task.cancelled() and task.exception() is not None:
        log.warning("job write failed: %r", task.exception())
