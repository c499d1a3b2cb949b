"""What a job costs the server: scripts vs native vs a raw list loop, in one run.

For the lifecycle enqueue -> claim -> complete of no-op jobs, each row runs the same
number of jobs on one private server (an ``EmbeddedServer`` with echomq's module
loaded) under ``executor="scripts"`` (the scripts by ``FCALL`` of their Functions form,
the default on Redis 7), ``eval`` (the same scripts by ``EVALSHA``, ``EMQ_FUNCTIONS=0``:
a server without Functions, and the cluster), ``executor="native"`` and, as the floor,
a raw redis-py loop that pushes and pops the same number of items on a list. Workloads:

- ``one by one``: ``enqueue``, ``claim``, ``complete``, one call each (the raw loop:
  ``LPUSH`` then ``BRPOP``, one round trip each);
- ``batches of B``: ``enqueue_many`` of B jobs, then the worker's own round trip
  (``worker.plans.complete_and_claim``: the last batch's completions pipelined with the
  next claim of B, as a worker does), so every job is claimed and completed in batches
  (the raw loop: ``LPUSH`` of B items, then ``RPOP key B``).

Per job it prints:

- ``own us``: the server's time in the commands the client sent, from ``INFO
  commandstats`` (``usec`` of ``fcall`` or ``evalsha`` and the pause gate's ``hexists`` for scripts,
  of the ``emq.*`` commands for native, of ``lpush``/``brpop``/``rpop`` for raw; a
  script's or a module command's time includes the commands it runs);
- ``cpu us``: the server process's CPU (``INFO cpu``, user + sys), which also counts
  the sockets, the event loop and the replies: what one primary really spends;
- ``sent``: the commands the client sent; ``cmds``: every command the server ran,
  those run inside a script or a module command included (``INFO commandstats``
  ``calls``; the ``INFO`` calls of the bench itself left out).

Then the ratios scripts/eval (what Functions save), native/scripts, scripts/raw and
native/raw of both times. Each figure is the
lowest of ``--repeat`` runs (``--median`` for the median), the three kinds interleaved
so that the machine's drift hits them alike: on a machine shared with other work, other
processes only ever add to a run's time, so the lowest is the closest to the cost.
``--detail`` also prints, per kind, the calls and usec per job of each command the
server ran (what a script spends its time on).

``--callgrind`` counts the server's instructions per job instead (valgrind's callgrind,
one private server per kind, the same workloads after a warm-up): what no neighbour on
a shared machine can disturb, and the figure to quote for native/scripts.

``--functions`` measures, under callgrind, the fixed cost alone (the figures that led
to the Functions form, kept to compare): per call, an ``EVALSHA`` of ``return 1``
against an ``FCALL`` of a function returning 1, and an ``EVALSHA`` of each lifecycle
script's prologue (its header, ``local B = KEYS[1]`` and the lib helpers spliced in,
then ``return 1``) against an ``FCALL`` of a library that defines the same helpers
once, at load. The
second pair is an upper bound of the saving: a real port would pass the queue's base
to the helpers (they read ``B`` as an upvalue), which costs a little back.

Run: ``.venv/bin/python bench/server_cost.py`` (about a minute; ``--jobs``,
``--batch``, ``--repeat``), or ``... --callgrind`` (about 20 s; needs valgrind), or
``... --functions`` (about a minute; needs valgrind).
"""

from __future__ import annotations

import argparse
import itertools
import os
import sys
from collections.abc import Callable
from importlib import resources
from typing import Any

import redis

from _common import Callgrind, median, report
from echomq import Queue, native
from echomq.embedded import EmbeddedServer
from echomq.scripts import _INCLUDE as INCLUDE
from echomq.scripts import script
from echomq.worker.plans import complete_and_claim

KINDS = ("scripts", "eval", "native", "raw")
#: The commands each kind sends itself (their usec include what runs inside them).
SENT = {
    "scripts": ("fcall", "hexists"),
    "eval": ("evalsha", "hexists"),
    "native": ("emq.enqueue", "emq.claim", "emq.complete"),
    "raw": ("lpush", "brpop", "rpop"),
}
_names = itertools.count()

Stats = dict[str, tuple[int, int]]


def stats(r: redis.Redis) -> tuple[Stats, float]:
    """Per command (calls, usec), and the server's CPU seconds so far."""
    cs = r.info("commandstats")
    per = {k.removeprefix("cmdstat_"): (int(v["calls"]), int(v["usec"])) for k, v in cs.items()}
    cpu = r.info("cpu")
    return per, float(cpu["used_cpu_user"]) + float(cpu["used_cpu_sys"])


def queue(kind: str, name: str, url: str) -> Queue:
    """A queue of ``kind`` (``eval``: the scripts sent by ``EVALSHA``)."""
    old = os.environ.get("EMQ_FUNCTIONS")
    os.environ["EMQ_FUNCTIONS"] = "0" if kind == "eval" else "1"
    try:
        q = Queue(name, url=url, executor="native" if kind == "native" else "scripts")
    finally:
        if old is None:
            del os.environ["EMQ_FUNCTIONS"]
        else:
            os.environ["EMQ_FUNCTIONS"] = old
    q.counts()  # the fence, the executor's MODULE LIST and the scripts
    assert q.ctx.executor.native is (kind == "native")
    assert q.ctx.executor.fcall is (kind != "eval")
    return q


