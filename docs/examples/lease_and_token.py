"""The lease and the fencing token: a claim hands out `attempts`; a stale one is refused."""

import os
import time

from echomq import Queue, StaleToken

q = Queue(os.environ.get("EMQ_QUEUE", "reports"), url=os.environ.get("EMQ_URL"))
job_id = q.enqueue({"report": "q3"})

first = q.claim(lease_ms=50)  # a worker leases the job for 50 ms ...
assert first is not None and first.token == 1
# ... and stalls. Once the lease has run out, reap puts the job back in pending.
while q.reap() == 0:
    time.sleep(0.01)
second = q.claim(lease_ms=30_000)  # another worker claims it: the token moves on
assert second is not None and second.id == job_id and second.token == 2

try:
    q.complete(job_id, first.token)  # the stale holder wakes up and tries to finish
except StaleToken as refusal:
    print("refused:", refusal.reason)  # refused: stale -- and nothing changed
assert q.job_state(job_id) == "active"

q.complete(job_id, second.token)  # the current holder completes it
assert q.job_state(job_id) is None and q.counts().completed == 1
print(q.counts())
