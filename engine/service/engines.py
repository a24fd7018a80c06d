"""The engine routes: each takes the CLI's JSON input form and answers the CLI's JSON output form.

- ``POST /v1/macros``: ``{"template", "context"?, "card"?, "seed"?, "trace"?}`` -> what
  ``tavernbox macros --json`` prints (text, variables, diagnostics, draws).
- ``POST /v1/render``: one ``tavernbox render --jsonl`` job (``template``, ``variables``, and the
  bridge fields ``mvu``, ``world_books``, ``activated``, ``preset``, ``card``) -> what ``render
  --json`` prints, ``{"text", "error", "usage"}`` (plus ``reads`` through the bridge); a failed
  render is answered 422 with the same object. ``"provenance": true`` (opt-in) adds ``provenance``:
  ``{"spans": [{"start", "end", "kind", "source_start", "source_end", "line", "column"}]}``, which
  template token (text, ``<%=``, ``<%-``, or a ``<%`` code tag that printed) produced each output
  range (:mod:`tavernbox.ejs.provenance`), or ``{"spans": null, "reason"}`` when it cannot be told.
- ``POST /v1/activate``: one ``tavernbox activate --jsonl`` scenario -> the ``--json`` object
  (``"macros": true`` expands keys and contents, as the CLI does outside ``--jsonl``).
- ``POST /v1/replay``: a record (or a whole ``assemble --json`` answer) -> ``replay --json``.
- ``POST /v1/import``: the file's bytes as the body (PNG or JSON/YAML text; ``?kind=`` forces the
  kind, ``?name=`` names it) -> ``import --json``; with ``?store=true`` the parsed document is
  also stored in the library (``?id=`` or a slug of its name) and ``stored`` names the revision.

Any body field may be a library ref (``{"ref": "cards/alice"}``); the answer then lists the
revisions used in ``refs``. They are the request's leases (:mod:`.leases`): a render through the
bridge holds them at every check point, and every route reads them again before it answers; an
asset that moved on meanwhile fails the request with ``SOURCE_CONTENT_CHANGED``.

Replaying a stored record (or an assemble answer with ``refs``) checks the revisions it names
against the library: by default each must still be the asset's newest (``"revisions":
"current"``), so a record whose assets were edited since fails with ``SOURCE_CONTENT_CHANGED``
naming the asset and both revisions; ``"revisions": "recorded"`` replays against exactly the
recorded revisions, which must still be kept with their digests. Every engine call runs in the
thread pool.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from fastapi import APIRouter
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse

from ..errors import TemplateError
from .answers import json_answer, read_json
from .leases import LibraryLeases, recorded_refs
from .library import resolve_refs

__all__ = ["router"]

router = APIRouter(prefix="/v1", tags=["engines"])

_JSON_BODY = {"requestBody": {"required": True, "content": {"application/json": {"schema": {"type": "object"}}}}}
_LIBRARY_KIND = {"card": "cards", "world_book": "books", "preset": "presets", "mvu": "mvu"}


async def _body(request: Request) -> tuple[dict[str, Any], list[dict[str, Any]], LibraryLeases]:
    """The JSON object body with library refs resolved (in the thread pool: database reads), and their leases."""
    data = await read_json(request)
    library = request.app.state.service.storage.library
    body, refs = await run_in_threadpool(resolve_refs, library, data)
    return body, refs, LibraryLeases(library, refs)


def _with_refs(answer: dict[str, Any], refs: list[dict[str, Any]]) -> dict[str, Any]:
    if refs:
        answer["refs"] = refs
    return answer


def _check_fields(body: dict[str, Any], allowed: set[str]) -> None:
    for key in body:
        if key not in allowed:
            raise TemplateError(f"unknown field {key!r} (known: {', '.join(sorted(allowed))})",
                                code="SERVICE_REQUEST_INVALID", path=f"$.{key}")


def _card_fields(card: Any) -> tuple[str, dict[str, Any]]:
    """A card object -> (its name, the ``character`` fields), through the importer as ``macros --card`` does."""
    from ..assets import load_asset
    from ..macros.context import CARD_FIELDS

    model = load_asset(json.dumps(card, ensure_ascii=False).encode("utf-8"), kind="card").model
    fields: dict[str, Any] = {key: getattr(model, key) for key in CARD_FIELDS if key != "depth_prompt"}
    fields["alternate_greetings"] = model.alternate_greetings
    if model.depth_prompt is not None:
        fields["depth_prompt"] = model.depth_prompt.prompt
    return model.name, fields


def _macros(body: dict[str, Any]) -> dict[str, Any]:
    from ..macros import expand_macros

    _check_fields(body, {"template", "context", "card", "seed", "trace"})
    template = body.get("template")
    if not isinstance(template, str):
        raise TemplateError("'template' must be a string", code="SERVICE_REQUEST_INVALID", path="$.template")
    context = body.get("context") or {}
    if not isinstance(context, dict):
        raise TemplateError("'context' must be an object", code="SERVICE_REQUEST_INVALID", path="$.context")
    seed = body.get("seed")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
        raise TemplateError("'seed' must be an integer", code="SERVICE_REQUEST_INVALID", path="$.seed")
    if body.get("card") is not None:
        name, fields = _card_fields(body["card"])
        character = dict(context.get("character") or {})
        character.update(fields)
        context = {**context, "character": character}
        if name and "char" not in context:
            context["char"] = name
    result = expand_macros(template, context, seed=seed, trace=bool(body.get("trace")))
    return result.to_dict(template)


def _leased(engine: Callable[[dict[str, Any]], dict[str, Any]], body: dict[str, Any],
            leases: LibraryLeases) -> dict[str, Any]:
    """``engine``'s answer to ``body``, given only while the library assets it read are still current."""
    answer = engine(body)
    leases.check("before the answer was sent")
    return answer


