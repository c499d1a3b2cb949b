"""The instructions of the pieces of the worker's per-job and per-turn work, each alone.

Each case runs a statement in a loop in a fresh Python under valgrind's callgrind, once
N/10 times and once N times; the difference over the difference is one run's cost
(startup and imports cancel out). No server: the replies are made up. It shows where
``bench/plain_instructions.py``'s instructions per job go (docs/performance.md, "The
worker's instructions per job").

Run: ``.venv/bin/python bench/worker_pieces.py`` (about 5 minutes on a quiet machine;
needs valgrind; ``--only json`` for the pieces whose name holds the text);
``--src ../main/src`` counts another checkout's pieces (those it has).
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
from pathlib import Path

from _common import counted, report

SRC = str(Path(__file__).resolve().parent.parent / "src")

SETUP = """
import asyncio, json, sys
sys.path.insert(0, sys.argv[1])
from echomq import lifecycle, registry
from echomq.context import Context
from echomq.ids import IdMinter
from echomq.keyspace import Keyspace
from echomq.replies import text
ctx = Context(Keyspace("q"))
reply = []  # a claim's reply of 10 jobs, as the runner hands it over
for i in range(10):
    reply += [f"0192abcd-{i:04d}-7000-8000-000000000000", '{"n":%d}' % i, "1", "", ""]
raw = [x.encode() for x in reply]  # the same, as the client reads it
payload = '{"n":1234}'
minter = IdMinter()
held = [(minter.mint(), 1) for _ in range(100)]
loop = asyncio.new_event_loop()
async def noop():
    return None
async def ten_tasks():
    for _ in range(10):
        loop.create_task(noop())
    await asyncio.sleep(0)
async def step():
    await asyncio.sleep(0)
async def wait_one():
    f = loop.create_future()
    loop.call_soon(f.set_result, None)
    await asyncio.wait([f], return_when=asyncio.FIRST_COMPLETED)
async def await_one():
    f = loop.create_future()
    loop.call_soon(f.set_result, None)
    await f
"""

#: name -> (statement, runs, what one run is)
CASES = {
    "decode a claim of 10 jobs": ("lifecycle.decode_claimed(ctx, reply)", 2000, 10),
    "json.loads of a small payload": ("json.loads(payload)", 20000, 1),
    "the claim decoder's JSON read": ("lifecycle.claiming._json_loads(payload)", 20000, 1),
    "replies.text of a 10-job claim reply": ("text(raw)", 2000, 10),
    "10 tasks of a no-op coroutine (less one loop step)": (
        "loop.run_until_complete(ten_tasks())",
        3000,
        10,
    ),
    "one loop step (subtracted above)": ("loop.run_until_complete(step())", 3000, 1),
    "asyncio.wait on one future": ("loop.run_until_complete(wait_one())", 3000, 1),
    "awaiting the future itself": ("loop.run_until_complete(await_one())", 3000, 1),
    "extend_op, 100 held jobs, checked": ("lifecycle.extend_op(ctx, held, 30000, 60000)", 300, 100),
    "extend_op, 100 held jobs, from_claim": (
        "lifecycle.extend_op(ctx, held, 30000, 60000, from_claim=True)",
        300,
        100,
    ),
    "registry.beat_op, 100 held jobs": (
        "registry.beat_op(ctx, 'cd' * 8, 3000, {'host': 'h'}, held)",
        300,
        100,
    ),
}


def count(src: str, stmt: str, runs: int) -> int:
    """The instructions of a fresh Python that sets up and runs ``stmt`` ``runs`` times."""
    prog = SETUP + f"for _ in range({runs}):\n    {stmt}\n"
    return counted([sys.executable, "-c", prog, src])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--src", default=SRC, help="the echomq to count (another checkout's src)")
    ap.add_argument("--only", default="", help="only the pieces whose name holds this text")
    args = ap.parse_args()
    if not shutil.which("valgrind"):
        raise SystemExit("needs valgrind (apt-get install valgrind)")
    rows: list[list[object]] = [["piece", "Ir per run", "per job"]]
    for name, (stmt, runs, jobs) in CASES.items():
        if args.only not in name:
            continue
        try:
            ir = (count(args.src, stmt, runs) - count(args.src, stmt, runs // 10)) / (
                runs - runs // 10
            )
        except subprocess.CalledProcessError:
            rows.append([name, "(not in this checkout)", ""])
            continue
        rows.append([name, int(ir), int(ir / jobs)])
    report(rows)


if __name__ == "__main__":
    main()
