"""The scripts' Functions form: each transition as a Redis 7 library of its own.

An ``EVALSHA`` runs the whole script on every call: its spliced helpers
(``--! include``) are made again as closures each time, a fixed cost of 9,000 to 25,000
server instructions a call (docs/performance.md). A library (``FUNCTION LOAD`` once,
``FCALL`` after) makes them once, at load. The same source makes both forms:

- the helpers of the script's leading includes become the library's top-level
  locals, defined once;
- the rest of the script becomes the registered function's body, unchanged: ``KEYS``,
  ``ARGV`` and the base ``B`` (the script's first line, ``local B = KEYS[n]``) are
  locals of the library that the function sets on entry, so the helpers read them as
  they read the script's own (the server runs one function at a time);
- the standard globals the code uses (``redis``, ``tonumber``, ``cjson``, ...) are
  locals of the library too, taken on the first call: a function's globals table is
  empty and reaches the real one through a metatable, so every global read would miss
  first (measured: a batch of 100 cost 1% more than by ``EVALSHA`` before this, 3%
  less after);
- the function's flags are the script's shebang flags (``#!lua flags=...``; a script
  without a shebang gets none: the server then refuses it at the start when memory is
  full, where the ``EVALSHA`` form is refused at its first write that needs memory;
  both before anything is written);
- the library and its one function are named ``emq_<script>_<sha1 of the code, 12
  hex>``: a change of the script is a new library, so clients of two versions never
  replace each other's.

The transport sends ``FCALL`` when the server takes it, loads a library on
``Function not found`` (a restarted server, a fresh one), and falls back to
``EVALSHA`` for good when the server has no Functions (Redis 6, a proxy, an ACL
without ``FCALL`` or ``FUNCTION LOAD``, a full server refusing the load), see
:mod:`echomq.transport.exchange`. ``EMQ_FUNCTIONS=0`` in the environment sends
``EVALSHA`` only. A cluster client sends ``EVALSHA`` (the sharded-publish form).
"""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass


def enabled() -> bool:
    """Whether a queue made now sends ``FCALL`` (``EMQ_FUNCTIONS=0``: never)."""
    flag = os.environ.get("EMQ_FUNCTIONS", "1").strip().lower()
    return flag not in ("0", "false", "no", "off")


#: The prefix of every library and function echomq loads.
PREFIX = "emq_"

#: The standard globals a library takes as locals when its code uses them.
GLOBALS = (
    "redis", "cjson", "cmsgpack", "bit", "struct", "string", "table", "math", "tonumber",
    "tostring", "type", "pairs", "ipairs", "next", "select", "unpack", "error", "pcall",
)  # fmt: skip
_WORD = re.compile(r"\w+")
_COMMENT = re.compile(r"--[^\n]*")
_SHEBANG = re.compile(r"^#!lua(?: flags=(\S+))?\s*$")
_PRELUDE = re.compile(r"^local (\w+) = (KEYS\[\d+\])\s*$")
_INCLUDE_LINE = re.compile(r"^--! include \w+\s*$")


@dataclass(frozen=True)
class Library:
    """A script's Functions form: the library's (and its function's) name and code."""

    name: str
    code: str


def split(text: str) -> tuple[tuple[str, ...], str, str, str]:
    """A script's source as its shebang flags, its prelude (``local B = KEYS[n]``), the
    leading include lines (the helpers the library defines once) and the rest (the
    function's body).

    Raises:
        ValueError: the script does not open with a prelude line after its comments.
    """
    lines = text.splitlines(keepends=True)
    i, flags = 0, ()
    m = _SHEBANG.match(lines[0]) if lines else None
    if m:
        flags = tuple(m.group(1).split(",")) if m.group(1) else ()
        i = 1
    while i < len(lines) and lines[i].startswith("--"):
        i += 1
    if i == len(lines) or not _PRELUDE.match(lines[i]):
        raise ValueError(f"no `local B = KEYS[n]` line after the header: {lines[i : i + 1]}")
    prelude = lines[i]
    i += 1
    start = i
    while i < len(lines) and (_INCLUDE_LINE.match(lines[i]) or lines[i].startswith("--")):
        i += 1
    return flags, prelude, "".join(lines[start:i]), "".join(lines[i:])


def library(script: str, flags: tuple[str, ...], prelude: str, helpers: str, body: str) -> Library:
    """The library of one script, from its parts as :func:`split` gives them, their
    includes spliced (``helpers`` and ``body`` are Lua)."""
    m = _PRELUDE.match(prelude)
    assert m is not None  # split() checked it
    local, source = m.groups()
    if not body.endswith("\n"):
        body += "\n"
    flag_list = ", ".join(f"'{f}'" for f in flags)
    words = set(_WORD.findall(_COMMENT.sub("", helpers + body)))
    used = ", ".join(g for g in GLOBALS if g in words or g == "redis")
    head = (
        f"-- echomq {script}: the Functions form of lua/{script}.lua (echomq.functions)\n"
        f"local KEYS, ARGV, {local}\n"
        # read at the first call: at load the globals are the loader's, not the runtime's
        f"local function runtime() return {used} end\n"
        f"local register = redis.register_function\n"
        f"local {used}\n{helpers}"
    )
    tail = (
        f"callback = function(keys, args)\n"
        f"if not redis then {used} = runtime() end\n"
        f"KEYS, ARGV = keys, args\n{local} = {source}\n{body}end}}\n"
    )
    sha = hashlib.sha1(f"{head}\0{flag_list}\0{tail}".encode()).hexdigest()[:12]
    name = f"{PREFIX}{script}_{sha}"
    register = f"register{{function_name = '{name}', flags = {{{flag_list}}},\n"
    return Library(name, f"#!lua name={name}\n{head}{register}{tail}")
