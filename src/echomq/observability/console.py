"""The console's ``/metrics`` route: the queues it knows, in the Prometheus text format.

It is a read route: it sits behind whatever guards the console's other reads (its read
login when one is set). The queues are the console's own directory (an incremental,
bounded SCAN); each scrape reads them with :func:`echomq.observability.scrape.snapshots`.
Without the ``metrics`` extra the route answers 501.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response


def metrics_endpoint(
    console: Any,
    check_read: Callable[[Request], None] | None = None,
    refuse: Callable[[Exception], Response] | None = None,
) -> Any:
    """The Starlette endpoint serving ``console``'s queues as metrics.

    Args:
        check_read: the console's read gate (raises when the request may not read).
        refuse: turns what ``check_read`` raised into the console's error reply.
    """

    from .series_tally import SeriesTally

    tally = SeriesTally()  # this console's wait and run sums, across scrapes

    async def metrics(request: Request) -> Response:
        if check_read is not None:
            try:
                check_read(request)
            except Exception as exc:
                if refuse is None:
                    raise
                return refuse(exc)
        try:
            from .prometheus import CONTENT_TYPE, render_async
        except ImportError:
            return PlainTextResponse(
                "the /metrics route needs the metrics extra: pip install 'echomq[metrics]'\n",
                status_code=501,
            )
        names, _ = await console.directory.refresh(console.client)
        if not names:
            from prometheus_client.core import CollectorRegistry
            from prometheus_client.exposition import generate_latest

            return Response(generate_latest(CollectorRegistry()), media_type=CONTENT_TYPE)
        # any facade's runner drives any plan: borrow the first queue's (no new line)
        runner = console.queue(names[0]).runner
        body = await render_async(runner, names, tally=tally)
        return Response(body, media_type=CONTENT_TYPE)

    return metrics
