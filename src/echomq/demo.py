"""The operator runbook, end to end: what ``emq demo`` walks and checks.

The demo runs the seed's runbook against a live queue with a real worker: enqueue a
backlog, start a worker, pause (a claim answers empty, the backlog intact), resume,
write progress (a subscriber receives the event), append and read logs, fail a job
into dead and reprocess it, drain, then pause and obliterate with a small budget,
looping on "more" until no key of the queue is left. Every step checks what the seed
says must happen and the demo stops at the first step that misbehaves.

Without a URL it starts a private embedded server and stops it at the end; with one
it works on a fresh queue it owns (it refuses a queue that already has keys) and
obliterates that queue at the end, so a server it was pointed at is left as it was.
"""

from __future__ import annotations

import contextlib
import secrets
import threading
import time
from collections.abc import Callable
from typing import Any

import redis
from rich.console import Console
from rich.markup import escape

from .embedded import EmbeddedServer
from .errors import QueueNotPaused, Refused
from .queue import Queue
from .schema import KEY
from .worker import Worker
from .worker.job import JobContext

#: Jobs in the first backlog, and how long each takes in the worker.
BACKLOG = 40
JOB_S = 0.02
#: Jobs enqueued to show drain, and the obliterate budget per call.
DRAIN_BACKLOG = 25
OBLITERATE_BUDGET = 7
#: The most seconds any one wait may take before the step fails.
WAIT_S = 5.0


class DemoFailed(Exception):
    """A step did not behave as the runbook says.

    Attributes:
        step: the step's title.
        reason: what was expected and what happened.
    """

    def __init__(self, step: str, reason: str) -> None:
        super().__init__(f"{step}: {reason}")
        self.step = step
        self.reason = reason


def handle(job: JobContext) -> None:
    """The demo's handler: resize images; an invoice with a negative total fails."""
    if job.name == "invoice":
        job.log(f"checking invoice {job.data['invoice']}")
        if job.data["total"] < 0:
            raise ValueError(f"invoice {job.data['invoice']}: total is negative")
    time.sleep(JOB_S)


