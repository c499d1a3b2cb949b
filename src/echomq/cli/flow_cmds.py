"""Flow commands: ``emq flow show|release|fail|cancel|sweep`` (docs/flows-operations.md).

``show`` prints a job's flow as a tree (bounded: ``--limit`` nodes); ``release``,
``fail`` and ``cancel`` act on a parent that waits for its children (journaled; each
asks first unless ``--yes``); ``sweep`` runs the repair the workers' beat runs once a
minute. Text from jobs (names, results, errors) is escaped (:mod:`.text`).
"""

from __future__ import annotations

import click

from ..flows.sweep import SWEEP_BUDGET, SWEEP_GRACE_MS, SWEEP_PARENTS
from ..flows.tree import FLOW_NODES, MAX_FLOW_NODES
from ..ids import validate
from ..results.flows import FlowNode, FlowTree
from .app import Env, cli, confirm, pass_env
from .text import clean

#: The longest result or error shown on a node's line.
SUMMARY_CUT = 80


@cli.group()
def flow() -> None:
    """Flows: a job's tree, and a waiting parent's release, failure or cancellation."""


def node_line(n: FlowNode) -> str:
    """One node of the tree as text: ref, state, name, policy, outcome and summary."""
    parts = [n.ref, n.state or "gone"]
    if n.name:
        parts.append(f"name={clean(n.name)}")
    if n.policy and n.policy != "fail_parent":
        parts.append(f"on_fail={n.policy}")
    if n.outcome:
        parts.append(f"-> {n.outcome}")
    if n.unresolved:
        parts.append(f"waiting for {n.unresolved}")
    if n.more:
        parts.append(f"(+{n.more} not shown)")
    line = "  ".join(parts)
    if n.summary:
        cut = n.summary if len(n.summary) <= SUMMARY_CUT else n.summary[:SUMMARY_CUT] + "..."
        line += f"  {clean(cut)}"
    return line


def tree_lines(tree: FlowTree) -> list[str]:
    """The tree as indented lines, parents first; the job asked about marked ``*``."""
    out: list[str] = []

    def walk(n: FlowNode, depth: int) -> None:
        mark = "* " if n.ref == tree.job else "  "
        out.append("    " * depth + mark + node_line(n))
        for k in n.kids:
            walk(k, depth + 1)

    walk(tree.root, 0)
    if tree.truncated:
        out.append(f"(truncated: {tree.nodes} nodes shown; --limit shows more)")
    return out


@flow.command("show")
@click.argument("queue")
@click.argument("job_id", metavar="ID")
@click.option(
    "--limit",
    type=click.IntRange(1, MAX_FLOW_NODES),
    default=FLOW_NODES,
    show_default=True,
    help="The most nodes read.",
)
@pass_env
def show(env: Env, queue: str, job_id: str, limit: int) -> None:
    """The flow of job ID of QUEUE: its parents up to the root, and the tree under it."""
    tree = env.queue(queue).flow(job_id, limit=limit)
    if tree is None:
        env.emit({"job": f"{queue}:{job_id}", "flow": None}, f"no job {job_id} in {queue}")
        return
    env.emit(tree.as_dict(), "\n".join(tree_lines(tree)))


@flow.command("release")
@click.argument("queue")
@click.argument("job_id", metavar="ID")
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
@pass_env
def release(env: Env, queue: str, job_id: str, yes: bool) -> None:
    """Let parent ID of QUEUE run now, before its children are done (they keep running;
    their results are recorded as they come). Journaled."""
    validate(job_id)
    q = env.queue(queue)
    confirm(env, yes, lambda: f"release flow parent {job_id} of {queue} {env.on_server()}?")
    left = q.release_parent(job_id)
    env.emit(
        {"id": job_id, "released": True, "unresolved": left},
        f"released {job_id} ({left} children not done yet)",
    )


@flow.command("fail")
@click.argument("queue")
@click.argument("job_id", metavar="ID")
@click.option("--error", default="failed by an operator", show_default=True)
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
@pass_env
def fail(env: Env, queue: str, job_id: str, error: str, yes: bool) -> None:
    """End parent ID of QUEUE as dead with ERROR; its own parent resolves it by its
    policy; its children keep running (see cancel). Journaled."""
    validate(job_id)
    q = env.queue(queue)
    confirm(
        env,
        yes,
        lambda: f"fail flow parent {job_id} of {queue} {env.on_server()} ({clean(error)})?",
    )
    q.fail_parent(job_id, error)
    env.emit({"id": job_id, "failed": True, "error": error}, f"failed {job_id}")


@flow.command("cancel")
@click.argument("queue")
@click.argument("job_id", metavar="ID")
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
@pass_env
def cancel(env: Env, queue: str, job_id: str, yes: bool) -> None:
    """Cancel the flow under parent ID of QUEUE: children not yet started removed,
    running ones asked to stop, waiting parents (ID first) dead. Journaled."""
    validate(job_id)
    q = env.queue(queue)

    def question() -> str:
        tree = q.flow(job_id)
        n = tree.find(f"{queue}:{job_id}") if tree is not None else None
        size = len(n.walk()) if n is not None else 0
        return f"cancel the flow under {job_id} of {queue} {env.on_server()} ({size} jobs)?"

    confirm(env, yes, question)
    got = q.cancel_flow(job_id)
    env.emit(
        {"id": job_id, **got.as_dict()},
        f"cancelled the flow under {job_id}: {got.removed} removed, {got.cancelling} "
        f"asked to stop, {got.failed} parents dead"
        + (" (truncated: the rest keeps running)" if got.truncated else ""),
    )


@flow.command("sweep")
@click.argument("queue")
@click.option("--limit", type=click.IntRange(1, 1000), default=SWEEP_PARENTS, show_default=True)
@click.option("--grace-ms", type=click.IntRange(min=0), default=SWEEP_GRACE_MS, show_default=True)
@click.option("--budget", type=click.IntRange(1, 10_000), default=SWEEP_BUDGET, show_default=True)
@pass_env
def sweep(env: Env, queue: str, limit: int, grace_ms: int, budget: int) -> None:
    """Resolve, as missing, the children of QUEUE's waiting parents that are gone with no
    ending on its way (the repair the workers' beat runs once a minute). Idempotent."""
    got = env.queue(queue).sweep_flows(limit=limit, grace_ms=grace_ms, budget=budget)
    env.emit(
        got.as_dict(),
        f"{got.parents} waiting parents examined, {got.checked} children checked, "
        f"{got.missing} missing, {got.resolved} resolved",
    )
