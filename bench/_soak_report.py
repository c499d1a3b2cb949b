"""The soak run's verdict: exactly-once accounting, the key families' bounds, and the
figures (memory, worker RSS, PING latency, waits), printed as tables.

Hard checks (a failure makes the run exit non-zero): no job lost, none accounted in
two final states, none completed twice (the server's completion count equals the ids
with a completion's evidence), no (id, token) pair run twice, and every index within
its time window plus one trim step (its oldest entry's age, and its size against the
rate), and none growing late in the run. The rest are targets, reported.
"""

from __future__ import annotations

import bisect
import statistics
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from _common import report
from _soak_load import QUEUES, RETENTION, Ledger
from _soak_sample import WINDOW_MS, Sample

#: One trim step, in time: an expired entry outlives its window by at most this.
STEP_MS = 10_000
AUDIT_CAP = 10_000
#: The families that must not grow with processed jobs (the trend check); the rows
#: follow the backlog (a saturated machine grows it), the loose rows (in no set) may not.
BOUNDED = (
    "loose rows",
    "settled",
    "claimreqs",
    "claimreq keys",
    "workers",
    "logs",
    "logtimes",
    "dedup",
    "locks",
    "errors",
    "completed",
    "metrics",
)
COLUMNS = (
    "settled",
    "claimreqs",
    "claimreq keys",
    "workers",
    "audit",
    "completed",
    "metrics",
    "pending",
    "gindex",
    "active",
    "schedule",
    "dead",
    "rows",
    "loose rows",
    "logs",
    "dedup",
)


@dataclass
class Verdict:
    """The run's findings; ``failures`` lists the hard checks missed."""

    enqueued: int = 0
    lost: int = 0
    twice_accounted: int = 0
    completed_twice: int = 0
    same_token_twice: int = 0
    failures: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.failures


def pct(xs: list[float], p: float) -> float:
    """The ``p``-th percentile of ``xs`` (0 when empty)."""
    if not xs:
        return 0.0
    s = sorted(xs)
    return s[min(len(s) - 1, int(p / 100 * len(s)))]


def read_runs(path: Path) -> tuple[dict[str, int], int, int]:
    """The handler runs file: each id's first start (ms), the (id, token) pairs run
    more than once, and the number of runs."""
    first: dict[str, int] = {}
    pairs: Counter[tuple[str, str]] = Counter()
    n = 0
    with open(path) as fh:
        for line in fh:
            parts = line.split()
            if len(parts) != 4:
                continue  # a line cut by a SIGKILL cannot be: one write() each
            n += 1
            _, jid, token, start = parts
            pairs[(jid, token)] += 1
            first[jid] = min(first.get(jid, 1 << 62), int(start))
    return first, sum(1 for c in pairs.values() if c > 1), n


def starts_by_queue(path: Path) -> dict[str, list[int]]:
    """Each queue's handler starts (wall ms), sorted: one claim each at most, so the
    claims of any window are at most the starts in it."""
    got: dict[str, list[int]] = defaultdict(list)
    with open(path) as fh:
        for line in fh:
            parts = line.split()
            if len(parts) == 4:
                got[parts[0]].append(int(parts[3]))
    for starts in got.values():
        starts.sort()
    return got


def _in_window(starts: list[int], end_ms: float, span_ms: float) -> int:
    return bisect.bisect_right(starts, end_ms) - bisect.bisect_left(starts, end_ms - span_ms)


def account(
    v: Verdict,
    ledger: Ledger,
    settled: dict[str, set[str]],
    kept_done: set[str],
    states: dict[str, dict[str, set[str]]],
    counted: dict[str, int],
) -> list[list[object]]:
    """Each landed job in exactly one final state; the server's completion count per
    queue against the ids with a completion's evidence. Rows of the accounting table."""
    rows: list[list[object]] = [
        [
            "queue",
            "enqueued",
            "completed",
            "dead",
            "removed",
            "waiting",
            "lost",
            "twice",
            "completions counted",
            "completed ids",
        ]
    ]
    by_queue: dict[str, list[str]] = defaultdict(list)
    for jid, sent in ledger.jobs.items():
        by_queue[sent.queue].append(jid)
    for spec in QUEUES:
        q, st = spec.name, states[spec.name]
        # a kept row the operator removed after it completed: completed, not removed
        removed = ledger.removed - kept_done
        done = (settled[q] - removed) | (kept_done if spec.kept else set())
        waiting = st["pending"] | st["active"] | st["schedule"]
        tally: Counter[str] = Counter()
        for jid in by_queue[q]:
            where = [
                name
                for name, ids in (
                    ("completed", done),
                    ("dead", st["dead"]),
                    ("removed", removed),
                    ("waiting", waiting),
                )
                if jid in ids
            ]
            if not where and jid in ledger.uncertain:
                where = ["removed"]  # a removal whose reply was lost: it left no job
            if not where:
                tally["lost"] += 1
            elif len(where) > 1:
                tally["twice"] += 1
            else:
                tally[where[0]] += 1
        extra = counted[q] - len(done)
        v.enqueued += len(by_queue[q])
        v.lost += tally["lost"]
        v.twice_accounted += tally["twice"]
        v.completed_twice += max(0, extra)
        if extra < 0:
            v.failures.append(f"{q}: {-extra} completions counted fewer than ids completed")
        rows.append(
            [
                q,
                len(by_queue[q]),
                tally["completed"],
                tally["dead"],
                tally["removed"],
                tally["waiting"],
                tally["lost"],
                tally["twice"],
                counted[q],
                len(done),
            ]
        )
    for what, n in (
        ("lost", v.lost),
        ("accounted in two states", v.twice_accounted),
        ("completed twice", v.completed_twice),
        ("run twice under one token", v.same_token_twice),
    ):
        if n:
            v.failures.append(f"{n} jobs {what}")
    return rows


