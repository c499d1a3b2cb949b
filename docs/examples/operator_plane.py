"""The operator plane in Python: pause, per-job verbs, dead -> reprocess, drain, obliterate."""

import os

from echomq import JobNotDead, Queue, QueueNotPaused

q = Queue(os.environ.get("EMQ_QUEUE", "invoices"), url=os.environ.get("EMQ_URL"))
ids = [q.enqueue({"invoice": n}) for n in range(5)]

# Pause: a field the claim reads first. Claims answer None; the backlog stays as it is.
q.pause()
assert q.claim() is None and q.counts().pending == 5

# Reach into one row, in any state.
job = ids[0]
q.update_data(job, {"invoice": 0, "total": 120})
q.update_progress(job, 50)  # also publishes {"event":"progress","job":...,"progress":50}
q.add_log(job, "checked the total")
print(q.get_job_logs(job))  # ['checked the total']

# A failure dead-letters a job at max_attempts; reprocess brings it back.
q.resume()
claimed = q.claim()
assert claimed is not None
assert q.retry(claimed.id, claimed.token, "total is negative", max_attempts=1) == "dead"
try:
    q.reprocess_job(ids[1])  # a pending job is not dead: refused, nothing changed
except JobNotDead as refusal:
    print("refused:", refusal.reason)  # refused: not_dead
q.reprocess_job(claimed.id)  # dead -> pending, last_error cleared, counters kept
assert q.job_state(claimed.id) == "pending"

# Drain: delete the pending backlog (active jobs and repeatables survive).
print("drained", q.drain())  # drained 5

# Obliterate: only a paused queue, a budget of jobs per call, until nothing is left.
try:
    q.obliterate()
except QueueNotPaused as refusal:
    print("refused:", refusal.reason)  # refused: not_paused
q.pause()
q.enqueue_many([{"n": n} for n in range(10)])
calls = 1
while not q.obliterate(budget=3):  # False means "more": call again
    calls += 1
print("obliterated in", calls, "calls")
