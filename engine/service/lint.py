"""``POST /v1/lint``: the static checks of ``tavernbox lint`` over uploaded assets.

The body names the files of one asset set, as the CLI lints the files it is given together
(cross-file checks: variables read and set, ``getwi``/``getpreset`` targets, card overrides)::

    {"files": [{"name": "preset.json", "content": <JSON or a library ref>},
               {"name": "intro.ejs", "text": "<% ... %>"},
               {"name": "card.png", "base64": "..."}],
     "settings": {SillyTavern's world-info settings}?, "format": "json" | "sarif", "min_severity": "info"?}

The name's suffix decides how a file is read, exactly as for the CLI (``.json``/``.yaml``/``.png``
are assets, anything else a template). Files are written to a private temporary folder for the
linter and its findings name them by the names given. The answer is what ``lint --format json``
(or ``sarif``) prints, with status 200 whatever the findings; ``counts.error`` says whether the CLI
would have exited 1.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import json
import re
import tempfile
from pathlib import Path
from typing import Any

from fastapi import APIRouter
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse

from ..errors import TemplateError
from .answers import json_answer, read_json
from .library import resolve_refs

__all__ = ["MAX_FILES", "router"]

router = APIRouter(prefix="/v1", tags=["engines"])

#: The most files one lint request may hold.
MAX_FILES = 64
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._ -]{0,127}")
_JSON_BODY = {"requestBody": {"required": True, "content": {"application/json": {"schema": {"type": "object"}}}}}


def _bad(message: str, path: str) -> TemplateError:
    return TemplateError(message, code="SERVICE_REQUEST_INVALID", path=path)


def _file_bytes(item: Any, where: str) -> tuple[str, bytes]:
    if not isinstance(item, dict):
        raise _bad("a file is an object with a name and one of content, text or base64", where)
    name = item.get("name")
    if not isinstance(name, str) or not _NAME.fullmatch(name) or name.strip() != name:
        raise _bad("a file name is 1-128 of [A-Za-z0-9._ -] starting with a letter or digit (no folders)",
                   f"{where}.name")
    given = [key for key in ("content", "text", "base64") if key in item]
    if len(given) != 1 or set(item) - {"name", "content", "text", "base64"}:
        raise _bad("a file has a name and exactly one of content (JSON), text or base64", where)
    key = given[0]
    if key == "content":
        return name, json.dumps(item["content"], ensure_ascii=False).encode("utf-8")
    if not isinstance(item[key], str):
        raise _bad(f"'{key}' must be a string", f"{where}.{key}")
    if key == "text":
        return name, item["text"].encode("utf-8", "surrogatepass")
    try:
        return name, base64.b64decode(item["base64"], validate=True)
    except (binascii.Error, ValueError):
        raise _bad("'base64' is not valid base64", f"{where}.base64") from None


def _lint(body: dict[str, Any]) -> dict[str, Any]:
    from ..lint import lint_files
    from ..lint.model import SEVERITY_RANK
    from ..lint.report import to_json, to_sarif
    from ..worldinfo.settings import WorldInfoSettings

    for key in body:
        if key not in ("files", "settings", "format", "min_severity"):
            raise _bad(f"unknown field {key!r} (known: files, settings, format, min_severity)", f"$.{key}")
    files = body.get("files")
    if not isinstance(files, list) or not files or len(files) > MAX_FILES:
        raise _bad(f"'files' is a list of 1 to {MAX_FILES} files", "$.files")
    fmt = body.get("format", "json")
    if fmt not in ("json", "sarif"):
        raise _bad("'format' is json or sarif", "$.format")
    floor = body.get("min_severity", "info")
    if floor not in SEVERITY_RANK:
        raise _bad("'min_severity' is info, warning or error", "$.min_severity")
    settings = None
    if body.get("settings") is not None:
        settings = WorldInfoSettings.from_mapping(body["settings"], path="$.settings")
    named = [_file_bytes(item, f"$.files[{i}]") for i, item in enumerate(files)]
    names = [name for name, _ in named]
    if len(set(names)) != len(names):
        raise _bad("file names must be unique", "$.files")
    with tempfile.TemporaryDirectory(prefix="tavernbox-lint-") as folder:
        paths = []
        for name, data in named:
            path = Path(folder) / name
            path.write_bytes(data)
            paths.append(str(path))
        report = lint_files(paths, settings=settings)
    back = dict(zip(paths, names))
    report.findings = [dataclasses.replace(f, file=back.get(f.file, f.file)) for f in report.findings
                       if SEVERITY_RANK[f.severity] >= SEVERITY_RANK[floor]]
    report.files = names
    return to_sarif(report) if fmt == "sarif" else to_json(report)


@router.post("/lint", summary="Static checks of presets, cards, books, templates and MVU (tavernbox lint --format json)",
             openapi_extra=_JSON_BODY)
async def lint(request: Request) -> JSONResponse:
    body = await read_json(request)
    library = request.app.state.service.storage.library

    def work() -> dict[str, Any]:
        resolved, refs = resolve_refs(library, body)
        answer = _lint(resolved)
        if refs:
            answer["refs"] = refs
        return answer

    return json_answer(await run_in_threadpool(work))
