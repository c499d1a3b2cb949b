"""Small helpers shared by the benchmarks in ``bench/``.

- :func:`bench_server` yields the URL of the server to measure: ``EMQ_URL`` when it is
  set, otherwise a private :class:`echomq.embedded.EmbeddedServer` started for the run.
- :func:`median` of repeated measurements.
- :func:`report` prints rows as an aligned table.
- :class:`Callgrind` runs a private server under valgrind's callgrind and reads its
  instruction count between steps (what no neighbour on a shared machine disturbs).
"""

from __future__ import annotations

import argparse
import glob
import os
import re
import shutil
import stat
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TextIO

# Let ``python bench/x.py`` run from a checkout without installing the package.
_SRC = Path(__file__).resolve().parent.parent / "src"
if _SRC.is_dir() and str(_SRC) not in sys.path:
    sys.path.insert(0, str(_SRC))

from echomq.embedded import EmbeddedServer, find_server_binary  # noqa: E402


class Callgrind:
    """A private server (the module loaded when ``module``) under valgrind's callgrind
    (``hz 1``: the timer adds little). Use as a context manager; :meth:`take` answers the
    instructions the server ran since the last :meth:`take` (or its start)."""

    def __init__(self, *, module: bool) -> None:
        if not shutil.which("valgrind") or not shutil.which("callgrind_control"):
            raise SystemExit("--callgrind needs valgrind (apt-get install valgrind)")
        binary = find_server_binary()
        if binary is None:
            raise SystemExit("no redis-server or valkey-server")
        self.dir = tempfile.mkdtemp(prefix="echomq-cg-")
        wrapper = os.path.join(self.dir, "server")
        with open(wrapper, "w") as fh:
            fh.write(
                "#!/bin/sh\nexec valgrind --tool=callgrind --quiet "
                f'--callgrind-out-file={self.dir}/cg.out {binary} "$@"\n'
            )
        os.chmod(wrapper, os.stat(wrapper).st_mode | stat.S_IXUSR)
        self.server = EmbeddedServer(binary=wrapper, module=module, extra_args=("--hz", "1"))
        self._seen: set[str] = set()

    def __enter__(self) -> Callgrind:
        self.server.start(timeout=120)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.stop()
        shutil.rmtree(self.dir, ignore_errors=True)

    @property
    def url(self) -> str:
        return self.server.url

    def take(self) -> int:
        """Dump callgrind's counters (which zeroes them); the instructions in the dump."""
        assert self.server.proc is not None
        pid = str(self.server.proc.pid)
        subprocess.run(["callgrind_control", "-d", pid], check=True, capture_output=True)
        for path in sorted(glob.glob(os.path.join(self.dir, "cg.out*"))):
            if path in self._seen:
                continue
            self._seen.add(path)
            with open(path) as fh:
                for line in fh:
                    if line.startswith(("summary:", "totals:")):
                        return int(line.split()[1])
        raise RuntimeError("callgrind wrote no dump")


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


def counted(argv: Sequence[str], out_file: str = "/dev/null") -> int:
    """The instructions callgrind counts for one process ``argv`` (run to its end; the
    counts go to ``out_file``, kept only when named)."""
    tool = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out_file}"]
    done = subprocess.run([*tool, *argv], capture_output=True, text=True, check=True)
    m = re.search(r"Collected : (\d+)", done.stderr)
    if m is None:
        raise RuntimeError("callgrind counted nothing:\n" + done.stderr[-2000:])
    return int(m.group(1))


def wake_args(ap: argparse.ArgumentParser) -> argparse.Namespace:
    """Parse the options of a bench that sends a job every ``--gap`` seconds to an idle
    worker process, ``--count`` jobs a round over ``--repeat`` rounds (the worker
    process itself gets ``--worker`` and its three arguments)."""
    ap.add_argument("--count", type=int, default=300, help="jobs a round")
    ap.add_argument("--gap", type=float, default=0.02, help="seconds between jobs")
    ap.add_argument("--repeat", type=int, default=3, help="rounds")
    ap.add_argument("--worker", nargs=3, help=argparse.SUPPRESS)
    return ap.parse_args()


def wait_blocked(r: Any, label: str, timeout: float = 30.0) -> None:
    """Return once a client of server ``r`` waits in ``BLPOP``/``BRPOP`` (a worker
    process started and idle); ``SystemExit`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not any(c.get("cmd") in ("blpop", "brpop") for c in r.client_list()):
        if time.monotonic() > deadline:
            raise SystemExit(f"{label}: the worker never waited")
        time.sleep(0.05)


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
