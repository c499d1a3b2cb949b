"""Jobs through a faulty link: lost replies and connection resets, counted.

A private server, the fault suite's TCP proxy in front of it (``tests/faults``), two
worker processes and a producer talking through the proxy. While the producer
enqueues ``--jobs`` jobs (each with an id of its own, retried until answered), the
proxy drops one reply in every ``--drop-every`` and resets a connection instead of
forwarding a reply with probability ``--reset-p``. Then the faults stop and the run
waits until every job completed. Printed: enqueued, completed, lost, completed twice
(beyond once per job), runs under a token already run, handler runs, the faults made.

Run: ``.venv/bin/python bench/faults.py`` (issue 12's figure: 10,000 jobs, 0 lost,
0 completed twice under one token).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import _common  # noqa: F401  (puts src/ on the path)

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from faults.harness import Rig


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=10_000)
    ap.add_argument("--drop-every", type=int, default=10, help="drop one reply per N jobs")
    ap.add_argument("--reset-p", type=float, default=0.01, help="reset instead of a reply")
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="echomq-faults-") as tmp:
        rig = Rig(Path(tmp))
        try:
            started = time.monotonic()
            name = "bench-faults"
            for _ in range(args.workers):
                rig.spawn_worker(name)
            q = rig.queue(name)

            def chaos(i: int) -> None:
                if i % args.drop_every == 0:
                    rig.proxy.drop_replies(1)

            rig.proxy.reset_every(args.reset_p)
            ids = rig.produce(q, args.jobs, during=chaos)
            rig.wait_settled(name, ids, timeout=120)
            rig.proxy.reset_every(0.0)
            rig.wait_settled(name, ids, timeout=120)
            report = rig.report(f"{args.jobs} jobs, drops and resets", name, ids, started)
            q.close()
        finally:
            rig.close()
    print(report.line())
    ok = report.lost == 0 and report.completed_twice == 0 and report.same_token_twice == 0
    print("0 lost, 0 completed twice under one token:", "met" if ok else "MISSED")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
