"""A private Redis Cluster for the tests: 3 primaries + 3 replicas on loopback.

Six ``redis-server --cluster-enabled yes`` processes (:class:`echomq.embedded.EmbeddedServer`,
nothing kept on disk, no native module) joined by ``redis-cli --cluster create ...
--cluster-replicas 1 --cluster-yes``. The session fixture ``cluster`` (tests/conftest.py)
starts one on first use and stops it at the end; a ``both_servers`` test module runs on
it too (``server`` is then the cluster). The failover test kills a primary and brings
it back as a replica, so later tests find a whole cluster again.
"""

from __future__ import annotations

import random
import shutil
import socket
import subprocess
import time
from typing import Any

import redis

from echomq.embedded import EmbeddedServer, find_server_binary

SLOTS = 16384
#: How long a primary may be silent before its replica takes over (ms). Short so the
#: failover test is quick; long enough that a busy 2-core machine does not fail over.
NODE_TIMEOUT_MS = 2000


def cluster_port(taken: set[int]) -> int:
    """A free port whose cluster bus port (port + 10000) is free too."""
    for port in random.sample(range(20000, 50000), 400):
        if port in taken or port + 10000 in taken:
            continue
        ok = True
        for p in (port, port + 10000):
            with socket.socket() as s:
                try:
                    s.bind(("127.0.0.1", p))
                except OSError:
                    ok = False
        if ok:
            return port
    raise RuntimeError("no free port pair")


def cli_binary() -> str | None:
    """``redis-cli`` (or ``valkey-cli``) next to the server binary, or on PATH."""
    for name in ("redis-cli", "valkey-cli"):
        found = shutil.which(name)
        if found:
            return found
    return None


def available() -> str | None:
    """Why no cluster can be made here, or None when it can."""
    if find_server_binary() is None:
        return "no redis-server/valkey-server"
    if cli_binary() is None:
        return "no redis-cli/valkey-cli"
    return None


class LocalCluster:
    """Cluster-mode servers joined into ``primaries`` primaries with ``replicas`` each
    (by default 3 + 3; ``module`` as :class:`~echomq.embedded.EmbeddedServer` takes it).

    Attributes:
        nodes: every server, in creation order.
        url: a ``redis://`` URL of one node (echomq detects the cluster from it).
    """

    def __init__(self, primaries: int = 3, replicas: int = 1, module: str | bool = False) -> None:
        taken: set[int] = set()
        self.nodes: list[EmbeddedServer] = []
        for _ in range(primaries * (1 + replicas)):
            port = cluster_port(taken)
            taken |= {port, port + 10000}
            self.nodes.append(
                EmbeddedServer(
                    port=port,
                    module=module,
                    extra_args=(
                        "--cluster-enabled", "yes",
                        "--cluster-config-file", "nodes.conf",
                        "--cluster-node-timeout", str(NODE_TIMEOUT_MS),
                        # a replica takes over whatever its link's age
                        "--cluster-replica-validity-factor", "0",
                        # the other shards serve while one has no primary
                        "--cluster-require-full-coverage", "no",
                    ),
                )
            )  # fmt: skip
        self.replicas = replicas
        #: the module the nodes load (None: the scripts serve, the default)
        self.module_path: str | None = module if isinstance(module, str) else None

    @property
    def url(self) -> str:
        return self.live()[0].url

    @property
    def port(self) -> int:
        return self.live()[0].port

    def live(self) -> list[EmbeddedServer]:
        return [n for n in self.nodes if n.proc is not None]

    def start(self) -> LocalCluster:
        for n in self.nodes:
            n.start()
        if len(self.nodes) == 1:  # redis-cli creates 3 primaries at least
            c = redis.Redis(port=self.nodes[0].port)
            c.execute_command("CLUSTER", "ADDSLOTSRANGE", 0, SLOTS - 1)
            c.close()
            self.wait_ok()
            return self
        cli = cli_binary()
        assert cli is not None
        addrs = [f"127.0.0.1:{n.port}" for n in self.nodes]
        done = subprocess.run(
            [cli, "--cluster", "create", *addrs, "--cluster-replicas", str(self.replicas),
             "--cluster-yes"],
            capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
        if done.returncode != 0:
            self.stop()
            raise RuntimeError(f"redis-cli --cluster create failed: {done.stdout}{done.stderr}")
        self.wait_ok()
        return self

    def info(self, node: EmbeddedServer, section: str) -> dict[str, str]:
        c = redis.Redis(port=node.port, decode_responses=True, socket_timeout=2)
        try:
            text: Any = c.execute_command("CLUSTER", "INFO") if section == "cluster" else None
            if text is None:
                return {k: str(v) for k, v in c.info(section).items()}
            return dict(line.split(":", 1) for line in str(text).splitlines() if ":" in line)
        finally:
            c.close()

    def wait_ok(self, timeout: float = 60.0) -> None:
        """Until every live node says ``cluster_state:ok``, knows every live node, and
        every replica is in sync with its primary."""
        deadline = time.monotonic() + timeout
        last: Any = None
        while time.monotonic() < deadline:
            try:
                live = self.live()
                states = [self.info(n, "cluster") for n in live]
                ok = all(s.get("cluster_state") == "ok" for s in states)
                ok = ok and all(int(s.get("cluster_slots_ok", 0)) == SLOTS for s in states)
                reps = [self.info(n, "replication") for n in live]
                ok = ok and all(
                    r.get("role") == "master" or r.get("master_link_status") == "up" for r in reps
                )
                primaries = sum(r.get("role") == "master" for r in reps)
                if ok and primaries == len(self.nodes) // (1 + self.replicas):
                    return
                last = (states, reps)
            except redis.RedisError as exc:
                last = exc
            time.sleep(0.1)
        raise RuntimeError(f"the private cluster did not converge: {last}")

    def primaries(self) -> list[EmbeddedServer]:
        return [n for n in self.live() if self.info(n, "replication").get("role") == "master"]

    def owner(self, key: str) -> EmbeddedServer:
        """The live primary that serves ``key``'s slot (as the live nodes agree)."""
        by_port = {n.port: n for n in self.live()}
        c = redis.Redis(port=self.primaries()[0].port, decode_responses=True)
        try:
            slot = int(c.execute_command("CLUSTER", "KEYSLOT", key))
            table = str(c.execute_command("CLUSTER", "NODES"))
        finally:
            c.close()
        for line in table.splitlines():
            parts = line.split()
            if "master" not in parts[2] or "fail" in parts[2]:
                continue
            port = int(parts[1].split("@")[0].rsplit(":", 1)[1])
            for rng in parts[8:]:
                lo, _, hi = rng.partition("-")
                if lo.isdigit() and int(lo) <= slot <= int(hi or lo) and port in by_port:
                    return by_port[port]
        raise RuntimeError(f"no live primary serves slot {slot}")

    def stop(self) -> None:
        for n in self.nodes:
            n.stop()