def check_bounds(
    v: Verdict,
    samples: list[Sample],
    rate: float,
    workers_per_queue: int,
    load_s: float,
    starts: dict[str, list[int]],
    wall0_ms: float,
) -> None:
    """Every index within its time window plus one trim step, by its oldest entry's
    age and by its size against what the window held (the enqueue rate, or the
    handler starts of the window plus one trim step when more: retries and reprocessed
    jobs claim again, and a backlog catching up claims faster than the rate); no
    bounded family growing late in the run."""
    missed: Counter[str] = Counter()
    for s in samples:
        minutes = s.t / 60 + 2
        for spec in QUEUES:
            q, size, ages = spec.name, s.sizes[spec.name], s.oldest_ms[spec.name]
            for z, age in ages.items():
                if age > WINDOW_MS[z] + STEP_MS:
                    missed[f"{q} {z}: oldest entry {age / 1000:.0f} s old"] += 1
            r = rate * spec.share + (1 if spec.kept else 0)
            ran = _in_window(starts.get(q, []), wall0_ms + s.t * 1000, 60_000 + STEP_MS)
            window = max(r * 60 * 1.2 + r * 20, ran * 1.05) + 500
            limits = {
                "settled": window,
                "claimreqs": window,
                "workers": workers_per_queue + 4,
                "audit": AUDIT_CAP * 1.1,
                "completed": RETENTION["completed"] + 100 if spec.kept else 0,
                "metrics": 2 + 2 * minutes,
                # the history series: one key per hour the run touched
                "hist keys": 2 + minutes / 60,
            }
            for family, limit in limits.items():
                if size[family] > limit:
                    missed[f"{q} {family}: {size[family]:,} > {limit:,.0f}"] += 1
    for what, n in missed.items():
        v.failures.append(f"index bound: {what} (in {n} samples)")
    span = load_s  # the trend under load (the backlog drains after it)
    if span < 180:
        v.notes.append("trend check skipped (a run under 180 s: the 60 s windows still fill)")
        return
    mid = [s for s in samples if span / 3 <= s.t < 2 * span / 3]
    late = [s for s in samples if 2 * span / 3 <= s.t <= span]
    for family in BOUNDED:
        a = max((s.total(family) for s in mid), default=0)
        b = max((s.total(family) for s in late), default=0)
        if b > 1.25 * a + 200:
            v.failures.append(f"{family} grows: late max {b:,} against {a:,} mid-run")


def series(samples: list[Sample], every: int) -> list[list[object]]:
    """The key families over time (summed over the queues), one row per ``every``."""
    rows: list[list[object]] = [["t s", *COLUMNS, "keys", "used MB"]]
    picked = samples[::every]
    if samples and samples[-1] not in picked:
        picked.append(samples[-1])
    for s in picked:
        fam = [s.total(c) for c in COLUMNS]
        rows.append([f"{s.t:.0f}", *fam, s.keys, round(s.used_memory / 2**20, 2)])
    return rows


def waits(
    ledger: Ledger, first: dict[str, int]
) -> tuple[list[list[object]], dict[str, dict[bool, float]]]:
    """Enqueue-to-first-start of the jobs enqueued without a delay, caller-chosen
    against minted ids, per queue (every job at priority 0). Rows, and the p99s."""
    got: dict[tuple[str, bool], list[float]] = defaultdict(list)
    for jid, sent in ledger.jobs.items():
        if sent.immediate and jid in first:
            got[(sent.queue, sent.chosen)].append(max(0, first[jid] - sent.at_ms) / 1000)
    rows: list[list[object]] = [["queue", "ids", "jobs", "p50 s", "p99 s", "mean s"]]
    p99: dict[str, dict[bool, float]] = defaultdict(dict)
    for spec in QUEUES:
        for chosen in (False, True):
            xs = got[(spec.name, chosen)]
            p99[spec.name][chosen] = pct(xs, 99)
            mean = statistics.fmean(xs) if xs else 0.0
            kind = "chosen" if chosen else "minted"
            rows.append([spec.name, kind, len(xs), pct(xs, 50), pct(xs, 99), mean])
    return rows, p99


def show(title: str, rows: list[list[object]]) -> None:
    print(f"\n{title}")
    report(rows)
