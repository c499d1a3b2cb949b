"""The release check (scripts/test runs it): build what a user installs, install it
where the tree cannot be seen, and use it.

1. ``python -m build``: the sdist, and from the sdist the platform wheel (so the sdist
   carries the C sources); a pure wheel (``EMQ_BUILD_NATIVE=0``), from the sdist too.
   Each is inspected: tags, the module inside or not, size under 1 MB.
2. ``twine check`` on all three.
3. A new venv in a temporary directory; the platform wheel installed with pip (its
   dependencies from the package index or pip's cache); from there, in isolated mode
   (``python -I``, the working directory outside the tree): ``emq native path`` names
   the installed module, ``emq server`` loads it, ``emq demo`` walks the runbook, and a
   native smoke enqueues a job, claims it through ``EMQ.CLAIM`` and completes it through
   ``EMQ.COMPLETE``. Then the pure wheel over it: no module, and the scripts serve.

Usage: .venv/bin/python scripts/check_dist.py [--keep]   (--keep leaves the temporary
directory and prints it). Prints the install's and the demo's times.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MAX_WHEEL = 1_000_000
MODULE_IN_WHEEL = "echomq/native/echomq.so"

#: Run with the installed package only: the module from the wheel, EMQ.CLAIM and
#: EMQ.COMPLETE counted by the server itself.
SMOKE = """
import sys
import echomq
from echomq import Queue, native
from echomq.embedded import EmbeddedServer

assert "site-packages" in echomq.__file__, echomq.__file__
with EmbeddedServer(module=True) as srv:
    assert srv.module_path == str(native.packaged_path()), srv.module_path
    q = Queue("dist-smoke", url=srv.url, executor="native")
    jid = q.enqueue({"hello": "wheel"})
    got = q.claim(lease_ms=10000)
    assert got is not None and got.id == jid, got
    q.complete(jid, got.token)
    counts = q.counts()
    assert (counts.pending, counts.active, counts.completed) == (0, 0, 1), counts
    stats = q.client.info("commandstats")
    for cmd in ("emq.claim", "emq.complete"):
        calls = int(stats.get("cmdstat_" + cmd, {}).get("calls", 0))
        assert calls >= 1, (cmd, stats.keys())
    assert not q.client.exists(q.keys.job(jid))
    q.close()
print("native smoke: enqueued, claimed with EMQ.CLAIM, completed with EMQ.COMPLETE:", jid)
"""


#: The pure wheel: no module anywhere, so ``auto`` takes the scripts and the job goes
#: through them (no EMQ.* command known to the server).
SMOKE_PURE = """
import echomq
from echomq import Queue, native
from echomq.embedded import EmbeddedServer

assert native.module_path() is None and not native.packaged_path().exists()
with EmbeddedServer() as srv:
    assert srv.module_path is None
    q = Queue("dist-smoke-pure", url=srv.url, executor="auto")
    jid = q.enqueue({"hello": "pure wheel"})
    got = q.claim(lease_ms=10000)
    assert got is not None and got.id == jid, got
    q.complete(jid, got.token)
    assert q.counts().completed == 1
    assert not any(k.startswith("cmdstat_emq.") for k in q.client.info("commandstats"))
    q.close()