class Runbook:
    """The runbook on one queue; each step method checks its own outcome.

    Args:
        url: the server.
        queue: the queue to work on (it must have no keys yet).
        console: where each step is printed.
    """

    def __init__(self, url: str, queue: str, console: Console) -> None:
        self.console = console
        self.q = Queue(queue, url=url)
        self.r = redis.Redis.from_url(url, decode_responses=True)
        self.url = url
        self.step = "setup"
        self.worker: Worker | None = None
        self.thread: threading.Thread | None = None
        self.report_job = ""

    # ---- reporting and checking ---------------------------------------------------

    def say(self, text: str) -> None:
        """One line of narration under the current step."""
        self.console.print(f"      {escape(text)}")

    def check(self, ok: bool, what: str, *, got: Any = None) -> None:
        """Print ``what`` as passed, or fail the step with it.

        Raises:
            DemoFailed: ``ok`` is false.
        """
        if not ok:
            detail = what if got is None else f"{what} (got {got!r})"
            self.console.print(f"    [red]✗[/] {escape(detail)}")
            raise DemoFailed(self.step, detail)
        self.console.print(f"    [green]✓[/] {escape(what)}")

    def wait_for(self, cond: Callable[[], bool], what: str) -> None:
        """Wait (at most :data:`WAIT_S`) until ``cond()``; then check it."""
        deadline = time.monotonic() + WAIT_S
        while not cond() and time.monotonic() < deadline:
            time.sleep(0.01)
        self.check(cond(), what)

    def keys(self) -> list[str]:
        """Every key of the queue on the server."""
        return sorted(self.r.scan_iter(match=self.q.keys.pattern(), count=1000))

    def snapshot(self, *, worker_running: bool = False) -> dict[str, Any]:
        """Every key of the queue with its value: equal means unchanged.

        A hash's or a set's content is taken (sorted), not its ``DUMP`` bytes: a large
        one is a hashtable whose serialised order follows its incremental rehash, which
        a read (a refused verb's own check) can advance; every other key's ``DUMP``.

        Args:
            worker_running: leave out what a running worker rewrites at any moment:
                the wake list, whose tokens an idle worker takes (hints, not state),
                and the worker registry (its record and the ``workers`` index), which
                its beat rewrites (under a CPU hog a beat fell between the two pictures).
        """
        if not worker_running:
            return {k: self._value(k) for k in self.keys()}
        k = self.q.keys
        records = k.base + KEY["WORKER"].suffix
        return {
            key: self._value(key)
            for key in self.keys()
            if key not in (k.wake, k.workers) and not key.startswith(records)
        }

    def _value(self, key: str) -> Any:
        kind = self.r.type(key)
        if kind == "hash":
            return sorted(self.r.hgetall(key).items())
        if kind == "set":
            return sorted(self.r.smembers(key))
        return self.r.dump(key)

    # ---- the walk -----------------------------------------------------------------

    def walk(self) -> None:
        """Run every step in order.

        Raises:
            DemoFailed: the first step that misbehaved.
        """
        q = self.q.name
        steps: list[tuple[str, str, Callable[[], None]]] = [
            ("enqueue a backlog", f"emq enqueue {q} JSON", self.enqueue_backlog),
            ("start a worker", f"emq worker MODULE:FUNCTION --queue {q}", self.start_worker),
            ("pause", f"emq pause {q}", self.pause),
            ("resume", f"emq resume {q}", self.resume),
            ("update progress", f"emq job progress {q} ID 50", self.progress),
            ("append and read logs", f"emq job log {q} ID LINE; emq job logs {q} ID", self.logs),
            ("fail a job into dead, reprocess it", f"emq job reprocess {q} ID", self.dead),
            ("drain", f"emq drain {q}", self.drain),
            ("pause and obliterate", f"emq obliterate {q} --budget 7", self.obliterate),
        ]
        for i, (title, cli_form, run) in enumerate(steps, 1):
            self.step = title
            self.console.print(
                f"[bold]{i}/{len(steps)} {escape(title)}[/]  [dim]{escape(cli_form)}[/]"
            )
            run()

    def enqueue_backlog(self) -> None:
        payloads = [{"image": i, "size": "800x600"} for i in range(BACKLOG)]
        ids = self.q.enqueue_many(payloads, name="resize")
        self.say(f"enqueue_many: {len(ids)} resize jobs, {ids[0]} .. {ids[-1]}")
        counts = self.q.counts()
        self.check(counts.pending == BACKLOG, f"{BACKLOG} jobs pending", got=counts)

    def start_worker(self) -> None:
        self.worker = Worker(self.q.name, handle, url=self.url, concurrency=2, lease_ms=5000)
        self.thread = threading.Thread(target=self.worker.run, name="emq-demo-worker")
        self.thread.start()
        self.check(self.worker.ready.wait(WAIT_S), "the worker is connected and serving")
        self.say(f"worker: concurrency 2, {int(JOB_S * 1000)} ms per job")
        self.wait_for(lambda: self.q.counts().completed >= 4, "the worker completes jobs")

    def pause(self) -> None:
        self.q.pause()
        self.say("pause: HSET meta paused 1 (a field; no set moves)")
        self.check(self.q.is_paused(), "the queue reports paused")
        self.wait_for(lambda: self.q.counts().active == 0, "jobs in flight finish")
        before = self.r.dump(self.q.keys.pending)
        counts = self.q.counts()
        claimed = self.q.claim(lease_ms=1000)
        self.check(claimed is None, "a claim answers empty", got=claimed)
        time.sleep(0.3)
        after = self.q.counts()
        self.check(0 < after.pending < BACKLOG, f"{after.pending} jobs wait in pending")
        self.check(
            self.r.dump(self.q.keys.pending) == before and after == counts,
            "the backlog is byte-for-byte intact and the worker claims nothing",
            got=(counts, after),
        )

    def resume(self) -> None:
        self.q.resume()
        self.say("resume: HDEL meta paused")
        self.check(not self.q.is_paused(), "the queue reports not paused")
        self.wait_for(
            lambda: self.q.counts().completed == BACKLOG,
            f"the worker serves the rest: {BACKLOG} completed",
        )
        counts = self.q.counts()
        self.check(counts.pending == 0 and counts.active == 0, "nothing left pending")

    def progress(self) -> None:
        job = self.q.enqueue({"report": "q3"}, name="report", delay_ms=600_000)
        self.report_job = job
        self.say(f"a report job {job} parked in the schedule (the worker leaves it)")
        with self.q.events() as stream:
            self.q.update_progress(job, 50)
            self.say(f"update_progress({job}, 50)")
            event = None
            deadline = time.monotonic() + WAIT_S
            while time.monotonic() < deadline:
                event = stream.get(timeout=0.5)
                if event is not None and event.name == "progress":
                    break
        self.check(
            event is not None
            and event.name == "progress"
            and event.job == job
            and event.get("progress") == 50,
            'the subscriber receives {"event":"progress","job":id,"progress":50}',
            got=event,
        )
        stored = self.r.hget(self.q.keys.job(job), "progress")
        self.check(stored == "50", "the row's progress field is 50", got=stored)

    def logs(self) -> None:
        job = self.report_job
        for page in (1, 2):
            self.q.add_log(job, f"rendered page {page}")
        kept = self.q.add_log(job, "rendered page 3", keep=2)
        self.say("add_log x3, the last with keep=2")
        self.check(kept == 2, "two lines kept", got=kept)
        lines = self.q.get_job_logs(job)
        want = ["rendered page 2", "rendered page 3"]
        self.check(lines == want, "get_job_logs reads the newest two in order", got=lines)

    def dead(self) -> None:
        job = self.q.enqueue({"invoice": 7, "total": -5}, name="invoice", max_attempts=1)
        self.say(f"an invoice job {job} with a negative total, max_attempts=1")
        self.wait_for(lambda: self.q.job_state(job) == "dead", "the handler fails it into dead")
        error = self.r.hget(self.q.keys.job(job), "last_error") or ""
        self.check("total is negative" in error, "the row keeps the error", got=error[:80])
        logs = self.q.get_job_logs(job)
        self.check(logs == ["checking invoice 7"], "the handler's log line is kept", got=logs)

        before = self.snapshot(worker_running=True)
        try:
            self.q.reprocess_job(self.report_job)
            refused: Refused | None = None
        except Refused as exc:
            refused = exc
        self.check(
            refused is not None
            and refused.reason == "not_dead"
            and self.snapshot(worker_running=True) == before,
            "reprocess of a job that is not dead: refused not_dead, nothing changed",
            got=refused,
        )
        self.q.update_data(job, {"invoice": 7, "total": 5})
        self.say("update_data: the total fixed; reprocess_job: dead -> pending")
        self.q.reprocess_job(job)
        self.wait_for(
            lambda: self.q.job_state(job) is None, "the worker completes the reprocessed job"
        )
        counts = self.q.counts()
        self.check(
            counts.dead == 0 and counts.completed == BACKLOG + 1,
            "dead is empty, the completion counted",
            got=counts,
        )

    def drain(self) -> None:
        self.q.pause()
        ids = self.q.enqueue_many(
            [{"image": i} for i in range(DRAIN_BACKLOG)], name="resize", group="tenant-a"
        )
        self.say(f"paused, then {len(ids)} jobs enqueued into the lane tenant-a")
        self.check(self.q.counts().pending == DRAIN_BACKLOG, f"{DRAIN_BACKLOG} pending")
        drained = self.q.drain()
        self.say(f"drain() -> {drained}")
        counts = self.q.counts()
        self.check(drained == DRAIN_BACKLOG, f"{DRAIN_BACKLOG} jobs drained", got=drained)
        self.check(
            counts.pending == 0 and counts.scheduled == 1,
            "pending is empty; the scheduled report job survives",
            got=counts,
        )
        left = sum(self.r.exists(self.q.keys.job(j)) for j in ids)
        self.check(left == 0, "every drained row is gone", got=left)

    def obliterate(self) -> None:
        self.stop_worker()
        self.check(self.q.counts().active == 0, "the worker stopped; nothing in flight")
        self.q.enqueue_many([{"n": i} for i in range(20)])
        self.q.enqueue_many([{"n": i} for i in range(10)], group="tenant-b")
        c = self.q.counts()
        total = c.pending + c.active + c.scheduled + c.dead
        self.say(f"{total} jobs on the queue (flat, a lane, the scheduled report)")

        self.q.resume()
        before = self.snapshot()
        try:
            self.q.obliterate(budget=OBLITERATE_BUDGET)
            refused = False
        except QueueNotPaused:
            refused = True
        self.check(
            refused and self.snapshot() == before,
            "obliterate of a live queue: refused not_paused, nothing changed",
        )
        self.q.pause()
        calls = 0
        done = False
        while not done and calls < 1000:
            done = self.q.obliterate(budget=OBLITERATE_BUDGET)
            calls += 1
            self.say(f"obliterate(budget={OBLITERATE_BUDGET}) call {calls}: "
                     + ("done" if done else "more"))  # fmt: skip
        self.check(done and calls > 1, f"looped on more: done after {calls} calls")
        left = self.keys()
        self.check(not left, f"no key emq:{{{self.q.name}}}:* is left", got=left[:5])

    # ---- teardown -----------------------------------------------------------------

    def stop_worker(self) -> None:
        """Stop the worker (gracefully) if it runs."""
        if self.worker is not None:
            self.worker.stop(timeout=WAIT_S)
            stats = self.worker.stats
            self.say(
                f"worker stopped: {stats.completed} completed, {stats.dead} dead, "
                f"{stats.retried} retried"
            )
            self.worker = None
        if self.thread is not None:
            self.thread.join(WAIT_S)
            self.thread = None

    def close(self, *, clean: bool) -> None:
        """Stop the worker, obliterate what is left when ``clean``, close connections."""
        if self.worker is not None:
            self.worker.stop(timeout=WAIT_S, force=True)
            self.worker = None
        if self.thread is not None:
            self.thread.join(WAIT_S)
        if clean:
            with contextlib.suppress(Exception):
                self.q.pause()
                while not self.q.obliterate(force=True):
                    pass
        self.q.close()
        self.r.close()


