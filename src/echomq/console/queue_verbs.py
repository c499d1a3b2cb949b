"""The console's changes to a queue as a whole, to one group's lane and to one
repeatable. Each checks its body, then the read-only switch, then acts (journaled as
the request's actor: see :func:`~echomq.console.core.acting_as`)."""

from __future__ import annotations

from .body import Body, Reply, check_keys, flag_field, int_field, required_field
from .core import ConsoleCore
from .limits import DRAIN_BUDGET, MAX_DRAIN_BUDGET, MAX_OBLITERATE_BUDGET, OBLITERATE_BUDGET


class QueueVerbs(ConsoleCore):
    """``POST /api/queues/{q}/<verb>``: pause, resume, drain, obliterate."""

    async def pause(self, queue: str, body: Body) -> Reply:
        """Close the queue's claim gate (idempotent)."""
        check_keys(body, ())
        self._writable()
        await self.queue(queue).pause()
        return {"ok": True, "paused": True}

    async def resume(self, queue: str, body: Body) -> Reply:
        """Open the queue's claim gate (idempotent)."""
        check_keys(body, ())
        self._writable()
        await self.queue(queue).resume()
        return {"ok": True, "paused": False}

    async def drain(self, queue: str, body: Body) -> Reply:
        """One bounded drain call of the pending backlog (``include_schedule``: the
        schedule too); the page calls again while ``done`` is false, showing progress
        (a 100,000-job backlog is never one blocking request).

        Body: ``include_schedule`` (bool), ``budget`` (jobs this call,
        1..``MAX_DRAIN_BUDGET``).

        Returns:
            ``{"ok", "drained", "done", "remaining"}``: the jobs this call deleted,
            whether none is left, and the pending and scheduled counts left.
        """
        check_keys(body, ("include_schedule", "budget"))
        include = flag_field(body, "include_schedule")
        budget = int_field(body, "budget", DRAIN_BUDGET, 1, MAX_DRAIN_BUDGET)
        self._writable()
        q = self.queue(queue)
        drained, more = await q.drain_step(include_schedule=include, budget=budget)
        counts = await q.counts()
        remaining = {"pending": counts.pending, "scheduled": counts.scheduled}
        return {"ok": True, "drained": drained, "done": not more, "remaining": remaining}

    async def obliterate(self, queue: str, body: Body) -> Reply:
        """One bounded obliterate call; the page calls again while ``done`` is false.

        Body: ``force`` (bool), ``budget`` (jobs this call, 1..``MAX_OBLITERATE_BUDGET``).

        Returns:
            ``{"ok", "done", "remaining"}``: ``remaining`` is the counts left after
            this call, for a progress bar.

        Raises:
            QueueNotPaused, QueueHasActiveJobs: refused, nothing changed.
        """
        check_keys(body, ("force", "budget"))
        force = flag_field(body, "force")
        budget = int_field(body, "budget", OBLITERATE_BUDGET, 1, MAX_OBLITERATE_BUDGET)
        self._writable()
        q = self.queue(queue)
        done = await q.obliterate(force=force, budget=budget)
        if done:
            self.directory.forget(queue)
        remaining = (await q.counts()).as_dict()
        del remaining["paused"]  # the reply keeps its shape: the jobs left, by state
        return {"ok": True, "done": done, "remaining": remaining}


class GroupVerbs(ConsoleCore):
    """``POST /api/queues/{q}/groups/{g}/<verb>``: one group's lane."""

    async def pause_group(self, queue: str, group: str, body: Body) -> Reply:
        """Hold one group back (idempotent)."""
        check_keys(body, ())
        self._writable()
        await self.queue(queue).pause_group(group)
        self.forget_groups(queue)  # the table shows the change at once
        return {"ok": True}

    async def resume_group(self, queue: str, group: str, body: Body) -> Reply:
        """Serve a paused group again (idempotent)."""
        check_keys(body, ())
        self._writable()
        await self.queue(queue).resume_group(group)
        self.forget_groups(queue)
        return {"ok": True}

    async def limit_group(self, queue: str, group: str, body: Body) -> Reply:
        """Set the group's concurrency ``limit`` (``null`` clears it)."""
        check_keys(body, ("limit",))
        limit = required_field(body, "limit")
        if limit is not None:
            limit = int_field(body, "limit", None, 1)
        self._writable()
        q = self.queue(queue)
        if limit is None:
            await q.clear_group_limit(group)
        else:
            await q.set_group_limit(group, limit)
        self.forget_groups(queue)
        return {"ok": True, "limit": limit}

    async def weight_group(self, queue: str, group: str, body: Body) -> Reply:
        """Set how many of the group's jobs one turn of the ring serves."""
        check_keys(body, ("weight",))
        weight = int_field(body, "weight", None, 1)
        self._writable()
        await self.queue(queue).set_group_weight(group, weight)
        self.forget_groups(queue)
        return {"ok": True, "weight": weight}

    async def drain_group(self, queue: str, group: str, body: Body) -> Reply:
        """Delete one group's pending lane."""
        check_keys(body, ())
        self._writable()
        drained = await self.queue(queue).drain_group(group)
        self.forget_groups(queue)
        return {"ok": True, "drained": drained}


class RepeatVerbs(ConsoleCore):
    """``POST /api/queues/{q}/repeats/{name}/<verb>``: one repeatable."""

    async def cancel_repeat(self, queue: str, name: str, body: Body) -> Reply:
        """Remove repeatable ``name``; the jobs it already made stay (idempotent)."""
        check_keys(body, ())
        self._writable()
        cancelled = await self.queue(queue).cancel_repeat(name)
        return {"ok": True, "cancelled": cancelled}

    async def pause_repeat(self, queue: str, name: str, body: Body) -> Reply:
        """Stop repeatable ``name`` making jobs (its next run is kept).

        Returns:
            ``{"ok": true, "paused": bool}`` (``false``: no such repeatable, or paused).
        """
        check_keys(body, ())
        self._writable()
        return {"ok": True, "paused": await self.queue(queue).pause_repeat(name)}

    async def resume_repeat(self, queue: str, name: str, body: Body) -> Reply:
        """Let paused repeatable ``name`` make jobs again, from its next slot after now.

        Returns:
            ``{"ok": true, "next_run_ms": ms or null}`` (``null``: none, or not paused).
        """
        check_keys(body, ())
        self._writable()
        return {"ok": True, "next_run_ms": await self.queue(queue).resume_repeat(name)}

    async def run_repeat(self, queue: str, name: str, body: Body) -> Reply:
        """Run repeatable ``name`` now: one job, made as its slots make theirs.

        Returns:
            ``{"ok": true, "id": job id or null}`` (``null``: none, paused, or a
            worker fired it just then).
        """
        check_keys(body, ())
        self._writable()
        return {"ok": True, "id": await self.queue(queue).run_repeat(name)}
