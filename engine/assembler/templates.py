"""The prompt-template source ``pmp-dsh-tavern/prompt-template``: the bridge's resources, rendered in the sandbox.

The engine is embedded here as a template source (research ``dsh-assembler.md`` 10.4): each
enabled prompt-template resource of the request that is bound to its session is expanded by
:func:`tavernbox.bridge.expand_prompt_template` (restricted EJS in a fresh QuickJS VM, every read
through the bridge and leased) and becomes one text block. The expansion is final text: it is
not run through the macro engine again (the source has no renderer), and its original stays in
the resource (``source.field`` is ``content``).

Inputs, all in ``assets``:

- ``prompt_templates``: a list of resources ``{id, name, content, enabled, session_ids, variables |
  variable_resource_id}`` (:class:`tavernbox.bridge.PromptTemplateResource`); a malformed one
  fails the request with ``TEMPLATE_RESOURCE_INVALID`` and its JSON path.
- ``mvu`` (``{name, stat_data}``): answers ``variable_resource_id: "mvu:<name>"``.
- ``st_preset`` and ``character``: what ``getpreset``/``getchar`` read.
- ``world_books`` (SillyTavern books, each with a ``name``): what ``getwi`` reads, limited to the
  entries activated this request (``world_info`` entries carrying ``book`` and ``uid``).

Without a session (``session_id`` null, e.g. a preview without one) the source gives no blocks
and one ``TEMPLATE_SESSION_REQUIRED`` diagnostic. Each block is reported with
``TAVERN_MEMORY_RESOURCE_VERSION`` (the resource revision) and one
``TAVERN_MEMORY_DEPENDENCY_VERSION`` per dependency read. Every lease a template took is checked
again after all templates of the source ran, so a dependency that changed meanwhile fails the
request (``SOURCE_POLICY_CHANGED``) instead of sending a stale prompt; the leases are also handed
to the assembler (output key ``leases``), which checks them once more after *every* source of the
request resolved, so a later source that changes the MVU state or revokes a permission fails the
whole assembly (research 10.4 step 6, fact 49). The source is never added implicitly: a rule of
kind ``pmp-dsh-tavern/prompt-template`` asks for it, request lifetime only.

The built-in registration reads everything from the request's (frozen, detached) assets. A host
whose MVU state or usage policy lives outside the request (a store, a manager) registers
:func:`prompt_template_source` instead, binding its live :class:`~tavernbox.bridge.MvuSource`
objects and :class:`~tavernbox.bridge.Management`; then a change made while the request is being
assembled is exactly what the leases catch.

Inputs read from a store (the service's library refs) carry leases in the request context
(``input_leases``, a :class:`~tavernbox.bridge.InputLeases` keyed by JSON path): a template read
from ``assets.prompt_templates[i]`` holds the leases of that entry from the start, and a lookup
holds those of the asset it answers from (``getpreset``: ``assets.st_preset``; ``getchar``:
``assets.character``; ``getwi``: that book of ``assets.world_books``; ``getvar`` over MVU:
``assets.mvu``). The bridge then re-checks the library revisions at each of its check points.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from ..errors import TemplateError
from .identity import content_hash
from .registry import thaw

if TYPE_CHECKING:  # pragma: no cover
    from ..bridge import InputLeases, Management, MvuSource
    from .registry import SourceDescriptor

Resolver = Callable[[Mapping[str, Any], Mapping[str, Any]], dict[str, Any]]

__all__ = ["TEMPLATE_SOURCE_ID", "prompt_template_resolver", "prompt_template_source", "resolve_prompt_templates"]

#: the plugin id of the tavern built-ins (this source and those of :mod:`.sources`)
TAVERN_PLUGIN = "pmp-dsh-tavern"
TEMPLATE_SOURCE_ID = f"{TAVERN_PLUGIN}/prompt-template"
_PATH = "$.assets.prompt_templates"


def _resources(raw: Any) -> list[Any]:
    """The validated resources (paths point into ``assets.prompt_templates``)."""
    from ..bridge import PromptTemplateResource

    if not isinstance(raw, (list, tuple)):
        raise TemplateError("assets.prompt_templates must be a list of prompt-template resources",
                            code="TEMPLATE_RESOURCE_INVALID", path=_PATH)
    out = []
    ids: set[str] = set()
    for i, item in enumerate(raw):
        try:
            resource = PromptTemplateResource.from_dict(thaw(item))
        except TemplateError as exc:
            sub = (exc.path or "$")[1:]
            raise TemplateError(f"prompt template {i}: {exc.message}", code=exc.code,
                                path=f"{_PATH}[{i}]{sub}") from None
        if resource.id in ids:
            raise TemplateError(f"prompt template id {resource.id!r} appears twice", code="TEMPLATE_RESOURCE_INVALID",
                                path=f"{_PATH}[{i}].id")
        ids.add(resource.id)
        out.append(resource)
    return out


def _stored_leases(leases: InputLeases | None, assets: Mapping[str, Any]) -> dict[str, list[Any]]:
    """The lookups' stored-asset leases: ``preset``, ``character``, ``variables``, ``world-book:<name>``."""
    if not leases:
        return {}
    out = {key: [check for _, check in leases.covering(f"$.assets.{field}")]
           for key, field in (("preset", "st_preset"), ("character", "character"), ("variables", "mvu"))}
    books = assets.get("world_books")
    if isinstance(books, (list, tuple)):
        for i, book in enumerate(books):
            name = book.get("name") if isinstance(book, Mapping) else None
            if isinstance(name, str) and name:
                out.setdefault(f"world-book:{name}", []).extend(
                    check for _, check in leases.covering(f"$.assets.world_books[{i}]"))
    return {key: checks for key, checks in out.items() if checks}


