"""A TCP fault proxy between echomq and a private server (loopback only).

It forwards bytes both ways, one thread per connection pair, and on demand:

- ``drop_replies(n)``: the next ``n`` chunks coming back from the server are swallowed
  and that connection is reset: the command was written and ran, its reply is lost;
- ``reset_all()``: every open connection is reset (``SO_LINGER`` 0: an RST, not a FIN);
- ``blackhole(True)``: bytes are read and thrown away both ways, nothing is answered,
  new connections are accepted and starve likewise;
- ``delay(s)``: every chunk from the server waits ``s`` seconds before it goes on;
- ``reset_every(p)``: each chunk from the server resets its connection instead, with
  probability ``p`` (a flapping link; the command it answered ran).

Counters (``replies_dropped``, ``resets``) tell a test what it did.
"""

from __future__ import annotations

import contextlib
import random
import select
import socket
import struct
import threading
import time

from typing_extensions import Self


def _rst(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    with contextlib.suppress(OSError):
        sock.close()


class FaultProxy:
    """Listens on a free loopback port and forwards to ``127.0.0.1:target_port``."""

    def __init__(self, target_port: int, *, seed: int = 7) -> None:
        self.target_port = target_port
        self._lsock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._lsock.bind(("127.0.0.1", 0))
        self._lsock.listen(128)
        self.port: int = self._lsock.getsockname()[1]
        self._lock = threading.Lock()
        self._pairs: set[tuple[socket.socket, socket.socket]] = set()
        self._drop = 0
        self._black = False
        self._delay = 0.0
        self._reset_p = 0.0
        self._rng = random.Random(seed)
        self._stopped = False
        self.replies_dropped = 0
        self.resets = 0
        self._thread = threading.Thread(target=self._accept, daemon=True)

    @property
    def url(self) -> str:
        """The ``redis://`` URL clients use to go through the proxy."""
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> Self:
        """Start accepting."""
        self._thread.start()
        return self

    def drop_replies(self, n: int = 1) -> None:
        """Swallow the next ``n`` replies, resetting the connection each carried."""
        with self._lock:
            self._drop += n

    def blackhole(self, on: bool) -> None:
        """Answer nothing (and forward nothing) while on."""
        self._black = on

    def delay(self, seconds: float) -> None:
        """Hold every reply this long."""
        self._delay = seconds

    def reset_every(self, p: float) -> None:
        """Reset a connection instead of forwarding a reply, with probability ``p``."""
        self._reset_p = p

    def reset_all(self) -> None:
        """Reset every open connection now."""
        with self._lock:
            pairs, self._pairs = self._pairs, set()
        for c, s in pairs:
            self.resets += 1
            _rst(c)
            _rst(s)

    def stop(self) -> None:
        """Stop accepting and reset everything."""
        self._stopped = True
        with contextlib.suppress(OSError):
            self._lsock.close()
        self.reset_all()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _accept(self) -> None:
        while not self._stopped:
            try:
                client, _ = self._lsock.accept()
            except OSError:
                return
            try:
                server = socket.create_connection(("127.0.0.1", self.target_port), timeout=2)
            except OSError:
                _rst(client)
                continue
            server.settimeout(None)
            pair = (client, server)
            with self._lock:
                self._pairs.add(pair)
            threading.Thread(target=self._pump, args=(pair,), daemon=True).start()

    def _take_drop(self) -> bool:
        with self._lock:
            if self._drop > 0:
                self._drop -= 1
                self.replies_dropped += 1
                return True
        return self._reset_p > 0 and self._rng.random() < self._reset_p

    def _kill(self, pair: tuple[socket.socket, socket.socket]) -> None:
        with self._lock:
            known = pair in self._pairs
            self._pairs.discard(pair)
        if known:
            self.resets += 1
        _rst(pair[0])
        _rst(pair[1])

    def _pump(self, pair: tuple[socket.socket, socket.socket]) -> None:
        client, server = pair
        try:
            while True:
                ready, _, _ = select.select([client, server], [], [], 0.5)
                if self._stopped:
                    break
                for sock in ready:
                    data = sock.recv(65536)
                    if not data:
                        raise ConnectionError("closed")
                    if self._black:
                        continue
                    if sock is client:
                        server.sendall(data)
                        continue
                    if self._take_drop():
                        raise ConnectionError("reply dropped")
                    if self._delay:
                        time.sleep(self._delay)
                    client.sendall(data)
        except (OSError, ConnectionError, ValueError):
            pass
        self._kill(pair)
