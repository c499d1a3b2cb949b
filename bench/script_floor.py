"""How much of a script call is the script's own logic: the wake path's two calls
against a floor that sends the same commands and does nothing else.

The idle worker's latency waits on two script calls (docs/performance.md, "The idle
worker's wake path"): the producer's enqueue of one job, then the claim written
behind the worker's wait, which finds that job. Each is checked against a *floor*: a
Functions library (``FUNCTION LOAD`` into the same server) whose two functions take
the very same ``FCALL`` arguments and issue the very same server commands, in the
same order with the same arguments, as the real script does on that path (no
options, no history, no lanes, no limits), and nothing else: no argument read but
the ones the commands need, no check, no option, no helper. What the real call costs
above its floor is the script's logic: its checks, its options and the paths it did
not take. What the floor costs is what any script issuing those commands pays.

Per call, under valgrind's callgrind (a private server, ``hz 1``; each call counted
alone, reading the command and writing the reply included; median of ``--calls``),
the server's instructions of: the real call, its floor, the floor's share, and for
scale the raw loop's pair (an ``LPUSH``, the ``BRPOP`` that finds it). With
``--cold``, the client's round trip of each in µs instead (a private server, no
valgrind; an enqueue and its claim every ``--gap`` seconds, each form in turn;
``--gap 0``: back to back, as an enqueue one by one). The floor is checked to be a
floor before anything is measured: the same command counts (``INFO commandstats``)
for a call of each, and the same row fields left.

Run: ``.venv/bin/python bench/script_floor.py`` (about a minute; needs valgrind;
``--calls``); ``--cold`` (about 15 s), ``--cold --gap 0 --calls 2000``.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections import Counter
from typing import Any

import redis

from _common import Callgrind, report
from echomq import Queue, lifecycle
from echomq.embedded import EmbeddedServer
from echomq.keyspace import KEY
from echomq.lifecycle import produce

#: The floor: exactly the commands of the real enqueue (short form, one job, no
#: option, no history) and of the wait's claim finding one job (no lane, no limit,
#: no request id), in their order. Key suffixes are the keyspace's (formatted in).
FLOOR = """#!lua name=emqbench_floor
local JOB, LOCK = '{JOB}', '{LOCK}'
redis.register_function('floor_enqueue', function(keys, args)
  local b, id = keys[1], args[3]
  redis.call('EXISTS', b .. '{SETTLED}', b .. '{KEEPS}', b .. '{KEEPS}')
  local seqs = string.format('%d', redis.call('INCRBY', b .. '{SEQ}', '1') - 1)
  redis.call('HSET', b .. JOB .. id, 'state', 'pending', 'attempts', '0',
    'payload', args[4], 'seq', seqs)
  redis.call('PUBLISH', b .. '{EVENTS}', '{{"event":"enqueued","job":"' .. id .. '"}}')
  redis.call('ZADD', b .. '{PENDING}', seqs, id)
  local wk = b .. '{WAKE}'
  if redis.call('LLEN', wk) < 64 then redis.call('RPUSH', wk, '1') end
  return 1
end)
redis.register_function('floor_claim', function(keys, args)
  local b = keys[1]
  local t = redis.call('TIME')
  local nows = t[1] .. string.sub('00000' .. t[2], -6, -4)
  local now = tonumber(nows)
  redis.call('HEXISTS', b .. '{META}', 'limits')
  redis.call('LLEN', b .. '{RING}')
  local r = redis.call('ZPOPMIN', b .. '{PENDING}', args[2])
  if #r == 0 then return {{}} end
  local id = r[1]
  local jk = b .. JOB .. id
  local f = redis.call('HMGET', jk, 'attempts', 'payload', 'name')
  local tok = (tonumber(f[1]) or 0) + 1
  local toks = tostring(tok)
  redis.call('HSET', jk, 'attempts', toks, 'state', 'active', 'started_at', nows)
  redis.call('SET', jk .. LOCK, toks, 'PX', args[4])
  redis.call('PUBLISH', b .. '{EVENTS}',
    '{{"event":"active","job":"' .. id .. '","attempt":' .. toks .. '}}')
  redis.call('ZADD', b .. '{ACTIVE}', string.format('%d', now + args[1]), id)
  return {{id, f[2] or '', tok, f[3] or '', ''}}
end)
"""


def floor_code() -> str:
    names = ("JOB", "LOCK", "SETTLED", "KEEPS", "SEQ", "EVENTS", "PENDING", "WAKE")
    names += ("META", "RING", "ACTIVE")
    return FLOOR.format(**{n: KEY[n].suffix for n in names})


def commands(r: Any) -> Counter[str]:
    """Calls per command so far (scripts' own commands included), but the script calls."""
    got = r.info("commandstats")
    return Counter(
        {
            k.removeprefix("cmdstat_"): v["calls"]
            for k, v in got.items()
            if k not in ("cmdstat_fcall", "cmdstat_info", "cmdstat_function|load")
        }
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--calls", type=int, default=50, help="calls measured per form")
    ap.add_argument("--cold", action="store_true", help="round trips, a pair every --gap s")
    ap.add_argument("--gap", type=float, default=0.02, help="--cold: seconds between pairs")
    a = ap.parse_args()
    if a.cold:
        with EmbeddedServer(module=False) as srv:
            Floor(srv.url).measure(a.calls, None, a.gap)
        return
    with Callgrind(module=False) as cg:
        Floor(cg.url).measure(a.calls, cg, 0.0)


class Floor:
    """The real calls and their floors on one queue of the server at ``url``."""

    def __init__(self, url: str) -> None:
        self.r = redis.Redis.from_url(url)
        self.r.function_load(floor_code(), replace=True)
        self.q = q = Queue("floor", url=url)
        claim = lifecycle.claim_op(q.ctx, 10, 60_000, 60_000, recorded=False)
        q.enqueue({})  # the real libraries loaded, by the queue's own calls
        q.runner.execute(claim)
        self.r.delete(q.ctx.keys.wake, q.ctx.keys.active)
        cmd = tuple(q.runner.command(claim))
        self.claims = {"claim": cmd, "claim floor": self.as_floor(cmd, "floor_claim")}

    def enqueue(self, floor: bool) -> tuple[Any, ...]:
        """The real enqueue's command as the queue's runner sends it (a fresh id), or
        its floor's with the same arguments."""
        cmd = tuple(self.q.runner.command(next(produce.enqueue(self.q.ctx, {}))))
        return self.as_floor(cmd, "floor_enqueue") if floor else cmd

    def as_floor(self, cmd: tuple[Any, ...], name: str) -> tuple[Any, ...]:
        assert cmd[0] == "FCALL" and int(cmd[2]) == 1 and cmd[3] == self.q.ctx.keys.base, cmd
        return ("FCALL", name, 1, *cmd[3:])

    def served(self, claimed: Any) -> None:
        """As the worker's wait takes the token and its completion the active entry:
        the wake list and the active set stay as small as on the real path."""
        self.r.lpop(self.q.ctx.keys.wake)
        self.r.zrem(self.q.ctx.keys.active, claimed[0])

    def check(self) -> None:
        """The floor sends what the real path sends: the same commands per call, the
        same row fields left (raises SystemExit if not)."""
        seen = {}
        for floor in (False, True):
            for _ in range(2):  # the second pair: the lists already made
                before = commands(self.r)
                self.r.execute_command(*self.enqueue(floor))
                enq = commands(self.r) - before
                before = commands(self.r)
                claimed = self.r.execute_command(*self.claims[_claim(floor)])
                clm = commands(self.r) - before
                self.served(claimed)
            row = self.r.hgetall(self.q.ctx.keys.job(claimed[0].decode()))
            seen[floor] = (enq, clm, sorted(row))
        if seen[False] != seen[True]:
            raise SystemExit(f"the floor is not the real path:\n{seen[False]}\n{seen[True]}")

    def measure(self, calls: int, cg: Callgrind | None, gap: float) -> None:
        """Per call: the server's instructions (``cg``) or the cold round trip in µs
        (a pair every ``gap`` s, the forms interleaved); prints the medians."""
        self.check()
        got: dict[str, list[float]] = {"enqueue": [], "claim": []}
        got |= {f"{name} floor": [] for name in list(got)}
        got |= {f"raw {name}": [] for name in ("enqueue", "claim")}
        for _ in range(calls):
            for floor in (False, True):
                cmd = self.enqueue(floor)
                if cg is not None:
                    cg.take()
                else:
                    time.sleep(gap)  # the server idle meanwhile, as between jobs
                t = time.perf_counter()
                self.r.execute_command(*cmd)
                got[_enqueue(floor)].append(_took(cg, t))
                t = time.perf_counter()
                claimed = self.r.execute_command(*self.claims[_claim(floor)])
                got[_claim(floor)].append(_took(cg, t))
                self.served(claimed)
            # for scale, the raw loop's pair: an LPUSH, the BRPOP that finds it
            if cg is not None:
                cg.take()
            else:
                time.sleep(gap)
            t = time.perf_counter()
            self.r.lpush(RAW_KEY, "{}")
            got["raw enqueue"].append(_took(cg, t))
            t = time.perf_counter()
            self.r.brpop([RAW_KEY])
            got["raw claim"].append(_took(cg, t))
        unit = "Ir" if cg is not None else "µs"
        rows: list[list[object]] = [
            ["call", f"real {unit}", f"floor {unit}", "floor/real", f"logic {unit}", "raw loop's"]
        ]
        for name in ("enqueue", "claim"):
            real = statistics.median(got[name])
            floor_v = statistics.median(got[f"{name} floor"])
            raw = statistics.median(got[f"raw {name}"])
            rows.append([name, real, floor_v, round(floor_v / real, 2), real - floor_v, raw])
        report(rows)
        print("raw loop's: LPUSH for the enqueue, the BRPOP that finds it for the claim")


#: The raw loop's list.
RAW_KEY = "raw:floor"


def _claim(floor: bool) -> str:
    return "claim floor" if floor else "claim"


def _enqueue(floor: bool) -> str:
    return "enqueue floor" if floor else "enqueue"


def _took(cg: Callgrind | None, start: float) -> float:
    """Since the last take: callgrind's instructions, else the µs since ``start``."""
    return float(cg.take()) if cg is not None else (time.perf_counter() - start) * 1e6


if __name__ == "__main__":
    main()
