"""The ``tavernbox serve`` application: FastAPI routes behind one guard.

The guard (:class:`Guard`, a plain ASGI middleware, outermost after Starlette's own error
middleware) runs before any route: it gives the request its id (``X-Request-Id``, kept from the
client when it is a short safe string, else generated), refuses cross-origin browser requests
(:mod:`.auth`), checks the bearer token (all routes but ``GET /healthz`` and the playground's page and
static files, :mod:`.playground`, which hold no data), refuses a declared
body over the limit and counts an undeclared one (:mod:`.limits`), and turns any exception a route
lets escape into the error envelope (:mod:`.answers`) logged with the request id. Each request
is logged once: id, method, path, status, milliseconds.

Engine work (renders, assembly, database calls) runs in Starlette's thread pool, never on the
event loop, so one slow request never stalls the others; renders share the sandbox's worker
pool, whose hard per-render deadline bounds what a hostile template can take.
"""

from __future__ import annotations

import asyncio
import logging
import re
import secrets
import time
import tracemalloc
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass, field
from typing import Any

from fastapi import FastAPI
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse

from .. import __version__
from ..errors import TemplateError
from ..store import Storage
from .answers import error_response, json_answer, request_id_of
from .auth import COOKIE, Access
from .limits import MAX_BODY_BYTES, BodyTooLarge, declared_length, limited_receive, too_large
from .playground import is_public

__all__ = ["Guard", "ServiceConfig", "app_from_environment", "create_app", "warm_engines"]

log = logging.getLogger("tavernbox.service")

_CLIENT_ID = re.compile(r"[A-Za-z0-9._:-]{1,128}")

#: A request carrying this header (value ``memory``) is answered with ``X-Tavernbox-Peak-Bytes``:
#: the peak of the Python heap allocated while it was served (``tracemalloc``), and
#: ``X-Tavernbox-Server-Ms``. For the playground's "memory used" figure of macros, world info and
#: assemble, which run in the service's own process (an EJS render reports its sandbox's heap in
#: its ``usage``). Tracing costs time, so it is asked for, never on by default; measured requests
#: are served one at a time (the tracer is process-wide), and a figure taken while unmeasured
#: requests run alongside includes their allocations too.
MEASURE_HEADER = "x-tavernbox-measure"
Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
ASGIApp = Callable[[Scope, Callable[[], Awaitable[Message]], Callable[[Message], Awaitable[None]]], Awaitable[None]]


@dataclass
class ServiceConfig:
    """What one running service needs: its database, token, bind and upstream."""

    storage: Storage
    token: str
    loopback_only: bool = True
    upstream: str | None = None
    upstream_key: str | None = None
    max_body: int = MAX_BODY_BYTES
    upstream_timeout: float = 600.0
    extra: dict[str, Any] = field(default_factory=dict)


