"""Quick start: enqueue jobs, work them with a Worker, read the queue's counts."""

import os
import threading
import time

from echomq import Queue, Worker

# EMQ_URL picks the server (`emq server` prints one); None means 127.0.0.1:6379.
q = Queue(os.environ.get("EMQ_QUEUE", "emails"), url=os.environ.get("EMQ_URL"))

for to in ("ada@example.com", "alan@example.com", "grace@example.com"):
    q.enqueue({"to": to}, name="welcome")
print(q.counts())  # Counts(pending=3, active=0, ..., completed=0, failed=0, paused=False)


def send_welcome(job):
    # job.id, job.data, job.name, job.attempt; job.progress(...), job.log(...)
    job.log(f"sending to {job.data['to']}")
    print("welcome mail to", job.data["to"])


worker = Worker(q, send_welcome, concurrency=5)
# worker.run() blocks until SIGINT/SIGTERM; here it runs in a thread until the
# backlog is done, then stops gracefully.
thread = threading.Thread(target=worker.run)
thread.start()
while q.counts().completed < 3:
    time.sleep(0.05)
worker.stop()
thread.join()

counts = q.counts()
print(counts)
assert counts.pending == 0 and counts.completed == 3
