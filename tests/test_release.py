"""The release's facts agree: the version, the changelog, where the module is found,
the wheel build's sources (the wheels themselves: scripts/check_dist.py)."""

from __future__ import annotations

import re
import runpy
from pathlib import Path

import pytest
from click.testing import CliRunner

import echomq
from echomq import native
from echomq.cli import app as cli_app

ROOT = Path(__file__).resolve().parents[1]


def test_the_changelog_opens_with_unreleased_then_this_version() -> None:
    text = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    headings = re.findall(r"^## \[([^\]]+)\]", text, re.MULTILINE)
    assert headings[0] == "Unreleased"
    assert headings[1] == echomq.__version__ == "0.2.0"
    assert len(headings) == len(set(headings))


def test_module_path_prefers_the_variable_then_the_checkout_then_the_package(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    checkout, package = tmp_path / "checkout", tmp_path / "package"
    checkout.mkdir()
    package.mkdir()
    monkeypatch.setattr(native, "source_dir", lambda: checkout)
    monkeypatch.setattr(native, "packaged_path", lambda: package / native.FILE_NAME)
    monkeypatch.delenv("EMQ_MODULE", raising=False)
    assert native.module_path() is None
    (package / native.FILE_NAME).write_bytes(b"")
    assert native.module_path() == package / native.FILE_NAME  # an installed wheel
    (checkout / native.FILE_NAME).write_bytes(b"")
    assert native.module_path() == checkout / native.FILE_NAME  # a developer's build wins
    chosen = tmp_path / "chosen.so"
    monkeypatch.setenv("EMQ_MODULE", str(chosen))
    assert native.module_path() is None  # an explicit choice is never passed over
    chosen.write_bytes(b"")
    assert native.module_path() == chosen
    result = CliRunner().invoke(cli_app.cli, ["native", "path"])
    assert result.exit_code == 0 and result.output == f"{chosen}\n"


def test_the_installed_module_sits_beside_the_native_package() -> None:
    assert native.packaged_path() == Path(native.__file__).resolve().parent / "echomq.so"
    assert native.source_dir() == ROOT / "native"


def test_the_wheel_build_compiles_the_makefiles_sources() -> None:
    setup = runpy.run_path(str(ROOT / "setup.py"), run_name="echomq_setup_probe")
    names = [p.name for p in setup["sources"]()]
    assert names[-1] == "module.c" and len(names) == len(set(names))
    assert set(names) == {p.name for p in (ROOT / "native").glob("*.c")}
