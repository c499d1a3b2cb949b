"""Write (or, with --check, verify) the files generated from src/echomq/schema.py.

- src/echomq/lua/lib/keys.lua: the scripts' key names and the run order's two numbers
  (constants the loader inlines);
- native/schema.h: the C module's key suffixes, field names and the same two numbers;
- docs/architecture.md: the key and field tables between their markers.

Usage: python scripts/gen_schema.py [--check]
--check writes nothing and exits 1 naming each stale file (scripts/test runs it).
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from echomq import schema  # noqa: E402

GENERATED = "generated from src/echomq/schema.py by scripts/gen_schema.py; do not edit"


def _lane_args(name: str) -> str:
    """Each lane slot's offset of sum ``name``, as 4 digits each, in slot order."""
    out = [str(schema.hist_lane_at(slot, name)) for slot in range(schema.HIST_LANES)]
    assert all(len(x) == 4 for x in out), out
    return "".join(out)


def lua_keys() -> str:
    HL = schema.HIST_LANES
    lines = [
        f"-- lib/keys: the scripts' key names, {GENERATED}.",
        "-- Every key of a queue is its base B (emq:{q}:, KEYS[1]) followed by one of these",
        "-- suffixes. Include it before lib/common, whose helpers read these names. The",
        "-- loader puts each constant in place of its name (in the script and its spliced",
        "-- helpers), so a name costs nothing per call.",
    ]
    for key in schema.KEYS:
        lines.append(f"-- {key.doc}")
        lines.append(f"local {key.name} = '{key.suffix}'")
    lines += [
        "-- run order: a ready job's score is priority * SEQ_SPAN + seq (its enqueue",
        "-- sequence, modulo SEQ_SPAN), with |priority| <= PRIORITY_MAX",
        f"local SEQ_SPAN = {schema.SEQ_SPAN}",
        f"local PRIORITY_MAX = {schema.PRIORITY_MAX}",
        "-- a keep_last job held behind its running owner waits in the schedule at this score",
        f"local DEDUP_HOLD = {schema.DEDUP_HOLD}",
        "-- the history series: a queue-hour's key, 60 minute slots (schema.HIST_FIELDS)",
        f"local HIST_SLOT_BITS = {schema.HIST_SLOT_BITS}",
        f"local HIST_MARK = {schema.HIST_MARK}",
        f"local HIST_MARK_ARG = '{schema.HIST_MARK}'",
        f"local HIST_KEEP_MS = {schema.HIST_KEEP_MS}",
        f"local HIST_WAIT_UNIT_MS = {schema.HIST_WAIT_UNIT_MS}",
        *(f"local HIST_{n.upper()}_AT = {schema.HIST_AT[n]}" for n, _ in schema.HIST_FIELDS),
        *(f"local HIST_{n.upper()}_T = '{schema.HIST_TYPE[n]}'" for n, _ in schema.HIST_FIELDS),
        "-- the busiest lanes' table in the hour key (schema.HIST_LANE*)",
        f"local HIST_LANES = {schema.HIST_LANES}",
        "-- the admission filter: a job id's mixed djb2 under this admits (schema.HIST_LANE_ADMIT)",
        f"local HIST_LANE_ADMIT_BELOW = {2**32 // schema.HIST_LANE_ADMIT}",
        "-- HIST_LANE_ADMIT_MIX's 16-bit halves (each product with a u32 exact in a double)",
        f"local HIST_LANE_ADMIT_MIX_HI = {schema.HIST_LANE_ADMIT_MIX >> 16}",
        f"local HIST_LANE_ADMIT_MIX_LO = {schema.HIST_LANE_ADMIT_MIX & 0xFFFF}",
        f"local HIST_LANES_AT = {schema.HIST_LANES_AT}",
        f"local HIST_LANE_HASH_AT = {schema.HIST_LANE_HASH_AT}",
        f"local HIST_LANE_HASH_BYTE = {schema.HIST_LANE_HASH_AT // 8}",
        "-- the hashes' bytes as GETRANGE's text arguments (a number argument costs a format)",
        f"local HIST_LANE_HASH_FIRST_ARG = '{schema.HIST_LANE_HASH_AT // 8}'",
        f"local HIST_LANE_HASH_LAST_ARG = '{schema.HIST_LANE_HASH_AT // 8 + 4 * HL - 1}'",
        f"local HIST_LANE_BITS = {schema.HIST_LANE_BITS}",
        "-- each slot's offset of a sum, 4 digits a slot (the scripts cut the slot's out)",
        *(
            f"local HIST_LANE_{n.upper()}_ARGS = '{_lane_args(n)}'"
            for n, _ in schema.HIST_LANE_FIELDS
        ),
        *(
            f"local HIST_LANE_{n.upper()}_AT = {schema.HIST_LANE_AT[n]}"
            for n, _ in schema.HIST_LANE_FIELDS
        ),
        *(f"local HIST_LANE_{n.upper()}_T = '{t}'" for n, t in schema.HIST_LANE_TYPE.items()),
    ]
    return "\n".join(lines) + "\n"


