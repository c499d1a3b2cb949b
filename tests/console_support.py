"""The console served for real: uvicorn on a free loopback port, in a thread (the
tests that need a socket: event streams, admission caps, the browser)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import uvicorn

from echomq.console import create_app
from echomq.embedded import free_port


@contextmanager
def serving(url: str, log_level: str = "warning", **kw: Any) -> Iterator[int]:
    """The console over the server at ``url`` (``create_app(url, **kw)``), listening;
    yields its port, and stops it after."""
    port = free_port()
    config = uvicorn.Config(create_app(url, **kw), host="127.0.0.1", port=port, log_level=log_level)
    config.timeout_graceful_shutdown = 1
    srv = uvicorn.Server(config)
    thread = threading.Thread(target=srv.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not srv.started:
        assert time.monotonic() < deadline and thread.is_alive(), "uvicorn did not start"
        time.sleep(0.02)
    try:
        yield port
    finally:
        srv.should_exit = True
        thread.join(5)