def _bridge_inputs(assets: Mapping[str, Any], live_mvu: Mapping[str, MvuSource] | None = None,
                   management: Management | None = None,
                   leases: InputLeases | None = None) -> tuple[Any, dict[str, Any]]:
    """The bridge's sources for this request and the MVU resources by id (``live_mvu`` wins over assets)."""
    from ..bridge import MvuSource, sources_from_inputs

    mvu: dict[str, Any] = {}
    raw_mvu = assets.get("mvu")
    if isinstance(raw_mvu, Mapping) and isinstance(raw_mvu.get("stat_data"), Mapping):
        resource_id = f"mvu:{raw_mvu.get('name') or 'mvu'}"
        mvu[resource_id] = MvuSource({"stat_data": thaw(raw_mvu["stat_data"])}, resource_id=resource_id)
    books = assets.get("world_books")
    activated: dict[str, list[Any]] = {}
    for entry in assets.get("world_info") or ():
        if isinstance(entry, Mapping) and isinstance(entry.get("book"), str) and entry.get("uid") is not None:
            activated.setdefault(entry["book"], []).append(entry["uid"])
    preset = assets.get("st_preset")
    card = assets.get("character")
    sources = sources_from_inputs(
        world_books=thaw(books) if books is not None else None,
        activated=activated if books is not None else None,
        preset=thaw(preset) if isinstance(preset, Mapping) else None,
        card=thaw(card) if isinstance(card, Mapping) and card else None,
        management=management,
    )
    sources.input_leases = _stored_leases(leases, assets)
    if live_mvu:
        mvu.update(live_mvu)
    return sources, mvu


def resolve_prompt_templates(context: Mapping[str, Any], rule: Mapping[str, Any]) -> dict[str, Any]:
    """The source's resolver: one text block per template that ran (see the module docstring)."""
    return _resolve(context, None, None)


