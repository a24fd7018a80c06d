"""The web playground: ``GET /`` and its static files (``GET /static/<name>``), shipped as package data.

Why no build step: the page is plain ES modules and CSS (``tavernbox/service/static``), so a fresh
``pip install`` serves it and nothing is fetched from elsewhere at run time. These two routes are
the only ones the guard lets through without the token (:mod:`.app`), because they hold no data:
every answer the page shows comes from the API routes, which it calls with ``Authorization:
Bearer``. The token reaches the page once as ``/?token=...`` (the login URL ``tavernbox serve``
prints); the page keeps it in ``sessionStorage`` and removes it from the address bar.

Every file is answered with a strict Content-Security-Policy (scripts, styles and connections
from this origin only, no framing) and ``Referrer-Policy: no-referrer``, so the token in the
first URL never leaves in a ``Referer`` header.
"""

from __future__ import annotations

from importlib import resources

from fastapi import APIRouter
from starlette.responses import Response

from ..errors import TemplateError

__all__ = ["PUBLIC_PREFIX", "router", "is_public"]

router = APIRouter(include_in_schema=False)

#: URL prefix of the static files.
PUBLIC_PREFIX = "/static/"

_TYPES = {".html": "text/html; charset=utf-8", ".js": "text/javascript; charset=utf-8",
          ".css": "text/css; charset=utf-8", ".svg": "image/svg+xml", ".json": "application/json"}

_HEADERS = {
    "Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
                               "img-src 'self' data:; form-action 'none'; base-uri 'none'; frame-ancestors 'none'",
    "Referrer-Policy": "no-referrer",
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Cache-Control": "no-cache",
}


def is_public(method: str, path: str) -> bool:
    """Whether a request may go without the token: reading the page or one of its static files."""
    return method in ("GET", "HEAD") and (path == "/" or path.startswith(PUBLIC_PREFIX))


def _static_files() -> dict[str, bytes]:
    """The shipped files by name (read once: a handful of small files)."""
    folder = resources.files("tavernbox.service").joinpath("static")
    files: dict[str, bytes] = {}
    for item in folder.iterdir():
        suffix = "." + item.name.rsplit(".", 1)[-1] if "." in item.name else ""
        if item.is_file() and suffix in _TYPES:
            files[item.name] = item.read_bytes()
    return files


_FILES: dict[str, bytes] | None = None


def _file(name: str) -> Response:
    global _FILES
    if _FILES is None:
        _FILES = _static_files()
    data = _FILES.get(name)
    if data is None:
        raise TemplateError(f"no such playground file: {name!r}", code="SERVICE_ROUTE_UNKNOWN")
    media = _TYPES["." + name.rsplit(".", 1)[-1]]
    return Response(data, media_type=media, headers=_HEADERS)


@router.api_route("/", methods=["GET", "HEAD"], summary="The web playground")
async def index() -> Response:
    return _file("index.html")


@router.api_route("/docs", methods=["GET", "HEAD"], summary="The API docs (read from /openapi.json, offline)")
async def docs() -> Response:
    return _file("docs.html")


@router.api_route(PUBLIC_PREFIX + "{name}", methods=["GET", "HEAD"], summary="A static file of the playground")
async def static(name: str) -> Response:
    return _file(name)