@router.post("/macros", summary="Expand SillyTavern macros (tavernbox macros --json)", openapi_extra=_JSON_BODY)
async def macros(request: Request) -> JSONResponse:
    body, refs, leases = await _body(request)
    return json_answer(_with_refs(await run_in_threadpool(_leased, _macros, body, leases), refs))


#: The render fields that go through the dependency bridge (as in ``render --jsonl`` lines).
_BRIDGE_FIELDS = ("mvu", "world_books", "activated", "preset", "card")


def _error_object(exc: TemplateError) -> dict[str, Any]:
    return {"code": exc.code, "message": exc.message, "line": exc.line, "column": exc.column}


def _usage_dict(usage: Any) -> dict[str, Any] | None:
    if usage is None:
        return None
    return {name: getattr(usage, name) for name in ("time_ms", "memory_bytes", "output_bytes", "passes", "job_steps")
            if hasattr(usage, name)}


def _render(body: dict[str, Any], leases: LibraryLeases | None = None) -> tuple[dict[str, Any], int]:
    """One render; ``leases`` (the body's library refs) are held by the bridge and checked before answering."""
    try:
        answer, status = _render_once(body, leases)
        if leases is not None and status == 200:
            leases.check("before the answer was sent")
    except TemplateError as exc:
        if exc.code not in ("SOURCE_CONTENT_CHANGED", "SOURCE_POLICY_CHANGED"):
            raise
        return {"text": None, "error": _error_object(exc), "usage": None}, 422
    return answer, status


def _render_once(body: dict[str, Any], leases: LibraryLeases | None) -> tuple[dict[str, Any], int]:
    _check_fields(body, {"template", "variables", "provenance", *_BRIDGE_FIELDS})
    if not isinstance(body.get("template"), str):
        raise TemplateError("'template' must be a string", code="SERVICE_REQUEST_INVALID", path="$.template")
    want = body.pop("provenance", False)
    if not isinstance(want, bool):
        raise TemplateError("'provenance' must be true or false", code="SERVICE_REQUEST_INVALID", path="$.provenance")
    answer, status = _render_answer(body, want, leases)
    if want and "provenance" not in answer:
        answer["provenance"] = None  # the render failed: there is no output to explain
    return answer, status


