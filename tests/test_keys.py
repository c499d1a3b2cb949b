"""One key schema: the Lua include ``lua/lib/keys.lua`` against ``keyspace.py``.

The scripts spell every key as the queue base followed by a suffix named in
``lib/keys``; ``keyspace.py`` builds the same keys for Python. These tests hold the
two to the same suffixes (nothing missing on either side), keep inline suffixes out
of the scripts, and check on a live server that every key the verbs leave behind is
one ``keyspace.py`` can name.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from importlib import resources

import pytest
import redis

from conftest import queue_keys
from echomq import Queue, new_id, schema
from echomq.keyspace import Keyspace
from echomq.scripts import all_scripts, script

LUA = resources.files("echomq") / "lua"
_CONST = re.compile(r"^local ([A-Z_]+) = '([^']*)'$")
_NUMBER = re.compile(r"^local ([A-Z_]+) = ([0-9]+)$", re.MULTILINE)


def lua_numbers() -> dict[str, str]:
    """``lib/keys``'s whole-number constants (the run order's two numbers, the dedup
    hold and the history series' layout)."""
    text = (LUA / "lib" / "keys.lua").read_text(encoding="utf-8")
    return dict(_NUMBER.findall(text))


def hist_layout() -> dict[str, str]:
    """The history series' layout as lib/keys must spell it (schema.HIST_*): numbers,
    and each field's BITFIELD type and the marker's offset as text."""
    out = {
        "HIST_SLOT_BITS": str(schema.HIST_SLOT_BITS),
        "HIST_MARK": str(schema.HIST_MARK),
        "HIST_KEEP_MS": str(schema.HIST_KEEP_MS),
        "HIST_WAIT_UNIT_MS": str(schema.HIST_WAIT_UNIT_MS),
    }
    for name, _ in schema.HIST_FIELDS:
        out[f"HIST_{name.upper()}_AT"] = str(schema.HIST_AT[name])
    # the busiest lanes' table in the hour key
    out["HIST_LANES"] = str(schema.HIST_LANES)
    out["HIST_LANES_AT"] = str(schema.HIST_LANES_AT)
    out["HIST_LANE_HASH_AT"] = str(schema.HIST_LANE_HASH_AT)
    out["HIST_LANE_HASH_BYTE"] = str(schema.HIST_LANE_HASH_AT // 8)
    out["HIST_LANE_BITS"] = str(schema.HIST_LANE_BITS)
    out["HIST_LANE_ADMIT_BELOW"] = str(2**32 // schema.HIST_LANE_ADMIT)
    out["HIST_LANE_ADMIT_MIX_HI"] = str(schema.HIST_LANE_ADMIT_MIX >> 16)
    out["HIST_LANE_ADMIT_MIX_LO"] = str(schema.HIST_LANE_ADMIT_MIX & 0xFFFF)
    for name, _ in schema.HIST_LANE_FIELDS:
        out[f"HIST_LANE_{name.upper()}_AT"] = str(schema.HIST_LANE_AT[name])
    return out


def hist_texts() -> dict[str, str]:
    out = {f"HIST_{n.upper()}_T": schema.HIST_TYPE[n] for n, _ in schema.HIST_FIELDS}
    out.update({f"HIST_LANE_{n.upper()}_T": t for n, t in schema.HIST_LANE_TYPE.items()})
    out["HIST_MARK_ARG"] = str(schema.HIST_MARK)
    for name, _ in schema.HIST_LANE_FIELDS:
        at = [f"{schema.hist_lane_at(slot, name):04d}" for slot in range(schema.HIST_LANES)]
        out[f"HIST_LANE_{name.upper()}_ARGS"] = "".join(at)
    out["HIST_LANE_HASH_FIRST_ARG"] = str(schema.HIST_LANE_HASH_AT // 8)
    out["HIST_LANE_HASH_LAST_ARG"] = str(schema.HIST_LANE_HASH_AT // 8 + 4 * schema.HIST_LANES - 1)
    return out


def lua_suffixes() -> dict[str, str]:
    """``lib/keys``'s names and their suffixes; the lib holds nothing else but
    :func:`lua_numbers`."""
    out: dict[str, str] = {}
    for line in (LUA / "lib" / "keys.lua").read_text(encoding="utf-8").splitlines():
        if not line or line.startswith("--") or _NUMBER.match(line):
            continue
        m = _CONST.match(line)
        assert m, f"lib/keys holds only constant suffixes, not {line!r}"
        if m.group(1) in hist_texts():  # the history series' layout, as text
            assert hist_texts()[m.group(1)] == m.group(2), m.group(1)
            continue
        assert m.group(1) not in out, f"{m.group(1)} defined twice"
        out[m.group(1)] = m.group(2)
    return out


ID, GROUP, DEDUP_ID, REPEAT_NAME = new_id(), "grp", "dd", "rep"

#: keyspace.py's key builders that take a part, each with the Lua spelling of the
#: same key (the names of lib/keys it uses) and how keyspace.py builds it.
COMPOSED: dict[str, tuple[tuple[str, ...], Callable[[Keyspace], str], str]] = {
    # builder: (lib/keys names, keyspace call, the part between them)
    "job": (("JOB",), lambda k: k.job(ID), ID),
    "logs": (("JOB", "LOGS"), lambda k: k.logs(ID), ID),
    "logtimes": (("JOB", "LOGTIMES"), lambda k: k.logtimes(ID), ID),
    "lock": (("JOB", "LOCK"), lambda k: k.lock(ID), ID),
    "errors": (("JOB", "ERRORS"), lambda k: k.errors(ID), ID),
    "deps": (("JOB", "DEPS"), lambda k: k.deps(ID), ID),
    "kids": (("JOB", "KIDS"), lambda k: k.kids(ID), ID),
    "kidfails": (("JOB", "KIDFAILS"), lambda k: k.kidfails(ID), ID),
    "dedup": (("DEDUP",), lambda k: k.dedup(DEDUP_ID), DEDUP_ID),
    "lane": (("LANE", "LANE_END"), lambda k: k.lane(GROUP), GROUP),
    "lane_starts": (("GSTARTS",), lambda k: k.lane_starts(GROUP), GROUP),
    "repeat_record": (("REPEAT_RECORD",), lambda k: k.repeat_record(REPEAT_NAME), REPEAT_NAME),
    "claim_request": (("CLAIMREQ",), lambda k: k.claim_request("0123abcd"), "0123abcd"),
    "worker": (("WORKER",), lambda k: k.worker("0123abcd"), "0123abcd"),
    "hist": (("HIST",), lambda k: k.hist(498971), "498971"),
}
#: Keyspace members that are not keys of the queue's schema.
NOT_KEYS = {"name", "base", "state_set", "pattern"}


def keyspace_members() -> set[str]:
    attrs = set(Keyspace.__slots__)
    methods = {n for n, v in vars(Keyspace).items() if callable(v) and not n.startswith("_")}
    return (attrs | methods) - NOT_KEYS


def test_lib_keys_and_keyspace_name_the_same_keys() -> None:
    lua = lua_suffixes()
    ks = Keyspace("q")
    used: set[str] = set()
    for member in sorted(keyspace_members()):
        if member in COMPOSED:
            names, build, part = COMPOSED[member]
            head, *tail = names
            spelled = ks.base + lua[head] + part + "".join(lua[n] for n in tail)
            assert build(ks) == spelled, member
            used.update(names)
        else:
            name = member.upper()
            assert name in lua, f"keyspace.{member} has no suffix in lib/keys"
            assert getattr(ks, member) == ks.base + lua[name], member
            used.add(name)
    assert used == set(lua), f"lib/keys names no keyspace.py key: {set(lua) - used}"


def _code(text: str) -> str:
    return re.sub(r"--[^\n]*", "", text)


@pytest.mark.parametrize(
    "path",
    sorted(
        [p.name for p in LUA.iterdir() if p.name.endswith(".lua")]
        + [f"lib/{p.name}" for p in (LUA / "lib").iterdir() if p.name != "keys.lua"]
    ),
)
def test_no_script_spells_a_key_inline(path: str) -> None:
    text = (LUA / path).read_text(encoding="utf-8")
    code = _code(text)
    # a key is the base and a lib/keys name; only obliterate's SCAN pattern is B .. '*'
    inline = [m for m in re.findall(r"B \.\. '[^']*'", code) if m != "B .. '*'"]
    assert not inline, f"{path} spells keys inline: {inline}"
    assert not re.findall(r"\.\. ':", code), f"{path} spells a row suffix inline"
    if path.startswith("lib/"):
        return  # a lib is spliced into scripts, which include lib/keys for it
    if "--! include common" in text or re.search(r"\bB \.\. [A-Z]", code):
        keys_at = text.find("--! include keys")
        assert keys_at >= 0, f"{path} uses lib/keys without including it"
        common_at = text.find("--! include common")
        assert common_at < 0 or keys_at < common_at, "lib/keys goes before lib/common"


def _named(k: Keyspace, key: str) -> str | None:
    """``key`` as keyspace.py builds it, or ``None`` when no builder makes it."""
    plain = {getattr(k, a) for a in Keyspace.__slots__ if a not in NOT_KEYS}
    if key in plain:
        return key
    rest = key[len(k.base) :]
    for pattern, build in (
        (r"job:(\w+)", k.job),
        (r"job:(\w+):logs", k.logs),
        (r"job:(\w+):logtimes", k.logtimes),
        (r"job:(\w+):lock", k.lock),
        (r"de:(.+)", k.dedup),
        (r"g:(.+):pending", k.lane),
        (r"repeat:(.+)", k.repeat_record),
        (r"hist:(\d+)", lambda h: k.hist(int(h))),
    ):
        m = re.fullmatch(pattern, rest)
        if m and build(m.group(1)) == key:
            return key
    return None


def test_every_key_the_verbs_leave_is_one_keyspace_names(q: Queue, r: redis.Redis) -> None:
    """Run verbs that leave every kind of key, then name each key left from keyspace.py."""
    k = q.keys
    a = q.enqueue("a")
    b = q.enqueue("b", max_attempts=1)
    c = q.enqueue("c", group=GROUP)
    got = {j.id: j for j in q.claim_many(3, lock_ms=60_000)}
    assert set(got) == {a, b, c}
    q.complete(a, got[a].token)
    assert q.retry(b, got[b].token, "boom") == "dead"
    held = q.enqueue("held", dedup_id=DEDUP_ID)
    laned = q.enqueue("laned", group=GROUP)
    later = q.enqueue("later", delay_ms=60_000)
    assert q.add_log(held, "line") == 1
    q.set_group_limit(GROUP, 2)
    q.set_group_weight(GROUP, 2)
    q.pause_group("other")
    q.repeat(REPEAT_NAME, every_ms=60_000, payload={"r": 1})
    q.pause()
    left = queue_keys(r, q)
    assert {key for key in left if _named(k, key) is None} == set()
    # the history series: the hour's key (two, when the hour turned meanwhile)
    hours = {key for key in left if key.startswith(k.base + "hist:")}
    assert 1 <= len(hours) <= 2
    left -= hours
    assert left == {
        k.meta, k.pending, k.active, k.schedule, k.dead, k.wake, k.ring, k.groups,
        k.gactive, k.glimit, k.gweight, k.gpaused, k.repeat, k.metrics_completed,
        k.metrics_failed, k.job(b), k.job(c), k.lock(c), k.job(held), k.logs(held),
        k.logtimes(held),
        k.job(laned), k.job(later), k.dedup(DEDUP_ID), k.lane(GROUP),
        k.repeat_record(REPEAT_NAME), k.audit, k.gindex, k.settled, k.seq,
    }  # fmt: skip


def test_lib_keys_numbers_are_the_schema_s() -> None:
    assert lua_numbers() == {
        "SEQ_SPAN": str(schema.SEQ_SPAN),
        "PRIORITY_MAX": str(schema.PRIORITY_MAX),
        "DEDUP_HOLD": str(schema.DEDUP_HOLD),
        **hist_layout(),
    }
    # put in place of their names like the suffixes: no script names them
    for s in all_scripts():
        code = re.sub(r"--[^\n]*", "", s.body)
        assert not re.search(r"\b(SEQ_SPAN|PRIORITY_MAX|DEDUP_HOLD|HIST_\w+)\b", code), s.name
    assert "* 4294967296 +" in script("enqueue").body  # lib/common's run_score, inlined


def test_the_loader_puts_each_suffix_in_place_of_its_name() -> None:
    """lib/keys costs nothing per call: its names become the literal suffixes, in the
    script and in the helpers spliced into it (no local, no upvalue per call)."""
    lua = lua_suffixes()
    for s in all_scripts():
        code = re.sub(r"--[^\n]*", "", s.body)
        assert not re.search(r"\b(" + "|".join(lua) + r")\b", code), s.name
    body = script("complete").body
    # complete spells active itself; give_back (from lib/common) reads gactive and glimit
    for key in ("B .. 'active'", "B .. 'gactive'", "B .. 'glimit'", "jk .. ':lock'"):
        assert key in body, key
    assert "local GACTIVE" not in body and "--! include" not in body
