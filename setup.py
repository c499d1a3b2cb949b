"""The wheel's one build step beyond pyproject.toml: echomq's server module.

The module (``native/*.c``) is a Redis/Valkey module, not a Python extension: the server
loads it with ``--loadmodule``, Python never imports it. So it is compiled here with the
system's C compiler into the wheel as package data (``echomq/native/echomq.so``), and the
wheel is tagged ``py3-none-<platform>`` (any Python 3, no Python ABI, one platform).

``EMQ_BUILD_NATIVE`` chooses (docs/packaging.md):

- ``auto`` (the default): on Linux, compile the module; when that fails, say so loudly and
  make the pure wheel (the scripts serve every verb). Elsewhere, the pure wheel.
- ``1``: the module is required; a failure to compile fails the build.
- ``0``: the pure wheel (``py3-none-any``), scripts only.

Nothing is downloaded and nothing compiles at run time: the installed package only
finds the file (``echomq.native.module_path()``).
"""

from __future__ import annotations

import os
import platform
import re
import shlex
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

from setuptools import setup
from setuptools.command.bdist_wheel import bdist_wheel

HERE = Path(__file__).resolve().parent
NATIVE = HERE / "native"
#: Flags for a module that runs on any glibc Linux of its architecture: no -march (the
#: build machine's CPU is not the user's), position-independent, hidden symbols but the
#: entry point, and no -Werror (a newer compiler's new warning must not fail an install;
#: the Makefile keeps -Werror for the developers).
CFLAGS = ["-O2", "-std=c11", "-fPIC", "-Wall", "-Wextra", "-fvisibility=hidden"]
LDFLAGS = ["-shared", "-Wl,--as-needed", "-lm"]
#: The oldest glibc the platform wheel claims (manylinux2014): a module asking for a newer
#: symbol version is tagged for this platform only (``linux_<arch>``).
MANYLINUX = (2, 17)
#: The libraries a manylinux wheel may need from the system (PEP 599's list, the part
#: a C module without C++ could ask for).
ALLOWED_LIBS = {"libc.so.6", "libm.so.6", "libpthread.so.0", "libdl.so.2", "librt.so.1"}


def sources() -> list[Path]:
    """The module's sources, as the Makefile lists them (one list of sources)."""
    text = (NATIVE / "Makefile").read_text(encoding="utf-8").replace("\\\n", " ")
    found = re.search(r"^SOURCES\s*=\s*(.+)$", text, re.MULTILINE)
    if found is None:
        raise RuntimeError("native/Makefile lists no SOURCES")
    return [NATIVE / name for name in found.group(1).split()]


def compile_module(target: Path) -> None:
    """Compile the module into ``target`` with the system's compiler (``CC``, else cc).

    Raises:
        RuntimeError: no compiler, or it failed (its output in the message).
    """
    cc = shlex.split(os.environ.get("CC") or "cc")
    if shutil.which(cc[0]) is None:
        raise RuntimeError(f"no C compiler ({cc[0]!r} is not on PATH)")
    target.parent.mkdir(parents=True, exist_ok=True)
    cmd = [*cc, *CFLAGS, "-o", str(target), *map(str, sources()), *LDFLAGS]
    done = subprocess.run(cmd, capture_output=True, text=True, cwd=NATIVE)
    if done.returncode != 0:
        raise RuntimeError(f"{shlex.join(cmd)} failed:\n{done.stdout}{done.stderr}")


def manylinux_tag(module: Path) -> str | None:
    """``manylinux_2_17_<arch>`` when the module needs nothing newer than glibc 2.17 and
    only the allowed system libraries (read with binutils' objdump), else None."""
    arch = platform.machine()
    if shutil.which("objdump") is None or arch not in ("x86_64", "aarch64"):
        return None
    dump = subprocess.run(
        ["objdump", "-p", "-T", str(module)], capture_output=True, text=True, check=False
    )
    if dump.returncode != 0:
        return None
    needed = set(re.findall(r"^\s*NEEDED\s+(\S+)", dump.stdout, re.MULTILINE))
    versions = {
        tuple(int(p) for p in v.split(".")) for v in re.findall(r"GLIBC_([0-9.]+)", dump.stdout)
    }
    if not needed <= ALLOWED_LIBS or any(v[:2] > MANYLINUX for v in versions):
        return None
    major, minor = MANYLINUX
    return f"manylinux_{major}_{minor}_{arch}.manylinux2014_{arch}"


class NativeWheel(bdist_wheel):
    """bdist_wheel that puts the compiled module in the wheel, or makes the pure wheel."""

    def run(self) -> None:
        choice = os.environ.get("EMQ_BUILD_NATIVE", "auto").strip().lower() or "auto"
        if choice not in ("auto", "0", "1"):
            raise SystemExit(f"EMQ_BUILD_NATIVE must be auto, 0 or 1, got {choice!r}")
        wanted = choice == "1" or (choice == "auto" and sys.platform.startswith("linux"))
        if wanted:
            # a platform wheel: build and install into platlib (Root-Is-Purelib: false),
            # as for a wheel with an extension module
            self.distribution.has_ext_modules = lambda: True  # type: ignore[method-assign]
        build_lib = Path(self.get_finalized_command("build").build_lib).absolute()
        target = build_lib / "echomq" / "native" / "echomq.so"
        target.unlink(missing_ok=True)  # never a module left from an earlier build
        self.module: Path | None = None
        if wanted and NATIVE.is_dir():
            try:
                compile_module(target)
                self.module = target
            except RuntimeError as exc:
                if choice == "1":
                    raise SystemExit(f"echomq: the native module did not build: {exc}") from None
                del self.distribution.has_ext_modules  # the pure wheel after all: purelib
                print(
                    f"WARNING: echomq: the native module did not build; making the pure "
                    f"wheel (the scripts serve every verb): {exc}",
                    file=sys.stderr,
                )
        elif choice == "1":
            raise SystemExit("echomq: EMQ_BUILD_NATIVE=1 but there is no native/ source")
        self.root_is_pure = self.module is None
        super().run()

    def get_tag(self) -> tuple[str, str, str]:
        if getattr(self, "module", None) is None:
            return super().get_tag()
        assert self.module is not None
        plat = manylinux_tag(self.module)
        if plat is None:
            plat = sysconfig.get_platform().replace("-", "_").replace(".", "_")
        return "py3", "none", plat


if __name__ == "__main__":  # as the build backend runs it (tests import the helpers)
    setup(cmdclass={"bdist_wheel": NativeWheel})