def run_demo(
    url: str | None = None, queue: str | None = None, console: Console | None = None
) -> float:
    """Walk the runbook; return the seconds it took.

    Args:
        url: the server to use; ``None`` starts a private embedded server (never the
            default address) and stops it at the end.
        queue: the queue name (default a fresh ``demo-<hex>``); it must have no keys.
        console: where to print the steps (stdout by default).

    Returns:
        The wall time of the walk in seconds.

    Raises:
        DemoFailed: a step did not behave as the runbook says.
        ServerUnavailable: no server at ``url``, or none could be started.
    """
    out = console or Console(highlight=False)
    started = time.monotonic()
    server = None if url else EmbeddedServer().start()
    target = url or (server.url if server else "")
    name = queue or f"demo-{secrets.token_hex(4)}"
    where = "a private embedded server" if server else "the server you gave"
    out.print(
        f"emq demo: the operator runbook on queue {escape(name)} at {escape(target)} ({where})"
    )
    book = Runbook(target, name, out)
    owned = False
    try:
        book.check(not book.keys(), f"queue {name} has no keys yet, so the demo owns it")
        owned = True
        book.walk()
    finally:
        # Only a queue the demo made is cleaned up, and only when a step failed midway.
        book.close(clean=owned and bool(book.keys()))
        if server is not None:
            server.stop()
    took = time.monotonic() - started
    out.print(f"[bold green]runbook complete[/]: every step behaved as described ({took:.1f} s)")
    return took
