"""The one JSON codec the tools share: :class:`LenientJson` reads a payload another
serializer wrote as its text, and :func:`to_json` writes every document the CLI
prints and the console answers."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from ..context import JsonSerializer


class LenientJson(JsonSerializer):
    """The default JSON codec, except that a payload that is not JSON reads back as
    its raw text (a tool shows queues whose producers may use another serializer:
    a row it cannot parse must still render)."""

    def loads(self, text: str) -> Any:
        """Parse JSON text; return the text itself when it is not JSON."""
        try:
            return json.loads(text)
        except ValueError:
            return text


def _default(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    if isinstance(value, (bytes, bytearray)):
        return value.decode("utf-8", "replace")
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    return str(value)


_DOC = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, default=_default)


def to_json(doc: Any) -> str:
    """One compact JSON document (dataclasses as objects, numbers as numbers)."""
    return _DOC.encode(doc)
