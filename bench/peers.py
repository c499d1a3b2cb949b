"""echomq beside the raw redis-py loop, through the side-by-side peers harness.

Runs ``../shared/bench-peers`` (``--harness``; its README describes it) with this
checkout's venv, so its rows ``echomq``, ``echomq-native`` (the server loads
``native/echomq.so``) and ``echomq-threads`` (a plain ``def`` handler) are this code;
``redis-py-raw`` is the raw ``LPUSH``/``BRPOP`` loop every figure is divided by. Each
row gets a private server and one worker process; figures are ratios within one run.

It runs ``--runs`` runs at concurrency ``--conc`` (async and threads alike: equal
concurrency), then one run at concurrency 50 (``--conc50``, async rows only), and
prints the harness's own ratio tables (``echomq_ratios.py``) and then one summary
table in the issue's shape: per figure, the range of the ratio to raw over the runs.

Run: ``make -C native && .venv/bin/python bench/peers.py`` (about 4 minutes a run at
the default N=20,000 on 2 cores); ``-n 2000 --runs 1`` for a quick look. Raw results
stay in ``--out`` (default: a temporary folder), one ``results.json`` per run.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
ROWS = ("redis-py-raw", "echomq", "echomq-native", "echomq-threads")
KINDS = ("echomq", "echomq-native", "echomq-threads")
#: The summary's lines: label, path in a row's results, which runs (c10/c50).
FIGURES: tuple[tuple[str, tuple[str, ...], str], ...] = (
    ("process /s, first to last, c={c}", ("proc", "rate_steady"), "base"),
    ("process /s, first to last, c=50", ("proc", "rate_steady"), "c50"),
    ("process /s, from start, c={c}", ("proc", "rate"), "base"),
    ("worker CPU µs/job", ("proc", "worker_cpu_us"), "base"),
    ("server CPU µs/job", ("proc", "redis_cpu_us"), "base"),
    ("server cmds/job", ("proc", "cmds_per_job"), "base"),
    ("enqueue 1-by-1 /s", ("enq_single", "rate"), "all"),
    ("enqueue client CPU µs/job", ("enq_single", "client_cpu_us"), "all"),
    ("latency p50 ms", ("latency", "latency", "p50_ms"), "base"),
    ("latency p99 ms", ("latency", "latency", "p99_ms"), "base"),
)


def get(d: Any, path: tuple[str, ...]) -> float | None:
    for k in path:
        if not isinstance(d, dict) or d.get(k) is None:
            return None
        d = d[k]
    return float(d)


def run_harness(args: argparse.Namespace, out: Path, conc: int, rows: tuple[str, ...]) -> Path:
    harness = Path(args.harness).resolve()
    env = dict(os.environ, BENCH_EMQ_MODULE=str(Path(args.module).resolve()))
    cmd = [sys.executable, str(harness / "bench.py"), "--out", str(out), "-n", str(args.n)]
    cmd += ["--async-conc", str(conc), "--threads", str(conc), "--lat-count", str(args.lat_count)]
    subprocess.run([*cmd, *rows], check=True, env=env, cwd=harness)
    return out / "results.json"


def summary(base: list[Path], c50: list[Path], conc: int) -> str:
    """One line per figure: the range over the runs of each row's ratio to raw."""
    loaded = {p: json.loads(p.read_text())["rows"] for p in [*base, *c50]}
    lines = [
        "| figure (÷raw) | " + " | ".join(KINDS) + " | raw |",
        "|---|" + "---|" * (len(KINDS) + 1),
    ]
    for label, path, which in FIGURES:
        runs = {"base": base, "c50": c50, "all": [*base, *c50]}[which]
        cells, raws = [], []
        for kind in KINDS:
            ratios = []
            for p in runs:
                raw, v = get(loaded[p].get("redis-py-raw"), path), get(loaded[p].get(kind), path)
                if raw and v is not None:
                    ratios.append(v / raw)
            low, high = (f"{min(ratios):.2f}", f"{max(ratios):.2f}") if ratios else ("", "")
            cells.append(low if low == high else f"{low}-{high}")
        for p in runs:
            raw = get(loaded[p].get("redis-py-raw"), path)
            if raw is not None:
                raws.append(f"{raw:,.0f}" if raw >= 100 else f"{raw:.2f}")
        lines.append(f"| {label.format(c=conc)} | " + " | ".join(cells) + f" | {', '.join(raws)} |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--harness", default=str(ROOT.parent / "shared" / "bench-peers"))
    ap.add_argument("--module", default=str(ROOT / "native" / "echomq.so"))
    ap.add_argument("-n", type=int, default=20_000, help="jobs per phase")
    ap.add_argument("--runs", type=int, default=2, help="runs at --conc")
    ap.add_argument("--conc", type=int, default=10, help="async and threads concurrency")
    ap.add_argument("--no-conc50", dest="conc50", action="store_false")
    ap.add_argument("--lat-count", type=int, default=500, help="latency samples")
    ap.add_argument("--out", help="results folder (default: a temporary one)")
    args = ap.parse_args()
    if not Path(args.module).is_file():
        raise SystemExit(f"{args.module} is missing: build it with `make -C native`")
    if not (Path(args.harness) / "bench.py").is_file():
        raise SystemExit(f"no harness at {args.harness} (--harness)")
    out = Path(args.out or tempfile.mkdtemp(prefix="echomq-peers-"))
    base = [run_harness(args, out / f"run{i + 1}", args.conc, ROWS) for i in range(args.runs)]
    c50 = [run_harness(args, out / "conc50", 50, ROWS[:3])] if args.conc50 else []
    ratios = Path(args.harness) / "echomq_ratios.py"
    subprocess.run([sys.executable, str(ratios), *map(str, [*base, *c50])], check=True)
    print("\n#### summary (ratio to raw, range over the runs; raw's own figures last)\n")
    print(summary(base, c50, args.conc))
    print(f"\nresults: {out}")


if __name__ == "__main__":
    main()
