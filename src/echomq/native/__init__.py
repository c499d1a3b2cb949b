"""The native executor: echomq's server module and the choice between it and the scripts.

The module (``native/*.c``; installed by the platform wheel as ``echomq/native/echomq.so``,
or built in a checkout into ``native/echomq.so`` by ``emq native build``) adds commands
``EMQ.<VERB>`` that take the same keys and arguments as the script of that verb and
make the same replies, refusals, events and writes. A runner whose :class:`Executor`
resolved to native sends an :class:`~echomq.scripts.Eval` of a script that has a twin
(:data:`TWINS`) as ``EMQ.<VERB> numkeys keys... args...`` in place of ``EVALSHA``.

The choice, per queue: ``executor="auto"`` (the default, or ``EMQ_EXECUTOR``) uses the
commands when the server lists the module in ``MODULE LIST`` (asked once per runner,
on its first call) and the scripts otherwise; ``"scripts"`` never uses them;
``"native"`` requires them and refuses a server without the module.
"""

from __future__ import annotations

import logging
import os
import subprocess
from pathlib import Path
from typing import Any

from ..errors import InvalidArgument, NativeUnavailable
from ..functions import enabled as functions_enabled

# the twins and the gated ones, declared in echomq.transitions (re-exported)
from ..transitions import GATED as GATED
from ..transitions import NATIVE as TWINS

log = logging.getLogger("echomq.native")

__all__ = ["NativeUnavailable"]  # re-exported: it lives in echomq.errors now

EXECUTORS = ("auto", "scripts", "native")
#: The module's name in ``MODULE LIST``.
MODULE_NAME = "echomq"
#: What the runner resolves with when it could not ask the server (an asyncio cluster
#: client routes no keyless ``MODULE LIST``): ``auto`` then takes the scripts, and
#: ``native`` is taken at its word.
UNASKED: Any = object()


def choose(executor: str | None) -> str:
    """The executor asked for: the argument, else ``EMQ_EXECUTOR``, else ``auto``.

    Raises:
        InvalidArgument: not one of ``auto``, ``scripts``, ``native``.
    """
    choice = executor if executor is not None else os.environ.get("EMQ_EXECUTOR") or "auto"
    if choice not in EXECUTORS:
        raise InvalidArgument(f"executor must be one of {', '.join(EXECUTORS)}, got {choice!r}")
    return choice


def lists_module(reply: Any) -> bool:
    """Whether a ``MODULE LIST`` reply (RESP2 or RESP3, bytes or text) names echomq."""
    for entry in reply or ():
        if isinstance(entry, dict):
            fields = entry
        else:
            items = list(entry)
            fields = dict(zip(items[::2], items[1::2]))
        for key, value in fields.items():
            k = key.decode() if isinstance(key, bytes) else str(key)
            v = value.decode() if isinstance(value, bytes) else str(value)
            if k == "name" and v == MODULE_NAME:
                return True
    return False


class Executor:
    """One queue's executor: the choice and, once its runner asked the server, whether
    native commands are used. The queue's plans and its runner share it.

    Attributes:
        choice: ``auto``, ``scripts`` or ``native``.
        native: ``None`` until resolved, then whether ``EMQ.*`` commands are sent.
        fcall: whether a script goes as ``FCALL`` of its Functions form
            (:mod:`echomq.functions`); cleared for good when the server has none, and
            on a cluster.
    """

    def __init__(self, choice: str | None = "scripts") -> None:
        self.choice = choose(choice)
        self.native: bool | None = False if self.choice == "scripts" else None
        self.fcall = functions_enabled()

    def resolve(self, listing: Any) -> bool:
        """Decide once, from a ``MODULE LIST`` reply (or the error it raised).

        Raises:
            NativeUnavailable: ``native`` was asked for and the server has no module.
        """
        if self.native is not None:
            return self.native
        if listing is UNASKED:
            self.native = self.choice == "native"
            return self.native
        if isinstance(listing, BaseException):  # a server or proxy refusing MODULE LIST
            if self.choice == "native":
                raise NativeUnavailable(f"cannot list the server's modules: {listing}")
            found = False
        else:
            found = lists_module(listing)
        if self.choice == "native" and not found:
            raise NativeUnavailable(
                "executor='native' but the server has not loaded the echomq module "
                "(`emq native path` prints its path for a loadmodule line; see docs/native.md)"
            )
        self.native = found
        return found

    def twin(self, script_name: str) -> str | None:
        """The command to send for ``script_name``, or None to send the script."""
        return TWINS.get(script_name) if self.native else None

    @property
    def gate_folded(self) -> bool:
        """Whether the claim twin reads the pause itself (the plan skips its read)."""
        return bool(self.native)


#: How to get the module, for messages that find it missing: it comes in the platform
#: wheel, or a checkout builds it as a step of its own (``scripts/setup`` takes it),
#: never as a side effect of importing or starting.
BUILD_HINT = (
    "install the platform wheel (pip install echomq on Linux x86_64), or build it with "
    "`emq native build` (make -C native) in an echomq checkout"
)
#: The module's file name, in a checkout's ``native/`` and in the installed package.
FILE_NAME = "echomq.so"


def source_dir() -> Path:
    """The ``native/`` directory of this checkout (the module's source and build); it
    does not exist in an installed package."""
    return Path(__file__).resolve().parents[3] / "native"


def packaged_path() -> Path:
    """Where the platform wheel puts the module: ``echomq/native/echomq.so`` beside this
    file (package data; the pure wheel has none)."""
    return Path(__file__).resolve().with_name(FILE_NAME)


def module_path() -> Path | None:
    """The module a server should load, or None when there is none.

    The first of: ``EMQ_MODULE`` when set (None if that file is missing: an explicit
    choice is never passed over); a checkout's own build ``native/echomq.so`` (a
    developer's fresh ``make`` wins over anything installed); the module the platform
    wheel installed (:func:`packaged_path`). Nothing is built here.
    """
    env = os.environ.get("EMQ_MODULE")
    if env:
        return Path(env) if Path(env).is_file() else None
    for candidate in (source_dir() / FILE_NAME, packaged_path()):
        if candidate.is_file():
            return candidate
    return None


def build(*, quiet: bool = False) -> Path | None:
    """Build the module with ``make -C native`` (a no-op when up to date): the explicit
    step behind ``emq native build``, ``scripts/setup``, the tests and the benches;
    nothing in the library calls it by itself.

    Returns:
        The shared object, or None when it did not build; a failure is logged as a
        warning (the scripts serve then), never passed over silently.
    """
    src = source_dir()
    if not (src / "Makefile").is_file():
        return module_path()
    try:
        done = subprocess.run(
            ["make", "-s", "-C", str(src)], capture_output=True, text=True, timeout=120
        )
    except (OSError, subprocess.SubprocessError) as exc:
        log.warning("echomq: the native module did not build (%s); scripts serve", exc)
        return None
    if done.returncode != 0:
        log.warning(
            "echomq: the native module did not build; scripts serve\n%s", done.stderr.strip()
        )
        return None
    so = src / "echomq.so"
    if not quiet:
        log.info("echomq: native module built at %s", so)
    return so if so.is_file() else None
