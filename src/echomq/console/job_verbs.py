"""The console's changes to one job: its data, progress and logs, remove, promote,
cancel, reprocess, rerun; a flow parent's release, failure and cancellation. Each
checks its body, then the read-only switch, then acts."""

from __future__ import annotations

from .body import Body, Reply, check_keys, int_field, required_field, text_field
from .core import ConsoleCore


class JobVerbs(ConsoleCore):
    """``POST /api/queues/{q}/jobs/{id}/<verb>``."""

    async def update_data(self, queue: str, job_id: str, body: Body) -> Reply:
        """Replace the job's payload with ``data`` (any JSON value)."""
        check_keys(body, ("data",))
        data = required_field(body, "data")
        self._writable()
        await self.queue(queue).update_data(job_id, data)
        return {"ok": True}

    async def update_progress(self, queue: str, job_id: str, body: Body) -> Reply:
        """Write the job's ``progress`` (a number, a string or any JSON value)."""
        check_keys(body, ("progress",))
        progress = required_field(body, "progress")
        self._writable()
        await self.queue(queue).update_progress(job_id, progress)
        return {"ok": True}

    async def add_log(self, queue: str, job_id: str, body: Body) -> Reply:
        """Append ``line`` to the job's logs (``keep`` > 0 trims to the newest)."""
        check_keys(body, ("line", "keep"))
        line = text_field(body, "line")
        keep = int_field(body, "keep", 0, 0)
        self._writable()
        kept = await self.queue(queue).add_log(job_id, line, keep)
        return {"ok": True, "kept": kept}

    async def remove_job(self, queue: str, job_id: str, body: Body) -> Reply:
        """Delete the job in any state (refused while a worker holds it)."""
        check_keys(body, ())
        self._writable()
        await self.queue(queue).remove_job(job_id)
        return {"ok": True}

    async def promote_job(self, queue: str, job_id: str, body: Body) -> Reply:
        """Run a scheduled job now: it moves to pending (or its lane) at its priority.

        Raises:
            JobNotScheduled: the job is not in the schedule; nothing changed.
        """
        check_keys(body, ())
        self._writable()
        await self.queue(queue).promote_job(job_id)
        return {"ok": True}

    async def cancel_job(self, queue: str, job_id: str, body: Body) -> Reply:
        """Ask the worker running an active job to stop it (cooperative).

        Returns:
            ``{"ok": true, "requested": bool}`` (``false``: already asked for this run).

        Raises:
            JobNotActive: the job is not running; nothing changed.
        """
        check_keys(body, ())
        self._writable()
        requested = await self.queue(queue).cancel_job(job_id)
        return {"ok": True, "requested": requested}

    async def reprocess_job(self, queue: str, job_id: str, body: Body) -> Reply:
        """Move a dead job back to the backlog."""
        check_keys(body, ())
        self._writable()
        await self.queue(queue).reprocess_job(job_id)
        return {"ok": True}

    async def rerun_job(self, queue: str, job_id: str, body: Body) -> Reply:
        """Run a completed or dead job again as a new job (a copy, linked both ways).

        Returns:
            ``{"ok": true, "copy": id}``: the copy's id.

        Raises:
            JobNotFinished: the job is pending, scheduled or active; nothing changed.
        """
        check_keys(body, ())
        self._writable()
        copy = await self.queue(queue).rerun_job(job_id)
        return {"ok": True, "copy": copy}

    async def release_parent(self, queue: str, job_id: str, body: Body) -> Reply:
        """Let a flow parent that waits for its children run now.

        Returns:
            ``{"ok": true, "unresolved": n}``: its children not done yet.

        Raises:
            JobNotWaiting: the job is not waiting_children; nothing changed.
        """
        check_keys(body, ())
        self._writable()
        left = await self.queue(queue).release_parent(job_id)
        return {"ok": True, "unresolved": left}

    async def fail_parent(self, queue: str, job_id: str, body: Body) -> Reply:
        """End a flow parent that waits for its children as dead with ``error``.

        Raises:
            JobNotWaiting: the job is not waiting_children; nothing changed.
        """
        check_keys(body, ("error",))
        error = text_field(body, "error") if "error" in body else "failed by an operator"
        self._writable()
        await self.queue(queue).fail_parent(job_id, error)
        return {"ok": True}

    async def cancel_flow(self, queue: str, job_id: str, body: Body) -> Reply:
        """Cancel the flow under a waiting parent (see ``Queue.cancel_flow``).

        Returns:
            ``{"ok": true, "removed", "cancelling", "failed", "nodes", "truncated"}``.

        Raises:
            JobNotWaiting: the job is not waiting_children; nothing changed anywhere.
        """
        check_keys(body, ())
        self._writable()
        got = await self.queue(queue).cancel_flow(job_id)
        return {"ok": True, **got.as_dict()}
