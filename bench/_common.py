"""Small helpers shared by the benchmarks in ``bench/``.

- :func:`bench_server` yields the URL of the server to measure: ``EMQ_URL`` when it is
  set, otherwise a private :class:`echomq.embedded.EmbeddedServer` started for the run.
- :func:`median` of repeated measurements.
- :func:`report` prints rows as an aligned table.
"""

from __future__ import annotations

import os
import statistics
import sys
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TextIO

# Let ``python bench/x.py`` run from a checkout without installing the package.
_SRC = Path(__file__).resolve().parent.parent / "src"
if _SRC.is_dir() and str(_SRC) not in sys.path:
    sys.path.insert(0, str(_SRC))

from echomq.embedded import EmbeddedServer  # noqa: E402


@contextmanager
def bench_server() -> Iterator[str]:
    """The URL of the server to measure.

    Yields:
        ``EMQ_URL`` when set; otherwise the URL of a private server started here and
        stopped when the block ends.
    """
    url = os.environ.get("EMQ_URL")
    if url:
        yield url
        return
    with EmbeddedServer() as srv:
        yield srv.url


def median(xs: Iterable[float]) -> float:
    """The median of ``xs`` (which must not be empty)."""
    return float(statistics.median(list(xs)))


def _cell(value: object) -> str:
    if isinstance(value, float):
        if value >= 1000:
            return f"{value:,.0f}"
        if value >= 10:
            return f"{value:.1f}"
        return f"{value:.3f}"
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    return str(value)


def report(rows: Sequence[Sequence[object]], *, file: TextIO | None = None) -> None:
    """Print ``rows`` as an aligned table; the first row is taken as the header.

    Numbers are formatted (thousands separators, a few decimals for small floats) and
    right-aligned; text is left-aligned.

    Args:
        rows: the header row followed by data rows; rows may differ in length.
        file: where to print (``sys.stdout`` when omitted).
    """
    out = file if file is not None else sys.stdout
    if not rows:
        return
    cells = [[_cell(v) for v in row] for row in rows]
    numeric = [
        [isinstance(v, (int, float)) and not isinstance(v, bool) for v in row] for row in rows
    ]
    width = max(len(row) for row in cells)
    widths = [max((len(row[i]) for row in cells if i < len(row)), default=0) for i in range(width)]
    for n, row in enumerate(cells):
        parts = [
            (c.rjust(widths[i]) if numeric[n][i] else c.ljust(widths[i])) for i, c in enumerate(row)
        ]
        print("  ".join(parts).rstrip(), file=out)
        if n == 0 and len(rows) > 1:
            print("  ".join("-" * w for w in widths), file=out)
