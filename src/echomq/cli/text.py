"""Job text made safe for a terminal.

Job names, errors, payloads, progress and log lines are written by producers and
workers, not by the operator: ``emq`` never lets them style the output (rich markup
is off on every console it prints with) or drive the terminal. Every control
character (C0, DEL, C1) and every bidirectional override is shown as an escape
(``\\x1b``, ``\\n``, ``\\u202e``), so an ESC/OSC sequence in a log line prints as
text instead of retitling the window, clearing the screen or writing the clipboard.
"""

from __future__ import annotations

from ..safetext import clean, clean_lines

__all__ = ["clean", "clean_lines"]
