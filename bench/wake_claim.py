"""What the claim a woken worker waits for costs the server, in instructions.

An idle worker's claim rides behind its wait (``BLPOP``) and asks for its free slots;
a job every few milliseconds finds one job there. This counts, under valgrind's
callgrind (a private server, ``hz 1``), the server's instructions per claim of
``--count`` (default 10, a worker's default concurrency) finding one job pending, for
each form of the claim script call:

- ``wait``: as the worker sends it behind the wait (``claim_op(..., recorded=False)``:
  no request id, so no ``claimreq:<rid>`` record);
- ``recorded``: as ``claim_many`` and the busy worker's round trip send it (a fresh
  request id, recorded for a re-send);

and, for scale, an ``enqueue`` of one job (the call that wakes the worker). Each call
is counted alone (``callgrind_control`` dumps around it), so the figure includes the
server reading the command and writing its reply, as a real call does. The scripts go
by ``FCALL`` of their Functions form.

Run: ``.venv/bin/python bench/wake_claim.py`` (about a minute; needs valgrind;
``--calls``, ``--count``).
"""

from __future__ import annotations

import argparse
import statistics

from _common import Callgrind, report
from echomq import Queue, lifecycle


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--calls", type=int, default=50, help="calls counted per form")
    ap.add_argument("--count", type=int, default=10, help="jobs each claim asks for")
    a = ap.parse_args()
    with Callgrind(module=False) as cg:
        q = Queue("wake-claim", url=cg.url)
        forms = {
            "wait": lambda: lifecycle.claim_op(q.ctx, a.count, 60_000, 60_000, recorded=False),
            "recorded": lambda: lifecycle.claim_op(q.ctx, a.count, 60_000, 60_000),
        }
        for make in forms.values():  # warm: the libraries loaded, the keys made
            for _ in range(20):
                q.enqueue({})
                q.runner.execute(make())
        rows: list[list[object]] = [["call", "Ir/call (median)", "calls"]]
        enq: list[int] = []
        got: dict[str, list[int]] = {name: [] for name in forms}
        for _ in range(a.calls):
            for name, make in forms.items():
                cg.take()
                q.enqueue({})
                enq.append(cg.take())
                q.runner.execute(make())
                got[name].append(cg.take())
        rows.append(["enqueue (one job)", int(statistics.median(enq)), len(enq)])
        for name, counts in got.items():
            label = f"claim of {a.count}, one job pending: {name}"
            rows.append([label, int(statistics.median(counts)), len(counts)])
    report(rows)


if __name__ == "__main__":
    main()
