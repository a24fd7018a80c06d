"""Who may call the service: the bearer token, and only from a non-browser or same-origin client.

Why a token on loopback too: any local process, and any web page the user opens, can reach
127.0.0.1. The token (``TAVERNBOX_TOKEN`` or 32 random bytes printed once at start, as Jupyter
does) is required on every route but ``GET /healthz``, as ``Authorization: Bearer <token>``.
A browser opening the printed URL (``/?token=...``, the playground, or ``/docs?token=...``) gets the
token as a ``SameSite=Strict`` cookie, so the docs page works without copying the token into it;
the playground page keeps it in ``sessionStorage`` and sends it as a bearer token.

Why the origin check besides: a web page from another origin must not drive the service even if
it learned the token. A request whose ``Origin`` is not the service's own, or which a browser
marks ``Sec-Fetch-Site: cross-site``/``same-site``, is refused with 403; no CORS headers are ever
sent, so browsers keep cross-origin answers from the page. On a loopback bind the ``Host``
header must also name a loopback host, which defeats DNS rebinding.
"""

from __future__ import annotations

import hmac
import secrets
from urllib.parse import parse_qs, urlsplit

from ..errors import TemplateError

__all__ = ["COOKIE", "LOOPBACK_HOSTS", "Access", "new_token"]

COOKIE = "tavernbox_token"
LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1", "[::1]"})


def new_token() -> str:
    """A fresh random token (256 bits, URL-safe)."""
    return secrets.token_urlsafe(32)


def _host_only(host: str) -> str:
    """``host[:port]`` -> host (IPv6 literals keep their brackets)."""
    if host.startswith("["):
        return host[: host.find("]") + 1] if "]" in host else host
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


class Access:
    """The access rules for one running service (its token and whether it is bound to loopback)."""

    def __init__(self, token: str, *, loopback_only: bool) -> None:
        if not token:
            raise ValueError("the service token must not be empty")
        self._token = token.encode("utf-8")
        self.loopback_only = loopback_only

    def check_origin(self, headers: dict[str, str], scheme: str) -> None:
        """Refuse (403 ``SERVICE_ORIGIN_REFUSED``) cross-origin browser requests and foreign hosts."""
        host = headers.get("host", "")
        if self.loopback_only and _host_only(host).lower() not in LOOPBACK_HOSTS:
            raise TemplateError(f"Host {host!r} is not a loopback name this service answers to",
                                code="SERVICE_ORIGIN_REFUSED")
        site = headers.get("sec-fetch-site")
        if site in ("cross-site", "same-site"):
            raise TemplateError(f"browser request from another site (Sec-Fetch-Site: {site})",
                                code="SERVICE_ORIGIN_REFUSED")
        origin = headers.get("origin")
        if origin is not None:
            parts = urlsplit(origin)
            if origin == "null" or parts.scheme != scheme or parts.netloc.lower() != host.lower():
                raise TemplateError(f"browser request from another origin ({origin})", code="SERVICE_ORIGIN_REFUSED")

    def _matches(self, candidate: str | None) -> bool:
        return candidate is not None and hmac.compare_digest(candidate.encode("utf-8", "surrogatepass"), self._token)

    def token_in_query(self, query: str) -> str | None:
        """The token when the query string carries this service's (``?token=``), else ``None``."""
        for token in parse_qs(query).get("token", []):
            if self._matches(token):
                return token
        return None

    def check_token(self, headers: dict[str, str], query: str) -> str | None:
        """Accept the request or raise 401 ``SERVICE_UNAUTHORIZED``.

        Returns the token when it came in the query string (so the caller can set the cookie).
        """
        auth = headers.get("authorization")
        if auth is not None:
            scheme, _, value = auth.partition(" ")
            if scheme.lower() == "bearer" and self._matches(value.strip()):
                return None
            raise TemplateError("the bearer token is not this service's", code="SERVICE_UNAUTHORIZED")
        token = self.token_in_query(query)
        if token is not None:
            return token
        for part in headers.get("cookie", "").split(";"):
            name, _, value = part.strip().partition("=")
            if name == COOKIE and self._matches(value):
                return None
        raise TemplateError("this route needs 'Authorization: Bearer <token>' (the token printed at start)",
                            code="SERVICE_UNAUTHORIZED")
