"""Building the native module is an explicit step: ``emq native build`` / ``emq native
path``, and an embedded server that only loads a module already built (it never runs
``make``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from echomq import native
from echomq.cli import app as cli_app
from echomq.cli import exits
from echomq.embedded import EmbeddedServer
from echomq.errors import ServerUnavailable


@pytest.fixture()
def no_make(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fail the test if anything builds the module."""

    def refuse(**kw: Any) -> None:
        raise AssertionError("the module was built as a side effect")

    monkeypatch.setattr(native, "build", refuse)


def test_native_path_prints_the_built_module(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    so = tmp_path / "echomq.so"
    so.write_bytes(b"")
    monkeypatch.setenv("EMQ_MODULE", str(so))
    result = CliRunner().invoke(cli_app.cli, ["native", "path"])
    assert result.exit_code == 0 and result.output == f"{so}\n"
    result = CliRunner().invoke(cli_app.cli, ["--json", "native", "path"])
    assert result.exit_code == 0 and json.loads(result.output) == {"path": str(so)}


def test_native_path_without_a_module_says_how_to_build_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, no_make: None
) -> None:
    monkeypatch.setenv("EMQ_MODULE", str(tmp_path / "missing.so"))
    result = CliRunner().invoke(cli_app.cli, ["native", "path"])
    assert result.exit_code == exits.FAILURE
    assert "the echomq native module is not built" in result.output
    assert "emq native build" in result.output


def test_native_build_runs_make_and_prints_the_path(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[bool] = []
    built = native.source_dir() / "echomq.so"

    def fake_build(*, quiet: bool = False) -> Path:
        calls.append(quiet)
        return built

    monkeypatch.setattr(native, "build", fake_build)
    result = CliRunner().invoke(cli_app.cli, ["native", "build"])
    assert result.exit_code == 0 and result.output == f"{built}\n" and calls == [True]
    monkeypatch.setattr(native, "build", lambda quiet=False: None)
    result = CliRunner().invoke(cli_app.cli, ["native", "build"])
    assert result.exit_code == exits.FAILURE
    assert "did not build" in result.output


@pytest.mark.skipif(native.module_path() is None, reason="the echomq native module is not built")
def test_native_build_really_builds() -> None:
    result = CliRunner().invoke(cli_app.cli, ["native", "build"])  # up to date: a no-op
    assert result.exit_code == 0, result.output
    assert result.output.strip() == str(native.source_dir() / "echomq.so")


def test_an_embedded_server_asked_for_a_missing_module_says_how_to_build_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, no_make: None
) -> None:
    monkeypatch.setenv("EMQ_MODULE", str(tmp_path / "missing.so"))
    with pytest.raises(ServerUnavailable, match=r"not built; install the platform wheel.*emq"):
        EmbeddedServer(module=True).start()


def test_an_embedded_server_starts_without_a_module_not_built(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, no_make: None
) -> None:
    monkeypatch.setenv("EMQ_MODULE", str(tmp_path / "missing.so"))
    with EmbeddedServer() as srv:  # the scripts serve; nothing was built
        assert srv.module_path is None


@pytest.mark.skipif(native.module_path() is None, reason="the echomq native module is not built")
def test_an_embedded_server_loads_the_module_already_built(no_make: None) -> None:
    with EmbeddedServer(module=True) as srv:
        assert srv.module_path == str(native.module_path())
