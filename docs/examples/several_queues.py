"""One worker for high, default and low: the first queue with work is served first."""

import os
import threading
import time

from echomq import Queue, Worker

base = os.environ.get("EMQ_QUEUE", "mail")
url = os.environ.get("EMQ_URL")
high, default, low = (Queue(f"{base}{tag}", url=url) for tag in ("", "-default", "-low"))

low.enqueue_many([{"n": n} for n in range(3)])
default.enqueue_many([{"n": n} for n in range(3)])
high.enqueue_many([{"n": n} for n in range(3)])
served = []


def handle(job):
    served.append(job.queue)  # job.queue: which of the worker's queues it came from


# order="priority" (the default, RQ's rule) or "fair" (the queues with work claim in
# turns: about an equal share each); concurrency counts the jobs in hand over all three
worker = Worker([high, default, low], handle, concurrency=1, order="priority")
thread = threading.Thread(target=worker.run)
thread.start()
while len(served) < 9:
    time.sleep(0.05)
worker.stop()
thread.join()

print(served)
assert served == [high.name] * 3 + [default.name] * 3 + [low.name] * 3