def prompt_template_resolver(*, mvu: Mapping[str, MvuSource] | None = None,
                             management: Management | None = None) -> Resolver:
    """A resolver for this source bound to host state: live MVU resources by id and a policy.

    ``mvu`` maps ``"mvu:<name>"`` to :class:`~tavernbox.bridge.MvuSource` (these win over
    ``assets.mvu`` with the same id); ``management`` is the :class:`~tavernbox.bridge.Management`
    deciding template and dependency usage (default: every resource native).
    """
    from ..bridge import Management, MvuSource

    live = dict(mvu or {})
    for key, value in live.items():
        if not isinstance(value, MvuSource) or value.id != key:
            raise TemplateError(f"mvu[{key!r}] must be the MvuSource with id {key!r}", code="INPUT_INVALID")
    if management is not None and not isinstance(management, Management):
        raise TemplateError("management must be a tavernbox.bridge.Management", code="INPUT_INVALID")

    def resolve(context: Mapping[str, Any], rule: Mapping[str, Any]) -> dict[str, Any]:
        return _resolve(context, live, management)

    return resolve


def prompt_template_source(*, mvu: Mapping[str, MvuSource] | None = None,
                           management: Management | None = None) -> SourceDescriptor:
    """The ``pmp-dsh-tavern/prompt-template`` descriptor with host state bound (see :func:`prompt_template_resolver`).

    It has the built-in one's id, so register it in place of that one: build the registry from
    :data:`tavernbox.assembler.sources.BUILTINS` leaving out ``TEMPLATE_SOURCE_ID``, then register this.
    """
    from .registry import SourceDescriptor

    return SourceDescriptor(TEMPLATE_SOURCE_ID, TAVERN_PLUGIN, "Prompt templates",
                            resolve=prompt_template_resolver(mvu=mvu, management=management),
                            stability="evaluation", lifetimes=("request",))


def _resolve(context: Mapping[str, Any], live_mvu: Mapping[str, MvuSource] | None,
             management: Management | None) -> dict[str, Any]:
    assets = context["assets"]
    raw = assets.get("prompt_templates")
    if raw is None:
        return {"blocks": []}
    resources = _resources(raw)
    session = context["session_id"]
    if session is None:
        return {"blocks": [], "diagnostics": [{
            "code": "TEMPLATE_SESSION_REQUIRED", "severity": "info",
            "message": "prompt templates run only for a session; this request has none, so they give no output"}]}
    from ..bridge import LeaseSet, expand_prompt_template

    leases: InputLeases | None = context.get("input_leases")
    sources, mvu = _bridge_inputs(assets, live_mvu, management, leases)
    blocks: list[dict[str, Any]] = []
    diagnostics: list[dict[str, Any]] = []
    expansions = []
    for index, resource in enumerate(resources):
        own = None
        if leases:  # the template's definition read from a store: its leases are held from the start
            own = LeaseSet()
            for label, check in leases.covering(f"{_PATH}[{index}]"):
                own.add(f"template {resource.id} ({label})", check)
        expansion = expand_prompt_template(resource, session_id=session, sources=sources, mvu=mvu, leases=own)
        for d in expansion.diagnostics:
            diagnostics.append({"code": d.code, "message": d.message, "severity": d.severity,
                                "data": {"resource_id": resource.id}})
        if expansion.text is None:
            continue
        expansions.append(expansion)
        revision = resource.revision
        blocks.append({
            "type": "text",
            "id": "template-" + content_hash((resource.id, revision))[7:23],
            "text": expansion.text,
            "name": resource.name,
            "source": {"resource_id": resource.id, "field": "content"},
        })
        diagnostics.append({"code": "TAVERN_MEMORY_RESOURCE_VERSION", "severity": "info",
                            "message": f"prompt template {resource.id} at revision {revision}",
                            "data": {"resource_id": resource.id, "revision": revision}})
        for read in expansion.reads:
            diagnostics.append({"code": "TAVERN_MEMORY_DEPENDENCY_VERSION", "severity": "info",
                                "message": f"prompt template {resource.id} read {read.kind} {read.key!r} from "
                                           f"{read.id} at revision {read.revision}",
                                "data": {"resource_id": resource.id, **read.to_dict()}})
    for expansion in expansions:  # a dependency changed while later templates ran: fail, never send it stale
        expansion.check_leases("after the prompt-template source resolved")
    # ... and once more after every source of the request resolved (the registry runs these)
    return {"blocks": blocks, "diagnostics": diagnostics, "leases": expansions}
