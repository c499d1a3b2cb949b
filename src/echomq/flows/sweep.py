"""The flow sweep: a repair tool that finds waiting parents whose children are gone
with no ending on its way, and resolves those dependencies as ``missing``.

No ending of a child should leave its parent waiting (every ending script calls
``flow_ended``); the sweep is the net under that promise (a row deleted by hand, a
queue's keys lost in a failover, a bug). One call (:func:`sweep_flows`):

1. reads the oldest waiting parents of this queue that have waited longer than the
   grace (``grace_ms``, 60 s by default: a flow written across slots writes its
   children after its parent), at most ``limit`` (50);
2. reads up to ``budget`` (1,000) of their unresolved dependencies (a sample of a
   larger set: ``SRANDMEMBER``, bounded; the next call looks at others);
3. checks each child: its row (``EXISTS``), then its queue's outbox (``ZSCORE``), in
   that order, one pipelined round trip of every queue's probes: a row gone and no
   outbox entry means no ending is on its way (a row is deleted in the same step that
   writes its outbox entry, and an entry is dropped only after its parent resolved it);
4. resolves those with ``resolve_child`` (outcome ``missing``, the default policy
   ``fail_parent``: the child's row, where its policy was, is gone), then relays when
   a parent's own ending went to an outbox.

Idempotent: ``resolve_child`` is keyed by the child's ref; a dependency resolved by
anything else between the read and the resolve resolves nothing. Run by the worker's
beat at a low rate (:data:`BEAT_EVERY_MS`, per queue) and by ``emq flow sweep Q``.
"""

from __future__ import annotations

from .. import checks
from ..context import Context, as_str
from ..keyspace import Keyspace
from ..results.flows import FlowSweep
from ..scripts import Batch, Cmd, Eval, Plan, script
from .relay import relay_flows
from .tree import parse_ref

#: Parents one call examines, and dependencies it checks, by default.
SWEEP_PARENTS = 50
SWEEP_BUDGET = 1000
#: How long a parent waits before the sweep looks at it.
SWEEP_GRACE_MS = 60_000
#: How often a worker's beat sweeps its queue.
BEAT_EVERY_MS = 60_000
#: Endings one resolve_child call applies.
_CHUNK = 100


def sweep_flows(
    ctx: Context,
    limit: int = SWEEP_PARENTS,
    grace_ms: int = SWEEP_GRACE_MS,
    budget: int = SWEEP_BUDGET,
) -> Plan[FlowSweep]:
    """Resolve, as ``missing``, the dependencies of this queue's waiting parents whose
    child is gone with no ending on its way (see the module's docstring).

    Args:
        limit: the most parents examined (oldest waiting first), 1..1000.
        grace_ms: only parents waiting longer than this (0: every one).
        budget: the most dependencies checked, 1..10000.

    Returns:
        A :class:`~echomq.results.flows.FlowSweep`.

    Raises:
        InvalidArgument: before any I/O.
    """
    limit = checks.integer(limit, "limit", 1, 1000)
    grace_ms = checks.ms(grace_ms, "grace_ms", zero=True)
    budget = checks.integer(budget, "budget", 1, 10_000)
    k = ctx.keys
    now = yield Cmd(("TIME",))
    now_ms = int(now[0]) * 1000 + int(now[1]) // 1000
    raw = yield Cmd(
        ("ZRANGE", k.waiting, "-inf", f"({now_ms - grace_ms}", "BYSCORE", "LIMIT", 0, limit)
    )
    pids = [as_str(p) for p in raw]
    if not pids:
        return FlowSweep(0, 0, 0, 0)
    share = max(1, budget // len(pids))
    deps = yield Batch(tuple(Cmd(("SRANDMEMBER", k.deps(p), share)) for p in pids))
    pairs: list[tuple[str, str, tuple[str, str]]] = []
    for pid, refs in zip(pids, deps):
        if isinstance(refs, Exception):
            raise refs
        for ref in refs or ():
            p = parse_ref(ref)
            if p is not None:
                pairs.append((pid, as_str(ref), p))
    if not pairs:
        return FlowSweep(len(pids), 0, 0, 0)
    probes: list[Cmd] = []
    for _, _, (q, i) in pairs:
        ks = Keyspace(q)
        probes += [Cmd(("EXISTS", ks.job(i))), Cmd(("ZSCORE", ks.outbox, i))]
    seen = yield Batch(tuple(probes))
    missing: list[tuple[str, str]] = []
    for n, (pid, ref, _) in enumerate(pairs):
        exists, queued = seen[2 * n], seen[2 * n + 1]
        if isinstance(exists, Exception):
            raise exists
        if int(exists) == 0 and queued is None:
            missing.append((pid, ref))
    resolved, relay_now = 0, False
    for s in range(0, len(missing), _CHUNK):
        argv: list[str] = []
        for pid, ref in missing[s : s + _CHUNK]:
            argv += [ref, pid, "missing", "", ""]
        reply = yield Eval(script("resolve_child"), (k.base,), argv)
        resolved += int(reply[0])
        relay_now = relay_now or bool(int(reply[1]))
    if relay_now:
        yield from relay_flows(ctx)
    refs = tuple(ref for _, ref in missing[:100])
    return FlowSweep(len(pids), len(pairs), len(missing), resolved, refs)
