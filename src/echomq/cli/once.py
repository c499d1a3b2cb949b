"""No option given twice is silently dropped: click keeps the last value of an option
that takes one (``emq worker --queue a --queue b`` served only ``b``).

Every command and group of ``emq`` is made from :class:`OnceCommand` or
:class:`OnceGroup` (the root group's ``command_class`` and ``group_class``), whose
parser refuses a single-valued option given more than once (a flag too, and a
``--x/--no-x`` pair given both ways) as a usage error. Options that collect values
(``multiple=True``) and counters (``count=True``) may repeat as they always could.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import click


def refuse_repeats(ctx: click.Context, order: Sequence[Any]) -> None:
    """Raise if a single-valued option appears more than once in ``order`` (the
    parameters as the parser met them, one entry per occurrence).

    Raises:
        click.UsageError: an option given twice.
    """
    seen: set[int] = set()
    for param in order:
        if not isinstance(param, click.Option) or param.multiple or param.count:
            continue
        if id(param) in seen:
            names = "/".join(param.opts + param.secondary_opts)
            raise click.UsageError(
                f"option {names} given more than once (it takes one value; "
                "click would keep only the last)",
                ctx,
            )
        seen.add(id(param))


class _Once:
    """The parser check, mixed into a click command class."""

    def make_parser(self, ctx: click.Context) -> Any:
        """The command's parser, its ``parse_args`` checking for repeats."""
        parser = super().make_parser(ctx)  # type: ignore[misc]
        parse = parser.parse_args

        def checked(args: list[str]) -> Any:
            opts, rest, order = parse(args=args)
            refuse_repeats(ctx, order)
            return opts, rest, order

        parser.parse_args = checked
        return parser


class OnceCommand(_Once, click.Command):
    """A command that refuses a single-valued option given twice."""


class OnceGroup(_Once, click.Group):
    """A group that refuses a single-valued option given twice; its subcommands and
    subgroups are made the same way."""

    command_class: type[click.Command] = OnceCommand
    group_class: type[click.Group] | type[type] | None = type  # a subgroup: this class
