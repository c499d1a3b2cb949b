"""A change's JSON body: the type of a request and a reply, and the checks each verb
runs on its fields before any I/O (a bad field is :class:`~echomq.errors.InvalidArgument`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..errors import InvalidArgument

Body = Mapping[str, Any]
Reply = dict[str, Any]


def check_keys(body: Body, allowed: tuple[str, ...]) -> None:
    """Refuse a body that is not an object or names a field outside ``allowed``."""
    if not isinstance(body, Mapping):
        raise InvalidArgument("the request body must be a JSON object")
    extra = sorted(set(body) - set(allowed))
    if extra:
        raise InvalidArgument(f"unexpected field(s): {', '.join(map(str, extra))}")


def flag_field(body: Body, key: str) -> bool:
    """Field ``key`` as a bool (absent: false)."""
    value = body.get(key, False)
    if not isinstance(value, bool):
        raise InvalidArgument(f"{key} must be true or false, got {value!r}")
    return value


def int_field(body: Body, key: str, default: int | None, low: int, high: int | None = None) -> int:
    """Field ``key`` as an integer in ``low..high`` (absent: ``default``; ``None``: required)."""
    value = body.get(key, default)
    if value is None:
        raise InvalidArgument(f"{key} is required")
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise InvalidArgument(f"{key} must be an integer >= {low}, got {value!r}")
    if high is not None and value > high:
        raise InvalidArgument(f"{key} must be at most {high}, got {value!r}")
    return value


def text_field(body: Body, key: str) -> str:
    """Field ``key`` as a string (required)."""
    value = body.get(key)
    if not isinstance(value, str):
        raise InvalidArgument(f"{key} must be a string, got {value!r}")
    return value


def required_field(body: Body, key: str) -> Any:
    """Field ``key`` as it is (any JSON value, ``null`` too), which must be present."""
    if key not in body:
        raise InvalidArgument(f"{key} is required")
    return body[key]
