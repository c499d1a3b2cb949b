"""What flows cost and how fast a parent follows its children (issue 27's figures).

Three parts:

- ``fan-in``: one flow of 1 parent and ``--children`` children (default 1,000), served
  by real workers (default config, concurrency 10): the time from the last child's
  handler returning to the parent's handler starting, with the children in the parent's
  queue (resolved inline by the completion itself) and in another queue (through the
  outbox and the relay the worker runs right after that settle). The median and the
  worst of ``--repeat`` runs. Targets: 50 ms in one queue, 250 ms across queues.
- ``overhead`` (``--callgrind``): the server's instructions per child of a flow against
  a plain job, for the whole life (enqueue -> claim -> complete, one by one; the
  flow's parent's own enqueue, claim and completion counted in, spread over its
  children), scripts and native. Target: under 1.5x.
- ``leftovers``: ``--flows`` flows (default 10,000) of 10 children each (110,000 jobs)
  enqueued, every job claimed and completed in batches (the worker's batch completion),
  then every key under the queue's base counted: only the queue's own bookkeeping
  (metrics, seq, settled tombstones, claim records, wake) may remain; no row, no
  :deps/:kids/:kidfails, empty waiting/outbox.

Run: ``.venv/bin/python bench/flows.py`` (fan-in and leftovers, about a minute), with
``--callgrind`` for the overhead (about a minute more; needs valgrind).
"""

from __future__ import annotations

import argparse
import statistics
import threading
import time
from typing import Any

from _common import Callgrind, bench_server, report
from echomq import Flow, Queue, Worker, native
from echomq.worker.config import WorkerConfig

BOOKKEEPING = ("metrics:", "seq", "settled", "claimreq", "wake", "version")


def fan_in(url: str, children: int, cross: bool, tag: str) -> float:
    """Seconds from the last child's return to the parent's start."""
    qa = Queue(f"bench-flow-{tag}-a", url=url)
    qb = Queue(f"bench-flow-{tag}-b", url=url) if cross else qa
    marks: dict[str, float] = {}
    done = threading.Event()
    last_child = [0.0]
    lock = threading.Lock()

    def handle(job: Any) -> Any:
        if job.data == "parent":
            marks["parent"] = time.perf_counter()
            done.set()
            return None
        with lock:
            last_child[0] = max(last_child[0], time.perf_counter())
        return job.data

    ids = qa.enqueue_flow(
        Flow(payload="parent", children=[Flow(qb.name, i) for i in range(children)])
    )
    cfg = WorkerConfig(concurrency=10)
    workers = [Worker(qa, handle, config=cfg)]
    if cross:
        workers.append(Worker(qb, handle, config=cfg))
    threads = [threading.Thread(target=w.run, daemon=True) for w in workers]
    for t in threads:
        t.start()
    assert done.wait(120), "the parent never ran"
    for w in workers:
        w.stop(timeout=10)
    for t in threads:
        t.join(10)
    assert qa.job_state(ids.id) is None
    for q in {qa, qb}:
        q.close()
    return marks["parent"] - last_child[0]


def overhead(n: int) -> list[list[Any]]:
    """Ir per job of plain jobs against flow children (+ their parent's share)."""
    rows: list[list[Any]] = [["executor", "plain Ir/job", "flow child Ir/job", "ratio"]]
    kinds = ["scripts", "native"] if native.build(quiet=True) else ["scripts"]
    for executor in kinds:
        with (
            Callgrind(module=executor == "native") as cg,
            Queue("bench-flow-cg", url=cg.url, executor=executor) as q,
        ):
            q.counts()
            for _ in range(200):  # warm: scripts loaded, sets made
                q.enqueue(1)
                c = q.claim()
                assert c is not None
                q.complete(c.id, c.token)
            cg.take()
            for _ in range(n):
                q.enqueue(1)
            for _ in range(n):
                c = q.claim()
                assert c is not None
                q.complete(c.id, c.token)
            plain = cg.take() / n
            q.enqueue_flow(Flow(payload="p", children=[Flow(payload=1) for _ in range(n)]))
            for _ in range(n + 1):
                c = q.claim()
                assert c is not None
                q.complete(c.id, c.token, result=1)
            flow = cg.take() / n
        rows.append([executor, int(plain), int(flow), f"{flow / plain:.3f}"])
    return rows


def leftovers(url: str, flows: int) -> tuple[int, list[str]]:
    """Enqueue `flows` flows of 10 and run them all; the keys left but bookkeeping."""
    q = Queue("bench-flow-left", url=url)
    for _ in range(flows):
        q.enqueue_flow(Flow(payload="p", children=[Flow(payload=i) for i in range(10)]))
    ran = 0
    while True:
        got = q.claim_many(500, lease_ms=60_000)
        if not got:
            break
        assert q.complete_many([(c.id, c.token) for c in got]) == []
        ran += len(got)
    base = q.keys.base
    left = sorted(
        (k.decode() if isinstance(k, bytes) else k).removeprefix(base)
        for k in q.client.scan_iter(match=q.keys.pattern(), count=1000)
    )
    q.close()
    return ran, [k for k in left if not k.startswith(BOOKKEEPING)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--children", type=int, default=1000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--flows", type=int, default=10_000)
    ap.add_argument("--callgrind", action="store_true", help="the overhead in Ir (valgrind)")
    args = ap.parse_args()
    with bench_server() as url:
        rows: list[list[Any]] = [["fan-in", "median ms", "worst ms", "target ms"]]
        for cross, target in ((False, 50), (True, 250)):
            got = [
                fan_in(url, args.children, cross, f"{'x' if cross else 's'}{i}") * 1000
                for i in range(args.repeat)
            ]
            name = "across queues" if cross else "one queue"
            rows.append([name, f"{statistics.median(got):.1f}", f"{max(got):.1f}", target])
        report(rows)
        ran, left = leftovers(url, args.flows)
        print(
            f"\nleftovers: {args.flows} flows x 10 children: {ran} jobs ran; keys left "
            f"besides bookkeeping: {len(left)} {left[:10]}"
        )
    if args.callgrind:
        print()
        report(overhead(min(args.children, 1000)))


if __name__ == "__main__":
    main()
