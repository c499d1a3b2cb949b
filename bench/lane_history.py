"""What the busiest lanes' history costs the server: instructions per grouped ending.

Each row runs jobs one by one (enqueue, claim with a 60 s lock as a worker does, then
complete, or a failure that is the job's last: dead) on a private server under
valgrind's callgrind (``hz 1``), after a warm-up that fills the hour's lane key to
its steady state, and prints the server's instructions per job in the ending's call
(``complete`` or ``retry``):

- ``flat``: jobs with no group (they must pay nothing for the lanes);
- ``grouped, 8 lanes``: each ending's lane already in the hour's table (the common
  case: the hashes read, ``GETRANGE`` or in place natively, and the slot's sums added in
  the ``BITFIELD`` that counts the minute);
- ``grouped, 1,000 lanes``: a lane not in the table nearly every ending (1,000 lanes
  taken in turn, far more than the table's 8 slots): about 1 in 16 admitted by its job
  id (``schema.HIST_LANE_ADMIT``: the endeds read, ``BITFIELD_RO``, the fewest-ended slot
  taken over and the lane named in ``lanenames``, ``ZADD``), the others counted in the
  minute only: the worst case;
- ``dead, 1,000 lanes``: as above, each job failing its only attempt.

Run: ``.venv/bin/python bench/lane_history.py --callgrind`` (a few minutes; needs
valgrind). Compare with the same script on another checkout (``PYTHONPATH=<it>/src``).
"""

from __future__ import annotations

import argparse
from typing import Any

from _common import Callgrind, report
from echomq import Queue, native

LOCK_MS = 60_000
ROWS: tuple[tuple[str, int, bool], ...] = (
    ("flat", 0, False),
    ("grouped, 8 lanes", 8, False),
    ("grouped, 1,000 lanes", 1000, False),
    ("dead, 1,000 lanes", 1000, True),
)


def run(q: Queue, n: int, lanes: int, dead: bool, start: int, cg: Callgrind | None) -> int:
    """n jobs through their ending; the instructions of the endings alone."""
    for i in range(n):
        group = f"tenant-{(start + i) % lanes:04d}" if lanes else None
        q.enqueue({"n": i}, group=group, max_attempts=1)
    got = [q.claim_many(1, lock_ms=LOCK_MS)[0] for _ in range(n)]
    if cg is not None:
        cg.take()
    for job in got:
        assert job is not None
        if dead:
            q.retry(job.id, job.token, "boom")
        else:
            q.complete(job.id, job.token)
    return cg.take() if cg is not None else 0


def callgrind(n: int) -> None:
    built = native.build(quiet=True) is not None
    rows: list[list[Any]] = [["executor", "ending", "Ir/job"]]
    for executor in ["scripts", "native"] if built else ["scripts"]:
        with Callgrind(module=executor == "native") as cg:
            for k, (label, lanes, dead) in enumerate(ROWS):
                with Queue(f"bench-lanes-{k}", url=cg.url, executor=executor) as q:
                    run(q, 300, lanes, dead, 0, None)  # warm-up: the table full
                    ir = run(q, n, lanes, dead, 300, cg)
                    rows.append([executor, label, ir / n])
    report(rows)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=300, help="measured jobs per row")
    ap.add_argument("--callgrind", action="store_true", help="count instructions (valgrind)")
    args = ap.parse_args()
    if not args.callgrind:
        raise SystemExit("only --callgrind is measured (see the docstring)")
    callgrind(args.jobs)


if __name__ == "__main__":
    main()
