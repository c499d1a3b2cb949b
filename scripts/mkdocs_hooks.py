"""mkdocs hooks (mkdocs.yml ``hooks:``): the verbs' reference, generated from the verb table.

``docs/reference/queue.md`` holds the marker ``<!-- verbs -->``; it becomes one section
per verb of :class:`echomq.verbs.VerbTable`, in declaration order: the call as a queue
takes it (the plan's signature without its context), the verb's kind and scripts, and
the plan's docstring rendered by mkdocstrings. A verb added to the table appears here
with no edit to the docs.
"""

from __future__ import annotations

import inspect
from typing import Any

MARKER = "<!-- verbs -->"


class _Text(str):
    """An annotation kept as source text (the modules use postponed annotations):
    printed as written, without the quotes a string's repr would add."""

    def __repr__(self) -> str:
        return str(self)


def _call(name: str, sig: inspect.Signature) -> str:
    """``q.name(args) -> T``: the plan's ``Plan[T]`` is what the verb returns."""
    params = [
        p.replace(annotation=_Text(p.annotation)) if isinstance(p.annotation, str) else p
        for p in sig.parameters.values()
    ]
    ret = sig.return_annotation
    if isinstance(ret, str):
        ret = _Text(ret[5:-1] if ret.startswith("Plan[") and ret.endswith("]") else ret)
    return f"q.{name}{sig.replace(parameters=params, return_annotation=ret)}"


def _verbs_markdown() -> str:
    from echomq.verbs import _bound_signature, verbs

    out = []
    for name, verb in verbs().items():
        plan = verb.plan
        runs = ", ".join(f"`{r}`" for r in verb.runs) or "no script"
        out += [
            f"### {name}",
            "",
            f"```python\n{_call(name, _bound_signature(plan))}\n```",
            "",
            f"Kind: `{verb.kind}`; runs: {runs}.",
            "",
            f"::: {plan.__module__}.{plan.__qualname__}",
            "    options:",
            "      show_root_heading: false",
            "      show_signature: false",
            "      show_root_toc_entry: false",
            "      heading_level: 4",
            "",
        ]
    return "\n".join(out)


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    """Expand the verbs' marker (only the page that has it)."""
    if MARKER in markdown:
        markdown = markdown.replace(MARKER, _verbs_markdown())
    return markdown
