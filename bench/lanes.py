"""Grouped (lane) claim + complete throughput beside the flat one, in the same run.

Every row drains ``n`` jobs through claim + complete on one private server (or
``EMQ_URL``), the repetitions interleaved so drift hits every row alike; each figure is
the median of ``--repeat`` runs. Rows:

- ``flat``: the flat pending set, the baseline.
- ``grouped, 1 lane`` / ``10 lanes`` / ``1000 lanes``: the same jobs spread evenly over
  that many groups, so the ring holds 1, 10 or 1000 groups.
- ``grouped, 10 lanes, limit 1``: every claim takes its group off the ring and every
  complete puts it back (the ring churns on each job).
- ``grouped, 2 lanes, weight 3:1``: a weighted head keeps the ring for three claims.
- ``mixed flat + 10 lanes``: half the jobs flat, half grouped (the claims alternate).

Each row runs twice: one job at a time (three round trips per job: the pause read, the
claim script, the complete script) and in batches (``claim_many`` + ``complete_many``
of ``--batch``). ``server us/job`` is the time the server spent in EVALSHA per job
(``INFO commandstats``), which isolates the scripts' cost from the round trips.

Run: ``.venv/bin/python bench/lanes.py`` (``--repeat``, ``--one``, ``--many``,
``--batch``; ``EMQ_URL`` measures another server).
"""

from __future__ import annotations

import argparse
import itertools
import os
import time
from collections.abc import Callable
from dataclasses import dataclass

import redis

from _common import bench_server, median, report
from echomq import Queue

_names = itertools.count()
PREFIX = f"bench-lanes-{os.getpid()}"


@dataclass(frozen=True)
class Shape:
    """How the jobs of one row are laid out."""

    label: str
    groups: int  # 0 = every job flat
    flat_share: float = 0.0  # the share of jobs enqueued flat beside the lanes
    limit: int | None = None  # per-group limit
    heavy_weight: int | None = None  # the weight of the first group


SHAPES = (
    Shape("flat", 0),
    Shape("grouped, 1 lane", 1),
    Shape("grouped, 10 lanes", 10),
    Shape("grouped, 1000 lanes", 1000),
    Shape("grouped, 10 lanes, limit 1", 10, limit=1),
    Shape("grouped, 2 lanes, weight 3:1", 2, heavy_weight=3),
    Shape("mixed flat + 10 lanes", 10, flat_share=0.5),
)

Measured = tuple[float, float]  # jobs/s, server microseconds in EVALSHA per job


def evalsha_usec(stats: redis.Redis) -> int:
    return int(stats.info("commandstats").get("cmdstat_evalsha", {}).get("usec", 0))


def fill(q: Queue, shape: Shape, n: int) -> None:
    """Enqueue ``n`` jobs laid out as ``shape`` (outside the timing)."""
    flat = int(n * shape.flat_share) if shape.groups else n
    if flat:
        q.enqueue_many({"i": i} for i in range(flat))
    grouped = n - flat
    if not grouped:
        return
    for g in range(shape.groups):
        share = grouped // shape.groups + (1 if g < grouped % shape.groups else 0)
        if share:
            q.enqueue_many(({"g": g, "i": i} for i in range(share)), group=f"g{g}")
        if shape.limit is not None:
            q.set_group_limit(f"g{g}", shape.limit)
    if shape.heavy_weight is not None:
        q.set_group_weight("g0", shape.heavy_weight)


def one_by_one(q: Queue) -> None:
    while (c := q.claim()) is not None:
        q.complete(c.id, c.token)


def batched(q: Queue, batch: int) -> None:
    while cs := q.claim_many(batch):
        assert not q.complete_many([(c.id, c.token) for c in cs])


def measure(
    stats: redis.Redis, url: str, shape: Shape, n: int, drain: Callable[[Queue], None]
) -> Measured:
    with Queue(f"{PREFIX}-{next(_names)}", url=url) as q:
        fill(q, shape, n)
        usec = evalsha_usec(stats)
        start = time.perf_counter()
        drain(q)
        elapsed = time.perf_counter() - start
        spent = evalsha_usec(stats) - usec
        # every job went through claim + complete; nothing is left behind
        counts = q.counts()
        assert counts.completed == n and counts.pending == counts.active == 0, counts
        return n / elapsed, spent / n


def cleanup(client: redis.Redis) -> None:
    keys = list(client.scan_iter(match=f"emq:{{{PREFIX}-*", count=5000))
    for i in range(0, len(keys), 1000):
        client.delete(*keys[i : i + 1000])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5, help="runs per measurement (median)")
    ap.add_argument("--one", type=int, default=3000, help="jobs per one-at-a-time run")
    ap.add_argument("--many", type=int, default=20000, help="jobs per batched run")
    ap.add_argument("--batch", type=int, default=100, help="claim_many / complete_many size")
    args = ap.parse_args()

    with bench_server() as url:
        client = redis.Redis.from_url(url)
        runs: dict[tuple[str, str], list[Measured]] = {}
        try:
            for _ in range(args.repeat):
                for shape in SHAPES:
                    runs.setdefault((shape.label, "one"), []).append(
                        measure(client, url, shape, args.one, one_by_one)
                    )
                    runs.setdefault((shape.label, "batch"), []).append(
                        measure(client, url, shape, args.many, lambda q: batched(q, args.batch))
                    )
                cleanup(client)
            server = client.info("server")
            name = "valkey" if "valkey_version" in server else "redis"
            version = server.get("valkey_version") or server.get("redis_version")
        finally:
            cleanup(client)
            client.close()

    rate = {k: median(r for r, _ in v) for k, v in runs.items()}
    usec = {k: median(u for _, u in v) for k, v in runs.items()}
    flat_one, flat_batch = rate[("flat", "one")], rate[("flat", "batch")]
    rows: list[tuple[object, ...]] = [
        (
            "claim + complete",
            "1-by-1 jobs/s",
            "vs flat",
            "server us/job",
            f"batch {args.batch} jobs/s",
            "vs flat",
            "server us/job",
        )
    ]
    for shape in SHAPES:
        one, batch = (shape.label, "one"), (shape.label, "batch")
        rows.append(
            (
                shape.label,
                rate[one],
                rate[one] / flat_one,
                usec[one],
                rate[batch],
                rate[batch] / flat_batch,
                usec[batch],
            )
        )
    print(
        f"server: {name} {version} at {url}; median of {args.repeat} runs; "
        f"{args.one} jobs per 1-by-1 run, {args.many} per batched run"
    )
    report(rows)
    print(
        "server us/job: time the server spent in EVALSHA per job (claim + complete "
        "scripts, INFO commandstats); 'vs flat' divides by the flat row of the same run."
    )


if __name__ == "__main__":
    main()
