"""Forwarding an assembled chat completion to the ``--upstream`` server, streaming included.

Why byte-for-byte: the client asked an OpenAI-compatible question and must get the upstream's
own answer (its status, its JSON, its server-sent events) as if it had called it directly; only
``messages`` (or, for a text completion, ``prompt`` and ``stop``) were rewritten on the way out. With ``stream: true`` every chunk is passed on as
soon as it arrives (no buffering), so tokens reach the client at the upstream's pace. An
upstream that cannot be reached is ``502 SERVICE_UPSTREAM_FAILED``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
from starlette.responses import Response, StreamingResponse

from ..errors import TemplateError

__all__ = ["forward"]

#: upstream answer headers passed back (the rest are hop-by-hop or describe the upstream's encoding)
_PASS_HEADERS = ("content-type", "cache-control", "x-request-id", "openai-processing-ms", "openai-model")


def _headers_for(config: Any) -> dict[str, str]:
    headers = {"Content-Type": "application/json", "Accept-Encoding": "identity"}
    if config.upstream_key:
        headers["Authorization"] = f"Bearer {config.upstream_key}"
    return headers


def _failed(exc: Exception, url: str) -> TemplateError:
    return TemplateError(f"the upstream {url} failed: {type(exc).__name__}: {exc}", code="SERVICE_UPSTREAM_FAILED")


def _passed(upstream: httpx.Response, extra: dict[str, str]) -> dict[str, str]:
    out = {k: v for k, v in upstream.headers.items() if k.lower() in _PASS_HEADERS}
    if "x-request-id" in out:
        out["x-upstream-request-id"] = out.pop("x-request-id")
    out.update(extra)
    return out


async def forward(config: Any, body: dict[str, Any], extra_headers: dict[str, str],
                  path: str = "/chat/completions") -> Response:
    """POST ``body`` to ``{upstream}{path}`` (chat or text completions) and answer with the upstream's answer."""
    url = f"{config.upstream}{path}"
    timeout = httpx.Timeout(config.upstream_timeout, connect=10.0)
    client = httpx.AsyncClient(timeout=timeout)
    if not body.get("stream"):
        try:
            upstream = await client.post(url, json=body, headers=_headers_for(config))
        except httpx.HTTPError as exc:
            raise _failed(exc, url) from None
        finally:
            await client.aclose()
        return Response(upstream.content, status_code=upstream.status_code, headers=_passed(upstream, extra_headers))
    try:
        request = client.build_request("POST", url, json=body, headers=_headers_for(config))
        upstream = await client.send(request, stream=True)
    except httpx.HTTPError as exc:
        await client.aclose()
        raise _failed(exc, url) from None

    async def relay() -> AsyncIterator[bytes]:
        try:
            async for chunk in upstream.aiter_raw():
                yield chunk
        except httpx.HTTPError:
            return  # the upstream broke off mid-stream: end ours too (the client sees a short stream)
        finally:
            await upstream.aclose()
            await client.aclose()

    headers = _passed(upstream, extra_headers)
    headers.setdefault("cache-control", "no-cache")
    return StreamingResponse(relay(), status_code=upstream.status_code, headers=headers,
                             media_type=upstream.headers.get("content-type", "text/event-stream"))
