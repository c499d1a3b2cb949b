"""Subscribe to a queue's events: every transition publishes one on emq:{q}:events."""

import os

from echomq import Queue

q = Queue(os.environ.get("EMQ_QUEUE", "uploads"), url=os.environ.get("EMQ_URL"))
job_id = q.enqueue({"file": "cat.png"})

with q.events() as stream:  # subscribed from here on (pub/sub is at-most-once)
    q.update_progress(job_id, 75)
    q.pause()
    seen = [stream.get(timeout=5), stream.get(timeout=5)]

for event in seen:
    print(event.name, event.job, dict(event.fields))
# progress JOB... {'progress': 75}
# paused None {}
assert [e.name for e in seen if e] == ["progress", "paused"]
assert seen[0] is not None and seen[0].get("progress") == 75
