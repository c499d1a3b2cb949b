"""The operator console: the operator plane in a browser, served by ``emq console``.

``handlers`` holds the API as plain coroutines over :class:`~echomq.AsyncQueue`;
``app`` is the thin Starlette adapter (routes, safety, server-sent events) and
``static/`` the page (plain JS and CSS, nothing fetched from elsewhere).
Starlette and uvicorn come with the ``console`` extra: ``pip install echomq[console]``.
"""

from __future__ import annotations

from typing import Any

from .handlers import ReadOnly, UnsafeBind


def create_app(
    url: str | None = None,
    *,
    host: str = "127.0.0.1",
    token: str | None = None,
    read_only: bool = False,
    client: Any = None,
) -> Any:
    """Build the console as an ASGI app; see :func:`echomq.console.app.create_app`.

    Raises:
        UnsafeBind: ``host`` is not loopback and no token is configured.
    """
    from .app import create_app as build

    return build(url, host=host, token=token, read_only=read_only, client=client)


def serve(
    url: str | None = None,
    host: str = "127.0.0.1",
    port: int = 8765,
    token: str | None = None,
    read_only: bool = False,
) -> None:
    """Serve the console with uvicorn until interrupted.

    Args:
        url: the Valkey/Redis server URL (default ``redis://127.0.0.1:6379/0``).
        host: the address to bind; loopback by default. Any other address needs a token.
        port: the TCP port.
        token: every change must carry it in ``X-EMQ-Token`` (default: the
            ``EMQ_CONSOLE_TOKEN`` environment variable).
        read_only: refuse every change with 403.

    Raises:
        UnsafeBind: ``host`` is not loopback and no token is configured.
    """
    from .app import serve as run

    run(url, host=host, port=port, token=token, read_only=read_only)


__all__ = ["ReadOnly", "UnsafeBind", "create_app", "serve"]
