"""Fixtures: one private server per test session, a fresh queue name per test.

The server is a real ``redis-server``/``valkey-server`` started by
:class:`echomq.embedded.EmbeddedServer` on a free loopback port, with nothing kept on
disk, and stopped at the end. No test touches a server it did not start. The native
module is built first and the server loads it when it built (the report header says
which); a module that did not build fails nothing here but every native-executor test
is skipped, with the build's warning.

``executor``: the queues the fixtures make use ``scripts`` unless a test module is
marked ``pytest.mark.both_executors``: its tests then run once per executor
(``scripts`` and ``native``), so the lifecycle, lanes and operator-plane suites prove the
native twins equal to the scripts. ``EMQ_TEST_EXECUTOR`` changes the default. The
scripts go as ``FCALL`` of their Functions form on the single node (echomq.functions);
a module marked ``pytest.mark.evalsha_too`` as well runs a third time as ``eval``: the
scripts sent as ``EVALSHA`` (``EMQ_FUNCTIONS=0``), the form a server without Functions
and the cluster run.

``server``: a module marked ``pytest.mark.both_servers`` runs each test that uses the
server once on the single node (id ``single``) and once on the private Redis Cluster
(id ``cluster``, 3 primaries + 3 replicas, tests/cluster_support.py; marked
``cluster`` and ``slow``, skipped when no cluster can start). There ``server`` is the
cluster and ``r`` a cluster client; the cluster runs the scripts only (its nodes load
no module), so a ``both_executors`` module's tests run as ``scripts-single``,
``native-single`` and ``scripts-cluster``. A test marked ``single_node(reason)`` stays
on the single node.
"""

from __future__ import annotations

import itertools
import os
import warnings
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import pytest
import redis
import redis.asyncio
from redis.cluster import RedisCluster

from cluster_support import LocalCluster
from cluster_support import available as cluster_unavailable
from echomq import AsyncQueue, Queue, native
from echomq.embedded import EmbeddedServer
from faults.proxy import FaultProxy

_names = itertools.count()
_built = native.build(quiet=True)
# A queue a test builds itself (not through the fixtures) gets this executor; the
# native executor is tested where it is asked for (EMQ_EXECUTOR=auto runs them all on it).
os.environ.setdefault("EMQ_EXECUTOR", "scripts")
EXECUTORS = ("scripts", "native")
#: The servers a ``both_servers`` module runs on: its id, and the marks of its runs.
SERVERS = (
    pytest.param("single", id="single"),
    pytest.param("cluster", id="cluster", marks=(pytest.mark.cluster, pytest.mark.slow)),
)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "both_executors: run the module's queue tests under scripts and native"
    )
    config.addinivalue_line(
        "markers",
        "both_servers: run the module's server tests on the single node and on the cluster",
    )
    config.addinivalue_line(
        "markers", "evalsha_too: a both_executors module also runs its scripts by EVALSHA"
    )
    config.addinivalue_line(
        "markers", "single_node(reason): left out of a both_servers module's cluster run"
    )
    config.addinivalue_line(
        "markers", "cluster: runs on the private Redis Cluster (3 primaries + 3 replicas)"
    )
    if _built is None:
        warnings.warn(
            "echomq: the native module did not build; native-executor tests are skipped",
            stacklevel=1,
        )


def pytest_report_header() -> str:
    if _built is None:
        return "echomq native module: NOT BUILT (native-executor tests skip)"
    return f"echomq native module: {_built} (loaded by the test server)"


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    marked = metafunc.definition.get_closest_marker
    executors = "executor" in metafunc.fixturenames and marked("both_executors")
    servers = "server" in metafunc.fixturenames and marked("both_servers")
    if not servers:
        if executors:
            kinds_of = EXECUTORS + (("eval",) if marked("evalsha_too") else ())
            metafunc.parametrize("executor", kinds_of, indirect=True)
        return
    kinds = SERVERS[:1] if marked("single_node") else SERVERS
    # function scope: the tests keep their order (pytest would otherwise regroup a
    # session-scoped parameter across modules); the servers behind stay one each
    if not executors:
        metafunc.parametrize("server", kinds, indirect=True, scope="function")
        return
    # the cluster's nodes load no module: the native executor runs on the single node
    single = EXECUTORS + (("eval",) if marked("evalsha_too") else ())
    runs = [
        pytest.param(ex, kind.values[0], id=f"{ex}-{kind.id}", marks=kind.marks)
        for kind in kinds
        for ex in (single if kind.values[0] == "single" else EXECUTORS[:1])
    ]
    metafunc.parametrize(("executor", "server"), runs, indirect=True, scope="function")


