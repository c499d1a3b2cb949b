"""Where an idle worker's enqueue-to-start latency goes, against the raw loop's.

The harness's latency figure (``bench/peers.py``: a job every 20 ms to an idle worker,
its start minus its enqueue call's start) split into steps. Per kind, on a private
server, a worker process waits idle and a producer enqueues ``--count`` jobs
``--gap`` seconds apart, each carrying the time its enqueue call started
(``time.monotonic``, one clock for every process of the machine). Kinds:

- ``scripts``, ``native``: an echomq worker (``Worker``, ``async def`` handler,
  concurrency 10) on a queue of that executor; a sync ``Queue.enqueue`` producer;
- ``raw``: the raw loop (``LPUSH`` of a JSON message; a worker blocked in ``BRPOP``
  that decodes it and calls the job), as the harness's ``redis-py-raw`` row.

Per kind it prints the medians, in ms after the enqueue call started, of:

- ``enqueue back``: the producer's call returned;
- ``token read``: (echomq) the worker read its wait's ``BLPOP`` reply, the first of the
  four the wake brings (the token, then ``MULTI``'s, the claim's ``QUEUED`` and
  ``EXEC``'s with the claimed jobs);
- ``jobs read``: (echomq) it read the other three;
- ``start``: the handler started (and its p99);

and the server's own time per command at p50, cold as a job every 20 ms finds it
(``INFO latencystats``): ``enqueue us`` (``FCALL``: the enqueue and, as many, the
completion; ``EMQ.ENQUEUE`` native; ``LPUSH`` raw), ``claim us`` (the ``EXEC`` of the
claim behind the wait) and ``wake us`` (``BLPOP``/``BRPOP``: serving the blocked wait).
The kinds are interleaved over ``--repeat`` rounds; each figure is the median over
the rounds of each round's median. The marks wrap a method of the worker's held
connection (``HeldConnection.read``): a few microseconds each.

Run: ``.venv/bin/python bench/wake_latency.py`` (about 10 s a kind and round;
``--kinds``, ``--count``, ``--gap``, ``--repeat``).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

import redis

import _common  # also puts src/ on the path
from echomq import JobContext, Queue, Worker
from echomq.embedded import EmbeddedServer

QUEUE, RAW_KEY = "wake", "raw:wake"
KINDS = ("scripts", "native", "raw")
#: The server's columns: the first command of each list the run used.
SERVER = {
    "enqueue us": ("emq.enqueue", "fcall", "lpush"),
    "claim us": ("exec",),
    "wake us": ("blpop", "brpop"),
}


def run_worker(url: str, kind: str, out: str) -> None:
    """The worker process: serve until SIGTERM, then write its marks to ``out``."""
    marks: list[list[Any]] = []
    if kind == "raw":
        r = redis.Redis.from_url(url)

        def stop(*_: object) -> None:
            with open(out, "w") as fh:
                json.dump(marks, fh)
            os._exit(0)

        signal.signal(signal.SIGTERM, stop)
        while True:
            got = r.brpop([RAW_KEY])
            msg = json.loads(got[1])
            if msg["a"]:
                marks.append(["start", time.monotonic(), msg["a"][0]])
    from echomq.transport import aio

    read = aio.HeldConnection.read

    async def marked(self: Any, n: int) -> list[Any]:
        got = await read(self, n)
        marks.append([f"read{n}", time.monotonic()])
        return got

    aio.HeldConnection.read = marked  # type: ignore[method-assign]

    async def handle(job: JobContext) -> None:
        ts = job.data.get("ts")
        if ts:
            marks.append(["start", time.monotonic(), ts])

    Worker(Queue(QUEUE, url=url, executor=kind), handle, concurrency=10).run()
    with open(out, "w") as fh:
        json.dump(marks, fh)


def produce(url: str, kind: str, count: int, gap: float) -> list[tuple[float, float]]:
    """Enqueue ``count`` jobs ``gap`` apart; (call start, call end) of each."""
    if kind == "raw":
        r = redis.Redis.from_url(url)

        def enqueue(ts: float) -> None:
            r.lpush(RAW_KEY, json.dumps({"f": "noop", "a": [ts] if ts else []}))
    else:
        q = Queue(QUEUE, url=url, executor=kind)

        def enqueue(ts: float) -> None:
            q.enqueue({"ts": ts} if ts else {})

    for _ in range(20):  # warm-up, not measured
        enqueue(0.0)
        time.sleep(gap)
    calls = []
    base = time.monotonic()
    for i in range(count):
        pause = base + i * gap - time.monotonic()
        if pause > 0:
            time.sleep(pause)
        t = time.monotonic()
        enqueue(t)
        calls.append((t, time.monotonic()))
    time.sleep(0.3)
    return calls


def one(kind: str, count: int, gap: float) -> dict[str, float]:
    with EmbeddedServer(module=kind == "native") as srv, tempfile.TemporaryDirectory() as tmp:
        r = redis.Redis.from_url(srv.url, decode_responses=True)
        r.config_set("latency-tracking", "yes")
        out = os.path.join(tmp, "marks.json")
        cmd = [sys.executable, __file__, "--worker", srv.url, kind, out]
        worker = subprocess.Popen(cmd)
        try:
            _common.wait_blocked(r, kind)
            r.config_resetstat()
            calls = produce(srv.url, kind, count, gap)
            stats = r.info("latencystats")
        finally:
            worker.send_signal(signal.SIGTERM)
            worker.wait(30)
        with open(out) as fh:
            marks = json.load(fh)
    return steps(marks, calls, stats)


def steps(marks: list[list[Any]], calls: list[tuple[float, float]], stats: Any) -> dict[str, float]:
    back = dict(calls)
    reads = [(m[0], m[1]) for m in marks if m[0] != "start"]
    got: dict[str, list[float]] = {"enqueue back": [], "token read": [], "jobs read": []}
    starts = []
    for _, at, ts in (m for m in marks if m[0] == "start"):
        starts.append(at - ts)
        if ts in back:
            got["enqueue back"].append(back[ts] - ts)
        first = {name: t for name, t in reversed(reads) if ts < t <= at}
        for name, label in (("read1", "token read"), ("read3", "jobs read")):
            if name in first:
                got[label].append(first[name] - ts)
    row = {k: statistics.median(v) * 1000 for k, v in got.items() if v}
    starts.sort()
    row["start"] = statistics.median(starts) * 1000
    row["start p99"] = starts[int(len(starts) * 0.99)] * 1000
    p50 = {
        key.removeprefix("latency_percentiles_usec_"): float(v["p50"] if isinstance(v, dict) else v)
        for key, v in stats.items()
    }
    for label, names in SERVER.items():
        for name in names:
            if name in p50:
                row[label] = p50[name]
                break
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--kinds", default=",".join(KINDS))
    a = _common.wake_args(ap)
    if a.worker:
        run_worker(*a.worker)
        return
    kinds = a.kinds.split(",")
    rounds: dict[str, list[dict[str, float]]] = {k: [] for k in kinds}
    for _ in range(a.repeat):
        for kind in kinds:
            rounds[kind].append(one(kind, a.count, a.gap))
    cols = ["enqueue back", "token read", "jobs read", "start", "start p99"]
    cols += list(SERVER)
    print(f"{'kind':8s}" + "".join(f"{c:>14s}" for c in cols))
    for kind, rows in rounds.items():
        cells = []
        for c in cols:
            vals = [r[c] for r in rows if c in r]
            cells.append(f"{statistics.median(vals):14.3f}" if vals else f"{'':>14s}")
        print(f"{kind:8s}" + "".join(cells))
    raw = rounds.get("raw")
    if raw:
        base = statistics.median(r["start"] for r in raw)
        for kind, rows in rounds.items():
            if kind != "raw":
                ratio = statistics.median(r["start"] for r in rows) / base
                print(f"start p50 {kind} / raw: {ratio:.2f}")


if __name__ == "__main__":
    main()
