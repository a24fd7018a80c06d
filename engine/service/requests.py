"""``POST /v1/assemble``, ``/v1/chat/completions`` and ``/v1/completions``: SillyTavern's outgoing request over HTTP.

``/v1/assemble`` takes the request-file object of ``tavernbox assemble --request`` (preset, card,
books, chat, user, author_note, world_info, group, options) and answers what ``assemble --request
--json`` prints (messages, body, warnings, nodes, provenance, trace, record; for a request with
``text_completion``: prompt, stop, templates, warnings and the prompt's provenance). ``"preview": true``
asks for SillyTavern's dry run (``options.dry_run``); ``"store": true`` also keeps the answer's
record in the library as ``records/<id>`` (``"record_id"`` or the request id), so ``/v1/replay``
with ``{"ref": "records/<id>"}`` rebuilds it after a restart. Any asset may be a library ref;
the revisions used are listed in ``refs`` and stored with the record. They are the request's
leases (:mod:`.leases`): read again right before the record is stored and the answer sent, and a
ref whose asset moved on meanwhile fails the request with ``SOURCE_CONTENT_CHANGED`` (nothing
stored). ``/v1/chat/completions`` checks them before it forwards anything upstream.

``/v1/chat/completions`` takes an ordinary OpenAI chat-completion request whose ``messages`` are
the chat, plus a ``tavernbox`` object naming the preset, card, books, user... (refs or inline;
every request-file field but ``chat``). It assembles the real messages, replaces
``messages`` with them and forwards everything else unchanged to ``--upstream`` (:mod:`.upstream`),
streaming the answer back as it comes (``stream: true``: server-sent events, byte for byte).

``/v1/completions`` is the same for a text-completion API (OpenAI's ``/v1/completions``): the
``tavernbox`` object is a whole request file with ``text_completion`` (its ``chat`` included, as a
text completion has no ``messages``); SillyTavern's prompt replaces ``prompt``, and its stop strings
come first in ``stop`` (the client's own follow).

The service never reads a file on its own machine for a client: asset fields given as strings
(paths, in the request file) are refused here with their JSON path.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response

from ..errors import TemplateError
from .answers import json_answer, read_json, request_id_of
from .leases import LibraryLeases
from .library import resolve_refs

__all__ = ["router", "chat_from_openai"]

router = APIRouter(prefix="/v1", tags=["requests"])

_JSON_BODY = {"requestBody": {"required": True, "content": {"application/json": {"schema": {"type": "object"}}}}}


def _tavernbox_fields() -> tuple[str, ...]:
    """The request-file fields a ``tavernbox`` object may carry: all but ``chat`` (the OpenAI ``messages``)."""
    from ..sillytavern.request import StRequest

    return tuple(name for name in StRequest.model_fields if name != "chat")


def _refuse_paths(request: dict[str, Any], prefix: str = "$") -> None:
    """Asset fields must be objects (or refs, already resolved): a string would be a server path."""
    hint = "the service reads no files on its machine: embed the asset or name a library ref ({\"ref\": \"kind/id\"})"
    for key in ("preset", "card", "chat"):
        if isinstance(request.get(key), str):
            raise TemplateError(f"{prefix}.{key} is a path; {hint}", code="SERVICE_REQUEST_INVALID",
                                path=f"{prefix}.{key}")
    books = request.get("books")
    if isinstance(books, list):
        for i, book in enumerate(books):
            inner = book.get("book") if isinstance(book, dict) and "book" in book and "entries" not in book else book
            if isinstance(inner, str):
                raise TemplateError(f"{prefix}.books[{i}] is a path; {hint}", code="SERVICE_REQUEST_INVALID",
                                    path=f"{prefix}.books[{i}]")
    group = request.get("group")
    cards = group.get("cards") if isinstance(group, dict) else None
    if isinstance(cards, list):  # a group's member cards are assets too
        for i, card in enumerate(cards):
            if isinstance(card, str):
                raise TemplateError(f"{prefix}.group.cards[{i}] is a path; {hint}", code="SERVICE_REQUEST_INVALID",
                                    path=f"{prefix}.group.cards[{i}]")


def _assemble(request: dict[str, Any]) -> Any:
    from ..sillytavern.assemble import assemble_request

    return assemble_request(request)


def _assemble_answer(request: dict[str, Any]) -> dict[str, Any]:
    """What ``assemble --request --json`` prints: for a request with ``text_completion``, the prompt,
    the stop strings and the prompt's provenance (each span's source) instead of the messages."""
    if request.get("text_completion") is not None:
        from ..sillytavern.text_completion import assemble_text_completion

        return assemble_text_completion(request).to_dict()
    answer: dict[str, Any] = _assemble(request).to_dict()
    return answer


def _prepare(body: dict[str, Any]) -> tuple[dict[str, Any], bool, str | None]:
    """Split the service's own fields (preview, store, record_id) from the request file."""
    request = dict(body)
    preview = request.pop("preview", False)
    store = request.pop("store", False)
    record_id = request.pop("record_id", None)
    for key, value in (("preview", preview), ("store", store)):
        if not isinstance(value, bool):
            raise TemplateError(f"'{key}' must be true or false", code="SERVICE_REQUEST_INVALID", path=f"$.{key}")
    if record_id is not None and not isinstance(record_id, str):
        raise TemplateError("'record_id' must be a string", code="SERVICE_REQUEST_INVALID", path="$.record_id")
    if preview:
        options = request.get("options") or {}
        if not isinstance(options, dict):
            raise TemplateError("'options' must be an object", code="REQUEST_INVALID", path="$.options")
        request["options"] = {**options, "dry_run": True}
    _refuse_paths(request)
    return request, store, record_id


