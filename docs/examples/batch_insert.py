"""A batched bulk insert: one handler call per batch of rows, each job settled alone."""

import os
import sqlite3
import threading
import time

from echomq import Batch, Queue, Worker

q = Queue(os.environ.get("EMQ_QUEUE", "events"), url=os.environ.get("EMQ_URL"))
db = sqlite3.connect(":memory:", check_same_thread=False)
db.execute("CREATE TABLE events (job TEXT PRIMARY KEY, kind TEXT NOT NULL)")

q.enqueue_many([{"kind": "click"} for _ in range(250)])
bad = q.enqueue({"kind": ""}, max_attempts=1)  # the database would refuse it


def insert_rows(jobs):
    """One INSERT for the batch; a row that cannot go in fails only its own job."""
    results, rows = [], []
    for job in jobs:
        if job.data["kind"]:
            rows.append((job.id, job.data["kind"]))
            results.append(None)  # completes
        else:
            results.append(ValueError("an event needs a kind"))  # fails, retried alone
    with db:
        db.executemany("INSERT INTO events VALUES (?, ?)", rows)
    return results  # one per job, in order (or None: all complete; or raise: all fail)


worker = Worker(q, insert_rows, batch=Batch(size=100, min_size=1, wait_ms=500))
thread = threading.Thread(target=worker.run)
thread.start()
while q.counts().completed < 250 or q.job_state(bad) != "dead":
    time.sleep(0.05)
worker.stop()
thread.join()

print(q.counts())
assert db.execute("SELECT COUNT(*) FROM events").fetchone() == (250,)
assert q.counts().completed == 250 and q.counts().dead == 1
