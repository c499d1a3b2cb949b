"""What the soak run reads from the server while it runs, directly (never through a
queue): every key family's size, the age of the oldest entry of each index trimmed by
time, used_memory, and the evidence of each completion.

A completion leaves evidence the sampler collects before it goes: a settled tombstone
(60 s) for a job whose row is deleted, or, on the kept queue, the row in ``completed``
(kept while among the newest 2,000 and younger than 30 s; a trim of a row younger than
60 s leaves a tombstone). Sampling every few seconds reads each of them at least once.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field

import redis

from echomq.keyspace import Keyspace

#: The per-key families, by the shape of the key after the queue's base.
_FAMILY = (
    (re.compile(r"job:JOB\w{11}$"), "rows"),
    (re.compile(r"job:JOB\w{11}:logs$"), "logs"),
    (re.compile(r"job:JOB\w{11}:logtimes$"), "logtimes"),
    (re.compile(r"job:JOB\w{11}:lock$"), "locks"),
    (re.compile(r"job:JOB\w{11}:errors$"), "errors"),
    (re.compile(r"de:"), "dedup"),
    (re.compile(r"claimreq:"), "claimreq keys"),
    (re.compile(r"worker:"), "worker keys"),
    (re.compile(r"g:.*:pending$"), "lanes"),
    (re.compile(r"hist:\d+$"), "hist keys"),
)
_KEY = re.compile(r"emq:\{([A-Za-z0-9._-]+)\}:(.*)$")
#: The indexes (sorted sets) and other queue-wide keys sampled by size.
ZSETS = ("settled", "claimreqs", "workers", "completed", "pending", "gindex", "active", "schedule",
         "dead")  # fmt: skip
#: The sets a job row is in (a row in none of them is a leak: "loose rows").
STATES = ("completed", "pending", "gindex", "active", "schedule", "dead")
#: Indexes trimmed by time: the window of their oldest entry's score, behind the
#: server's clock (settled: settle time, 60 s; claimreqs: expiry; workers: last beat,
#: the record's ttl of 3 beats + 2 s).
WINDOW_MS = {"settled": 60_000, "claimreqs": 0, "workers": 3 * 500 + 2000}


@dataclass
class Sample:
    """One reading: per queue, each family's size; server-wide figures."""

    t: float  # seconds since the load started
    sizes: dict[str, Counter[str]]  # queue -> family -> size
    oldest_ms: dict[str, dict[str, int]]  # queue -> index -> age of its oldest entry
    used_memory: int
    keys: int
    rss_kb: dict[int, int] = field(default_factory=dict)  # worker pid -> VmRSS

    def total(self, family: str) -> int:
        """``family``'s size over every queue."""
        return sum(c[family] for c in self.sizes.values())


def rss_kb(pid: int) -> int | None:
    """A process's resident set (kB), or None when it is gone."""
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


class Sampler:
    """Reads the server at ``url`` (directly) for the queues named."""

    def __init__(self, url: str, queues: list[str], kept: str) -> None:
        self.r = redis.Redis.from_url(url, decode_responses=True, socket_timeout=10)
        self.keys = {q: Keyspace(q) for q in queues}
        self.kept = kept
        #: queue -> ids seen settled (tombstone) or kept completed: the completions
        #: (and the operator's removals, which leave tombstones too)
        self.settled: dict[str, set[str]] = {q: set() for q in queues}
        #: the ids seen in the kept queue's ``completed``: completions only (an operator
        #: may remove a kept row afterwards, which is not a removal of the job)
        self.kept_done: set[str] = set()
        self._since: dict[tuple[str, str], float] = {}

    def now_ms(self) -> int:
        sec, usec = self.r.time()
        return int(sec) * 1000 + int(usec) // 1000

    def collect(self) -> None:
        """Read the evidence written since the last call (with 15 s of overlap)."""
        for q, k in self.keys.items():
            sets = [k.settled] + ([k.completed] if q == self.kept else [])
            for key in sets:
                since = self._since.get((q, key), 0.0)
                got = self.r.zrangebyscore(key, since - 15_000, "+inf", withscores=True)
                self.settled[q].update(m for m, _ in got)
                if key == k.completed:
                    self.kept_done.update(m for m, _ in got)
                if got:
                    self._since[(q, key)] = max(since, max(s for _, s in got))

    def sample(self, t: float, pids: list[int]) -> Sample:
        """Every family's size now, the oldest entries' ages, memory and worker RSS."""
        now = self.now_ms()
        sizes: dict[str, Counter[str]] = {q: Counter() for q in self.keys}
        oldest: dict[str, dict[str, int]] = {q: {} for q in self.keys}
        with self.r.pipeline(transaction=False) as p:
            for k in self.keys.values():
                for z in ZSETS:
                    p.zcard(getattr(k, z))
                    p.zrange(getattr(k, z), 0, 0, withscores=True)
                p.xlen(k.audit)
                p.hlen(k.metrics_completed)
                p.hlen(k.metrics_failed)
            p.info("memory")
            p.dbsize()
            replies = iter(p.execute())
        for q in self.keys:
            for z in ZSETS:
                sizes[q][z] = next(replies)
                first = next(replies)
                if z in WINDOW_MS and first:
                    oldest[q][z] = now - int(first[0][1])
            sizes[q]["audit"] = next(replies)
            sizes[q]["metrics"] = next(replies) + next(replies)
        memory, keys = next(replies), next(replies)
        for key in self.r.scan_iter("emq:{*", count=1000):
            m = _KEY.match(key)
            if m is None or m.group(1) not in sizes:
                continue
            for pattern, family in _FAMILY:
                if pattern.match(m.group(2)):
                    sizes[m.group(1)][family] += 1
                    break
        for c in sizes.values():
            c["loose rows"] = max(0, c["rows"] - sum(c[z] for z in STATES))
        rss = {pid: kb for pid in pids if (kb := rss_kb(pid)) is not None}
        return Sample(t, sizes, oldest, int(memory["used_memory"]), int(keys), rss)

    def metrics_completed(self) -> dict[str, int]:
        """Per queue, the completions the server counted (one per completion)."""
        return {
            q: int(self.r.hget(k.metrics_completed, "count") or 0) for q, k in self.keys.items()
        }

    def states(self) -> dict[str, dict[str, set[str]]]:
        """Per queue, the ids in each state set now (pending includes the lanes)."""
        out: dict[str, dict[str, set[str]]] = {}
        for q, k in self.keys.items():
            st = {s: set(self.r.zrange(getattr(k, s), 0, -1)) for s in STATES}
            st["pending"] |= st.pop("gindex")
            out[q] = st
        return out

    def close(self) -> None:
        self.r.close()