def ratios(label: str, a: dict[str, float], *more: dict[str, float]) -> list[list[Any]]:
    """The ratio rows of one workload: per pair, each figure's ratio."""
    pairs = (("scripts", "eval"), ("native", "scripts"), ("scripts", "raw"), ("native", "raw"))
    figs = (a, *more)
    return [[label, f"{x}/{y}", *(f[x] / f[y] for f in figs)] for x, y in pairs]


def one_by_one(q: Queue, n: int) -> None:
    for _ in range(n):
        jid = q.enqueue(None)
        got = q.claim()
        assert got is not None and got.id == jid
        q.complete(got.id, got.token)


def batched(q: Queue, n: int, batch: int) -> None:
    done: list[tuple[str, int]] = []
    for _ in range(n // batch):
        q.enqueue_many([None] * batch)
        got = q.runner.drive(complete_and_claim(q.ctx, done, batch, 30000, 0))
        assert len(got.claimed) == batch and not got.gone and not got.stale
        done = [(c.id, c.token) for c in got.claimed]
    got = q.runner.drive(complete_and_claim(q.ctx, done, 0, 30000, 0))
    assert not got.gone and not got.stale


def raw(r: redis.Redis, n: int, batch: int) -> None:
    key = f"bench-raw-{os.getpid()}-{next(_names)}"
    if batch == 1:
        for _ in range(n):
            r.lpush(key, "x")
            r.brpop([key], 1)
        return
    items = ["x"] * batch
    for _ in range(n // batch):
        r.lpush(key, *items)
        r.rpop(key, batch)


Figures = tuple[float, float, float, float]  # own us, cpu us, sent, cmds (per job)


def measure(r: redis.Redis, kind: str, run: Callable[[], None], n: int, detail: Stats) -> Figures:
    before, cpu0 = stats(r)
    run()
    after, cpu1 = stats(r)
    usec = sent = calls = 0
    for name, (c1, u1) in after.items():
        c0, u0 = before.get(name, (0, 0))
        if name == "info":
            continue
        calls += c1 - c0
        if name in SENT[kind]:
            usec, sent = usec + u1 - u0, sent + c1 - c0
        dc, du = detail.get(name, (0, 0))
        detail[name] = (dc + c1 - c0, du + u1 - u0)
    return usec / n, (cpu1 - cpu0) * 1e6 / n, sent / n, calls / n


def instructions(jobs: int, batched_jobs: int, batch: int) -> None:
    """Ir per job of each workload and kind, each kind on its own server under callgrind."""
    rows: list[list[Any]] = [["workload", "kind", "Ir/job"]]
    for label, n, b in (("one by one", jobs, 1), (f"batches of {batch}", batched_jobs, batch)):
        ir: dict[str, float] = {}
        for kind in KINDS:
            with Callgrind(module=kind == "native") as cg:
                r = redis.Redis.from_url(cg.url)
                if kind == "raw":
                    raw(r, n, b)  # the warm-up
                    cg.take()
                    raw(r, n, b)
                else:
                    with queue(kind, f"bench-cost-cg-{kind}", cg.url) as q:
                        for _ in range(2):  # a warm-up, then the run counted
                            cg.take()
                            if b == 1:
                                one_by_one(q, n)
                            else:
                                batched(q, n, b)
                ir[kind] = cg.take() / n
                r.close()
        for kind in KINDS:
            rows.append([label, kind, ir[kind]])
        rows += ratios(label, ir)
    report(rows)


def prologue(name: str) -> str:
    """The part of ``name``'s script body that runs before its own work: the first
    line, the header, ``local B = KEYS[1]`` and the lib helpers spliced in."""
    body = script(name).body
    raw = (resources.files("echomq") / "lua" / f"{name}.lua").read_text(encoding="utf-8")
    last = list(INCLUDE.finditer(raw))[-1]
    after = raw[last.end() :]
    opened = raw[: last.start()].rstrip("\n").rsplit("\n", 1)[-1]
    if opened.startswith("local function "):
        # a lib spliced inside a function made only when needed (claim's limits_lib):
        # that function's definition is part of the prologue, its body is not run
        after = after[after.index("\nend\n") + len("\nend\n") :]
    first = next(line for line in after.splitlines() if line.strip())
    return body[: body.index(first)]


def _library(lib: str, helpers: str) -> str:
    # loaded once: no KEYS/ARGV then, so the prologue's top-level reads get a stand-in
    helpers = helpers.replace("KEYS[", "({''})[").replace("ARGV[", "({''})[")
    return (
        f"#!lua name={lib}\n{helpers}\nredis.register_function{{function_name='{lib}', "
        "callback=function(keys, args) return 1 end, flags={'allow-oom'}}\n"
    )


def functions(calls: int) -> None:
    """Ir per call: EVALSHA against FCALL, bare and with each lifecycle prologue."""
    rows: list[list[Any]] = [["body", "EVALSHA Ir/call", "FCALL Ir/call", "saved", "FCALL/EVALSHA"]]
    with Callgrind(module=False) as cg:
        r: Any = redis.Redis.from_url(cg.url)  # execute_command is untyped
        if int(r.info("server")["redis_version"].split(".")[0]) < 7:
            raise SystemExit("--functions needs a server with Functions (Redis 7+)")

        def per_call(*cmd: Any) -> float:
            for _ in range(50):  # the warm-up: compiled, caches filled
                r.execute_command(*cmd)
            cg.take()
            for _ in range(calls):
                r.execute_command(*cmd)
            return cg.take() / calls

        bodies = [("return 1", "", "#!lua flags=allow-oom\n")]
        for name in ("enqueue", "claim", "complete"):
            text = prologue(name)
            helpers = text.split("\n", 1)[1]  # without the #!lua line
            bodies.append((f"{name}'s prologue", helpers, text))
        for i, (label, helpers, text) in enumerate(bodies):
            sha = r.script_load(text + "\nreturn 1\n")
            lib = f"emqbench{i}"
            r.execute_command("FUNCTION", "LOAD", "REPLACE", _library(lib, helpers))
            ev = per_call("EVALSHA", sha, 1, "emq:{bench}:")
            fc = per_call("FCALL", lib, 1, "emq:{bench}:")
            rows.append([label, ev, fc, ev - fc, fc / ev])
        r.close()
    report(rows)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=1000, help="jobs per one-by-one run")
    ap.add_argument("--batch", type=int, default=100, help="jobs per batch")
    ap.add_argument("--batched-jobs", type=int, default=10000, help="jobs per batched run")
    ap.add_argument("--repeat", type=int, default=7, help="runs per figure (the lowest)")
    ap.add_argument("--median", action="store_true", help="the median of the runs instead")
    ap.add_argument("--detail", action="store_true", help="per-command calls and usec per job")
    ap.add_argument("--callgrind", action="store_true", help="count instructions (valgrind)")
    ap.add_argument("--functions", action="store_true", help="EVALSHA against FCALL (valgrind)")
    args = ap.parse_args()
    if args.functions:
        functions(500)
        return
    if args.callgrind:
        if native.build(quiet=True) is None:
            sys.exit("bench/server_cost.py: the native module did not build (make -C native)")
        instructions(min(args.jobs, 400), min(args.batched_jobs, 3000), args.batch)
        return
    pick = median if args.median else min
    url = os.environ.get("EMQ_URL")
    srv: EmbeddedServer | None = None
    if url is None:
        if native.build(quiet=True) is None:
            sys.exit("bench/server_cost.py: the native module did not build (make -C native)")
        srv = EmbeddedServer(module=True).start()
        url = srv.url
    try:
        r = redis.Redis.from_url(url)
        rows: list[list[Any]] = [
            ["workload", "kind", "own us/job", "cpu us/job", "sent/job", "cmds/job"]
        ]
        details: list[tuple[str, str, int, Stats]] = []
        for label, n, batch in (
            ("one by one", args.jobs, 1),
            (f"batches of {args.batch}", args.batched_jobs, args.batch),
        ):
            got: dict[str, list[Figures]] = {k: [] for k in KINDS}
            detail: dict[str, Stats] = {k: {} for k in KINDS}
            for _ in range(args.repeat):
                for kind in KINDS:
                    if kind == "raw":
                        work: Callable[[], None] = lambda n=n, b=batch: raw(r, n, b)  # noqa: E731
                        got[kind].append(measure(r, kind, work, n, detail[kind]))
                        continue
                    name = f"bench-cost-{os.getpid()}-{next(_names)}"
                    with queue(kind, name, url) as q:
                        q.enqueue_many([None])
                        q.complete_many([(c.id, c.token) for c in q.claim_many(1)])
                        work = (
                            (lambda q=q, n=n: one_by_one(q, n))
                            if batch == 1
                            else (lambda q=q, n=n, b=batch: batched(q, n, b))
                        )
                        got[kind].append(measure(r, kind, work, n, detail[kind]))
            for kind in KINDS:
                rows.append([label, kind, *(pick(c) for c in zip(*got[kind]))])
                details.append((label, kind, n * args.repeat, detail[kind]))
            own = {k: pick(x[0] for x in got[k]) for k in KINDS}
            cpu = {k: pick(x[1] for x in got[k]) for k in KINDS}
            rows += [[*row, "", ""] for row in ratios(label, own, cpu)]
        report(rows)
        if args.detail:
            for label, kind, jobs, per in details:
                print(f"\n{label}, {kind}: calls/job and usec/job of each command")
                ranked = sorted(per.items(), key=lambda kv: -kv[1][1])
                report(
                    [["command", "calls/job", "usec/job"]]
                    + [[c, k / jobs, u / jobs] for c, (k, u) in ranked if k]
                )
        r.close()
    finally:
        if srv is not None:
            srv.stop()


if __name__ == "__main__":
    main()