print("pure smoke: enqueued, claimed and completed by the scripts:", jid)
"""


def run(cmd: list[str], **kw: object) -> subprocess.CompletedProcess[str]:
    """Run ``cmd``; on failure print its output and stop the check."""
    done = subprocess.run(cmd, capture_output=True, text=True, **kw)  # type: ignore[call-overload]
    if done.returncode != 0:
        sys.stderr.write(f"check_dist: {' '.join(map(str, cmd))} failed\n")
        sys.stderr.write(done.stdout[-4000:] + done.stderr[-4000:])
        raise SystemExit(1)
    return done  # type: ignore[no-any-return]


def build(out: Path, *args: str, native: str) -> None:
    env = {**os.environ, "EMQ_BUILD_NATIVE": native}
    run([sys.executable, "-m", "build", "--outdir", str(out), *args], env=env)


def inspect_wheel(path: Path, *, native: bool) -> None:
    size = path.stat().st_size
    with zipfile.ZipFile(path) as zf:
        names = set(zf.namelist())
        wheel_meta = next(n for n in names if n.endswith(".dist-info/WHEEL"))
        meta = zf.read(wheel_meta).decode()
    has_module = MODULE_IN_WHEEL in names
    tagged = "py3-none-any" not in path.name
    problems = []
    if has_module != native or tagged != native:
        problems.append(f"module inside: {has_module}, platform tag: {tagged}")
    if native and "Root-Is-Purelib: false" not in meta:
        problems.append("a platform wheel must install into platlib")
    if size >= MAX_WHEEL:
        problems.append(f"{size} bytes (the limit is {MAX_WHEEL})")
    if not any(n.startswith("echomq/lua/") for n in names):
        problems.append("no Lua scripts")
    if problems:
        raise SystemExit(f"check_dist: {path.name}: " + "; ".join(problems))
    print(f"check_dist: {path.name}: {size / 1000:.0f} kB")


def served_module(emq: str, cwd: Path, env: dict[str, str]) -> str:
    """Start ``emq server`` from the fresh venv; the module path its server loaded."""
    import redis  # the check's own venv has it (the package's dependency)

    proc = subprocess.Popen(
        [emq, "--json", "server"],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert proc.stdout is not None
        url = json.loads(proc.stdout.readline())["url"]
        client = redis.Redis.from_url(url, decode_responses=True)
        listed = {m["name"]: m.get("path", "?") for m in client.execute_command("MODULE", "LIST")}
        client.close()
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=30)
    if "echomq" not in listed:
        raise SystemExit(f"check_dist: emq server loaded no echomq module: {listed}")
    return str(listed["echomq"])


def main() -> int:
    keep = "--keep" in sys.argv[1:]
    tmp = Path(tempfile.mkdtemp(prefix="echomq-dist-"))
    try:
        dist, pure = tmp / "dist", tmp / "pure"
        t0 = time.monotonic()
        build(dist, str(ROOT), native="1")  # the sdist, then the wheel from it
        (sdist,) = dist.glob("*.tar.gz")
        # from the sdist too: a clean tree (a build/ left in the checkout may hold stale files)
        build(pure, "--wheel", str(sdist), native="0")
        print(f"check_dist: built in {time.monotonic() - t0:.1f} s")
        (wheel,) = dist.glob("*.whl")
        (pure_wheel,) = pure.glob("*.whl")
        inspect_wheel(wheel, native=True)
        inspect_wheel(pure_wheel, native=False)
        run([sys.executable, "-m", "twine", "check", "--strict", str(sdist), str(wheel)])
        run([sys.executable, "-m", "twine", "check", "--strict", str(pure_wheel)])
        print("check_dist: twine check passed")

        work = tmp / "elsewhere"  # the fresh venv's working directory: not the tree
        work.mkdir()
        env = {
            k: v
            for k, v in os.environ.items()
            if k not in ("PYTHONPATH", "EMQ_MODULE", "VIRTUAL_ENV", "EMQ_URL", "EMQ_EXECUTOR")
        }
        venv = tmp / "venv"
        t0 = time.monotonic()
        run([sys.executable, "-m", "venv", str(venv)], cwd=work, env=env)
        made = time.monotonic() - t0
        py, emq = str(venv / "bin" / "python"), str(venv / "bin" / "emq")
        run([py, "-m", "pip", "install", "-q", str(wheel)], cwd=work, env=env)
        installed = time.monotonic() - t0 - made
        found = run([emq, "native", "path"], cwd=work, env=env).stdout.strip()
        if not found.startswith(str(venv)) or not found.endswith("echomq/native/echomq.so"):
            raise SystemExit(f"check_dist: emq native path gave {found!r}, not the installed one")
        served = served_module(emq, work, env)
        if served != found:
            raise SystemExit(f"check_dist: emq server loaded {served!r}, not {found!r}")
        print(f"check_dist: emq server loads {served}")
        t0 = time.monotonic()
        run([emq, "demo"], cwd=work, env=env)
        demo = time.monotonic() - t0
        print(run([py, "-I", "-c", SMOKE], cwd=work, env=env).stdout.strip())
        # the pure wheel over it (same dependencies): no module, the scripts serve
        run([py, "-m", "pip", "install", "-q", "--no-deps", "--force-reinstall", str(pure_wheel)])
        gone = subprocess.run([emq, "native", "path"], capture_output=True, cwd=work, env=env)
        if gone.returncode != 1:
            raise SystemExit("check_dist: emq native path found a module in the pure wheel")
        print(run([py, "-I", "-c", SMOKE_PURE], cwd=work, env=env).stdout.strip())
        print(
            f"check_dist: a fresh venv {made:.1f} s, pip install of the platform wheel "
            f"{installed:.1f} s, emq demo {demo:.1f} s (together {made + installed + demo:.1f} s;"
            f" load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores)"
        )
    finally:
        if keep:
            print(f"check_dist: kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
