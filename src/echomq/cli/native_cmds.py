"""``emq native``: build echomq's server module in a checkout, and say where it is.

The platform wheel installs the module already built; in a checkout, building is a
step of its own (``scripts/setup`` takes it, or ``emq native build``): the library
never runs ``make`` by itself, and the embedded server only loads a module already
built (docs/native.md).
"""

from __future__ import annotations

from .. import native as native_module
from . import exits
from .app import CommandFailed, Env, cli, pass_env


@cli.group()
def native() -> None:
    """Build and locate the native server module (see docs/native.md)."""


@native.command()
@pass_env
def build(env: Env) -> None:
    """Build the module in a checkout (make -C native; a no-op when up to date); print
    its path (in an installed package: the installed module's)."""
    made = native_module.build(quiet=True)
    if made is None:
        raise CommandFailed(
            "the echomq native module did not build (the warning above says why); "
            "the scripts serve without it",
            exits.FAILURE,
        )
    env.emit({"path": str(made)}, str(made))


@native.command()
@pass_env
def path(env: Env) -> None:
    """Print the module's path, for a server's loadmodule line (EMQ_MODULE, else a
    checkout's native/echomq.so, else the installed one); exit 1 when there is none."""
    found = native_module.module_path()
    if found is None:
        raise CommandFailed(
            f"the echomq native module is not built; {native_module.BUILD_HINT}", exits.FAILURE
        )
    env.emit({"path": str(found)}, str(found))
