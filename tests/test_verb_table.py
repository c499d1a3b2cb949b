"""The verb table (echomq.verbs) and the transitions (echomq.transitions) against the
scripts, the native module's source and the facades: a verb or a script missing
anywhere fails here."""

from __future__ import annotations

import logging
import re
from importlib import resources
from pathlib import Path

import pytest

from echomq import AsyncQueue, Queue, hooks
from echomq.native import GATED, TWINS
from echomq.queue import verb_names
from echomq.scripts import script
from echomq.transitions import RESEND, TRANSITIONS
from echomq.transport import RESEND as TRANSPORT_RESEND
from echomq.verbs import RUNTIME_VERBS, VerbTable, journaling, of_kind, verbs

LUA = resources.files("echomq") / "lua"
NATIVE = Path(__file__).resolve().parents[1] / "native"
_AUDIT_CALL = re.compile(r"^[^-\n]*\baudit\('(\w+)'", re.MULTILINE)


def lua_names() -> list[str]:
    return sorted(p.name[:-4] for p in LUA.iterdir() if p.name.endswith(".lua"))


def header(name: str) -> str:
    """A script's contract header: its leading comment lines."""
    lines = (LUA / f"{name}.lua").read_text(encoding="utf-8").splitlines()
    out = []
    for line in lines:
        if line.startswith("#!"):
            continue
        if not line.startswith("--"):
            break
        out.append(line)
    return "\n".join(out)


def audited(name: str) -> set[str]:
    """The verb names a script's own code writes audit entries for."""
    return set(_AUDIT_CALL.findall((LUA / f"{name}.lua").read_text(encoding="utf-8")))


def test_every_script_is_declared_once_and_every_declaration_has_its_script() -> None:
    assert sorted(TRANSITIONS) == lua_names()


@pytest.mark.parametrize("name", lua_names())
def test_each_script_header_names_its_contract(name: str) -> None:
    head = header(name)
    assert head.startswith(f"-- {name}:"), head[:80]
    for part in ("KEYS[1]", "Repl"):
        assert part in head, f"{name}'s header does not name {part}"
    if TRANSITIONS[name].journals:
        assert "audit" in head.lower(), f"{name} journals but its header does not say so"


@pytest.mark.parametrize("name", lua_names())
def test_a_transition_journals_exactly_when_its_script_writes_an_audit_entry(name: str) -> None:
    assert TRANSITIONS[name].journals == bool(audited(name)), name


def test_every_transition_is_run_by_a_verb() -> None:
    run = {s for v in verbs().values() for s in v.runs} | {
        s for rv in RUNTIME_VERBS for s in rv.runs
    }
    assert sorted(set(TRANSITIONS) - run) == []
    assert sorted(run - set(TRANSITIONS)) == []


def test_each_audit_entry_names_a_verb_that_runs_its_script() -> None:
    table = verbs()
    for name in TRANSITIONS:
        for verb in audited(name):
            assert verb in table, f"{name}.lua journals {verb!r}, which is no verb"
            assert name in table[verb].runs, f"{verb} does not declare it runs {name}"


def test_every_journaling_verb_is_an_operator_verb() -> None:
    for name, verb in verbs().items():
        if journaling(verb):
            assert verb.kind == "operator", name


def test_every_verb_names_a_plan_that_runs_what_it_declares() -> None:
    """A plan's module spells ``script("x")`` for each transition ``x`` it declares."""
    import inspect

    for name, verb in verbs().items():
        module = inspect.getsource(inspect.getmodule(verb.plan))  # type: ignore[arg-type]
        for run in verb.runs:
            script(run)  # loads
            assert f'script("{run}")' in module, f"{name}: {run} not run by its module"


def test_the_facades_are_the_table() -> None:
    assert verb_names(Queue) == verb_names(AsyncQueue) == sorted(verbs())
    assert set(vars(VerbTable)) >= set(verbs())


def test_the_resend_table_is_derived() -> None:
    assert TRANSPORT_RESEND == RESEND
    for name, t in TRANSITIONS.items():
        assert t.why, f"{name}: say why it is (or is not) re-sent"
    # the metrics scrape's two read-only scripts may be re-sent (a lost reply is a read)
    assert RESEND["obs_queue"] and RESEND["obs_groups"]


def test_native_twins_are_derived_and_the_module_registers_each() -> None:
    assert {s: t.native for s, t in TRANSITIONS.items() if t.native} == TWINS
    assert {t.native for t in TRANSITIONS.values() if t.gated} == set(GATED)
    source = "\n".join(p.read_text(encoding="utf-8") for p in NATIVE.glob("*.c")).lower()
    for command in TWINS.values():
        assert f'"{command.lower()}"' in source, f"{command} is not registered by the module"


def test_operator_verbs_are_logged_and_the_hot_path_is_not() -> None:
    """The facade's bound call of an operator verb is wrapped (a log line, a span when
    tracing); a hot-path verb or a read is the bare call."""
    q = Queue("vt", url="redis://127.0.0.1:1/0")  # no connection is made
    try:
        for name, verb in verbs().items():
            bound = getattr(q, name)
            wrapped = getattr(bound, "__wrapped__", None)
            if verb.kind == "operator":
                assert wrapped is not verb.plan, f"{name} is not observed"
            else:
                assert wrapped is verb.plan, f"{name} is wrapped"
    finally:
        q.close()


def test_the_kinds_cover_the_verbs() -> None:
    assert set().union(*(of_kind(k) for k in hooks.KINDS)) == set(verbs())
    # the twelve operator verbs that once journaled with no log line are operator verbs
    assert {
        "reprocess_jobs",
        "remove_jobs",
        "promote_jobs",
        "clean",
        "promote_job",
        "cancel_job",
        "pause_repeat",
        "resume_repeat",
        "run_repeat",
        "reindex",
        "set_retention",
        "drain_step",
    } <= of_kind("operator")


def test_an_operator_verb_logs_one_line_and_journals_one_entry(
    q: Queue, caplog: pytest.LogCaptureFixture
) -> None:
    jid = q.enqueue({"a": 1}, delay_ms=60_000)
    with caplog.at_level(logging.INFO, "echomq.operator"):
        assert q.set_retention(completed=10) == 0
        assert q.promote_jobs().matched == 1
    records = [
        (r.verb, r.queue, r.outcome)  # type: ignore[attr-defined]
        for r in caplog.records
        if r.name == "echomq.operator"
    ]
    assert records == [("set_retention", q.name, "ok"), ("promote_jobs", q.name, "ok")]
    assert [e.verb for e in q.audit()] == ["promote_jobs", "set_retention"]  # newest first
    assert q.job_state(jid) == "pending"
