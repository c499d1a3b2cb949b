"""What the wake path's shape costs, apart from echomq's client code: today's shape and
a hand-off sketch, both with floor scripts, against the raw loop.

A job every ``--gap`` seconds to an idle worker; the figure is the job's start minus
its enqueue call's start, as in the peers harness. The worker here is a bare
synchronous redis-py loop in its own process for every shape, so what differs is
only what the server runs and what the worker reads:

- ``raw``: the raw loop: ``LPUSH`` a message; the worker waits in ``BRPOP``.
- ``now``: today's shape with the floor scripts of ``bench/script_floor.py`` (the
  real calls' commands and nothing else): the enqueue floor writes the row, its place
  in ``pending`` and a wake token; the worker, after the gate round trip (``WATCH``
  meta and the pause read), waits in ``BLPOP`` on the wake list with ``MULTI``, the
  claim floor and ``EXEC`` written behind it, and reads the four replies.
- ``handoff``: a sketch of a design this project does not have: the worker lists
  itself as idle (``RPUSH``) and waits in ``BLPOP`` on a list of its own; the enqueue
  reads the queue's gate (``paused`` and ``limits``, one ``HMGET``), pops an idle
  worker and, when there is one, writes the row already leased to it (the claim
  floor's writes: state, attempts, the active set, the lock, both events) and pushes
  the job onto its list, in one script. The worker reads one reply. A job that finds
  no idle worker takes today's path. (Not a design: what a worker that stops or dies
  while listed, the limits and the lanes would need is left out; this measures the
  shape's floor only.)

Per shape: the median and p99 start latency and the median's ratio to raw, over
``--repeat`` rounds of ``--count`` jobs (each round's median, then the median of the
rounds), the shapes interleaved; a fresh private server for each.

Run: ``.venv/bin/python bench/wake_shapes.py`` (about 40 s; ``--count``, ``--gap``,
``--repeat``).
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
from echomq.embedded import EmbeddedServer
from echomq.keyspace import KEY, Keyspace
from script_floor import floor_code

SHAPES = ("raw", "now", "handoff")
KS = Keyspace("shapes")
RAW_KEY = "raw:shapes"
IDLE, HAND = KS.base + "bench:idle", KS.base + "bench:hand:"
WID = "w1"

#: The hand-off sketch: the enqueue floor's commands, then the claim floor's writes
#: for a job leased to an idle worker, pushed onto that worker's list.
HANDOFF = """#!lua name=emqbench_handoff
local JOB, LOCK = '{JOB}', '{LOCK}'
redis.register_function('sketch_handoff', function(keys, args)
  local b, id, payload = keys[1], args[3], args[4]
  redis.call('EXISTS', b .. '{SETTLED}', b .. '{KEEPS}', b .. '{KEEPS}')
  local seqs = string.format('%d', redis.call('INCRBY', b .. '{SEQ}', '1') - 1)
  local gate = redis.call('HMGET', b .. '{META}', 'paused', 'limits')
  local wid = not gate[1] and not gate[2] and redis.call('LPOP', b .. 'bench:idle')
  local jk = b .. JOB .. id
  if not wid then
    redis.call('HSET', jk, 'state', 'pending', 'attempts', '0', 'payload', payload,
      'seq', seqs)
    redis.call('PUBLISH', b .. '{EVENTS}', '{{"event":"enqueued","job":"' .. id .. '"}}')
    redis.call('ZADD', b .. '{PENDING}', seqs, id)
    local wk = b .. '{WAKE}'
    if redis.call('LLEN', wk) < 64 then redis.call('RPUSH', wk, '1') end
    return 1
  end
  local t = redis.call('TIME')
  local nows = t[1] .. string.sub('00000' .. t[2], -6, -4)
  redis.call('HSET', jk, 'state', 'active', 'attempts', '1', 'payload', payload,
    'seq', seqs, 'started_at', nows)
  redis.call('PUBLISH', b .. '{EVENTS}', '{{"event":"enqueued","job":"' .. id .. '"}}')
  redis.call('ZADD', b .. '{ACTIVE}', string.format('%d', tonumber(nows) + 60000), id)
  redis.call('SET', jk .. LOCK, '1', 'PX', '120000')
  redis.call('PUBLISH', b .. '{EVENTS}',
    '{{"event":"active","job":"' .. id .. '","attempt":1}}')
  -- one element: the id, the token and the payload, as a claim's reply carries them
  redis.call('RPUSH', b .. 'bench:hand:' .. wid, id .. '\\n1\\n' .. payload)
  return 1
end)
"""


def handoff_code() -> str:
    names = ("JOB", "LOCK", "SETTLED", "KEEPS", "SEQ", "META", "EVENTS", "PENDING", "WAKE")
    names += ("ACTIVE",)
    return HANDOFF.format(**{n: KEY[n].suffix for n in names})


def run_worker(url: str, shape: str, out: str) -> None:
    """The worker process: serve until SIGTERM, then write its start latencies."""
    got: list[float] = []

    def stop(*_: object) -> None:
        with open(out, "w") as fh:
            json.dump(got, fh)
        os._exit(0)

    signal.signal(signal.SIGTERM, stop)
    r = redis.Redis.from_url(url)
    conn = r.connection_pool.get_connection()

    def exchange(*cmds: tuple[Any, ...]) -> list[Any]:
        conn.send_packed_command(conn.pack_commands(cmds))
        replies = []
        for _ in cmds:
            try:
                replies.append(conn.read_response())
            except redis.ResponseError as exc:
                replies.append(exc)
        return replies

    claim = ("FCALL", "floor_claim", 1, KS.base, "60000", "10", "f", "120000")
    while True:
        if shape == "raw":
            payload = exchange(("BRPOP", RAW_KEY, 0))[0][1]
        elif shape == "now":
            exchange(("WATCH", KS.meta), ("HEXISTS", KS.meta, "paused"))
            replies = exchange(("BLPOP", KS.wake, 0), ("MULTI",), claim, ("EXEC",))
            payload = replies[3][0][1]
        else:
            job = exchange(("RPUSH", IDLE, WID), ("BLPOP", HAND + WID, 0))[1][1]
            payload = job.split(b"\n", 2)[2]
        ts = json.loads(payload)["ts"]
        got.append(time.monotonic() - ts)


def one(shape: str, count: int, gap: float) -> list[float]:
    with EmbeddedServer(module=False) as srv, tempfile.TemporaryDirectory() as tmp:
        r = redis.Redis.from_url(srv.url)
        r.function_load(floor_code(), replace=True)
        r.function_load(handoff_code(), replace=True)
        out = os.path.join(tmp, "got.json")
        worker = subprocess.Popen([sys.executable, __file__, "--worker", srv.url, shape, out])
        try:
            _common.wait_blocked(r, shape)
            fn = "floor_enqueue" if shape == "now" else "sketch_handoff"
            base = time.monotonic()
            for i in range(count + 20):  # the first 20 warm up, not kept
                pause = base + i * gap - time.monotonic()
                if pause > 0:
                    time.sleep(pause)
                t = time.monotonic()
                payload = json.dumps({"ts": t})
                if shape == "raw":
                    r.lpush(RAW_KEY, payload)
                else:
                    r.execute_command("FCALL", fn, 1, KS.base, "1", "2", f"j{i}", payload)
            time.sleep(0.3)
        finally:
            worker.send_signal(signal.SIGTERM)
            worker.wait(30)
        with open(out) as fh:
            return list(json.load(fh))[20:]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    a = _common.wake_args(ap)
    if a.worker:
        run_worker(*a.worker)
        return
    rounds: dict[str, list[list[float]]] = {s: [] for s in SHAPES}
    for _ in range(a.repeat):
        for shape in SHAPES:
            rounds[shape].append(sorted(one(shape, a.count, a.gap)))
    p50 = {s: statistics.median(statistics.median(r) for r in rs) for s, rs in rounds.items()}
    rows: list[list[object]] = [["shape", "start p50 ms", "start p99 ms", "p50 ÷ raw"]]
    for shape, rs in rounds.items():
        p99 = statistics.median(r[int(len(r) * 0.99)] for r in rs)
        rows.append([shape, p50[shape] * 1000, p99 * 1000, round(p50[shape] / p50["raw"], 2)])
    _common.report(rows)


if __name__ == "__main__":
    main()