@router.post("/assemble", summary="Assemble SillyTavern's outgoing request (tavernbox assemble --request --json)",
             openapi_extra=_JSON_BODY)
async def assemble(request: Request) -> Response:
    body = await read_json(request)
    library = request.app.state.service.storage.library
    rid = request_id_of(request) or "request"

    def work() -> dict[str, Any]:
        resolved, refs = resolve_refs(library, body)
        prepared, store, record_id = _prepare(resolved)
        answer = _assemble_answer(prepared)
        LibraryLeases(library, refs).check("before the assembly was committed")
        if refs:
            answer["refs"] = refs
        if store:
            if "prompt" in answer:
                raise TemplateError("a text-completion assembly has no record to store (no replay yet)",
                                    code="SERVICE_REQUEST_INVALID", path="$.store")
            stored = {"record": answer.get("record"), "messages": answer.get("messages"), "refs": refs,
                      "request_id": rid, "preview": bool(prepared.get("options", {}).get("dry_run"))}
            answer["stored"] = library.put("records", record_id or rid, stored).to_dict(with_data=False)
        return answer

    return json_answer(await run_in_threadpool(work))


def _text_of(content: Any, where: str) -> str:
    """An OpenAI message content (a string, or a list of parts) as text."""
    if isinstance(content, str):
        return content
    if content is None:
        return ""
    if isinstance(content, list):
        parts = []
        for i, part in enumerate(content):
            if isinstance(part, dict) and part.get("type") == "text" and isinstance(part.get("text"), str):
                parts.append(part["text"])
            else:
                raise TemplateError("only text content parts can be assembled", code="SERVICE_REQUEST_INVALID",
                                    path=f"{where}[{i}]")
        return "".join(parts)
    raise TemplateError("a message content is a string or a list of text parts", code="SERVICE_REQUEST_INVALID",
                        path=where)


def chat_from_openai(messages: Any) -> dict[str, Any]:
    """OpenAI ``messages`` as the request file's ``chat`` (role, content, name)."""
    if not isinstance(messages, list) or not messages:
        raise TemplateError("'messages' must be a non-empty list", code="SERVICE_REQUEST_INVALID", path="$.messages")
    out = []
    for i, message in enumerate(messages):
        where = f"$.messages[{i}]"
        if not isinstance(message, dict) or message.get("role") not in ("system", "user", "assistant"):
            raise TemplateError("a message is an object with role system, user or assistant",
                                code="SERVICE_REQUEST_INVALID", path=f"{where}.role")
        item: dict[str, Any] = {"role": message["role"], "content": _text_of(message.get("content"), f"{where}.content")}
        if isinstance(message.get("name"), str) and message["name"]:
            item["name"] = message["name"]
        out.append(item)
    return {"messages": out}