@pytest.fixture(scope="session")
def single_server() -> Iterator[EmbeddedServer]:
    """The private single-node server of the session (it loads the native module)."""
    with EmbeddedServer(module=_built is not None and str(_built)) as srv:
        yield srv


@pytest.fixture(scope="session")
def server(request: pytest.FixtureRequest) -> EmbeddedServer | LocalCluster:
    """The server the test runs on: the single node, or in a ``both_servers`` module's
    cluster run the private cluster (it has ``url``, ``port`` and ``module_path`` too)."""
    kind = getattr(request, "param", "single")
    made: EmbeddedServer | LocalCluster = request.getfixturevalue(
        "cluster" if kind == "cluster" else "single_server"
    )
    return made


@pytest.fixture(scope="session")
def cluster() -> Iterator[LocalCluster]:
    """A private Redis Cluster, 3 primaries + 3 replicas on loopback, for the whole
    session (started on first use; tests/cluster_support.py)."""
    why = cluster_unavailable()
    if why is not None:
        pytest.skip(f"no cluster: {why}")
    made = LocalCluster().start()
    try:
        yield made
    finally:
        made.stop()


@pytest.fixture()
def executor(
    request: pytest.FixtureRequest, server: EmbeddedServer, monkeypatch: pytest.MonkeyPatch
) -> str:
    """The executor of the queues the fixtures make (see the module docstring); ``eval``
    is ``scripts`` sent as ``EVALSHA``."""
    choice: str = getattr(request, "param", None) or os.environ.get("EMQ_TEST_EXECUTOR", "scripts")
    if choice == "native" and server.module_path is None:
        pytest.skip("the echomq native module is not built")
    if choice == "eval":
        monkeypatch.setenv("EMQ_FUNCTIONS", "0")
        return "scripts"
    return choice


@pytest.fixture()
def evalsha(monkeypatch: pytest.MonkeyPatch) -> None:
    """Queues made from now on send their scripts as ``EVALSHA`` (``EMQ_FUNCTIONS=0``)."""
    monkeypatch.setenv("EMQ_FUNCTIONS", "0")


@pytest.fixture()
def r(server: EmbeddedServer | LocalCluster) -> Iterator[redis.Redis]:
    """A client of the test's server; on the cluster a cluster client (it routes each
    key to its node, and SCAN walks every primary)."""
    client: Any = (
        RedisCluster.from_url(server.url, decode_responses=True)
        if isinstance(server, LocalCluster)
        else redis.Redis.from_url(server.url, decode_responses=True)
    )
    yield client
    client.close()


@pytest.fixture()
def qname(request: pytest.FixtureRequest) -> str:
    """A queue name no other test uses."""
    base = request.node.name.replace("[", "-").replace("]", "").replace("/", "-")
    return f"t{os.getpid()}-{next(_names)}-{base}"[:120].replace(" ", "_")


@pytest.fixture()
def make_queue(server: EmbeddedServer, executor: str) -> Iterator[Callable[..., Queue]]:
    """Factory: ``make_queue(name, **kw)`` -> a Queue on the private server."""
    made: list[Queue] = []

    def make(name: str, **kw: Any) -> Queue:
        kw.setdefault("executor", executor)
        q = Queue(name, url=server.url, **kw)
        made.append(q)
        return q

    yield make
    for q in made:
        q.close()


@pytest.fixture()
def q(make_queue: Callable[..., Queue], qname: str) -> Queue:
    return make_queue(qname)


@pytest.fixture()
async def aq(server: EmbeddedServer, qname: str, executor: str) -> AsyncIterator[AsyncQueue]:
    queue = AsyncQueue(qname, url=server.url, executor=executor)
    yield queue
    await queue.aclose()


def dump(r: redis.Redis, queue: Queue | AsyncQueue) -> dict[str, Any]:
    """Every key of a queue with its type, value and ttl presence: a picture to compare
    before and after a refused call. A hash's or a set's content is compared (sorted),
    not its ``DUMP`` bytes: a hashtable's serialised order follows its incremental
    rehash, which a read can advance, so equal content can dump differently."""
    out: dict[str, Any] = {}
    for key in sorted(r.scan_iter(match=queue.keys.pattern(), count=1000)):
        kind = r.type(key)
        kind_text = kind.decode() if isinstance(kind, bytes) else kind
        value: Any
        if kind_text == "hash":
            value = sorted(r.hgetall(key).items())
        elif kind_text == "set":
            value = sorted(r.smembers(key))
        else:
            value = r.dump(key)
        out[key] = (kind, value, r.pttl(key) > 0)
    return out


