"""``tavernbox serve``: run the HTTP service (FastAPI on uvicorn).

::

    tavernbox serve [--host 127.0.0.1] [--port 8787] [--database FILE|postgresql://...] [--upstream URL]
                    [--workers N]

Binds to loopback by default. On start it prints the URL with a login token (``TAVERNBOX_TOKEN``,
or a fresh random one), as Jupyter does: ``/?token=...`` opens the web playground, ``/docs?token=...``
the API docs; API clients send ``Authorization: Bearer <token>``.
``--port 0`` takes a free port (the URL printed names it). The database is an SQLite file
(default ``tavernbox.db`` in the user's data folder, :func:`default_database`) or a PostgreSQL URL; ``--upstream`` is the
OpenAI-compatible server ``/v1/chat/completions`` forwards to (its key, if it needs one, from
``TAVERNBOX_UPSTREAM_KEY``). ``--workers N`` runs N service processes on the one port (uvicorn's
supervisor), each with its own database connection: renders are stateless and state is in the
database, so they behave as one service with N times the cores. Logs (one line per request,
with its id) go to stderr.
"""

from __future__ import annotations

import ipaddress
import logging
import os
import socket
import sys
from pathlib import Path

import click

from .output import guarded, stderr

__all__ = ["ENVIRONMENT", "command", "default_database"]

#: every environment variable ``tavernbox serve`` reads (its ``--help`` lists them, and so does the README)
ENVIRONMENT = {
    "TAVERNBOX_TOKEN": "the login token (default: a fresh random one, printed with the URL)",
    "TAVERNBOX_UPSTREAM_KEY": "the API key sent to --upstream as 'Authorization: Bearer' (if it needs one)",
}


def default_database() -> Path:
    """The SQLite file used without ``--database``: ``tavernbox/tavernbox.db`` in the user's data folder
    (``$XDG_DATA_HOME`` or ``~/.local/share`` on Linux, ``~/Library/Application Support`` on macOS, ``%APPDATA%`` on
    Windows), never the current directory (where it would show in a clone's ``git status``)."""
    if sys.platform == "win32":
        base = Path(os.environ.get("APPDATA") or Path.home() / "AppData" / "Roaming")
    elif sys.platform == "darwin":
        base = Path.home() / "Library" / "Application Support"
    else:
        base = Path(os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share")
    return base / "tavernbox" / "tavernbox.db"


def _epilog() -> str:
    rows = "\n".join(f"  {name}: {what}" for name, what in ENVIRONMENT.items())
    return f"\b\nEnvironment:\n{rows}\n\n\b\nThe default database: {default_database()}"


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _bind(host: str, port: int) -> socket.socket:
    """A listening socket for ``host:port`` (port 0: a free one), so the printed URL is exact."""
    from ..errors import TemplateError

    family = socket.AF_INET6 if ":" in host.strip("[]") else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host.strip("[]"), port))
    except OSError as exc:
        sock.close()
        raise TemplateError(f"cannot listen on {host}:{port}: {exc.strerror or exc}", code="INPUT_INVALID") from None
    sock.listen(2048)
    sock.set_inheritable(True)
    return sock


@click.command("serve", epilog=_epilog())
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to bind (loopback by default).")
@click.option("--port", default=8787, show_default=True, type=click.IntRange(0, 65535), help="Port (0: a free one).")
@click.option("--database", default=None,
              help="SQLite file, or postgresql://user@host:port/db for PostgreSQL [default: tavernbox.db in the "
                   "user's data folder, below].")
@click.option("--upstream", default=None, help="OpenAI-compatible base URL /v1/chat/completions forwards to "
                                               "(e.g. http://127.0.0.1:5001/v1).")
@click.option("--workers", default=1, show_default=True, type=click.IntRange(1, 64),
              help="Service processes sharing the port (each its own database connection).")
def command(host: str, port: int, database: str | None, upstream: str | None, workers: int) -> None:
    """Serve the engines, an asset library and an OpenAI-compatible endpoint over HTTP."""

    def body() -> None:
        from ..extras import require_extra

        require_extra("serve", "tavernbox serve")
        nonlocal database
        if database is None:
            default = default_database()
            default.parent.mkdir(parents=True, exist_ok=True)
            database = str(default)
        if database.startswith(("postgresql://", "postgres://")):
            require_extra("postgres", "a PostgreSQL database")
        import uvicorn

        from ..service import ServiceConfig, create_app
        from ..service.auth import new_token
        from ..store import open_database

        from ..errors import TemplateError

        if upstream is not None and not upstream.startswith(("http://", "https://")):
            raise TemplateError(f"--upstream must be an http:// or https:// URL, not {upstream!r}", code="INPUT_INVALID")
        token = os.environ.get("TAVERNBOX_TOKEN") or new_token()
        loopback = _is_loopback(host)
        storage = open_database(database)
        try:
            sock = _bind(host, port)
            config = ServiceConfig(storage=storage, token=token, loopback_only=loopback,
                                   upstream=upstream.rstrip("/") if upstream else None,
                                   upstream_key=os.environ.get("TAVERNBOX_UPSTREAM_KEY") or None)
            app = create_app(config)
            logging.basicConfig(stream=sys.stderr, level=logging.INFO, format="%(asctime)s %(name)s[%(process)d] %(message)s")
            bound = sock.getsockname()[1]
            shown = f"[{host.strip('[]')}]" if ":" in host.strip("[]") else host
            base = f"http://{shown}:{bound}"
            click.echo(f"tavernbox serve: listening on {base}/ (database: {storage.backend} {storage.where})")
            if os.environ.get("TAVERNBOX_TOKEN"):
                click.echo(f"    playground: {base}/?token=<TAVERNBOX_TOKEN>  (or open {base}/ and paste it)")
                click.echo(f"    API docs:   {base}/docs  (token from TAVERNBOX_TOKEN)")
            else:
                click.echo(f"    playground: {base}/?token={token}")
                click.echo(f"    API docs:   {base}/docs?token={token}")
                click.echo(f"    API clients: Authorization: Bearer {token}")
            if not loopback:
                stderr.print(f"[yellow]warning[/] bound to {host}: reachable from other machines; the token is "
                             "the only protection and travels in clear text without TLS")
            sys.stdout.flush()
            if workers == 1:
                server = uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off",
                                                       timeout_graceful_shutdown=5))
                server.run(sockets=[sock])
                return
            from ..service.app import ENV_DATABASE, ENV_LOOPBACK, ENV_UPSTREAM

            sock.close()  # uvicorn's supervisor binds the (now known) port itself and shares it with its workers
            storage.close()
            os.environ.update({"TAVERNBOX_TOKEN": token, ENV_DATABASE: database, ENV_LOOPBACK: "1" if loopback else "0",
                               ENV_UPSTREAM: config.upstream or ""})
            uvicorn.run("tavernbox.service.app:app_from_environment", factory=True, host=host.strip("[]"), port=bound,
                        workers=workers, log_level="warning", access_log=False, lifespan="off",
                        timeout_graceful_shutdown=5)
        finally:
            storage.close()  # closing twice is harmless

    guarded(body, label="serve")
