"""Structured logs on the stdlib :mod:`logging`.

echomq logs under one logger per part:

=====================  ==============================================================
``echomq.worker``      each job: ``started``/``completed``/``cancelled`` at DEBUG,
                       ``failed`` at WARNING (with the traceback); the worker's own
                       recoveries at WARNING
``echomq.operator``    each operator verb through a queue (pause, drain, remove_job,
                       ...) at INFO, with its outcome (``ok`` or the refusal reason);
                       the console's and the CLI's changes go through these verbs
``echomq.exporter``    the exporter's start and its failed scrapes
=====================  ==============================================================

Records about a job carry ``queue``, ``job_id``, ``attempt`` and ``token`` as ``extra``
fields (an operator verb: ``queue``, ``verb``, ``outcome`` and ``job_id`` when it acts on
one job), so a JSON formatter puts them in the record's object and a text formatter
can name them. :class:`JsonFormatter` writes one JSON object per line; :func:`configure`
installs it (``emq worker --log-format json``).
"""

from __future__ import annotations

import json
import logging
import sys
from datetime import datetime, timezone
from typing import Any, TextIO

from ..safetext import clean, clean_lines

#: The attributes every LogRecord has; anything else on a record came from ``extra``.
_STANDARD = frozenset(
    logging.LogRecord("", 0, "", 0, "", None, None).__dict__.keys()
    | {"message", "asctime", "taskName"}
)


class JsonFormatter(logging.Formatter):
    """One JSON object per record: ``ts`` (UTC, ISO 8601), ``level``, ``logger``,
    ``msg``, every ``extra`` field, and ``exc`` (the formatted traceback) when there is
    one."""

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, timezone.utc).isoformat(
                timespec="milliseconds"
            ),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        for key, value in record.__dict__.items():
            if key not in _STANDARD and not key.startswith("_"):
                out[key] = value
        if record.exc_info:
            out["exc"] = self.formatException(record.exc_info)
        return json.dumps(out, default=str, ensure_ascii=False)


class TextFormatter(logging.Formatter):
    """``time level logger: message`` followed by the ``extra`` fields as ``k=v``.

    A job's text is data (a handler's exception message, a job name, an error): the
    message and the fields are one line with every control character escaped, and
    each line of a traceback too (see :mod:`echomq.safetext`), so a job cannot drive
    the terminal that tails the log or forge a log line.
    """

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s: %(message)s")

    def formatMessage(self, record: logging.LogRecord) -> str:
        """The prefix and the message, the message escaped to one line."""
        record.message = clean(record.message)
        return super().formatMessage(record)

    def formatException(self, ei: Any) -> str:
        """The traceback, each of its lines escaped."""
        return clean_lines(super().formatException(ei))

    def format(self, record: logging.LogRecord) -> str:
        # the stdlib caches the formatted traceback on the record: format it afresh
        # (escaped) here, and leave the record as other handlers expect it
        cached, record.exc_text = record.exc_text, None
        try:
            text = super().format(record)
        finally:
            record.exc_text = cached
        fields = [
            f"{k}={clean(v)}"
            for k, v in record.__dict__.items()
            if k not in _STANDARD and not k.startswith("_")
        ]
        if not fields:
            return text
        head, sep, tail = text.partition("\n")
        return f"{head} [{' '.join(fields)}]{sep}{tail}"


def configure(
    fmt: str = "text", level: int | str = logging.INFO, stream: TextIO | None = None
) -> logging.Handler:
    """Send the ``echomq`` loggers to ``stream`` (stderr) in ``fmt`` (``text``/``json``).

    Returns:
        The handler installed on the ``echomq`` logger (replacing one installed by an
        earlier call).

    Raises:
        ValueError: an unknown format.
    """
    if fmt not in ("text", "json"):
        raise ValueError(f"unknown log format {fmt!r}; want text or json")
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    handler._echomq = True  # type: ignore[attr-defined]
    root = logging.getLogger("echomq")
    for old in [h for h in root.handlers if getattr(h, "_echomq", False)]:
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level)
    root.propagate = False
    return handler
