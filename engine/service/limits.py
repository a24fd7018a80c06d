"""The request-body limit, enforced while the body arrives.

Why at the ASGI layer: a body must be refused before it is held whole. A ``Content-Length``
above the limit is answered 413 at once, without reading a byte of the body; a chunked body is
counted as it streams in and the read fails (``SERVICE_BODY_TOO_LARGE``) at the first chunk past
the limit, so at most the limit plus one chunk is ever buffered.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from ..errors import TemplateError

__all__ = ["MAX_BODY_BYTES", "BodyTooLarge", "limited_receive", "too_large"]

#: The largest request body accepted (2 MiB): a big card PNG or a 200-message chat fits.
MAX_BODY_BYTES = 2 * 1024 * 1024

Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]


class BodyTooLarge(TemplateError):
    """A request body over the limit (answered 413)."""

    default_code = "SERVICE_BODY_TOO_LARGE"


def too_large(limit: int, size: int | None = None) -> BodyTooLarge:
    """The error for a body over ``limit`` bytes."""
    said = f" ({size} bytes)" if size is not None else ""
    return BodyTooLarge(f"the request body{said} is larger than the limit of {limit} bytes")


def declared_length(headers: dict[str, str]) -> int | None:
    """``Content-Length`` as an int (``None`` when absent); a malformed one is refused."""
    value = headers.get("content-length")
    if value is None:
        return None
    if not value.isdigit():
        raise TemplateError("Content-Length is not a number", code="SERVICE_REQUEST_INVALID")
    return int(value)


def limited_receive(receive: Receive, limit: int) -> Receive:
    """Wrap an ASGI ``receive`` so reading past ``limit`` body bytes raises :class:`BodyTooLarge`."""
    seen = 0

    async def wrapped() -> MutableMapping[str, Any]:
        nonlocal seen
        message = await receive()
        if message.get("type") == "http.request":
            seen += len(message.get("body", b""))
            if seen > limit:
                raise too_large(limit)
        return message

    return wrapped
