"""The soak run's load: the queues and their job mix, the producers, the operator and
the PING probe (threads of the soak process; the workers are processes of their own).

Every producer enqueues with an id it holds before sending (a minted ``new_id()`` or a
caller-chosen ``JOB1<counter>``) and retries an unanswered enqueue with that same id,
so each landed job is known by id whatever the server did (a re-sent enqueue of a
landed id answers that id). The operator records, by id, every job it removed.
"""

from __future__ import annotations

import itertools
import random
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import redis

from echomq import (
    EchoMQError,
    JobGone,
    JobLocked,
    OutcomeUnknown,
    Queue,
    ServerUnavailable,
    new_id,
)

#: Groups of the lanes queue, their limits (None: unlimited) and weights.
GROUPS = {"g0": (2, 1), "g1": (2, 2), "g2": (4, 1), "g3": (None, 1), "g4": (1, 3)}


@dataclass(frozen=True)
class QueueSpec:
    """One soak queue: its share of the rate and what it exercises."""

    name: str
    share: float
    lanes: bool = False  # jobs go to the lanes of GROUPS
    kept: bool = False  # set_retention (kept history) and the repeatable
    clean_dead: bool = False  # the operator cleans its dead jobs (else reprocesses)


QUEUES = (
    QueueSpec("soak.flat", 0.40, clean_dead=True),
    QueueSpec("soak.lanes", 0.33, lanes=True),
    QueueSpec("soak.kept", 0.27, kept=True),
)
REPEAT = "soak-tick"
#: Kept history of the kept queue: the newest 2,000 completed, at most 30 s old.
RETENTION = {"completed": 2000, "completed_age_ms": 30_000}

_chosen = itertools.count(1)


def chosen_id() -> str:
    """A caller-chosen id, as a user's own scheme would make one (it sorts after every
    minted id: issue 24, item 2)."""
    return f"JOB1{next(_chosen):010d}"


@dataclass
class Sent:
    """A job a producer landed."""

    queue: str
    chosen: bool
    at_ms: int  # wall clock when first sent
    immediate: bool  # no delay: its wait (enqueue to first start) is measured


@dataclass
class Ledger:
    """What the producers landed and what the operator removed, by id (thread-safe by
    the GIL: each mutation is one dict/set operation)."""

    jobs: dict[str, Sent] = field(default_factory=dict)
    deduplicated: int = 0  # enqueues answered with another job's id (dedup_id held)
    removed: set[str] = field(default_factory=set)
    uncertain: set[str] = field(default_factory=set)  # removals whose outcome is unknown
    retries: int = 0  # enqueues sent again after no answer
    ops: dict[str, int] = field(default_factory=dict)  # operator verbs that took effect


def job_options(spec: QueueSpec, rng: random.Random) -> tuple[dict[str, Any], dict[str, Any]]:
    """One job of the mix: (payload, enqueue options)."""
    payload: dict[str, Any] = {"ms": rng.choice((0, 1, 2, 5, 10))}
    opts: dict[str, Any] = {}
    r = rng.random()
    if r < 0.10:  # retried: fails its first one or two attempts
        payload["fail"] = rng.choice((1, 2))
        opts["max_attempts"] = 4
    elif r < 0.13:  # dead by design (twice: completes after its second reprocess)
        payload["fail"] = 3
        opts["max_attempts"] = 2
    if rng.random() < 0.10:
        opts["delay_ms"] = rng.randint(200, 3000)
    if rng.random() < 0.05:
        opts["dedup_id"] = f"d{rng.randint(0, 20)}"
    if rng.random() < 0.2:
        payload["log"] = 1
    if rng.random() < 0.2:
        payload["prog"] = 1
    if spec.lanes:
        opts["group"] = rng.choice(sorted(GROUPS))
    return payload, opts


def setup(url: str) -> None:
    """The queues' settings: lane limits and weights, retention, the repeatable."""
    for spec in QUEUES:
        with Queue(spec.name, url=url) as q:
            if spec.lanes:
                for g, (limit, weight) in GROUPS.items():
                    if limit is not None:
                        q.set_group_limit(g, limit)
                    q.set_group_weight(g, weight)
            if spec.kept:
                q.set_retention(**RETENTION)
                q.repeat(REPEAT, every_ms=1000, payload={"log": 1, "prog": 1})


def until_answered(call: Any, ledger: Ledger, patience: float = 60.0) -> Any:
    """``call()`` until the server answers it (a restart takes a second or two); the
    last error once ``patience`` seconds passed without an answer."""
    deadline = time.monotonic() + patience
    while True:
        try:
            return call()
        except (ServerUnavailable, OutcomeUnknown):
            ledger.retries += 1
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


