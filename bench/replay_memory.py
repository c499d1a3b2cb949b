"""What replay protection costs in memory: the settled tombstones and the claim records.

Every completion leaves its id in ``settled`` for 60 s (so an enqueue re-sent after a lost
reply cannot run a settled job again) and every claim that leased a job leaves a record
``claimreq:<rid>`` (60 s, indexed in ``claimreqs``) so a re-sent claim answers the same
jobs. Both are bounded by time (trimmed from their oldest end), so what they cost is a
window's worth: bytes per job at rest times the jobs of one minute.

Measured on a private server (``MEMORY USAGE`` of each key, and ``used_memory`` before
and after), one by one (a claim per job: the worst case for records) and with claims in
batches of ``--batch``.

Usage: python bench/replay_memory.py [--jobs 5000] [--batch 50]
"""

from __future__ import annotations

import argparse

import redis

from echomq import Queue
from echomq.embedded import EmbeddedServer

WINDOW_S = 60


def measure(url: str, name: str, jobs: int, batch: int) -> dict[str, float]:
    r = redis.Redis.from_url(url, decode_responses=True)
    q = Queue(name, url=url)
    q.enqueue_many([{"i": i} for i in range(jobs)])
    base = int(r.info("memory")["used_memory"])
    claims = 0
    while True:
        got = q.claim_many(batch) if batch > 1 else [c for c in [q.claim()] if c]
        if not got:
            break
        claims += 1
        q.complete_many([(c.id, c.token) for c in got])
    used = int(r.info("memory")["used_memory"])
    settled = r.memory_usage(q.keys.settled) or 0
    index = r.memory_usage(q.keys.claimreqs) or 0
    records = [k for k in r.scan_iter(match=q.keys.base + "claimreq:*", count=1000)]
    sample = records[:200]
    per_record = sum(r.memory_usage(k) or 0 for k in sample) / max(1, len(sample))
    q.close()
    r.close()
    return {
        "jobs": jobs,
        "claims": claims,
        "settled_bytes_per_job": settled / jobs,
        "claimreqs_index_bytes_per_claim": index / max(1, claims),
        "record_bytes_per_claim": per_record,
        "replay_bytes_per_job": (settled + index + per_record * len(records)) / jobs,
        "used_memory_delta_per_job": (used - base) / jobs,
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--jobs", type=int, default=5000)
    p.add_argument("--batch", type=int, default=50)
    args = p.parse_args()
    with EmbeddedServer() as srv:
        rows = {
            "one by one": measure(srv.url, "replay-1", args.jobs, 1),
            f"claims of {args.batch}": measure(srv.url, "replay-b", args.jobs, args.batch),
        }
    print(f"replay protection at rest (a {WINDOW_S} s window), {args.jobs} jobs:")
    for label, m in rows.items():
        print(
            f"  {label:>14}: {m['replay_bytes_per_job']:6.1f} B/job "
            f"(tombstone {m['settled_bytes_per_job']:.1f} B/job; "
            f"record {m['record_bytes_per_claim']:.1f} + index "
            f"{m['claimreqs_index_bytes_per_claim']:.1f} B per claim, {m['claims']} claims); "
            f"used_memory after the run {m['used_memory_delta_per_job']:+.1f} B/job"
        )
    one = rows["one by one"]["replay_bytes_per_job"]
    for per_day in (1_000_000, 10_000_000, 100_000_000):
        rate = per_day / 86_400
        at_rest = rate * WINDOW_S * one
        print(
            f"  {per_day:>11,} jobs/day ({rate:,.0f}/s): about {at_rest / 1e6:,.2f} MB held "
            f"at any time (one by one; claims in batches cost less)"
        )


if __name__ == "__main__":
    main()