def script_calls(r: redis.Redis) -> int:
    """How many script calls the server ran: ``EVALSHA`` and ``FCALL`` (a script's
    Functions form) together (INFO commandstats)."""
    stats = r.info("commandstats")
    return sum(int(stats.get(f"cmdstat_{c}", {}).get("calls", 0)) for c in ("evalsha", "fcall"))


def native(queue: Queue | AsyncQueue) -> bool:
    """Whether the queue's verbs run on a native module that keeps no claim records and
    no tombstones. Ours keeps both, as the scripts do (native/*.c): never."""
    return False


def tombstones(queue: Queue | AsyncQueue) -> set[str]:
    """The settled-tombstone key a completion leaves (under either executor)."""
    return set() if native(queue) else {queue.keys.settled}


def claim_records(r: redis.Redis, queue: Queue | AsyncQueue) -> set[str]:
    """The claim request records (``claimreq:<rid>``, kept 60 s) a queue holds: each
    claim that leased a job leaves one, so a re-sent claim answers the same jobs."""
    return set(r.scan_iter(match=queue.keys.base + "claimreq:*", count=1000))


def queue_keys(r: redis.Redis, queue: Queue | AsyncQueue) -> set[str]:
    """The names of every key the queue has, less its claim records and their index
    (``claimreqs``): 60 s receipts of each claim that leased a job, which the native
    claim does not keep (yet); :func:`claim_records` lists them."""
    receipts = claim_records(r, queue) | {queue.keys.claimreqs}
    return set(r.scan_iter(match=queue.keys.pattern(), count=1000)) - receipts


@pytest.fixture()
def proxy(server: EmbeddedServer) -> Iterator[FaultProxy]:
    """A TCP fault proxy in front of the private server (tests/faults/proxy.py)."""
    with FaultProxy(server.port) as p:
        yield p


@pytest.fixture()
def pq(proxy: FaultProxy, qname: str) -> Iterator[Queue]:
    """A queue that talks to the server through the fault proxy."""
    q = Queue(qname, url=proxy.url)
    yield q
    q.close()


def hist_keys(r: redis.Redis, queue: Queue | AsyncQueue) -> set[str]:
    """The queue's history keys (``hist:<hour>``)."""
    return {k for k in queue_keys(r, queue) if k.startswith(queue.keys.base + "hist:")}


def hour_lanes(r: redis.Redis, key: str) -> list[tuple[int, int, int, int, int]]:
    """An hour key's busiest lanes' table, slot by slot: (hash, ended, dead, wait in
    ``HIST_WAIT_UNIT_MS`` units, run ms); an empty slot is all zeros."""
    from echomq.schema import HIST_LANE_FIELDS, HIST_LANE_TYPE, HIST_LANES, hist_lane_at

    names = ["hash", *(name for name, _ in HIST_LANE_FIELDS)]
    ops: list[Any] = []
    for slot in range(HIST_LANES):
        for name in names:
            ops += ["GET", HIST_LANE_TYPE[name], hist_lane_at(slot, name)]
    raw = [int(v) for v in r.execute_command("BITFIELD_RO", key, *ops)]
    n = len(names)
    return [tuple(raw[i * n : (i + 1) * n]) for i in range(HIST_LANES)]  # type: ignore[misc]


def plant_lane(
    r: redis.Redis,
    queue: Queue | AsyncQueue,
    hour: int,
    slot: int,
    name: str,
    figures: tuple[int, int, int, int],
    at_ms: int,
) -> None:
    """Write a lane into slot ``slot`` of an hour's table, as a grouped ending would
    (figures: ended, dead, wait units, run ms), and its name in ``lanenames`` at
    ``at_ms``: a test's own hour, or a name no enqueue takes."""
    from echomq.reads.series import lane_hash
    from echomq.schema import HIST_LANE_FIELDS, HIST_LANE_TYPE, HIST_MARK, hist_lane_at

    names = ["hash", *(name for name, _ in HIST_LANE_FIELDS)]
    ops: list[Any] = []
    for field, value in zip(names, (lane_hash(name), *figures)):
        ops += ["SET", HIST_LANE_TYPE[field], hist_lane_at(slot, field), value]
    r.execute_command("BITFIELD", queue.keys.hist(hour), *ops, "SET", "u1", HIST_MARK, 1)
    r.zadd(queue.keys.lanenames, {name: at_ms})