class Guard:
    """Request id, origin check, token check, body limit and the last-resort error answer."""

    def __init__(self, app: ASGIApp, config: ServiceConfig) -> None:
        self.app = app
        self.access = Access(config.token, loopback_only=config.loopback_only)
        self.limit = config.max_body
        self._measuring = asyncio.Lock()

    async def __call__(self, scope: Scope, receive: Callable[[], Awaitable[Message]],
                       send: Callable[[Message], Awaitable[None]]) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        raw_headers = scope.get("headers") or []
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in raw_headers}
        if headers.get(MEASURE_HEADER) == "memory" and self._may_measure(scope, headers):
            async with self._measuring:
                await self._measured(scope, receive, send, headers)
            return
        await self._guarded(scope, receive, send, headers)

    def _may_measure(self, scope: Scope, headers: dict[str, str]) -> bool:
        """Only a caller with the token may queue on the measuring lock (an unmeasured request never waits)."""
        try:
            self.access.check_token(headers, scope.get("query_string", b"").decode("latin-1"))
        except TemplateError:
            return False
        return True

    async def _measured(self, scope: Scope, receive: Callable[[], Awaitable[Message]],
                        send: Callable[[Message], Awaitable[None]], headers: dict[str, str]) -> None:
        """Serve one request under ``tracemalloc`` and answer its peak (see :data:`MEASURE_HEADER`)."""
        already = tracemalloc.is_tracing()
        if not already:
            tracemalloc.start()
        tracemalloc.reset_peak()
        base = tracemalloc.get_traced_memory()[0]
        started = time.perf_counter()

        async def send_measured(message: Message) -> None:
            if message["type"] == "http.response.start":  # the work is done when the answer starts
                peak = max(0, tracemalloc.get_traced_memory()[1] - base)
                took = (time.perf_counter() - started) * 1000
                message["headers"] = list(message.get("headers", [])) + [
                    (b"x-tavernbox-peak-bytes", str(peak).encode()),
                    (b"x-tavernbox-server-ms", f"{took:.1f}".encode())]
            await send(message)

        try:
            await self._guarded(scope, receive, send_measured, headers)
        finally:
            if not already:
                tracemalloc.stop()

    async def _guarded(self, scope: Scope, receive: Callable[[], Awaitable[Message]],
                       send: Callable[[Message], Awaitable[None]], headers: dict[str, str]) -> None:
        client_id = headers.get("x-request-id", "")
        rid = client_id if _CLIENT_ID.fullmatch(client_id) else "req_" + secrets.token_hex(8)
        scope.setdefault("state", {})["request_id"] = rid
        started = time.perf_counter()
        state: dict[str, Any] = {"status": 0, "cookie": None}

        async def send_with_id(message: Message) -> None:
            if message["type"] == "http.response.start":
                state["status"] = message["status"]
                extra = [(b"x-request-id", rid.encode("latin-1"))]
                if state["cookie"]:
                    extra.append((b"set-cookie", f"{COOKIE}={state['cookie']}; Path=/; HttpOnly; "
                                                 "SameSite=Strict".encode("latin-1")))
                message["headers"] = list(message.get("headers", [])) + extra
            await send(message)

        try:
            try:
                if not (scope["method"] == "GET" and scope["path"] == "/healthz"):
                    self.access.check_origin(headers, scope.get("scheme", "http"))
                    query = scope.get("query_string", b"").decode("latin-1")
                    if is_public(scope["method"], scope["path"]):
                        # the playground's page and files hold no data: no token needed, but a
                        # right one in the login URL still sets the cookie (for /docs)
                        state["cookie"] = self.access.token_in_query(query)
                    else:
                        state["cookie"] = self.access.check_token(headers, query)
                length = declared_length(headers)
                if length is not None and length > self.limit:
                    raise too_large(self.limit, length)
            except TemplateError as exc:
                await error_response(exc, rid)(scope, receive, send_with_id)
                return
            try:
                await self.app(scope, limited_receive(receive, self.limit), send_with_id)
            except BodyTooLarge as exc:
                if not state["status"]:
                    await error_response(exc, rid)(scope, receive, send_with_id)
            except Exception:  # the boundary: log the traceback with the id, answer the envelope
                log.exception("%s unexpected failure", rid)
                if not state["status"]:
                    error = TemplateError(f"an unexpected failure in the service (request {rid}; see its log)",
                                          code="INTERNAL_ERROR")
                    await error_response(error, rid)(scope, receive, send_with_id)
        finally:
            log.info("%s %s %s %s %.1fms", rid, scope["method"], scope["path"], state["status"] or "-",
                     (time.perf_counter() - started) * 1000)


def _validation_path(loc: Any) -> str:
    path = "$"
    for part in list(loc)[1:] if loc and loc[0] in ("body", "query", "path", "header") else list(loc):
        path += f"[{part}]" if isinstance(part, int) else f".{part}"
    return path


def warm_engines() -> None:
    """Build the engines' lazily built tables once, in this thread, before any request arrives.

    Why: the macro parser's LALR tables, the EJS parser and the built-in macro registry are built
    on first use and cached. Two request threads reaching a cold process at once each build
    them, and the macro parser was seen to pair the state numbers of one build with the goto
    table of the other (``KeyError``/``IndexError`` inside ``lalr_items``, answered as
    ``INTERNAL_ERROR``) under 200 concurrent requests to fresh workers. Built here first, every
    thread finds them cached.
    """
    from ..ejs.render import compile_source
    from ..macros import expand_macros
    from ..macros.parser import validate_macro
    from ..sillytavern.assemble import assemble_request

    validate_macro("{{setvar::warm::{{char}}}}")
    expand_macros("{{char}} {{roll:1d6}} {{setvar::w::1}}{{getvar::w}} {{.w += 1}}", {"char": "C"})
    compile_source("<% if (true) { %><%= 1 %><% } %>")
    assemble_request({"preset": {}, "card": {"name": "C", "description": "{{user}} {{random::a::b}}"},
                      "books": [{"entries": {"0": {"uid": 0, "key": ["hi"], "content": "{{char}}"}}}],
                      "chat": {"messages": [{"role": "user", "content": "hi {{char}}"}]}})


