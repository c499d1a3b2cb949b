"""A private ``valkey-server`` or ``redis-server`` for tests, the demo and the CLI.

It listens on a free loopback port (or a unix socket), keeps nothing on disk
(``--save "" --appendonly no``) unless asked for an append-only file, and is stopped
by its own pid. The fault suite also kills it (SIGKILL, a crash) and starts it again
on the same port and directory, where its AOF brings the data back. When echomq's server
module is there (installed by the platform wheel, or built in a checkout as
``native/echomq.so``: :func:`echomq.native.module_path`, see docs/native.md) the server
loads it with ``--loadmodule`` and says so in the log; when it is not, the scripts serve
(in a checkout, a warning says how to build it).
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

from typing_extensions import Self

from . import native
from .errors import ServerUnavailable

BINARIES = ("valkey-server", "redis-server")


def find_server_binary() -> str | None:
    """The first of ``valkey-server``, ``redis-server`` on PATH (or ``EMQ_SERVER_BIN``)."""
    env = os.environ.get("EMQ_SERVER_BIN")
    if env:
        return env
    for name in BINARIES:
        path = shutil.which(name)
        if path:
            return path
    for d in ("/usr/bin", "/usr/local/bin", "/usr/sbin"):
        for name in BINARIES:
            p = Path(d) / name
            if p.exists():
                return str(p)
    return None


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class EmbeddedServer:
    """A private server process.

    Args:
        port: the TCP port on 127.0.0.1 (a free one when omitted).
        unix_socket: listen on this unix socket path instead of TCP.
        binary: the server executable (found on PATH when omitted).
        extra_args: more server arguments.
        module: load echomq's native module: ``None`` (default) when it is installed
            or built, ``True`` to require it (installed, or built already: ``emq native
            build``), ``False`` never, or a path. Starting never builds it.
        appendonly: keep an append-only file, synced on every write
            (``appendfsync always``), so a crash loses no acknowledged write.
        data_dir: the server's directory (kept by :meth:`stop`); a temporary one,
            removed by :meth:`stop`, when omitted.

    Attributes:
        module_path: the module the server loaded, or None (the scripts serve).

    Use as a context manager, or call :meth:`start` and :meth:`stop`.
    """

    def __init__(
        self,
        *,
        port: int | None = None,
        unix_socket: str | None = None,
        binary: str | None = None,
        extra_args: tuple[str, ...] = (),
        module: bool | str | None = None,
        appendonly: bool = False,
        data_dir: str | None = None,
    ) -> None:
        self.binary = binary or find_server_binary()
        self.unix_socket = unix_socket
        self.port = 0 if unix_socket else (port or free_port())
        self.extra_args = extra_args
        self.module = module
        self.module_path: str | None = None
        self.appendonly = appendonly
        self.data_dir = data_dir
        self.proc: subprocess.Popen[bytes] | None = None
        self._dir: str | None = None

    @property
    def url(self) -> str:
        """The ``redis://`` (or ``unix://``) URL of this server."""
        if self.unix_socket:
            return f"unix://{self.unix_socket}"
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self, timeout: float = 10.0) -> Self:
        """Start the server and wait until it answers ``PING``.

        Raises:
            ServerUnavailable: no server binary, or it did not answer in time.
        """
        if not self.binary:
            raise ServerUnavailable(
                "no valkey-server or redis-server on PATH (install one: apt-get install "
                "redis-server)"
            )
        if self._dir is None:  # a restart after kill() keeps its directory
            self._dir = self.data_dir or tempfile.mkdtemp(prefix="echomq-server-")
        aof = ["yes", "--appendfsync", "always"] if self.appendonly else ["no"]
        args = [
            self.binary,
            "--port", str(self.port),
            "--bind", "127.0.0.1",
            "--save", "",
            "--appendonly", *aof,
            "--daemonize", "no",
            "--dir", self._dir,
            "--logfile", "",
            "--loglevel", "warning",
        ]  # fmt: skip
        if self.unix_socket:
            args += ["--unixsocket", self.unix_socket, "--unixsocketperm", "700"]
        self.module_path = self._module()
        if self.module_path:
            args += ["--loadmodule", self.module_path]
        args += list(self.extra_args)
        self.proc = subprocess.Popen(
            args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            code = self.proc.poll()
            if code is not None:
                self.stop()
                raise ServerUnavailable(f"{self.binary} exited at start (status {code})")
            if self._answers():
                return self
            time.sleep(0.02)
        self.stop()
        raise ServerUnavailable(f"{self.binary} did not answer within {timeout}s")

    def _module(self) -> str | None:
        """The module to load, if any; says which, or warns that the scripts serve."""
        if self.module is False:
            return None
        if isinstance(self.module, str):
            return self.module
        # only a module installed or already built: building is a step of its own
        found = native.module_path()
        if found is None:
            if self.module:
                raise ServerUnavailable(
                    f"the echomq native module is not built; {native.BUILD_HINT}"
                )
            if native.source_dir().is_dir():
                native.log.warning(
                    "echomq: the native module is not built (%s); the embedded server runs "
                    "without it and the scripts serve",
                    native.BUILD_HINT,
                )
            return None
        native.log.info("echomq: the embedded server loads the native module %s", found)
        return str(found)

    def _answers(self) -> bool:
        try:
            if self.unix_socket:
                s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                s.settimeout(0.5)
                s.connect(self.unix_socket)
            else:
                s = socket.create_connection(("127.0.0.1", self.port), timeout=0.5)
            with s:
                s.sendall(b"PING\r\n")
                return s.recv(64).startswith(b"+PONG")
        except OSError:
            return False

    def kill(self) -> None:
        """Kill the server (SIGKILL: a crash, nothing flushed at exit). Its directory
        stays, so :meth:`start` brings back what its append-only file kept."""
        proc, self.proc = self.proc, None
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait(timeout=5)

    def stop(self) -> None:
        """Stop the server by its own pid and remove its directory (unless it was
        given as ``data_dir``)."""
        proc, self.proc = self.proc, None
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=5)
        if self._dir:
            if self.data_dir is None:
                shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def server_answers(url: str, timeout: float = 0.5) -> bool:
    """Whether a server answers ``PING`` at ``url``."""
    import redis

    from .connect import split_url

    try:
        client = redis.Redis.from_url(
            split_url(url)[0], socket_connect_timeout=timeout, socket_timeout=timeout
        )
        try:
            return bool(client.ping())
        finally:
            client.close()
    except (redis.ConnectionError, redis.TimeoutError, OSError):
        return False
