"""The console's per-request shortcuts answer what the long way did: the session
cookie's name (the port read from ``Host`` without building the URL), the loopback
``Host`` check (cached), and a shared read sent as the JSON it was written as once."""

from __future__ import annotations

import pytest
from starlette.requests import Request

from echomq.console.access import credentials
from echomq.console.safety import SESSION_COOKIE, Denied, Safety, cookie_name
from echomq.console.web import JsonDoc, encoded
from echomq.views import to_json


def request(host: str | None, scheme: str = "http", server: int = 8765) -> Request:
    headers = [] if host is None else [(b"host", host.encode("latin-1"))]
    scope = {
        "type": "http",
        "method": "GET",
        "scheme": scheme,
        "server": ("127.0.0.1", server),
        "path": "/api/queues",
        "query_string": b"",
        "headers": headers,
    }
    return Request(scope)


@pytest.mark.parametrize(
    ("host", "scheme"),
    [
        ("127.0.0.1:8765", "http"),
        ("127.0.0.1:9000", "https"),
        ("localhost", "http"),
        ("localhost", "https"),
        ("[::1]:8080", "http"),
        ("[::1]", "http"),
        ("console.example:443", "https"),
        ("console.example:80", "http"),
        (None, "http"),
    ],
)
def test_the_cookie_name_reads_the_port_as_the_url_does(host: str | None, scheme: str) -> None:
    req = request(host, scheme)
    port = req.url.port or (443 if req.url.scheme == "https" else 80)
    assert cookie_name(req) == f"{SESSION_COOKIE}_{port}"


def test_a_host_with_no_numeric_port_takes_the_schemes() -> None:
    assert cookie_name(request("console.example:x1")) == f"{SESSION_COOKIE}_80"


def test_the_cached_host_check_still_refuses_a_foreign_host() -> None:
    safety = Safety(credentials=credentials(None), read_only=False, loopback=True)
    for _ in range(2):  # the second answer comes from the cache: the same
        safety.check_host("127.0.0.1:8765")
        safety.check_host("localhost")
        with pytest.raises(Denied) as refused:
            safety.check_host("evil.example:8765")
        assert (refused.value.status, refused.value.reason) == (403, "host")


def test_a_shared_read_is_sent_as_the_json_of_its_document() -> None:
    doc = {"name": "orders", "counts": {"pending": 3}, "text": "é \u202e <b>"}
    assert JsonDoc(encoded(doc)).body == JsonDoc(doc).body == to_json(doc).encode()