class Producer(threading.Thread):
    """Enqueues the mix on one queue at ``rate`` jobs/s (a late schedule catches up by
    at most one second's worth) until ``stop`` is set."""

    def __init__(
        self, spec: QueueSpec, url: str, rate: float, ledger: Ledger, stop: threading.Event
    ):
        super().__init__(name=f"producer-{spec.name}", daemon=True)
        self.spec, self.rate, self.ledger, self.stop = spec, rate, ledger, stop
        self.q = Queue(spec.name, url=url)
        self.rng = random.Random(spec.name)

    def run(self) -> None:
        interval, due = 1.0 / self.rate, time.monotonic()
        while not self.stop.is_set():
            now = time.monotonic()
            if now < due:
                time.sleep(min(due - now, 0.05))
                continue
            due = max(due + interval, now - 1.0)
            self.one()
        self.q.close()

    def one(self) -> None:
        payload, opts = job_options(self.spec, self.rng)
        chosen = self.rng.random() < 0.5
        jid = chosen_id() if chosen else new_id()
        at = int(time.time() * 1000)
        got = until_answered(lambda: self.q.enqueue(payload, job_id=jid, **opts), self.ledger)
        if got != jid:
            self.ledger.deduplicated += 1
            return
        self.ledger.jobs[jid] = Sent(self.spec.name, chosen, at, "delay_ms" not in opts)


class Operator(threading.Thread):
    """Every ``every`` seconds: pauses one queue (in turn) for a moment and resumes it,
    removes a few waiting jobs by id, cleans the flat queue's dead jobs and reprocesses
    the others'. Everything it removed is recorded in the ledger by id."""

    def __init__(self, url: str, direct: str, ledger: Ledger, stop: threading.Event, every: float):
        super().__init__(name="operator", daemon=True)
        self.queues = {s.name: Queue(s.name, url=url) for s in QUEUES}
        self.r = redis.Redis.from_url(direct, decode_responses=True, socket_timeout=5)
        self.ledger, self.stop, self.every = ledger, stop, every
        self.errors = 0

    def count(self, verb: str, n: int = 1) -> None:
        self.ledger.ops[verb] = self.ledger.ops.get(verb, 0) + n

    def run(self) -> None:
        tick = 0
        while not self.stop.wait(self.every):
            spec = QUEUES[tick % len(QUEUES)]
            tick += 1
            try:
                self.pause_a_moment(self.queues[spec.name])
                for s in QUEUES:
                    self.tend(s, self.queues[s.name])
            except (EchoMQError, redis.RedisError):
                self.errors += 1  # the server restarting: the next tick does it
        for q in self.queues.values():
            q.close()

    def pause_a_moment(self, q: Queue) -> None:
        q.pause()
        self.count("pause")
        time.sleep(1.5)
        until_answered(q.resume, self.ledger)
        self.count("resume")

    def tend(self, spec: QueueSpec, q: Queue) -> None:
        k = q.keys
        # jobs no worker can take before the removal lands: delayed ones due in 2 s or
        # more, and (where a completed row is deleted: JobGone) the newest waiting ones.
        # On the kept queue a job taken and completed meanwhile would lose its kept row
        # to the removal, and the run could not tell it from a removed job
        sec, usec = self.r.time()
        later = int(sec) * 1000 + int(usec) // 1000 + 2000
        picks = self.r.zrangebyscore(k.schedule, later, "+inf", start=0, num=3)
        if not spec.kept:
            picks += self.r.zrange(k.pending, -2, -1)
        for jid in picks:
            try:
                q.remove_job(jid)
                self.ledger.removed.add(jid)
                self.count("remove_job")
            except (JobGone, JobLocked):
                pass
            except (OutcomeUnknown, ServerUnavailable):
                self.ledger.uncertain.add(jid)
                raise
        if spec.clean_dead:
            # the dead set changes only by this thread's hand meanwhile (and new deaths,
            # younger than the cut): the ids gone from it are the ones clean removed
            before = set(self.r.zrange(k.dead, 0, -1))
            res = q.clean(5000, "dead")
            gone = before - set(self.r.zrange(k.dead, 0, -1))
            self.ledger.removed |= gone
            self.count("clean", res.matched)
        else:
            self.count("reprocess_jobs", q.reprocess_jobs().matched)


class Pinger(threading.Thread):
    """PINGs the server every 50 ms on a connection of its own and keeps each round
    trip's time (ms); a PING the restart refused is counted, not timed."""

    def __init__(self, direct: str, stop: threading.Event):
        super().__init__(name="pinger", daemon=True)
        self.r = redis.Redis.from_url(direct, socket_timeout=2, socket_connect_timeout=2)
        self.stop = stop
        self.ms: list[float] = []
        self.failed = 0

    def run(self) -> None:
        while not self.stop.wait(0.05):
            t0 = time.perf_counter()
            try:
                self.r.ping()
            except redis.RedisError:
                self.failed += 1
                continue
            self.ms.append((time.perf_counter() - t0) * 1000)
        self.r.close()
