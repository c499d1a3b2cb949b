"""Which handler runs a job, and how a handler's failure is written on the row."""

from __future__ import annotations

import inspect
import traceback
from collections.abc import Callable, Mapping
from typing import Any

from ..errors import InvalidArgument
from .job import JobContext

Handler = Callable[[JobContext], Any]
#: The key of the fallback handler in a mapping of job name to handler.
DEFAULT_ROUTE = "*"


class Routes:
    """One handler for every job, or one per job name (``"*"`` = the fallback).

    Raises:
        InvalidArgument: an empty mapping or a handler that is not callable.
    """

    def __init__(self, handler: Handler | Mapping[str, Handler]) -> None:
        table = dict(handler) if isinstance(handler, Mapping) else {DEFAULT_ROUTE: handler}
        if not table:
            raise InvalidArgument("no handler given")
        for name, fn in table.items():
            if not callable(fn):
                raise InvalidArgument(f"handler for {name!r} is not callable")
        self.table = {k: (fn, is_async(fn)) for k, fn in table.items()}
        #: The route of every job when there is one handler (no look-up per job).
        self.only: tuple[Handler, bool] | None = None
        if len(self.table) == 1 and DEFAULT_ROUTE in self.table:
            self.only = self.table[DEFAULT_ROUTE]

    def find(self, name: str | None) -> tuple[Handler, bool] | None:
        """The handler for a job name and whether it is ``async``, or ``None``."""
        return self.table.get(name or DEFAULT_ROUTE) or self.table.get(DEFAULT_ROUTE)

    def pick(self, name: str | None) -> tuple[Handler, bool]:
        """The handler for a job name and whether it is ``async``.

        Raises:
            LookupError: no handler for that name and no fallback (the job fails).
        """
        found = self.find(name)
        if found is None:
            raise LookupError(f"no handler for job name {name!r}")
        return found


def is_async(fn: Any) -> bool:
    """Whether calling ``fn`` makes a coroutine (an ``async def`` or async ``__call__``)."""
    call = getattr(fn, "__call__", None)  # noqa: B004 - an object's async __call__
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(call)


def failure_text(exc: BaseException, max_chars: int) -> str:
    """``"Type: message"``, a blank line, then the traceback, cut to ``max_chars``."""
    trace = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    return f"{type(exc).__name__}: {exc}\n\n{trace}"[:max_chars]
