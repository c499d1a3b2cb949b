"""The one transport: every command a verb sends leaves through here.

A verb is a plan (:mod:`echomq.scripts`) that yields operations; a runner drives it
and hands each operation to its transport, which writes the commands on a connection
of the client's pool and reads the replies, with redis-py's documented API only
(``ConnectionPool.get_connection``/``release``, ``Connection.pack_commands``,
``send_packed_command``, ``read_response``, ``disconnect``).

**At most once.** The transport knows, for every failure, whether the commands left:

- the connection failed before the write (connect refused, a reset seen at the write):
  nothing ran, the commands are sent once more on a fresh connection;
- the write went out and no reply came (a reset or a timeout after the write): the
  outcome is unknown. An operation whose verb is idempotent on the server
  (:data:`RESEND`, one line per script, with the reason) is sent once more; any other
  raises :class:`~echomq.errors.OutcomeUnknown` carrying the job id, and is never sent
  again, by echomq or by redis-py: the transport does its own I/O, so the client's
  ``Retry`` policy only ever re-runs a *connect*, never a command.

**The fast path.** An idempotent operation (the hot path: enqueue, claim, complete,
extend, the pause gate) travels on one connection the transport keeps, made like the
pool's own (its documented ``connection_class`` and ``connection_kwargs``) but outside
it, so it never counts against the pool's ``max_connections`` and goes with the queue
when the queue is dropped. That skips the pool's per-call checkout (a lock and a
socket poll). Any other operation, or one that meets the kept connection busy (another
thread or task), takes a connection from the pool per call, whose checkout checks it
is still sound, so a server restart never turns a stale socket into an unknown
outcome. A pool of another kind (Sentinel) or with a client-side cache has no kept
connection. ``bench/lifecycle.py``
measures both; ``EMQ_FAST_PATH=0`` in the environment turns the kept connection off.

A cluster client (no single pool) is driven through its ``execute_command``; its own
retry policy applies there (build it with retries off for at-most-once sending).

**Quiet recovery.** A failure the transport recovers from by itself is logged at
DEBUG. One that reaches the caller starts an *outage*: one WARNING line, then one
line "recovered after N s" at the next success; tracebacks only at DEBUG.

The package, by what each module holds:

- :mod:`.exchange`: the sans-IO exchange: what an operation sends, how a reply or a
  failure is judged, the re-send decision, the version fence;
- :mod:`.resend`: :data:`RESEND`, which scripts may go again after a lost reply;
- :mod:`.sync` and :mod:`.aio`: the transports and runners, one per I/O style, kept
  as a checked mirror of each other (:mod:`.base` holds what they share);
- :mod:`.cluster`: driving a cluster client, and the deferred version fence;
- :mod:`.connections`: the connection facts both halves use (the kept connection);
- :mod:`.outage`: the outage log, shared with the worker.
"""

from .aio import AsyncRunner, AsyncTransport, HeldConnection
from .cluster import FENCE_RETRY_S, Deferral
from .connections import FAST_PATH
from .exchange import (
    Exchange,
    NoReply,
    NotSent,
    Request,
    exchange,
    fence,
    job_of,
    native_command,
)
from .outage import Outage, OutageLog
from .resend import RESEND, resendable
from .sync import SyncRunner, SyncTransport

__all__ = [
    "FAST_PATH",
    "FENCE_RETRY_S",
    "RESEND",
    "AsyncRunner",
    "AsyncTransport",
    "Deferral",
    "Exchange",
    "HeldConnection",
    "NoReply",
    "NotSent",
    "Outage",
    "OutageLog",
    "Request",
    "SyncRunner",
    "SyncTransport",
    "exchange",
    "fence",
    "job_of",
    "native_command",
    "resendable",
]