@router.post("/chat/completions", summary="OpenAI-compatible: assemble SillyTavern's messages and forward upstream",
             openapi_extra=_JSON_BODY)
async def chat_completions(request: Request) -> Response:
    from .upstream import forward

    config = request.app.state.service
    if not config.upstream:
        raise TemplateError("no upstream is configured (start the service with --upstream URL); the assembled "
                            "request is available from POST /v1/assemble", code="SERVICE_UPSTREAM_UNCONFIGURED")
    body = await read_json(request)
    library = config.storage.library

    def work() -> tuple[dict[str, Any], list[dict[str, Any]]]:
        extra = body.get("tavernbox")
        if not isinstance(extra, dict):
            raise TemplateError("a 'tavernbox' object names the preset, card, books... (refs or inline)",
                                code="SERVICE_REQUEST_INVALID", path="$.tavernbox")
        known = _tavernbox_fields()
        for key in extra:
            if key not in known:
                raise TemplateError(f"unknown field {key!r} (known: {', '.join(known)})",
                                    code="SERVICE_REQUEST_INVALID", path=f"$.tavernbox.{key}")
        resolved, refs = resolve_refs(library, extra, "$.tavernbox")
        assembly_request = {**resolved, "chat": chat_from_openai(body.get("messages"))}
        _refuse_paths(assembly_request, "$.tavernbox")
        assembled = _assemble(assembly_request)
        LibraryLeases(library, refs).check("before the request was forwarded upstream")
        outgoing = {k: v for k, v in body.items() if k != "tavernbox"}
        outgoing["messages"] = assembled.messages
        return outgoing, refs

    outgoing, refs = await run_in_threadpool(work)
    headers = {"X-Tavernbox-Refs": ",".join(f"{r['kind']}/{r['id']}@{r['revision']}" for r in refs)} if refs else {}
    return await forward(config, outgoing, headers)


def _stops(theirs: list[str], given: Any) -> list[str]:
    """SillyTavern's stop strings, then the client's own (``stop``: a string or a list), each once."""
    extra = [given] if isinstance(given, str) else [s for s in given if isinstance(s, str)] \
        if isinstance(given, list) else []
    return list(dict.fromkeys([*theirs, *extra]))


@router.post("/completions", summary="OpenAI-compatible text completion: assemble SillyTavern's prompt and stop "
             "strings and forward upstream", openapi_extra=_JSON_BODY)
async def completions(request: Request) -> Response:
    from ..sillytavern.text_completion import assemble_text_completion
    from .upstream import forward

    config = request.app.state.service
    if not config.upstream:
        raise TemplateError("no upstream is configured (start the service with --upstream URL)",
                            code="SERVICE_UPSTREAM_UNCONFIGURED")
    body = await read_json(request)
    library = config.storage.library

    def work() -> tuple[dict[str, Any], list[dict[str, Any]]]:
        extra = body.get("tavernbox")
        if not isinstance(extra, dict) or not isinstance(extra.get("text_completion"), dict):
            raise TemplateError("a 'tavernbox' object is the request file, with its chat and text_completion "
                                "(refs or inline)", code="SERVICE_REQUEST_INVALID", path="$.tavernbox.text_completion")
        resolved, refs = resolve_refs(library, extra, "$.tavernbox")
        _refuse_paths(resolved, "$.tavernbox")
        assembled = assemble_text_completion(resolved)
        LibraryLeases(library, refs).check("before the request was forwarded upstream")
        outgoing = {k: v for k, v in body.items() if k != "tavernbox"}
        outgoing["prompt"] = assembled.prompt
        outgoing["stop"] = _stops(assembled.stop, body.get("stop"))
        return outgoing, refs

    outgoing, refs = await run_in_threadpool(work)
    headers = {"X-Tavernbox-Refs": ",".join(f"{r['kind']}/{r['id']}@{r['revision']}" for r in refs)} if refs else {}
    return await forward(config, outgoing, headers, path="/completions")
