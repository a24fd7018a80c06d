"""Sessions of the rule-file strategies: ``POST /v1/assemble/rules`` and their stored snapshot records.

The rule-file strategies (format ``dsh-tavern-request-assembly``, and the built-ins
``builtin-native-slots``/``builtin-native-roles``) retain snapshot records between the requests
of one ``session_id`` (seed 002/003: what was sent stays as it was sent). The service gives the
assembler its database as the snapshot store, so a session continues across requests, service
processes and restarts; ``"preview": true`` reads the session without writing it (seed 003's
preview), an actual assembly writes the next revision (a concurrent write of the same session is
``SNAPSHOT_STORE_CONFLICT``, 422). The body is the assembler's request object, as ``tavernbox
assemble --strategy FILE`` builds it: ``preset`` (a rule file, a built-in id, or a ref),
``messages``, ``input_ids``, ``assets``, ``preview``, ``system_prompt_update``, ``seed``,
``session_id``; the answer is what ``assemble --json`` prints.

Library refs in the body are leases (:mod:`.leases`): the assembler holds them (prompt templates'
``getpreset``/``getchar``/``getwi`` over stored assets hold the asset's lease in the bridge),
checks them after every source and, read fresh, before it saves the session's snapshots; a stale
one fails with ``SOURCE_CONTENT_CHANGED`` and nothing is saved.

``GET /v1/sessions/{id}/snapshots`` answers the session's stored records and revision;
``DELETE /v1/sessions/{id}`` forgets them.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse

from ..errors import TemplateError
from .answers import json_answer, read_json
from .leases import LibraryLeases
from .library import resolve_refs

__all__ = ["router"]

router = APIRouter(prefix="/v1", tags=["sessions"])

_JSON_BODY = {"requestBody": {"required": True, "content": {"application/json": {"schema": {"type": "object"}}}}}


@router.post("/assemble/rules", summary="Assemble with a rule-file strategy; sessions keep their snapshot records",
             openapi_extra=_JSON_BODY)
async def assemble_rules(request: Request) -> JSONResponse:
    body = await read_json(request)
    storage = request.app.state.service.storage

    def work() -> dict[str, Any]:
        from ..assembler import Assembler, AssemblyRequest
        from ..strategies import builtin_strategy, st_registry
        from ..strategies.builtin import BUILTIN_IDS

        resolved, refs = resolve_refs(storage.library, body)
        preset = resolved.get("preset")
        if isinstance(preset, str):
            rule_builtins = [b for b in BUILTIN_IDS if b != "builtin-st"]
            if preset not in rule_builtins:
                raise TemplateError(f"preset {preset!r} is not a rule-file built-in ({', '.join(rule_builtins)}); "
                                    "builtin-st requests go to /v1/assemble", code="ASSEMBLY_STRATEGY_UNKNOWN",
                                    path="$.preset")
            resolved = {**resolved, "preset": builtin_strategy(preset)}
        leases = LibraryLeases(storage.library, refs)
        result = Assembler(st_registry(), store=storage.snapshots).assemble(
            AssemblyRequest.from_dict(resolved), leases=leases.leases if len(leases) else None)
        answer = result.to_dict()
        if refs:
            answer["refs"] = refs
        return answer

    return json_answer(await run_in_threadpool(work))


@router.get("/sessions/{session_id}/snapshots", summary="The stored snapshot records of a session")
async def get_snapshots(request: Request, session_id: str) -> JSONResponse:
    loaded = await run_in_threadpool(request.app.state.service.storage.snapshots.load, session_id)
    return json_answer({"session_id": session_id, "revision": loaded.revision, "records": list(loaded.records)})


@router.delete("/sessions/{session_id}", summary="Forget a session's snapshot records")
async def delete_session(request: Request, session_id: str) -> JSONResponse:
    await run_in_threadpool(request.app.state.service.storage.snapshots.delete, session_id)
    return json_answer({"session_id": session_id, "deleted": True})