def c_header() -> str:
    lines = [
        f"/* native/schema.h: {GENERATED}. */",
        "#ifndef ECHOMQ_SCHEMA_H",
        "#define ECHOMQ_SCHEMA_H",
        "",
        "/* key suffixes: a queue's key is its base emq:{q}: followed by one of these */",
    ]
    lines += [f'#define EMQ_K_{k.name} "{k.suffix}"' for k in schema.KEYS]
    lines += ["", "/* the fields of a job's row */"]
    lines += [f'#define EMQ_F_{f.const} "{f.name}"' for f in schema.ROW_FIELDS]
    lines += ["", "/* the fields of a queue's meta hash */"]
    lines += [f'#define EMQ_F_{f.const} "{f.name}"' for f in schema.META_FIELDS]
    lines += [
        "",
        "/* run order: a ready job's score is priority * EMQ_SEQ_SPAN + seq (its enqueue",
        " * sequence, modulo EMQ_SEQ_SPAN), with |priority| <= EMQ_PRIORITY_MAX */",
        f"#define EMQ_SEQ_SPAN {schema.SEQ_SPAN}LL",
        f"#define EMQ_PRIORITY_MAX {schema.PRIORITY_MAX}LL",
        "/* a keep_last job held behind its running owner waits in the schedule at this score */",
        f"#define EMQ_DEDUP_HOLD {schema.DEDUP_HOLD}LL",
        "/* the history series: a queue-hour's key, 60 minute slots (schema.HIST_FIELDS) */",
        f"#define EMQ_HIST_SLOT_BITS {schema.HIST_SLOT_BITS}LL",
        f"#define EMQ_HIST_MARK {schema.HIST_MARK}LL",
        f"#define EMQ_HIST_KEEP_MS {schema.HIST_KEEP_MS}LL",
        f"#define EMQ_HIST_WAIT_UNIT_MS {schema.HIST_WAIT_UNIT_MS}LL",
        *(f"#define EMQ_HIST_{n.upper()}_AT {schema.HIST_AT[n]}LL" for n, _ in schema.HIST_FIELDS),
        *(f'#define EMQ_HIST_{n.upper()}_T "{schema.HIST_TYPE[n]}"' for n, _ in schema.HIST_FIELDS),
        "/* the busiest lanes' table in the hour key (schema.HIST_LANE*) */",
        f"#define EMQ_HIST_LANES {schema.HIST_LANES}",
        "/* the admission filter: a job id's mixed djb2 under this admits (HIST_LANE_ADMIT) */",
        f"#define EMQ_HIST_LANE_ADMIT_BELOW {2**32 // schema.HIST_LANE_ADMIT}U",
        f"#define EMQ_HIST_LANE_ADMIT_MIX {schema.HIST_LANE_ADMIT_MIX}U",
        f"#define EMQ_HIST_LANES_AT {schema.HIST_LANES_AT}LL",
        f"#define EMQ_HIST_LANE_HASH_AT {schema.HIST_LANE_HASH_AT}LL",
        f"#define EMQ_HIST_LANE_HASH_BYTE {schema.HIST_LANE_HASH_AT // 8}LL",
        f"#define EMQ_HIST_LANE_BITS {schema.HIST_LANE_BITS}LL",
        *(
            f"#define EMQ_HIST_LANE_{n.upper()}_AT {schema.HIST_LANE_AT[n]}LL"
            for n, _ in schema.HIST_LANE_FIELDS
        ),
        *(f'#define EMQ_HIST_LANE_{n.upper()}_T "{t}"' for n, t in schema.HIST_LANE_TYPE.items()),
    ]
    lines += ["", "#endif", ""]
    return "\n".join(lines)