def _render_answer(body: dict[str, Any], want_provenance: bool,
                   leases: LibraryLeases | None) -> tuple[dict[str, Any], int]:
    from ..ejs import render_template

    if any(key in body for key in _BRIDGE_FIELDS):
        from ..bridge import render_with_sources, sources_from_inputs

        try:
            sources = sources_from_inputs(variables=body.get("variables"), mvu=body.get("mvu"),
                                          world_books=body.get("world_books"), activated=body.get("activated"),
                                          preset=body.get("preset"), card=body.get("card"))
            held = leases.leases.lease_set() if leases is not None and len(leases) else None
            bridged = render_with_sources(body["template"], sources, leases=held)
        except TemplateError as exc:
            return {"text": None, "error": _error_object(exc), "usage": None, "reads": []}, 422
        answer = {"text": bridged.text, "error": None, "usage": _usage_dict(bridged.usage),
                  "reads": [r.to_dict() for r in bridged.reads]}
        if want_provenance:
            answer["provenance"] = {"spans": None, "reason": "per-tag provenance is not available with the bridge "
                                                             "fields (mvu, world_books, activated, preset, card)"}
        return answer, 200
    try:
        if want_provenance:
            from ..ejs.provenance import render_with_provenance

            result, provenance = render_with_provenance(body["template"], body.get("variables"))
        else:
            result = render_template(body["template"], body.get("variables"))
    except TemplateError as exc:
        return {"text": None, "error": _error_object(exc), "usage": None}, 422
    answer = {"text": result.text, "error": None, "usage": _usage_dict(result.usage)}
    if want_provenance:
        answer["provenance"] = provenance.to_dict()
    return answer, 200


@router.post("/render", summary="Render an EJS template in the sandbox (tavernbox render --json)",
             openapi_extra=_JSON_BODY)
async def render(request: Request) -> JSONResponse:
    body, refs, leases = await _body(request)
    answer, status = await run_in_threadpool(_render, body, leases)
    return json_answer(_with_refs(answer, refs), status=status)


def _activate(body: dict[str, Any]) -> dict[str, Any]:
    """One ``activate --jsonl`` scenario -> its ``--json`` object (an error object on bad input)."""
    from ..worldinfo import ScanContext, WorldInfoSettings, activate_world_info, normalize_books, to_json
    from ..worldinfo.scan import chat_scan_messages

    try:
        if not isinstance(body.get("settings", {}), (dict, type(None))):
            raise TemplateError("settings should be an object", code="INPUT_INVALID", path="$.settings")
        settings = dict(body.get("settings") or {})
        if "max_context" in body:
            settings["max_context"] = body["max_context"]
        seed = body.get("seed", 0)
        if isinstance(seed, bool) or not isinstance(seed, int):
            raise TemplateError("seed should be an integer", code="INPUT_INVALID", path="$.seed")
        conf = WorldInfoSettings.from_mapping(settings, path="$.settings")
        chat = body.get("chat", [])
        if isinstance(chat, dict):  # the chat reader's form ({"messages": [...]}), as assemble reads it
            from ..assets.chats import parse_chat, scan_messages

            chat = scan_messages(parse_chat(chat, path="$.chat"))
        chat_scan_messages(chat, include_names=False, path="$.chat")
        context = ScanContext.from_mapping(body.get("context"), path="$.context")
        books: list[Any]
        if "books" in body:
            books, _ = normalize_books(body["books"], path="$.books")
        elif "entries" in body:
            books = [{"name": body.get("name", "book"), "entries": body["entries"]}]
        else:
            raise TemplateError("a scenario needs 'entries' (one book's entries) or 'books'", code="INPUT_INVALID",
                                path="$")
        expand = None
        if body.get("macros"):
            from ..macros import expand_macros

            def expand(text: str) -> str:
                return expand_macros(text).text

        activation = activate_world_info(books, chat, conf, body.get("state"), seed=seed, expand=expand,
                                         context=context, generation_type=body.get("generation_type", "normal"))
        return to_json(activation)
    except TemplateError as exc:
        return {"error": exc.to_dict()}
    except RecursionError:
        return {"error": TemplateError("the scenario is nested too deeply", code="INPUT_INVALID").to_dict()}


@router.post("/activate", summary="Activate world info for a chat (tavernbox activate --json)",
             openapi_extra=_JSON_BODY)
async def activate(request: Request) -> JSONResponse:
    body, refs, leases = await _body(request)
    answer = await run_in_threadpool(_leased, _activate, body, leases)
    status = 200
    if "error" in answer and isinstance(answer["error"], dict):
        from .answers import status_for

        status = status_for(answer["error"].get("code", ""))
    return json_answer(_with_refs(answer, refs), status=status)


