"""The simulated operators of ``bench/console_load.py``: each refreshes a queue page
the way the page's ``refresh()`` does (static/app.js) and holds one event stream.

Two clients do the same requests in the same order:

- ``raw`` (the default): hand-written HTTP/1.1 over asyncio streams, keep-alive
  connections reused like a browser's (a pool per operator, at most six to the
  origin, one of them the event stream), reading the status line, the headers and a
  ``Content-Length`` body; the stream's chunks are read and dropped. A load generator
  that costs little CPU leaves the machine's cores to the console it measures.
- ``httpx``: the earlier generator (one ``httpx.AsyncClient`` per operator), kept to
  measure what the generator itself costs.

A refresh is what the page sends: the summary; then throughput, repeatables, workers
and audit at once; then the history series; then the groups table and the pending
tab at once. Every request carries what ``fetch`` sends (``Accept``, the session
cookie when the console asks for a login). Each request's time is kept by path.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from typing import Any

#: The stages of one refresh: (label, path suffix) sent at once, stage after stage.
REFRESH: list[list[tuple[str, str]]] = [
    [("summary", "")],
    [
        ("metrics", "/metrics?minutes=60"),
        ("repeats", "/repeats"),
        ("workers", "/workers"),
        ("audit", "/audit?n=50"),
    ],
    [("history", "/history?range=1h")],
    [
        ("groups", "/groups?sort=depth&desc=1&offset=0&n=50"),
        ("jobs", "/jobs?state=pending&n=20&offset=0"),
    ],
]

#: A browser's connections to one origin over HTTP/1.1 (the stream holds one).
MAX_CONNS = 6


class HttpError(Exception):
    """A reply that was not 200, or a connection that failed."""


class RawConn:
    """One keep-alive HTTP/1.1 connection."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer

    @classmethod
    async def open(cls, host: str, port: int) -> RawConn:
        reader, writer = await asyncio.open_connection(host, port)
        return cls(reader, writer)

    async def request(self, head: bytes) -> tuple[int, dict[bytes, bytes]]:
        """Send ``head`` (a whole GET request); the status and headers of the reply."""
        self.writer.write(head)
        await self.writer.drain()
        status_line = await self.reader.readline()
        if not status_line:
            raise HttpError("closed")
        status = int(status_line.split(b" ", 2)[1])
        headers: dict[bytes, bytes] = {}
        while True:
            line = await self.reader.readline()
            if line in (b"\r\n", b""):
                break
            name, _, value = line.partition(b":")
            headers[name.strip().lower()] = value.strip()
        return status, headers

    async def get(self, head: bytes) -> tuple[int, bytes]:
        status, headers = await self.request(head)
        body = await self.reader.readexactly(int(headers.get(b"content-length", b"0")))
        return status, body

    def close(self) -> None:
        self.writer.close()


def get_head(host: str, path: str, cookie: str | None, accept: bytes) -> bytes:
    lines = [
        f"GET {path} HTTP/1.1".encode(),
        f"Host: {host}".encode(),
        b"Accept: " + accept,
        b"Sec-Fetch-Site: same-origin",
        b"Sec-Fetch-Mode: cors",
    ]
    if cookie:
        lines.append(f"Cookie: {cookie}".encode())
    return b"\r\n".join(lines) + b"\r\n\r\n"


class RawClient:
    """An operator's connections (reused, at most ``MAX_CONNS - 1`` for requests)."""

    def __init__(self, host: str, port: int, cookie: str | None) -> None:
        self.host, self.port, self.cookie = host, port, cookie
        self.origin = f"{host}:{port}"
        self.idle: list[RawConn] = []
        self.heads: dict[str, bytes] = {}

    async def get(self, path: str) -> None:
        head = self.heads.get(path)
        if head is None:
            head = self.heads[path] = get_head(self.origin, path, self.cookie, b"application/json")
        conn = self.idle.pop() if self.idle else await RawConn.open(self.host, self.port)
        try:
            status, _ = await conn.get(head)
        except (OSError, asyncio.IncompleteReadError, ValueError) as exc:
            conn.close()
            raise HttpError(type(exc).__name__) from None
        self.idle.append(conn)
        if status != 200:
            raise HttpError(f"{path.split('?')[0].rsplit('/', 1)[-1]} {status}")

    async def hold_stream(self, path: str, stop: float, errors: list[str]) -> None:
        conn = await RawConn.open(self.host, self.port)
        try:
            head = get_head(self.origin, path, self.cookie, b"text/event-stream")
            status, _ = await conn.request(head)
            if status != 200:
                errors.append(f"stream {status}")
                return
            while time.monotonic() < stop:
                if not await conn.reader.read(65536):
                    return
        except (OSError, asyncio.IncompleteReadError):
            return
        finally:
            conn.close()

    def close(self) -> None:
        for conn in self.idle:
            conn.close()


