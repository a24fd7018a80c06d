"""The assembler: one request in, the exact message array out, with provenance and a record.

Stages, each in its own module: the registry resolves sources into blocks (:mod:`.registry`);
:func:`.compose.compose` runs the rest (a replay shares it): placement turns blocks into ordered
nodes (:mod:`.claims`, :mod:`.placement`), depth items go in last (:mod:`.depth`), the native
layout and tool transactions are validated (:mod:`.tools`), the logical byte limit is charged
(:mod:`.limits`), system contributions are projected into complete snapshots (:mod:`.projection`),
and everything needed to reproduce the messages without calling a source again is recorded
(:mod:`.record`).

Preview and actual requests go through the same function; a preview leaves out the unsent input
and reports the system-update capability as unverified.

A caller whose inputs came from a store (the service's library refs) passes their leases
(``leases``, a :class:`~tavernbox.bridge.InputLeases`): the prompt-template source holds them for
the lookups that read those inputs, and the assembler checks all of them after every source
resolved and once more, read fresh, right before the session's snapshots are saved and the
result is returned. A stale one fails the assembly with ``SOURCE_CONTENT_CHANGED`` and nothing
is saved.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..collector import bulk_allocation
from ..errors import Diagnostic
from .compose import AssemblyRequest, AssemblyResult, bad_request, compose, json_copy
from .identity import content_hash
from .record import assembled_messages, build_record, diagnostic_dict
from .registry import (
    CancellationToken,
    FrozenMap,
    ResolvedEntry,
    SourceRegistry,
    build_jobs,
    freeze_assets,
    resolve_jobs,
    resolve_jobs_async,
)
from .render import RenderOutput, RenderState
from .snapshots import validate_records

if TYPE_CHECKING:
    from ..bridge.leases import InputLeases
    from ..store import SnapshotStore

__all__ = ["Assembler"]

def _macro_context(request: AssemblyRequest, native: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The macro-engine context for Tavern text, from the request's assets (chara_card_v2 names)."""
    assets = request.assets
    card = assets.get("character") or {}
    card = card.get("data", card) if isinstance(card, Mapping) else {}
    persona = assets.get("persona") or {}
    persona = persona if isinstance(persona, Mapping) else {"description": str(persona)}
    ctx: dict[str, Any] = {
        "user": assets.get("user") or persona.get("name") or "User",
        "char": card.get("nickname") or card.get("name") or "Assistant",
        "persona": persona.get("description", ""),
        "character": {k: v for k, v in card.items() if k != "extensions"},
        "chat": [
            {"role": m["role"], "name": m.get("name", ""), "content": m["content"]}
            for m in native
            if m["role"] in ("user", "assistant", "system") and isinstance(m["content"], str)
        ],
        "seed": request.seed,
    }
    extra = assets.get("macro_context")
    if isinstance(extra, Mapping):
        ctx.update(json_copy(extra, "$.assets.macro_context"))
    return ctx