def _table(head: str, rows: list[tuple[str, ...]]) -> str:
    cols = head.count("|") - 1
    out = [head, "|" + "---|" * cols]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(out)


def docs_tables() -> str:
    def spelled(k: schema.Key) -> str:
        if k.shape == "queue":
            return f'`B+"{k.suffix}"`'
        if k.shape == "per_id":
            return f'`B+"{k.suffix}"+id`'
        if k.shape == "row":
            return f'row`+"{k.suffix}"`'
        return f'lane end `"{k.suffix}"`'

    keys = _table(
        "| key | name | type | meaning |",
        [(spelled(k), f"`{k.name}`", k.type, k.doc) for k in schema.KEYS],
    )
    rows = _table(
        "| field | kind | meaning |",
        [(f"`{f.name}`", f.kind, f.doc) for f in schema.ROW_FIELDS],
    )
    meta = _table(
        "| field | kind | meaning |",
        [(f"`{f.name}`", f.kind, f.doc) for f in schema.META_FIELDS],
    )
    codes = _table(
        "| error reply | reason |",
        [(f"`{c}`", f"`{r}`") for c, r in schema.REFUSAL_CODES.items()]
        + [(f"`{schema.GONE}` (integer reply)", "`gone`")],
    )
    opts = ", ".join(f"`{o}`" for o in schema.ENQUEUE_OPTIONS)
    run_order = (
        "**Run order**: a ready job's score in `pending`, its lane and `gindex` is "
        f"`priority * {schema.SEQ_SPAN} + seq` (`SEQ_SPAN` = 2**32; `seq` is the row's "
        "enqueue sequence, taken from the key `seq` modulo 2**32), with "
        f"`|priority| <= {schema.PRIORITY_MAX}` (`PRIORITY_MAX` = 2**20)."
    )
    return (
        f"<!-- schema: {GENERATED} -->\n\n"
        f"**Keys** (`B` = `emq:{{q}}:`):\n\n{keys}\n\n"
        f'**A job\'s row** (`B+"job:"+id`):\n\n{rows}\n\n'
        f'**A queue\'s meta** (`B+"meta"`):\n\n{meta}\n\n'
        f"**Refusal codes**:\n\n{codes}\n\n"
        f"**Enqueue options**, in ARGV order after the jobs: {opts}.\n\n"
        f"{run_order}\n"
    )


BEGIN, END = "<!-- schema:begin -->", "<!-- schema:end -->"


def with_docs(text: str) -> str:
    if BEGIN not in text or END not in text:
        raise SystemExit(f"docs/architecture.md lacks the markers {BEGIN} ... {END}")
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    return f"{head}{BEGIN}\n{docs_tables()}{END}{tail}"


def targets() -> dict[Path, str]:
    arch = ROOT / "docs" / "architecture.md"
    return {
        ROOT / "src" / "echomq" / "lua" / "lib" / "keys.lua": lua_keys(),
        ROOT / "native" / "schema.h": c_header(),
        arch: with_docs(arch.read_text(encoding="utf-8")),
    }


def main(argv: list[str]) -> int:
    check = "--check" in argv
    stale = []
    for path, text in targets().items():
        old = path.read_text(encoding="utf-8") if path.exists() else None
        if old == text:
            continue
        if check:
            stale.append(path.relative_to(ROOT))
        else:
            path.write_text(text, encoding="utf-8")
            print(f"gen_schema: wrote {path.relative_to(ROOT)}")
    if stale:
        names = ", ".join(str(p) for p in stale)
        print(f"gen_schema: stale: {names} (run python scripts/gen_schema.py)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
