"""The ``emq`` command line (stub until the CLI issue lands)."""

from __future__ import annotations

import sys

from . import __version__


def main(argv: list[str] | None = None) -> int:
    """Print the version and the commands still to come."""
    print(f"emq {__version__}: commands coming: queues, stats, pause, resume, drain, obliterate")
    return 0


if __name__ == "__main__":
    sys.exit(main())
