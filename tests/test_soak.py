"""The soak run, 60 s of it (issue 24, deliverable 7): ``bench/soak.py`` at a rate a busy
2-core machine keeps up with, a worker SIGKILLed every 15 s, the server restarted from
its AOF half-way, the operator every 10 s. Only its hard checks are asserted (nothing
timed): every job accounted for exactly once, none completed twice nor run twice under
one token, every index within its time window plus one trim step.
"""

from __future__ import annotations

import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[1] / "bench"
if str(BENCH) not in sys.path:
    sys.path.append(str(BENCH))

import pytest  # noqa: E402

import soak  # noqa: E402

pytestmark = pytest.mark.slow  # a minute of load, worker processes and a server restart


def test_a_minute_of_soak_loses_nothing_and_grows_nothing() -> None:
    # 60 s of load at 100 jobs/s; no idle settle (memory is reported, not checked here)
    args = soak.parse(["--duration=60", "--rate=100", "--kill-every=15", "--settle=0"])
    verdict = soak.run(args)
    assert verdict.enqueued > 1000
    assert verdict.lost == 0
    assert verdict.twice_accounted == 0
    assert verdict.completed_twice == 0
    assert verdict.same_token_twice == 0
    assert verdict.ok, verdict.failures