def create_app(config: ServiceConfig) -> Any:
    """The ASGI application for ``config`` (the FastAPI app wrapped in :class:`Guard`)."""
    from . import engines, library, lint, playground, requests, sessions

    warm_engines()

    app = FastAPI(title="tavernbox", version=__version__, docs_url="/docs", redoc_url=None,
                  openapi_url="/openapi.json",
                  description="SillyTavern-exact prompt assembly, rendering and an asset library over HTTP. "
                              "Every route but GET /healthz needs `Authorization: Bearer <token>`.")
    app.state.service = config

    @app.exception_handler(TemplateError)
    async def _template_error(request: Request, exc: TemplateError) -> JSONResponse:
        return error_response(exc, request_id_of(request))

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        if exc.status_code in (404, 405):
            what = "no such route" if exc.status_code == 404 else f"{request.method} is not allowed on this route"
            err = TemplateError(f"{what}: {request.method} {request.url.path}", code="SERVICE_ROUTE_UNKNOWN")
            return error_response(err, request_id_of(request), status=exc.status_code)
        err = TemplateError(str(exc.detail), code="SERVICE_REQUEST_INVALID")
        return error_response(err, request_id_of(request), status=exc.status_code)

    @app.exception_handler(RequestValidationError)
    async def _validation_error(request: Request, exc: RequestValidationError) -> JSONResponse:
        first = exc.errors()[0] if exc.errors() else {}
        err = TemplateError(str(first.get("msg", "invalid request")), code="SERVICE_REQUEST_INVALID",
                            path=_validation_path(first.get("loc", ())))
        return error_response(err, request_id_of(request))

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
        # Starlette answers with this, then re-raises: the guard logs the traceback with the id.
        rid = request_id_of(request)
        err = TemplateError(f"an unexpected failure in the service (request {rid}; see its log)", code="INTERNAL_ERROR")
        return error_response(err, rid)

    @app.get("/healthz", tags=["service"], summary="Liveness (no token needed)")
    async def healthz() -> JSONResponse:
        return json_answer({"ok": True, "version": __version__})

    app.include_router(engines.router)
    app.include_router(lint.router)
    app.include_router(library.router)
    app.include_router(requests.router)
    app.include_router(sessions.router)
    app.include_router(playground.router)

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            from fastapi.openapi.utils import get_openapi

            schema = get_openapi(title=app.title, version=app.version, description=app.description, routes=app.routes)
            schema.setdefault("components", {})["securitySchemes"] = {"bearer": {"type": "http", "scheme": "bearer"}}
            schema["security"] = [{"bearer": []}]
            app.openapi_schema = schema
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
    return Guard(app, config)


#: How ``tavernbox serve --workers N`` hands its settings to each worker process (no secrets in argv).
ENV_DATABASE = "TAVERNBOX_SERVE_DATABASE"
ENV_UPSTREAM = "TAVERNBOX_SERVE_UPSTREAM"
ENV_LOOPBACK = "TAVERNBOX_SERVE_LOOPBACK"


def app_from_environment() -> Any:
    """The application of one worker process of ``tavernbox serve --workers N`` (a uvicorn factory).

    Each worker opens its own connection(s) to the database the parent already migrated; state
    lives in the database, so the workers agree as separate service processes do.
    """
    import os

    from ..store import open_database

    if not logging.getLogger().handlers:
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s[%(process)d] %(message)s")
    config = ServiceConfig(storage=open_database(os.environ[ENV_DATABASE]), token=os.environ["TAVERNBOX_TOKEN"],
                           loopback_only=os.environ.get(ENV_LOOPBACK) == "1",
                           upstream=os.environ.get(ENV_UPSTREAM) or None,
                           upstream_key=os.environ.get("TAVERNBOX_UPSTREAM_KEY") or None)
    return create_app(config)
