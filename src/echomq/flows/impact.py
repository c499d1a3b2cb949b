"""What a drain or an obliterate does to the flows that cross a queue: a bounded read
for their confirmations (the CLI's and the console's; docs/flows-operations.md)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from .. import checks
from ..context import Context
from ..scripts import Eval, Plan, script

#: Backlog jobs examined by default, and at most (about 4 us of server time a job:
#: bench/flow_ops.py).
IMPACT_BUDGET = 1000
MAX_IMPACT_BUDGET = 2000


@dataclass(frozen=True)
class FlowImpact:
    """The flows a drain or an obliterate of a queue touches.

    Attributes:
        waiting: flow parents waiting here: removed (their rows, deps and results); their
            children keep running, and their endings then find no parent.
        examined: backlog jobs examined (pending, lanes, scheduled, active, dead).
        backlog: the jobs there were to examine; ``examined < backlog``: the counts
            below are of a sample (``exact`` is false).
        children: examined jobs that are flow children: removing them resolves their
            parents by their policy (outcome ``drained`` or ``obliterated``).
        elsewhere: of those, the ones whose parent is in another queue.
    """

    waiting: int
    examined: int
    backlog: int
    children: int
    elsewhere: int

    @property
    def exact(self) -> bool:
        return self.examined >= self.backlog

    def phrase(self, outcome: str) -> str:
        """The flows' part of a confirmation (``''`` when no flow crosses the queue)."""
        if not self.waiting and not self.children:
            return ""
        parts = []
        if self.waiting:
            parts.append(
                f"{self.waiting} waiting flow parent(s) will be removed (their children "
                "keep running)"
            )
        if self.children:
            some = "" if self.exact else f" (of {self.examined} jobs examined)"
            parts.append(
                f"{self.children} flow child(ren){some} will resolve their parents as "
                f"{outcome}, {self.elsewhere} of them in another queue"
            )
        return "; ".join(parts)

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "exact": self.exact}


def flow_impact(ctx: Context, budget: int = IMPACT_BUDGET) -> Plan[FlowImpact]:
    """What a drain or an obliterate of this queue does to flows: its waiting parents
    (counted) and its flow children (counted among at most ``budget`` backlog jobs,
    each set from its oldest end). Read-only, one script call.

    Raises:
        InvalidArgument: ``budget`` is not in 1..2000, before any I/O.
    """
    budget = checks.integer(budget, "budget", 1, MAX_IMPACT_BUDGET)
    r = yield Eval(script("flow_impact"), (ctx.keys.base,), (str(budget),))
    return FlowImpact(*(int(x) for x in r))
