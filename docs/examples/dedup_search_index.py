"""Debounce a search index update: a burst of edits to one document reindexes it once,
with the newest text, after the edits stop."""

import os
import threading

from echomq import Dedup, Queue, Worker, WorkerConfig

q = Queue(os.environ.get("EMQ_QUEUE", "search-index"), url=os.environ.get("EMQ_URL"))
indexed: list[dict[str, str]] = []
done = threading.Event()


def reindex(job):  # the handler: one run per quiet burst
    indexed.append(job.data)
    done.set()


def on_save(doc_id: str, text: str) -> str:
    """Called on every save: the job of this document waits 300 ms after the last one."""
    return q.enqueue(
        {"doc": doc_id, "text": text},
        dedup=Dedup(f"doc:{doc_id}", mode="debounce", delay_ms=300),
    )


ids = {on_save("42", f"draft {n}") for n in range(50)}  # a user typing
assert len(ids) == 1  # one job, its payload replaced each time, its delay pushed
print(q.dedup_owner("doc:42"))  # DedupOwner(job_id='JOB...', state='scheduled', ...)

worker = Worker(q, reindex, config=WorkerConfig(beat_ms=50))
runner = threading.Thread(target=worker.run)
runner.start()
assert done.wait(10)
worker.stop(timeout=10)
runner.join()
assert indexed == [{"doc": "42", "text": "draft 49"}]  # once, the newest text
assert q.dedup_owner("doc:42") is None  # the run's end released the id
print("reindexed once:", indexed[0])
