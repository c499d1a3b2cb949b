"""The layers of docs/architecture.md, held: every module of echomq sits in one layer,
imports only from its own layer or those below, and no import cycle exists (imports
inside functions count; ``if TYPE_CHECKING:`` ones do not, as they never run)."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "echomq"

#: Bottom first: the first part of a module's name (echomq.<part>...) -> its layer.
LAYERS: list[tuple[str, set[str]]] = [
    (
        "foundation",
        {
            "errors",
            "schema",
            "transitions",
            "version",
            "safetext",
            "checks",
            "ids",
            "backoff",
            "keyspace",
            "results",
            "connect",
            "native",
            "functions",
            "context",
        },
    ),
    ("scripts", {"scripts", "replies", "hooks"}),
    (
        "plans",
        {
            "lifecycle",
            "spine",
            "reads",
            "views",
            "jobs",
            "admin",
            "lanes",
            "repeat",
            "bulk",
            "journal",
            "history",
            "registry",
            "limits",
            "dedup",
            "flows",
        },
    ),
    ("verbs", {"verbs"}),
    ("sending", {"transport"}),
    ("facades", {"queue", "events", "discovery"}),
    ("runtime", {"worker", "observability", "embedded"}),
    ("tools", {"cli", "console", "demo"}),
]


def modules() -> dict[str, Path]:
    out = {}
    for path in SRC.rglob("*.py"):
        parts = path.relative_to(SRC.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = path
    return out


def imports(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    typing_only = {
        id(n)
        for node in ast.walk(tree)
        if isinstance(node, ast.If) and getattr(node.test, "id", None) == "TYPE_CHECKING"
        for n in ast.walk(node)
    }
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    out: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - (node.level - 1)]
                target = ".".join([*base, *([node.module] if node.module else [])])
            elif (node.module or "").startswith("echomq"):
                target = node.module or ""
            else:
                continue
            for alias in node.names:
                full = f"{target}.{alias.name}"
                out.add(full if full in known else target)
        elif isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name.startswith("echomq")}
    return {m for m in out if m in known and m != name}


def layer(name: str) -> int:
    part = name.split(".")[1] if "." in name else ""
    for i, (_, members) in enumerate(LAYERS):
        if part in members:
            return i
    return len(LAYERS) if name == "echomq" else -1


def graph() -> dict[str, set[str]]:
    known = modules()
    return {name: imports(name, path, known) for name, path in known.items()}


def test_every_module_has_a_layer() -> None:
    assert sorted(m for m in modules() if layer(m) < 0) == []


def test_no_module_imports_a_layer_above_its_own() -> None:
    up = [
        f"{m} ({LAYERS[layer(m)][0]}) imports {o}"
        for m, outs in sorted(graph().items())
        if m != "echomq"
        for o in sorted(outs)
        if layer(o) > layer(m)
    ]
    assert up == []


def test_there_is_no_import_cycle() -> None:
    edges = graph()
    state: dict[str, int] = {}  # 1: on the path, 2: done
    cycles: list[list[str]] = []

    def visit(node: str, path: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(edges[node]):
            if state.get(nxt) == 1:
                cycles.append([*path[path.index(nxt) :], nxt])
            elif nxt not in state:
                visit(nxt, [*path, nxt])
        state[node] = 2

    for start in sorted(edges):
        if start not in state:
            visit(start, [start])
    assert cycles == []