#: ``/v1/replay``'s ``revisions``: check the recorded revisions against the newest ("current", the
#: default) or replay against exactly those revisions ("recorded": each must still be kept).
REPLAY_REVISIONS = ("current", "recorded")


def _replay(request: Request, body: dict[str, Any], leases: LibraryLeases) -> dict[str, Any]:
    """Replay a record: the revisions it names are leases, checked (see the module docstring) before the answer."""
    from ..assembler import replay

    mode = body.get("revisions", "current")
    if mode not in REPLAY_REVISIONS:
        raise TemplateError(f"'revisions' is one of {', '.join(REPLAY_REVISIONS)}", code="SERVICE_REQUEST_INVALID",
                            path="$.revisions")
    holder, where = body, "$"
    if isinstance(body.get("record"), dict):
        if isinstance(body["record"].get("record"), dict):  # {"record": <a stored record or an assemble answer>}
            holder, where = body["record"], "$.record"
        record = holder["record"]
    else:  # the bare record (its own ``refs``, if any, are not the service's)
        record = {k: v for k, v in body.items() if k != "revisions"}
    named = recorded_refs(holder.get("refs"), f"{where}.refs") if holder.get("record") is record else []
    library = request.app.state.service.storage.library
    LibraryLeases(library, named, pinned_all=mode == "recorded").check("when the record was replayed")
    answer = replay(record).to_dict()
    leases.check("before the answer was sent")
    return answer


@router.post("/replay", summary="Rebuild recorded messages without calling any source (tavernbox replay --json)",
             openapi_extra=_JSON_BODY)
async def replay_route(request: Request) -> JSONResponse:
    body, refs, leases = await _body(request)
    return json_answer(_with_refs(await run_in_threadpool(_replay, request, body, leases), refs))


def _slug(name: str | None) -> str | None:
    if not name:
        return None
    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("-._")[:128]
    return slug or None


def _import(request: Request, data: bytes, kind: str | None, name: str | None, store: bool,
            asset_id: str | None, if_match: str | None) -> tuple[dict[str, Any], int]:
    from ..assets import load_asset
    from ..assets.cards import read_png_card
    from ..assets.decoding import decode_bytes
    from ..assets.loader import PNG_SIGNATURE, parse_structured

    label = name or "upload"
    try:
        asset = load_asset(data, kind=kind, name=name)
    except TemplateError as exc:
        report = {"file": label, "ok": False, "error": exc.to_dict()}
        return {"files": [report], "ok": False, "error": exc.to_dict()}, 422
    report = {"file": label, "ok": True, **asset.summary()}
    answer: dict[str, Any] = {"files": [report], "ok": True}
    if store:
        from .library import _revision_header

        if data.startswith(PNG_SIGNATURE):
            value = read_png_card(data)[0]
        else:
            value = parse_structured(decode_bytes(data).text, prefer_yaml=asset.kind == "mvu")[0]
        target = asset_id or _slug(name) or _slug(asset.name)
        if target is None:
            raise TemplateError("give ?id= (the asset has no name to derive one from)", code="LIBRARY_INVALID",
                                path="$.id")
        library = request.app.state.service.storage.library
        entry = library.put(_LIBRARY_KIND[asset.kind], target, value,
                            if_match=_revision_header(if_match, "If-Match"))
        answer["stored"] = entry.to_dict(with_data=False)
    return answer, 200


@router.post("/import", summary="Detect, validate and summarise an asset; ?store=true keeps it (tavernbox import --json)",
             openapi_extra={"requestBody": {"required": True, "content": {
                 "application/octet-stream": {"schema": {"type": "string", "format": "binary"}},
                 "application/json": {"schema": {}}}}})
async def import_route(request: Request, kind: str | None = None, name: str | None = None, store: bool = False,
                       id: str | None = None) -> JSONResponse:  # noqa: A002 - the query parameter's name
    if kind is not None and kind not in _LIBRARY_KIND:
        raise TemplateError(f"unknown kind {kind!r} (one of {', '.join(_LIBRARY_KIND)})",
                            code="SERVICE_REQUEST_INVALID", path="$.kind")
    data = await request.body()
    answer, status = await run_in_threadpool(_import, request, data, kind, name, store, id,
                                             request.headers.get("if-match"))
    return json_answer(answer, status=status)
