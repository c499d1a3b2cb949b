"""The schema (echomq.schema) against what spells it elsewhere: the generated files,
the enqueue script's options, the row readers and a live row."""

from __future__ import annotations

import re
import subprocess
import sys
from dataclasses import fields
from importlib import resources
from pathlib import Path

import redis

from echomq import Queue, errors, schema
from echomq.hooks import TRACE_OPTION_INDEX
from echomq.lifecycle import KEEP_OPTION_INDEX, RESENT_OPTION
from echomq.results import JobRow

ROOT = Path(__file__).resolve().parents[1]
LUA = resources.files("echomq") / "lua"


def test_the_generated_files_are_fresh() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "gen_schema.py"), "--check"],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr


def test_enqueue_options_are_in_the_scripts_order() -> None:
    head = (LUA / "enqueue.lua").read_text(encoding="utf-8").split("\nlocal ", 1)[0]
    listed = head.split("in this order; '' or omitted = absent:", 1)[1].split("-- Reads:")[0]
    words = re.findall(r"(?:^|\n--\s+|,\s*)([a-z_]+)(?=[,\s(])", listed)
    assert tuple(w for w in words if w in schema.ENQUEUE_OPTIONS) == schema.ENQUEUE_OPTIONS
    o = schema.ENQUEUE_OPTIONS
    assert (
        o.index("trace"),
        o.index("keep_ms"),
        o.index("resent"),
    ) == (TRACE_OPTION_INDEX, KEEP_OPTION_INDEX, RESENT_OPTION)


def test_job_row_attributes_are_schema_fields() -> None:
    own = {"id", "data", "errors", "extra"}
    attrs = {f.name for f in fields(JobRow)} - own
    assert attrs <= set(schema.ROW_FIELD), sorted(attrs - set(schema.ROW_FIELD))


def test_refusal_codes_map_to_the_reasons_of_their_classes() -> None:
    for code, reason in schema.REFUSAL_CODES.items():
        cls = errors.REPLY_CODES[code]
        assert issubclass(cls, errors.Refused) and cls.reason == reason, code
    assert errors.GONE == schema.GONE


def test_a_kept_row_holds_only_schema_fields(q: Queue, r: redis.Redis) -> None:
    q.set_retention(completed=10, dead=10)
    jid = q.enqueue({"a": 1}, name="n", group="g", priority=3, max_attempts=1, dedup_id="d")
    job = q.claim()
    assert job is not None and job.id == jid
    q.update_progress(jid, 50)
    q.retry(jid, job.token, "boom")
    row = r.hgetall(q.keys.job(jid))
    assert row["state"] == "dead"
    assert set(row) <= set(schema.ROW_FIELD), sorted(set(row) - set(schema.ROW_FIELD))
    assert set(r.hgetall(q.keys.meta)) <= {f.name for f in schema.META_FIELDS}
