"""``/v1/library``: stored presets, cards, books, templates, chats, personas, MVU and records.

``PUT /v1/library/{kind}/{id}`` stores a JSON document as the next revision and answers its
revision and digest (201 for the first revision, 200 after); ``If-Match: "<revision>"`` makes
the write conditional (412 ``LIBRARY_CONFLICT`` when another client wrote first) and
``If-None-Match: *`` makes it create-only. ``GET`` answers ``{"kind", "id", "revision", "digest",
"updated_at", "data"}`` (``?revision=N`` for an older one) with the revision as ``ETag``;
``DELETE`` (conditional too) leaves a tombstone revision; ``GET /v1/library/{kind}`` lists ids.
Presets, cards, books and MVU documents are validated by the asset importer before they are
stored, so a stored asset always loads.

A request may name a stored asset instead of embedding it: any object whose only key is
``"ref"``, ``{"ref": "presets/my-preset"}`` (or ``"presets/my-preset@3"`` for a revision), is
replaced by the stored document (:func:`resolve_refs`), and the revisions used are reported.
Those revisions are the request's leases (:mod:`.leases`): checked again before it commits.
"""

from __future__ import annotations

import json
from typing import Any

from fastapi import APIRouter
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse

from ..errors import TemplateError
from ..store import AssetEntry, AssetLibrary
from ..store.library import MAX_LIST, check_kind, check_name
from .answers import json_answer, read_json

__all__ = ["ASSET_KIND", "MAX_REFS", "check_document", "resolve_refs", "router"]

router = APIRouter(prefix="/v1/library", tags=["library"])

#: library kind -> the importer's kind (validated on write)
ASSET_KIND = {"presets": "preset", "cards": "card", "books": "world_book", "mvu": "mvu"}
#: The most refs one request may name (each is a database read).
MAX_REFS = 64
_REF_DEPTH = 64


def _library(request: Request) -> AssetLibrary:
    return request.app.state.service.storage.library


def check_document(kind: str, data: Any) -> None:
    """Refuse a document the kind cannot use (importer codes and JSON paths for assets)."""
    if kind in ASSET_KIND:
        from ..assets import load_asset

        load_asset(json.dumps(data, ensure_ascii=False).encode("utf-8"), kind=ASSET_KIND[kind])
    elif kind == "templates":
        if not isinstance(data, str):
            raise TemplateError("a template is stored as a JSON string (its EJS or macro source)",
                                code="SERVICE_REQUEST_INVALID", path="$")
    elif not isinstance(data, (dict, list)):
        raise TemplateError(f"a {kind[:-1] if kind.endswith('s') else kind} is a JSON object or array",
                            code="SERVICE_REQUEST_INVALID", path="$")


def _revision_header(value: str | None, name: str) -> int | None:
    """The revision an ``If-Match`` names. An entity-tag this service never issued (``"stale-revision"``) matches
    no revision: ``LIBRARY_CONFLICT``, 412 (RFC 9110, 13.1.1); a value that is no entity-tag at all is refused (400)."""
    if value is None:
        return None
    text = value.strip()
    if text.startswith("W/"):
        text = text[2:]
    quoted = len(text) >= 2 and text[0] == text[-1] == '"' and '"' not in text[1:-1]
    text = text.strip('"')
    if quoted and not (text.isdigit() and len(text) <= 18):
        raise TemplateError(f"{name} {value.strip()} matches no revision (this service's entity-tags are revision "
                            'numbers, like "3")', code="LIBRARY_CONFLICT")
    if not text.isdigit() or len(text) > 18:
        raise TemplateError(f'{name} takes the ETag of one revision, like "3" (got {value!r})', code="LIBRARY_INVALID")
    return int(text)


def _etag(entry: AssetEntry) -> dict[str, str]:
    return {"ETag": f'"{entry.revision}"'}


@router.get("/{kind}", summary="List the stored assets of a kind")
async def list_assets(request: Request, kind: str, after: str | None = None, limit: int = MAX_LIST) -> JSONResponse:
    check_kind(kind)
    if limit < 1 or limit > MAX_LIST:
        raise TemplateError(f"limit is 1 to {MAX_LIST}", code="LIBRARY_INVALID", path="$.limit")
    entries = await run_in_threadpool(_library(request).list, kind, after=after, limit=limit)
    items = [e.to_dict(with_data=False) for e in entries]
    return json_answer({"kind": kind, "items": items, "next": items[-1]["id"] if len(items) == limit else None})


