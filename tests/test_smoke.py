from __future__ import annotations

import pytest

from echomq import JobGone, Queue, StaleToken
from echomq.results import Counts


def test_roundtrip(q: Queue, r) -> None:
    jid = q.enqueue({"n": 1})
    assert q.counts().pending == 1
    c = q.claim()
    assert c is not None and c.id == jid and c.payload == {"n": 1} and c.token == 1
    q.complete(c.id, c.token)
    assert q.counts() == Counts(
        pending=0, active=0, scheduled=0, dead=0, completed=1, failed=0, paused=False
    )
    with pytest.raises(JobGone):
        q.complete(c.id, c.token)
    j2 = q.enqueue("x", max_attempts=1)
    c2 = q.claim()
    assert c2 is not None
    with pytest.raises(StaleToken):
        q.complete(j2, 99)
    assert q.retry(j2, c2.token, "boom") == "dead"
    assert q.job_state(j2) == "dead"
    q.reprocess_job(j2)
    q.pause()
    assert q.claim() is None
    q.resume()
    assert q.claim() is not None