async def login(host: str, port: int, token: str) -> str:
    """Open a session as the page's login does; the ``Cookie`` header it sets."""
    body = b'{"token": "' + token.encode() + b'", "user": "bench"}'
    head = (
        b"POST /api/login HTTP/1.1\r\nHost: " + f"{host}:{port}".encode() + b"\r\n"
        b"Accept: application/json\r\nContent-Type: application/json\r\n"
        b"X-Requested-With: echomq-console\r\nSec-Fetch-Site: same-origin\r\n"
        b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body
    )
    conn = await RawConn.open(host, port)
    try:
        status, headers = await conn.request(head)
        await conn.reader.readexactly(int(headers.get(b"content-length", b"0")))
    finally:
        conn.close()
    if status != 200 or b"set-cookie" not in headers:
        raise HttpError(f"login {status}")
    return headers[b"set-cookie"].split(b";", 1)[0].decode()


Timings = dict[str, list[float]]
#: One refresh: its seconds, each request's seconds by label, when it began (epoch s).
Refresh = tuple[float, Timings, float]


async def refresh(get: Callable[[str], Awaitable[None]], base: str, times: Timings) -> None:
    """One page refresh: the stages of ``REFRESH``, each request's time by label."""

    async def one(label: str, suffix: str) -> None:
        began = time.monotonic()
        await get(base + suffix)
        times.setdefault(label, []).append(time.monotonic() - began)

    for stage in REFRESH:
        await asyncio.gather(*(one(label, suffix) for label, suffix in stage))


async def operator(
    client: str, host: str, port: int, queue: str, token: str | None, stop: float, out: Any
) -> None:
    """One operator until ``stop``: a stream held, a refresh every second (a closed
    loop: the next starts a second after the last began, or at once when it took
    longer). ``out`` collects each :data:`Refresh` and the errors."""
    base = f"/api/queues/{queue}"
    cookie = await login(host, port, token) if token else None
    if client == "httpx":
        import httpx

        headers = {"Accept": "application/json", "Sec-Fetch-Site": "same-origin"}
        if cookie:
            headers["Cookie"] = cookie
        hx = httpx.AsyncClient(base_url=f"http://{host}:{port}", headers=headers, timeout=30)

        async def hx_get(path: str) -> None:
            try:
                (await hx.get(path)).raise_for_status()
            except httpx.HTTPError as exc:
                raise HttpError(type(exc).__name__) from None

        async def hx_stream() -> None:
            with contextlib.suppress(httpx.HTTPError):
                async with hx.stream("GET", base + "/events") as resp:
                    if resp.status_code != 200:
                        out.errors.append(f"stream {resp.status_code}")
                        return
                    async for _ in resp.aiter_bytes():
                        if time.monotonic() > stop:
                            return

        get, stream_task = hx_get, asyncio.create_task(hx_stream())
    else:
        raw = RawClient(host, port, cookie)
        get = raw.get
        stream_task = asyncio.create_task(raw.hold_stream(base + "/events", stop, out.errors))
    try:
        while time.monotonic() < stop:
            began, wall = time.monotonic(), time.time()
            times: Timings = {}
            try:
                await refresh(get, base, times)
                out.refreshes.append((time.monotonic() - began, times, wall))
            except HttpError as exc:
                out.errors.append(str(exc))
            await asyncio.sleep(max(0.0, 1.0 - (time.monotonic() - began)))
    finally:
        stream_task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await stream_task
        if client == "httpx":
            await hx.aclose()
        else:
            raw.close()


class Results:
    def __init__(self) -> None:
        self.refreshes: list[Refresh] = []
        self.errors: list[str] = []


def operators(
    client: str, host: str, port: int, queue: str, token: str | None, n: int, seconds: float
) -> tuple[list[Refresh], list[str], float]:
    """Run ``n`` operators for ``seconds`` in this process (a pool worker); their
    refreshes, errors and this process's CPU seconds while they ran."""
    out = Results()
    cpu0 = time.process_time()
    stop = time.monotonic() + seconds

    async def run() -> None:
        await asyncio.gather(
            *(operator(client, host, port, queue, token, stop, out) for _ in range(n))
        )

    asyncio.run(run())
    return out.refreshes, out.errors, time.process_time() - cpu0
