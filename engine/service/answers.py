"""The service's answers: the error envelope, status codes, and reading a JSON request body.

Every failure, whatever raised it, leaves the service as ``{"error": {"code", "message",
"path"?, "line"?, "column"?, "request_id"}}`` with a stable code from :data:`tavernbox.errors.CODES`
and an HTTP status chosen from that code; a Python traceback never reaches a client (an
unexpected exception is logged with its request id and answered as ``INTERNAL_ERROR``).

The project's lone-surrogate rule (:mod:`tavernbox.strict_json`) holds here as at the CLI: a request
body whose JSON spells a lone surrogate (``"\\ud800"``) is refused with ``TEXT_SURROGATE`` and the
JSON path of the string or key holding it, and an answer an engine built with one (a template that
cuts a JavaScript string inside a pair) is refused the same way instead of failing to encode.
"""

from __future__ import annotations

import json
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse

from ..errors import TemplateError
from ..strict_json import check_json_text, refuse_surrogates

__all__ = ["STATUS", "error_body", "error_response", "json_answer", "read_json", "status_for"]

#: HTTP status per error code; codes not listed are input the engines refused (422).
STATUS: dict[str, int] = {
    "SERVICE_REQUEST_INVALID": 400,
    "INPUT_INVALID": 400,
    "LIBRARY_INVALID": 400,
    "SERVICE_UNAUTHORIZED": 401,
    "SERVICE_ORIGIN_REFUSED": 403,
    "SERVICE_ROUTE_UNKNOWN": 404,
    "LIBRARY_NOT_FOUND": 404,
    "LIBRARY_CONFLICT": 412,
    "SERVICE_BODY_TOO_LARGE": 413,
    "INTERNAL_ERROR": 500,
    "LIBRARY_CORRUPT": 500,
    "SNAPSHOT_STORE_CORRUPT": 500,
    "SERVICE_UPSTREAM_FAILED": 502,
    "SERVICE_UPSTREAM_UNCONFIGURED": 503,
    "SNAPSHOT_STORE_UNAVAILABLE": 503,
    "SNAPSHOT_STORE_INVALID": 400,
}


def status_for(code: str) -> int:
    """The HTTP status of an error code."""
    return STATUS.get(code, 422)


def request_id_of(request: Request) -> str | None:
    """The id the request middleware gave this request."""
    return request.scope.get("state", {}).get("request_id")


def _writable(text: str) -> str:
    """``text``, with any lone surrogate written as its ``\\udXXX`` escape: an error message may
    quote the input that caused it, and the envelope itself must always encode."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text


def error_body(error: TemplateError, request_id: str | None = None) -> dict[str, Any]:
    """``{"error": {...}}`` for a :class:`TemplateError` (position fields only when known)."""
    out: dict[str, Any] = {"code": error.code, "message": _writable(error.message)}
    if error.path:
        out["path"] = _writable(error.path)
    if error.line is not None:
        out["line"], out["column"] = error.line, error.column
    if request_id:
        out["request_id"] = request_id
    return {"error": out}


def error_response(error: TemplateError, request_id: str | None = None, *, status: int | None = None,
                   headers: dict[str, str] | None = None) -> JSONResponse:
    """The JSON error answer for ``error``."""
    return JSONResponse(error_body(error, request_id), status_code=status or status_for(error.code), headers=headers)


def json_answer(value: Any, status: int = 200, headers: dict[str, str] | None = None) -> JSONResponse:
    """A JSON answer (non-ASCII kept, as the CLI prints it); ``TEXT_SURROGATE`` with the path of a
    lone surrogate an engine put in it (UTF-8 cannot carry one)."""
    try:
        return JSONResponse(value, status_code=status, headers=headers)
    except UnicodeEncodeError:
        refuse_surrogates(value, what="the answer")
        raise  # pragma: no cover - a failed encode always has a lone surrogate to name


async def read_json(request: Request, *, want: type | tuple[type, ...] = dict) -> Any:
    """The request body as JSON of type ``want`` (``SERVICE_REQUEST_INVALID`` with line:col otherwise).

    The body limit is enforced while it is received (:mod:`.limits`), so this never holds more
    than the limit in memory.
    """
    raw = await request.body()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise TemplateError(f"the request body is not UTF-8 (byte {exc.start})", code="SERVICE_REQUEST_INVALID") from None
    if text.startswith("\ufeff"):
        text = text[1:]
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise TemplateError(f"the request body is not JSON: {exc.msg}", code="SERVICE_REQUEST_INVALID",
                            line=exc.lineno, column=exc.colno) from None
    except RecursionError:
        raise TemplateError("the request body is nested too deeply", code="SERVICE_REQUEST_INVALID") from None
    check_json_text(text, value, what="the request body")  # TEXT_SURROGATE with its JSON path
    if not isinstance(value, want):
        words = {"dict": "an object", "list": "an array", "str": "a string"}
        kind = " or ".join(words.get(t.__name__, t.__name__) for t in (want if isinstance(want, tuple) else (want,)))
        raise TemplateError(f"the request body must be {kind} (JSON)", code="SERVICE_REQUEST_INVALID", path="$")
    return value
