"""What a script's small habits cost the server, in instructions per call (callgrind).

Each row is one tiny script run ``--calls`` times by ``EVALSHA`` on a private server
under valgrind's callgrind (after 50 warm-up calls); the figure is the server's
instructions per call, the round trip included, so each row less ``return 1`` is what
its body costs. They price the choices the hot paths make (docs/performance.md):

- a number given to ``redis.call`` or joined into text is formatted (``%.17g`` by the
  server, ``%.14g`` by Lua): a ``string.format('%d')`` once, or the text itself, is
  cheaper, and a literal ``'1'`` costs nothing;
- every ``local function`` a script defines is a closure made on every call: a lib
  helper used only on a rare path costs every call unless it is made on that path;
- one more ``redis.call`` (``HEXISTS``) against a 7-field ``HMGET`` read into numbers.

Run: ``.venv/bin/python bench/lua_costs.py`` (about 30 s; needs valgrind).
"""

from __future__ import annotations

import argparse

import redis

from _common import Callgrind, report

BODIES: dict[str, str] = {
    "return 1": "return 1",
    "HEXISTS of a meta field": (
        "local B = KEYS[1] redis.call('HEXISTS', B .. 'meta', 'limits') return 1"
    ),
    "HMGET of 7 meta fields, as numbers": (
        "local B = KEYS[1] local f = redis.call('HMGET', B .. 'meta', 'rate_max', 'rate_ms',"
        " 'concurrency', 'limited_until', 'group_rate_max', 'group_rate_ms', 'rate_burst')"
        " local t = {tonumber(f[1]), tonumber(f[2]), tonumber(f[3]), tonumber(f[4]),"
        " tonumber(f[5]), tonumber(f[6]), tonumber(f[7])} return 1"
    ),
    "TIME": "local t = redis.call('TIME') return 1",
    "TIME + ZRANGEBYSCORE, numbers": (
        "local t = tonumber(redis.call('TIME')[1]) * 1000"
        " redis.call('ZRANGEBYSCORE', KEYS[1] .. 'gwait', '-inf', t, 'LIMIT', 0, 32) return 1"
    ),
    "TIME + ZRANGEBYSCORE, text": (
        "local t = redis.call('TIME')"
        " redis.call('ZRANGEBYSCORE', KEYS[1] .. 'gwait', '-inf', t[1], 'LIMIT', '0', '32')"
        " return 1"
    ),
    "a number joined into text": "local x = 1733220000123 local s = x .. '' return 1",
    "string.format('%d')": "local x = 1733220000123 local s = string.format('%d', x) return 1",
    "15 closures": "local B = KEYS[1]\n"
    + "\n".join(f"local function f{i}(x) return B .. x end" for i in range(15))
    + "\nreturn 1",
    "15 closures inside one not called": "local B = KEYS[1]\nlocal function lib()\n"
    + "\n".join(f"local function f{i}(x) return B .. x end" for i in range(15))
    + "\nreturn f1 end\nreturn 1",
    "3 empty tables": "local t, u, v = {}, {}, {} return 1",
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=300)
    args = ap.parse_args()
    rows: list[list[object]] = [["script body", "Ir/call", "less return 1"]]
    with Callgrind(module=False) as cg:
        r = redis.Redis.from_url(cg.url)
        base = 0.0
        for label, body in BODIES.items():
            sha = r.script_load(body)
            for _ in range(50):
                r.evalsha(sha, 1, "emq:{bench}:")
            cg.take()
            for _ in range(args.calls):
                r.evalsha(sha, 1, "emq:{bench}:")
            per = cg.take() / args.calls
            if label == "return 1":
                base = per
            rows.append([label, int(per), int(per - base)])
    report(rows)


if __name__ == "__main__":
    main()
