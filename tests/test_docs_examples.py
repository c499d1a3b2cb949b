"""The examples in the docs are files, and this test runs them against the private server.

Each ``docs/examples/*.py`` runs as its own process with ``EMQ_URL`` pointing at the
private server and ``EMQ_QUEUE`` naming a fresh queue; it must exit 0 (the examples
assert what they show) and leave the keys listed here. A markdown page that embeds an
example marks the block with ``<!-- example: NAME.py -->``; the block must be the file.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import redis

from conftest import queue_keys
from echomq import Queue
from echomq.embedded import EmbeddedServer

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "docs" / "examples"
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
_EMBED = re.compile(r"<!-- example: ([\w.]+) -->\n```python\n(.*?)```", re.DOTALL)

#: What each example leaves behind: the key suffixes under emq:{q}: (job rows as
#: ``job:*``). The wake list is left out: its tokens are hints that idle workers take
#: at any moment, so whether one is left depends on timing.
# ``settled`` (the tombstones) lasts 60 s; claim records are not counted (queue_keys).
LEFT_BEHIND = {
    # seq: the queue's enqueue sequence (the run order) stays with the queue
    "quickstart.py": {"metrics:completed", "settled", "seq"},
    "lease_and_token.py": {"metrics:completed", "settled", "seq"},
    "operator_plane.py": set(),
    "queue_events.py": {"meta", "pending", "job:*", "audit", "seq"},
    "dedup_search_index.py": {"metrics:completed", "settled", "seq"},
    # the rejected row stays dead (with its failure counted)
    "batch_insert.py": {"metrics:completed", "metrics:failed", "dead", "job:*", "settled", "seq"},
    # EMQ_QUEUE is the high queue; the example's two others are named after it
    "several_queues.py": {"metrics:completed", "settled", "seq"},
}


def test_every_example_is_listed() -> None:
    assert {p.name for p in EXAMPLES.glob("*.py")} == set(LEFT_BEHIND)


@pytest.mark.parametrize("name", sorted(LEFT_BEHIND))
def test_example_runs(name: str, server: EmbeddedServer, q: Queue, r: redis.Redis) -> None:
    env = {k: v for k, v in os.environ.items()}
    env.update(
        EMQ_URL=server.url,
        EMQ_QUEUE=q.name,
        PYTHONPATH=os.pathsep.join([str(ROOT / "src"), env.get("PYTHONPATH", "")]),
    )
    p = subprocess.run(
        [sys.executable, str(EXAMPLES / name)],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        env=env,
        timeout=60,
    )
    assert p.returncode == 0, p.stdout + p.stderr
    left = {k.removeprefix(q.keys.base) for k in queue_keys(r, q)}
    left = {"job:*" if k.startswith("job:") else k for k in left} - {"wake"}
    # the history series: a job that ended leaves its hour's key (two, when the hour
    # turned during the run), expiring 7 days after that hour
    hours = {k for k in left if re.fullmatch(r"hist:\d+", k)}
    ended = {"metrics:completed", "metrics:failed"} & LEFT_BEHIND[name]
    assert (1 <= len(hours) <= 2) if ended else not hours, p.stdout
    assert left - hours == LEFT_BEHIND[name], p.stdout


def test_embedded_examples_are_the_files() -> None:
    embedded = 0
    for page in PAGES:
        for name, block in _EMBED.findall(page.read_text(encoding="utf-8")):
            source = (EXAMPLES / name).read_text(encoding="utf-8")
            assert block == source, f"{page.name}: the block for {name} differs from the file"
            embedded += 1
    assert embedded >= 2, "the README and concepts page embed examples"
