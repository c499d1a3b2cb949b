"""Text from a job made safe for a terminal or a text log.

Job names, errors, payloads, progress, log lines and a handler's exception text are
written by producers and workers, not by the operator. Every control character (C0,
DEL, C1) and every bidirectional override is shown as an escape (``\\x1b``, ``\\n``,
``\\u202e``), so an ESC/OSC sequence prints as text instead of retitling the window,
clearing the screen or writing the clipboard, and a line break cannot forge a line.
The CLI (:mod:`echomq.cli.text`) and the worker's text log use these.
"""

from __future__ import annotations

import re
from typing import Any

# C0 controls, DEL, C1 controls, and the Unicode bidi embeddings/overrides/isolates
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape(m: re.Match[str]) -> str:
    ch = m.group()
    if ch in _NAMED:
        return _NAMED[ch]
    code = ord(ch)
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def clean(value: Any) -> str:
    """``value`` as one line of text with every control character escaped."""
    return _UNSAFE.sub(_escape, "" if value is None else str(value))


def clean_lines(text: str) -> str:
    """Like :func:`clean`, but line breaks stay line breaks (for messages)."""
    return "\n".join(clean(line) for line in text.split("\n"))