class Assembler:
    """Assemble requests from the sources of one registry.

    ``Assembler(registry).assemble(request)``: ``request`` is an :class:`AssemblyRequest` or its
    dict form. Registrations are captured once per request.
    """

    def __init__(self, registry: SourceRegistry | None = None, store: SnapshotStore | None = None) -> None:
        if registry is None:
            from .sources import builtin_registry  # the built-ins cost an import only when used

            registry = builtin_registry()
        self.registry = registry
        #: where retained snapshot records persist between requests of one ``session_id``: read
        #: when a request brings no ``snapshots`` of its own, written after every non-preview
        #: assembly (a conflicting concurrent write fails with ``SNAPSHOT_STORE_CONFLICT``)
        self.store = store

    def _prepare(
        self, request: AssemblyRequest | Mapping[str, Any]
    ) -> tuple[AssemblyRequest, list[Any], list[dict[str, Any]], list[Diagnostic], tuple[str, ...]]:
        req = request if isinstance(request, AssemblyRequest) else AssemblyRequest.from_dict(request)
        req = req.validated()
        native = list(req.messages)
        input_ids = req.input_ids
        if req.preview:  # a preview never includes the unsent input
            unsent = set(input_ids)
            native = [m for m in native if m["id"] not in unsent]
            input_ids = ()
        jobs, diags = build_jobs(req.preset, self.registry.capture())
        return req, jobs, native, diags, input_ids

    def _context(self, req: AssemblyRequest, native: list[dict[str, Any]], input_ids: tuple[str, ...],
                 token: CancellationToken, leases: InputLeases | None = None) -> Any:
        """The frozen request context handed to every resolver.

        The assets are detached from the caller through JSON (which also checks they are JSON
        data) and shared between requests while unchanged (:func:`freeze_assets`); everything is
        frozen lazily, so a source pays only for what it reads.
        """
        try:
            assets = freeze_assets(req.assets)
        except (TypeError, ValueError) as exc:
            raise bad_request(f"assets must be JSON data ({exc})", "$.assets") from None
        except RecursionError:
            raise bad_request("assets are nested too deeply", "$.assets") from None
        context: dict[str, Any] = {
            "session_id": req.session_id,
            "turn": None if req.preview else req.turn,
            "step": None if req.preview else req.step,
            "preview": req.preview,
            "preset": req.preset.to_dict(),
            "assets": assets,
            "native_messages": native,
            "input_ids": list(input_ids),
            "token": token,
        }
        if leases is not None:  # host objects, only when the caller holds leases on its inputs
            context["input_leases"] = leases
        return FrozenMap(context)

    def assemble(self, request: AssemblyRequest | Mapping[str, Any], token: CancellationToken | None = None, *,
                 leases: InputLeases | None = None) -> AssemblyResult:
        """Assemble one request synchronously (asynchronous sources need :meth:`assemble_async`).

        The cyclic garbage collector is paused meanwhile (``bulk_allocation``): an assembly builds
        thousands of small acyclic dicts and tuples, and each allocation burst would otherwise walk
        every live object again (a tenth of the time with a large preset cached).

        ``leases``: the leases on stored inputs (see the module docstring)."""
        token = token or CancellationToken()
        with bulk_allocation():
            req, jobs, native, diags, input_ids = self._prepare(request)
            entries = resolve_jobs(jobs, self._context(req, native, input_ids, token, leases), token, req.preset)
            if leases is not None:
                leases.check("after every source resolved")
            return self._finish(req, entries, native, input_ids, diags, token, leases)

    async def assemble_async(
        self, request: AssemblyRequest | Mapping[str, Any], token: CancellationToken | None = None, *,
        leases: InputLeases | None = None,
    ) -> AssemblyResult:
        """Assemble one request, awaiting asynchronous resolvers in job order (``leases`` as in :meth:`assemble`)."""
        token = token or CancellationToken()
        req, jobs, native, diags, input_ids = self._prepare(request)
        entries = await resolve_jobs_async(jobs, self._context(req, native, input_ids, token, leases), token,
                                           req.preset)
        if leases is not None:
            leases.check("after every source resolved")
        return self._finish(req, entries, native, input_ids, diags, token, leases)

    def _finish(
        self,
        req: AssemblyRequest,
        entries: list[ResolvedEntry],
        native: list[dict[str, Any]],
        input_ids: tuple[str, ...],
        diags: list[Diagnostic],
        token: CancellationToken,
        leases: InputLeases | None = None,
    ) -> AssemblyResult:
        loaded_revision: int | None = None
        prior = req.snapshots
        if prior is None and self.store is not None and req.session_id is not None:
            stored = self.store.load(req.session_id)
            prior, loaded_revision = list(stored.records), stored.revision
        prior_records = validate_records(prior)
        state = RenderState(macro_context=_macro_context(req, native))
        given = state.macro_context.get("variables")
        if isinstance(given, Mapping):
            # the variables the request starts from (SillyTavern's chat and global variables): the renders read
            # and change them from there
            if isinstance(given.get("local"), Mapping):
                state.local_variables = dict(given["local"])
            if isinstance(given.get("global"), Mapping):
                state.global_variables = dict(given["global"])
        renders: list[dict[str, Any]] = []

        def render_call(key: str, text: str, renderer: Any) -> RenderOutput:
            token.raise_if_cancelled()
            out = renderer.render(text, state)
            entry = {
                "key": key,
                "input_hash": out.input_hash or content_hash(text),
                "text": out.text,
                "draws": out.draws,
                "diagnostics": [diagnostic_dict(d) for d in out.diagnostics] if out.diagnostics else [],
            }
            if out.segments:
                entry["segments"] = out.segments  # (start, end, info) triples: JSON arrays when written
            renders.append(entry)
            return out

        result, _ = compose(
            req.preset,
            entries,
            native,
            input_ids,
            preview=req.preview,
            system_prompt_update=req.system_prompt_update,
            max_profile_bytes=req.max_profile_bytes,
            max_projection_bytes=req.max_projection_bytes,
            early_diagnostics=diags,
            render_call=render_call,
            render_notices=lambda: list(state.notices),
            snapshots=prior_records,
        )
        result.draws = [{"key": r["key"], "draws": r["draws"]} for r in renders if r["draws"]]
        result.variables = {"local": state.local_variables, "global": state.global_variables}
        # the record is built when read; what it describes is taken now (the messages as assembled:
        # the dicts belong to the caller once returned)
        sent, notices, early = assembled_messages(result.messages), list(state.notices), list(diags)
        result.record_builder = lambda: build_record(
            req, entries, native, input_ids, early, renders, notices, sent, snapshots=prior_records
        )
        if leases is not None:  # the commit point: nothing is saved or returned on a stale input
            leases.check("before the result was committed", fresh=True)
        if self.store is not None and req.session_id is not None and not req.preview:
            self.store.save(req.session_id, result.snapshots, expected_revision=loaded_revision)
        return result
