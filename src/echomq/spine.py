"""The job spine as data: enqueue, claim, settle, recover.

Each verb is a plan (see :mod:`echomq.scripts`): it gates its arguments before any
I/O, yields the operations to run and decodes their replies. ``Queue`` and
``AsyncQueue`` run the same plans.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from . import checks, hooks, ids
from .backoff import Backoff, spec_text
from .context import Context
from .errors import EnqueuePartial, JobGone, StaleToken
from .keyspace import check_name
from .replies import refusal
from .results import RetryOutcome
from .schema import ENQUEUE_OPTIONS
from .scripts import Batch, Cmd, Eval, Plan, script

#: Jobs per enqueue script call; enqueue_many pipelines the chunks in one round trip.
ENQUEUE_CHUNK = 500


@dataclass(frozen=True)
class Claimed:
    """A job leased to a worker.

    Attributes:
        id: the job id.
        payload: the deserialized payload.
        token: the fencing token (the row's ``attempts`` after this claim).
        name: the job's name, or ``None``.
        group: the job's group, or ``None`` for a flat job.
    """

    id: str
    payload: Any
    token: int
    name: str | None = None
    group: str | None = None


def _options(
    *,
    name: str | None,
    group: str | None,
    delay_ms: int | None,
    run_at_ms: int | None,
    priority: int,
    max_attempts: int | None,
    backoff: str | Backoff | None,
) -> list[str]:
    """Gate the options an enqueue shares across its jobs; return them in the
    enqueue script's order, trailing absent ones left off (fewer bytes per call)."""
    if (
        name is None
        and group is None
        and delay_ms is None
        and run_at_ms is None
        and max_attempts is None
        and backoff is None
        and type(priority) is int
        and priority == 0
    ):
        return []  # the common call: nothing to gate, nothing to send
    if group is not None:
        check_name(group, "group")
    if name is not None:
        checks.job_name(name)
    checks.priority(priority)
    if delay_ms is not None:
        delay_ms = checks.ms(delay_ms, "delay_ms", zero=True)
    if run_at_ms is not None:
        checks.run_at(run_at_ms)
    if max_attempts is not None:
        max_attempts = checks.count(max_attempts, "max_attempts")
    # the schema's ENQUEUE_OPTIONS before `trace`, in its order (tests/test_schema.py)
    opts = [
        str(int(priority)) if priority else "",
        name or "",
        group or "",
        "" if max_attempts is None else str(int(max_attempts)),
        "" if delay_ms is None else str(int(delay_ms)),
        "" if run_at_ms is None else str(int(run_at_ms)),
        spec_text(backoff) or "",
    ]
    while opts and not opts[-1]:
        opts.pop()
    return opts


def enqueue(
    ctx: Context,
    payload: Any,
    *,
    job_id: str | None = None,
    name: str | None = None,
    group: str | None = None,
    delay_ms: int | None = None,
    run_at_ms: int | None = None,
    priority: int = 0,
    max_attempts: int | None = None,
    dedup_id: str | None = None,
    backoff: str | Backoff | None = None,
    keep_ms: int | None = None,
) -> Plan[str]:
    """Enqueue one job in one round trip.

    Args:
        payload: the job's data, serialized by the queue's serializer (JSON by default).
        job_id: your own ``JOB`` id (idempotent enqueue); minted when omitted.
        name: a job name (a worker may route on it).
        group: put the job in this group's lane instead of the flat pending set.
        delay_ms: park the job in the schedule for this long (server clock).
        run_at_ms: park the job until this absolute time in ms since the epoch.
        priority: lower is served first; ties in mint order.
        max_attempts: failures before the job is dead (queue default 3).
        dedup_id: while a job holding this dedup id exists, enqueue returns its id.
        backoff: a :class:`~echomq.backoff.Backoff` (or its spec text) stored on the
            row; a worker retrying the job waits as it says.
        keep_ms: keep this job's history even when the queue keeps none: its
            timeline, result and error history, and its row for ``keep_ms`` after it
            completes (``0``/``None``: as the queue's retention says).

    Returns:
        The job id; for a duplicate ``job_id`` or a held ``dedup_id``, the id of the
        job that already exists (nothing is written then). An id still kept as
        history (a completed job) is a duplicate too: a re-sent enqueue cannot run a
        completed job again.

    Raises:
        InvalidJobId, InvalidName, InvalidArgument: before anything is sent.
    """
    if job_id is not None:
        ids.validate(job_id)
    if dedup_id is not None:
        checks.dedup(dedup_id)
    opts = _options(
        name=name,
        group=group,
        delay_ms=delay_ms,
        run_at_ms=run_at_ms,
        priority=priority,
        max_attempts=max_attempts,
        backoff=backoff,
    )
    keep = _keep(keep_ms)
    text = checks.payload(ctx.serializer, payload)
    opts = _with_keep(hooks.trace_opts(opts), keep)
    if job_id is None and dedup_id is None:
        # a minted id cannot be a duplicate: the short form, whose reply is a count
        jid = ids.new_id()
        yield _enqueue_op(ctx, ["1", "2", jid, text], opts)
        return jid
    jid = job_id or ids.new_id()
    check = "0" if job_id is None else "1"
    reply = yield _enqueue_op(ctx, ["1", "4", jid, text, dedup_id or "", check], opts)
    held: str = reply[0]
    return held


#: Where keep_ms goes among the enqueue script's shared options (the schema's order).
KEEP_OPTION_INDEX = ENQUEUE_OPTIONS.index("keep_ms")


def _keep(keep_ms: int | None) -> str:
    """Gate ``keep_ms``: its wire text, ``''`` for none (``None`` or 0)."""
    if keep_ms is None:
        return ""
    keep_ms = checks.ms(keep_ms, "keep_ms", zero=True)
    return str(keep_ms) if keep_ms else ""


def _with_keep(opts: list[str], keep: str) -> list[str]:
    """The shared options with keep_ms in its place (unchanged when there is none)."""
    if not keep:
        return opts
    return [*opts, *([""] * (KEEP_OPTION_INDEX - len(opts))), keep]


#: Where the enqueue script reads its ``resent`` option, counted from the first option.
RESENT_OPTION = ENQUEUE_OPTIONS.index("resent")


def _enqueue_op(ctx: Context, head: list[str], opts: list[str]) -> Eval:
    """One enqueue script call; its re-send (after a lost reply) sets the ``resent``
    option, so the script checks every id for a first run that landed. A first send
    checks only the ids the caller chose: minted ones are fresh."""
    again = [*head, *opts, *([""] * (RESENT_OPTION - len(opts))), "1"]
    return Eval(script("enqueue"), (ctx.keys.base,), [*head, *opts], again=again)


def enqueue_many(
    ctx: Context,
    payloads: Iterable[Any],
    *,
    name: str | None = None,
    group: str | None = None,
    delay_ms: int | None = None,
    priority: int = 0,
    max_attempts: int | None = None,
    keep_ms: int | None = None,
) -> Plan[list[str]]:
    """Enqueue many jobs in one round trip (script calls of ENQUEUE_CHUNK jobs, pipelined).

    Args:
        payloads: the jobs' data, one job each.
        name, group, delay_ms, priority, max_attempts, keep_ms: as for
            :func:`enqueue`, applied to every job.

    Returns:
        The new ids, in the order of ``payloads`` (which is also their mint order).

    Raises:
        InvalidName, InvalidArgument: before anything is sent.
        EnqueuePartial: some chunks landed and some did not (a full server refuses
            a chunk whole); ``.landed`` holds the ids written, ``.cause`` the error.
        ServerFull: nothing landed, the server is out of memory.
    """
    opts = _options(
        name=name,
        group=group,
        delay_ms=delay_ms,
        run_at_ms=None,
        priority=priority,
        max_attempts=max_attempts,
        backoff=None,
    )
    keep = _keep(keep_ms)
    texts = checks.payloads(ctx.serializer, payloads)
    opts = _with_keep(hooks.trace_opts(opts), keep)
    if not texts:
        return []
    minted = ids.new_ids(len(texts))
    ops = []
    for i in range(0, len(texts), ENQUEUE_CHUNK):
        chunk = texts[i : i + ENQUEUE_CHUNK]
        # per job only its id and payload travel; the options once per call
        head: list[str] = [str(len(chunk)), "2", *([""] * (2 * len(chunk)))]
        head[2::2] = minted[i : i + ENQUEUE_CHUNK]
        head[3::2] = chunk
        ops.append(_enqueue_op(ctx, head, opts))
    replies = yield Batch(tuple(ops))
    failed = [(k, r) for k, r in enumerate(replies) if isinstance(r, Exception)]
    if not failed:
        return minted
    if len(failed) == len(replies):
        raise failed[0][1]  # nothing landed: the error as it came
    # some chunks landed (a full server refuses a chunk whole, before its first write)
    landed = [
        j
        for k in range(len(replies))
        if not isinstance(replies[k], Exception)
        for j in minted[k * ENQUEUE_CHUNK : (k + 1) * ENQUEUE_CHUNK]
    ]
    first = failed[0][1]
    raise EnqueuePartial(
        f"enqueue_many: {len(landed)} of {len(minted)} jobs landed ({first})",
        landed=landed,
        cause=first,
    )


# The claim in explicit pieces. Every claimer composes them (``claim_many`` here, the
# worker in its own round trips): the pause-gate read, then the claim script call only
# while the gate reads open, then one decoder of the script's reply. Nobody inspects
# another plan's commands, so a change to a piece reaches every claimer.


def claim_gate(ctx: Context) -> Cmd:
    """The pause-gate read a claim starts with: ``HEXISTS meta paused``.

    It travels in a round trip of its own (or pipelined with other work, or behind a
    ``BLPOP``), before the claim script, which itself carries no pause logic. Read its
    reply with :func:`gate_open`.
    """
    return Cmd(("HEXISTS", ctx.keys.meta, "paused"))


def gate_open(reply: Any) -> bool:
    """Whether the reply of :func:`claim_gate` lets a claim run (the queue is not paused).

    Raises:
        Exception: the reply itself, when the read failed (a runner's mapped error).
    """
    if isinstance(reply, Exception):
        raise reply
    return not int(reply)


def request_id() -> str:
    """A fresh claim request id: 16 hex digits (a test may fix it)."""
    return os.urandom(8).hex()


def claim_op(ctx: Context, count: int, lease_ms: int, lock_ms: int) -> Eval:
    """The claim script call: lease up to ``count`` jobs (no pause logic of its own).

    Send it only after :func:`claim_gate` read open; read its reply with
    :func:`decode_claimed`. Each call flips which side (flat pending or the ring of
    lanes) the next claim tries first, so neither starves the other. The arguments
    are gated by the caller's verb (``claim_many`` checks them before any I/O).

    Each call carries a fresh request id: a call re-sent after a lost reply (marked
    as such, see ``Eval.again``) answers the jobs the first run claimed instead of
    leasing more.
    """
    side = "f" if ctx.flat_first else "g"  # the script's wire word for which side first
    ctx.flat_first = not ctx.flat_first
    args = (str(lease_ms), str(count), side, str(lock_ms), request_id())
    # only the re-send reads the request's record (a first send's rid is fresh)
    return Eval(script("claim"), (ctx.keys.base,), args, again=(*args, "1"))


def decode_claimed(ctx: Context, reply: Any) -> list[Claimed]:
    """The jobs in a claim script's reply (5 entries per job: id, payload, token,
    name, group), payloads deserialized by the queue's serializer."""
    loads = ctx.serializer.loads
    return [
        Claimed(
            id=reply[i],
            payload=loads(reply[i + 1]),
            token=int(reply[i + 2]),
            name=reply[i + 3] or None,
            group=reply[i + 4] or None,
        )
        for i in range(0, len(reply), 5)
    ]


def claim_behind_gate(
    ctx: Context, gate_reply: Any, count: int, lease_ms: int, lock_ms: int
) -> Plan[list[Claimed]]:
    """The claim after its gate read: nothing when the reply says paused, else the
    claim script call, decoded. ``claim_many`` runs it behind its own gate read; a
    caller that made the gate read in a round trip of its own passes the reply.

    Returns:
        The claimed jobs (``[]`` when paused or nothing is ready).
    """
    if not gate_open(gate_reply):
        return []
    return decode_claimed(ctx, (yield claim_op(ctx, count, lease_ms, lock_ms)))


def _claim_batch(ctx: Context, count: int, lease_ms: int, lock_ms: int) -> Plan[list[Claimed]]:
    # The separate gate: the pause is read in its own round trip, before the claim
    # script, which itself carries no pause logic. The native claim (EMQ.CLAIM) reads
    # the same field itself, so it goes alone: one round trip.
    if ctx.executor.gate_folded:
        return decode_claimed(ctx, (yield claim_op(ctx, count, lease_ms, lock_ms)))
    gate = yield claim_gate(ctx)
    return (yield from claim_behind_gate(ctx, gate, count, lease_ms, lock_ms))


def claim(ctx: Context, lease_ms: int = 30000) -> Plan[Claimed | None]:
    """Lease the next ready job, flat or grouped.

    The queue's ``paused`` field is read first; while it is set the answer is
    ``None`` and nothing is touched. Successive claims alternate which side (flat
    pending or the ring of lanes) is tried first, so neither starves the other.

    Args:
        lease_ms: the lease; past it, ``reap`` returns the job to the backlog.

    Returns:
        The claimed job, or ``None`` when the queue is paused or nothing is ready.
    """
    lease_ms = checks.ms(lease_ms, "lease_ms")
    got = yield from _claim_batch(ctx, 1, lease_ms, 0)
    return got[0] if got else None


def claim_many(
    ctx: Context, count: int, lease_ms: int = 30000, *, lock_ms: int = 0
) -> Plan[list[Claimed]]:
    """Lease up to ``count`` ready jobs in one script call (the pause read first).

    Args:
        count: the most jobs to lease.
        lease_ms: the lease of each.
        lock_ms: when > 0, also set each job's ``:lock`` key to its token for this long.

    Returns:
        The claimed jobs, flat and grouped interleaved (``[]`` when paused or empty).
    """
    count = checks.batch(count, "count")
    lease_ms = checks.ms(lease_ms, "lease_ms")
    lock_ms = checks.ms(lock_ms, "lock_ms", zero=True)
    return (yield from _claim_batch(ctx, count, lease_ms, lock_ms))


def _fenced(ctx: Context, job_id: str, token: int) -> str:
    ctx.keys.job(job_id)
    return str(checks.token(token))


def _row_keys(ctx: Context, job_id: str) -> tuple[str, str]:
    """The KEYS of a verb on one job: the queue base, then the job's row (gated)."""
    return ctx.keys.base, ctx.keys.job(job_id)


def complete(ctx: Context, job_id: str, token: int, *, result: Any = None) -> Plan[None]:
    """Settle an active job as done: its row and logs go, the completion is counted.

    A kept job (see ``set_retention`` and ``keep_ms``) stays instead, as history: state
    ``completed``, its finish time and ``result``.

    Args:
        job_id: the job.
        token: the token its claim handed out.
        result: the handler's return value, serialized by the queue's serializer and
            stored on a kept job's row (``None``: nothing is sent).

    Raises:
        JobGone: no such job (or it completed already and is kept as history).
        StaleToken: the job is not active under ``token``.
        InvalidPayload: ``result`` does not serialize, before anything is sent.
    """
    tok = _fenced(ctx, job_id, token)
    args: tuple[str, ...] = (job_id, tok)
    if result is not None:
        args = (job_id, tok, checks.payload(ctx.serializer, result))
    yield Eval(script("complete"), _row_keys(ctx, job_id), args, job=job_id)


def complete_many(ctx: Context, pairs: Sequence[tuple[str, int]]) -> Plan[list[str]]:
    """Complete many active jobs in one round trip: one script call per
    :data:`COMPLETE_CHUNK` jobs (each job fenced by its own token), pipelined.

    Args:
        pairs: ``(job_id, token)`` for each job.

    Returns:
        The ids that were NOT completed (gone or stale); ``[]`` when all were.
    """
    pairs = checks.pairs(pairs)
    ops = complete_ops(ctx, pairs)
    if not ops:
        return []
    gone, stale = settle_outcomes((yield Batch(tuple(ops))))
    missed = {*gone, *stale}
    return [j for j, _ in pairs if j in missed]


#: Jobs per call of the complete script's batch form.
COMPLETE_CHUNK = 500


def complete_ops(
    ctx: Context,
    pairs: Sequence[tuple[str, int]],
    results: dict[tuple[str, int], str] | None = None,
) -> list[Eval]:
    """The complete script's batch form for ``(job_id, token)`` pairs: one call per
    :data:`COMPLETE_CHUNK`, gated before any I/O (no call for no pairs). Each call
    makes each kind of write once for all its jobs (one ``ZREM``, one ``DEL``, one
    count), where a call per job would pay the script and its fixed writes each time.
    Read the replies with :func:`settle_outcomes`.

    Args:
        results: serialized results by ``(job_id, token)``, sent with their
            completions (a kept job stores its result; see :func:`complete`).
    """
    done = script("complete")
    found = results or {}
    ops = []
    for i in range(0, len(pairs), COMPLETE_CHUNK):
        args: list[str] = []
        for j, t in pairs[i : i + COMPLETE_CHUNK]:
            args += (j, _fenced(ctx, j, t), found.get((j, t)) or "")
        ops.append(Eval(done, (ctx.keys.base,), args))
    return ops


def settle_outcomes(replies: Sequence[Any]) -> tuple[list[str], list[str]]:
    """Read the replies of :func:`complete_ops` (each a flat list of ``(id, reason)``
    for the jobs not completed).

    Returns:
        ``(gone, stale)``: the ids whose row was gone and the ids refused as no longer
        active under that token.

    Raises:
        Exception: an error reply (the first one).
    """
    gone: list[str] = []
    stale: list[str] = []
    for r in replies:
        if isinstance(r, Exception):
            raise r
        for k in range(0, len(r), 2):
            (gone if r[k + 1] == "gone" else stale).append(r[k])
    return gone, stale


def fenced_batch(pairs: Sequence[tuple[str, int]], ops: Sequence[Eval]) -> Plan[list[str]]:
    """Run one token-fenced op per job in one pipelined round trip.

    Returns:
        The ids whose op was refused as gone or stale; any other error is raised.
    """
    if not ops:
        return []
    gone, stale = fenced_outcomes(pairs, (yield Batch(tuple(ops))))
    missed = {*gone, *stale}
    return [j for j, _ in pairs if j in missed]


def fenced_outcomes(
    pairs: Sequence[tuple[str, int]], replies: Sequence[Any]
) -> tuple[list[str], list[str]]:
    """Read the replies of one token-fenced op per job (in ``pairs`` order).

    Returns:
        ``(gone, stale)``: the ids whose row was gone (``JobGone``) and the
        ids refused as no longer active under that token.

    Raises:
        Exception: any other error reply (the first one).
    """
    gone: list[str] = []
    stale: list[str] = []
    for (j, _), r in zip(pairs, replies):
        if isinstance(r, JobGone):
            gone.append(j)
        elif isinstance(r, StaleToken):
            stale.append(j)
        elif isinstance(r, Exception):
            raise r
    return gone, stale


def retry(
    ctx: Context,
    job_id: str,
    token: int,
    error: str,
    *,
    delay_ms: int = 0,
    max_attempts: int | None = None,
) -> Plan[RetryOutcome]:
    """Record a failure of an active job and schedule it again, or dead-letter it.

    Args:
        error: the error text (kept as ``last_error``).
        delay_ms: how long until the job is due again (from a backoff policy).
        max_attempts: overrides the row's limit for this decision.

    Returns:
        ``RetryOutcome.SCHEDULED``, or ``RetryOutcome.DEAD`` when its failures reached
        ``max_attempts`` (each equal to its text, ``"scheduled"`` / ``"dead"``).

    Raises:
        JobGone, StaleToken: refused, nothing changed.
    """
    tok = _fenced(ctx, job_id, token)
    error = checks.error_text(error)
    delay_ms = checks.ms(delay_ms, "delay_ms", zero=True)
    if max_attempts is not None:
        max_attempts = checks.count(max_attempts, "max_attempts")
    reply = yield Eval(
        script("retry"),
        _row_keys(ctx, job_id),
        (
            job_id,
            tok,
            error,
            str(delay_ms),
            "" if max_attempts is None else str(max_attempts),
            str(ctx.max_attempts),
        ),
        job=job_id,
    )
    return RetryOutcome(reply)


def delay(ctx: Context, job_id: str, token: int, delay_ms: int) -> Plan[int]:
    """Move an active job back to the schedule, counting no failure.

    Returns:
        The due time in ms (server clock).

    Raises:
        JobGone, StaleToken: refused, nothing changed.
    """
    tok = _fenced(ctx, job_id, token)
    delay_ms = checks.ms(delay_ms, "delay_ms", zero=True)
    args = (job_id, tok, str(delay_ms))
    return int((yield Eval(script("delay"), _row_keys(ctx, job_id), args, job=job_id)))


def _release_op(ctx: Context, job_id: str, token: int) -> Eval:
    tok = _fenced(ctx, job_id, token)
    return Eval(script("release"), _row_keys(ctx, job_id), (job_id, tok), job=job_id)


def release(ctx: Context, job_id: str, token: int) -> Plan[None]:
    """Return an active job to pending (or its lane), keeping its counters.

    No failure is counted; the job's lock is deleted and a grouped job gives its lane
    slot back. The next claim serves it with the next token.

    Args:
        job_id: the job.
        token: the token its claim handed out.

    Raises:
        JobGone: no such job.
        StaleToken: the job is not active under ``token``; nothing changed.
    """
    yield _release_op(ctx, job_id, token)


def release_many(ctx: Context, pairs: Sequence[tuple[str, int]]) -> Plan[list[str]]:
    """Release many active jobs in one pipelined round trip.

    Args:
        pairs: ``(job_id, token)`` for each job.

    Returns:
        The ids NOT released (gone, or no longer active under that token).
    """
    pairs = checks.pairs(pairs)
    return (yield from fenced_batch(pairs, [_release_op(ctx, j, t) for j, t in pairs]))


def _extend(ctx: Context, pairs: Sequence[tuple[str, int]], lease_ms: int, lock_ms: int) -> Eval:
    lease_ms = checks.ms(lease_ms, "lease_ms")
    lock_ms = checks.ms(lock_ms, "lock_ms", zero=True)
    args: list[str] = [str(lease_ms), str(lock_ms)]
    for j, t in pairs:
        args += [j, _fenced(ctx, j, t)]
    return Eval(script("extend_lock"), (ctx.keys.base,), args)


def extend_op(ctx: Context, pairs: Sequence[tuple[str, int]], lease_ms: int, lock_ms: int) -> Eval:
    """The ``extend_locks`` call as one op, for a plan that batches it with others (the
    worker's beat); its reply is the flat ``(id, reason)`` list of the jobs not extended.
    """
    return _extend(ctx, checks.pairs(pairs, limit=checks.MAX_BATCH), lease_ms, lock_ms)


def extend_lock(ctx: Context, job_id: str, token: int, lease_ms: int) -> Plan[None]:
    """Move an active job's lease deadline to now + ``lease_ms``.

    Raises:
        JobGone, StaleToken: refused, nothing changed.
    """
    reply = yield _extend(ctx, [(job_id, token)], lease_ms, 0)
    if reply:  # this call answers refusals per job, as reasons: (id, 'gone' | 'stale')
        raise refusal(job_id, reply[1])


def extend_locks(
    ctx: Context, pairs: Sequence[tuple[str, int]], lease_ms: int, *, lock_ms: int = 0
) -> Plan[list[str]]:
    """Extend the leases of many jobs in one call, each fenced by its own token.

    Args:
        pairs: ``(job_id, token)`` for each job.
        lease_ms: the new lease from now.
        lock_ms: when > 0, also push each job's ``:lock`` expiry to this long.

    Returns:
        The ids NOT extended (gone, or no longer active under that token).
    """
    pairs = checks.pairs(pairs, limit=checks.MAX_BATCH)
    if not pairs:
        lease_ms = checks.ms(lease_ms, "lease_ms")
        lock_ms = checks.ms(lock_ms, "lock_ms", zero=True)
        return []
    reply = yield _extend(ctx, pairs, lease_ms, lock_ms)
    missed: list[str] = reply[::2]
    return missed


def promote(ctx: Context, budget: int = 100) -> Plan[int]:
    """Move due scheduled jobs to pending or their lane, at most ``budget``.

    Returns:
        How many moved; equal to ``budget`` means more may be due (call again).
    """
    budget = checks.batch(budget, "budget")
    return int((yield Eval(script("promote"), (ctx.keys.base,), (str(budget),))))


def reap(ctx: Context, budget: int = 100) -> Plan[int]:
    """Return jobs whose lease expired to pending or their lane, at most ``budget``.

    Returns:
        How many returned; equal to ``budget`` means call again.
    """
    budget = checks.batch(budget, "budget")
    return int((yield Eval(script("reap"), (ctx.keys.base,), (str(budget),))))


def check_stalled(
    ctx: Context, max_stalled: int = 2, budget: int = 100
) -> Plan[tuple[list[str], list[str]]]:
    """Recover expired leases, counting each on the row; dead-letter repeat stallers.

    Args:
        max_stalled: a job that has stalled more than this many times goes dead.
        budget: the most jobs handled per call.

    Returns:
        ``(recovered_ids, dead_ids)``.
    """
    max_stalled = checks.count(max_stalled, "max_stalled", zero=True)
    budget = checks.batch(budget, "budget")
    reply = yield Eval(script("check_stalled"), (ctx.keys.base,), (str(max_stalled), str(budget)))
    back: list[str] = reply[0]
    dead: list[str] = reply[1]
    return back, dead