@router.get("/{kind}/{asset_id}", summary="Read a stored asset (current or ?revision=N)")
async def get_asset(request: Request, kind: str, asset_id: str, revision: int | None = None) -> JSONResponse:
    check_name(kind, asset_id)
    entry = await run_in_threadpool(_library(request).get, kind, asset_id, revision)
    return json_answer(entry.to_dict(), headers=_etag(entry))


@router.put("/{kind}/{asset_id}", summary="Store the next revision of an asset (If-Match for a conditional write)",
            openapi_extra={"requestBody": {"required": True, "content": {"application/json": {"schema": {}}}}})
async def put_asset(request: Request, kind: str, asset_id: str) -> JSONResponse:
    check_name(kind, asset_id)
    if_match = _revision_header(request.headers.get("if-match"), "If-Match")
    none_match = request.headers.get("if-none-match")
    if none_match is not None and none_match.strip() != "*":
        raise TemplateError("If-None-Match takes only * (create, never overwrite)", code="LIBRARY_INVALID")
    data = await read_json(request, want=(dict, list, str))

    def write() -> AssetEntry:
        check_document(kind, data)
        return _library(request).put(kind, asset_id, data, if_match=if_match, if_absent=none_match is not None)

    entry = await run_in_threadpool(write)
    return json_answer(entry.to_dict(with_data=False), status=201 if entry.revision == 1 else 200, headers=_etag(entry))


@router.delete("/{kind}/{asset_id}", summary="Delete an asset (a tombstone revision; If-Match for a conditional delete)")
async def delete_asset(request: Request, kind: str, asset_id: str) -> JSONResponse:
    check_name(kind, asset_id)
    if_match = _revision_header(request.headers.get("if-match"), "If-Match")
    entry = await run_in_threadpool(_library(request).delete, kind, asset_id, if_match=if_match)
    return json_answer(entry.to_dict(with_data=False), headers=_etag(entry))


def _parse_ref(text: Any, path: str) -> tuple[str, str, int | None]:
    if not isinstance(text, str) or text.count("/") != 1:
        raise TemplateError('a ref is "kind/id" or "kind/id@revision", like "presets/my-preset"',
                            code="LIBRARY_INVALID", path=path)
    kind, _, rest = text.partition("/")
    asset_id, at, number = rest.partition("@")
    if at and (not number.isdigit() or len(number) > 18):
        raise TemplateError(f"the revision in ref {text!r} is not a number", code="LIBRARY_INVALID", path=path)
    try:
        check_name(kind, asset_id)
    except TemplateError as exc:
        raise TemplateError(exc.message, code=exc.code, path=path) from None
    return kind, asset_id, int(number) if at else None


def resolve_refs(library: AssetLibrary, value: Any, path: str = "$") -> tuple[Any, list[dict[str, Any]]]:
    """``value`` with every ``{"ref": "kind/id[@rev]"}`` replaced by the stored document.

    Returns the new value and the refs used (``ref``, ``kind``, ``id``, ``revision``, ``digest``,
    ``path``), in document order. A missing asset is ``LIBRARY_NOT_FOUND`` with the JSON path of
    the ref; refs inside stored documents are not followed (one level, no cycles).
    """
    used: list[dict[str, Any]] = []

    def walk(node: Any, where: str, depth: int) -> Any:
        if depth > _REF_DEPTH:
            return node
        if isinstance(node, dict):
            if set(node) == {"ref"}:
                if len(used) >= MAX_REFS:
                    raise TemplateError(f"more than {MAX_REFS} refs in one request", code="LIBRARY_INVALID", path=where)
                kind, asset_id, revision = _parse_ref(node["ref"], where + ".ref")
                try:
                    entry = library.get(kind, asset_id, revision)
                except TemplateError as exc:
                    raise TemplateError(exc.message, code=exc.code, path=where) from None
                used.append({"ref": node["ref"], "kind": kind, "id": asset_id, "revision": entry.revision,
                             "digest": entry.digest, "path": where})
                return entry.data
            return {k: walk(v, f"{where}.{k}", depth + 1) for k, v in node.items()}
        if isinstance(node, list):
            return [walk(v, f"{where}[{i}]", depth + 1) for i, v in enumerate(node)]
        return node

    return walk(value, path, 0), used
