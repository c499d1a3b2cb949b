"""Known queues: ``emq`` refuses a queue name with no keys on the server.

A mistyped name (``emq pause ordres``) would otherwise make a new queue, or show one
of zeros. The check is one ``EXISTS`` (:func:`echomq.views.queue_exists`), sent by the
queue's runner just before the first operation of the first verb the command runs:
after that verb's plan has checked its arguments (so a malformed id or name still
exits ``4`` with nothing sent) and before anything it would write.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..queue import Queue
from ..transport.sync import SyncRunner
from ..views import queue_exists


class CheckedRunner(SyncRunner):
    """A runner that calls ``check`` once, after the version fence of its first plan."""

    def __init__(self, client: Any, executor: Any, check: Callable[[SyncRunner], None]) -> None:
        super().__init__(client, executor)
        self._check: Callable[[SyncRunner], None] | None = check

    def fence(self) -> None:
        """The version fence, then (once) the queue's existence check."""
        super().fence()
        check, self._check = self._check, None
        if check is not None:
            check(self)


def require_known(q: Queue, unknown: Callable[[], Exception]) -> Queue:
    """Make ``q`` check, before its first verb's first operation, that it exists.

    Args:
        q: a queue no verb has run on yet.
        unknown: builds the error raised when the queue has no key.

    Returns:
        ``q``, its runner replaced.
    """

    def check(runner: SyncRunner) -> None:
        if not runner.drive(queue_exists(q.ctx)):
            raise unknown()

    q.runner.close()
    q.runner = CheckedRunner(q.client, q.ctx.executor, check)
    return q
