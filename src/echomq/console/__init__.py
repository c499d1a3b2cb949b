"""The operator console: the operator plane in a browser, served by ``emq console``.

``handlers`` holds the API as plain coroutines over :class:`~echomq.AsyncQueue`, with
no HTTP framework in sight (put together from the modules of its subjects: reads,
events, verbs); ``app`` is the thin Starlette adapter (the route table over
``safety``, ``web`` and the route modules) and ``static/`` the page (plain JS and CSS,
nothing fetched from elsewhere, no build step).

Starlette and uvicorn come with the ``console`` extra (``pip install 'echomq[console]'``);
without them importing this package raises ``ImportError``, which ``emq console`` turns
into a message.
"""

from __future__ import annotations

from .app import create_app, serve
from .handlers import Console, ReadOnly, UnsafeBind

__all__ = ["Console", "ReadOnly", "UnsafeBind", "create_app", "serve"]
