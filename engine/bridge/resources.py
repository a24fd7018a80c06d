"""Prompt-template resources: validated configuration, session binding, expansion with the bridge.

A resource is ``{id, name, content, enabled, session_ids, variables | variable_resource_id}``
(seed 003). Its ``content`` is the author's original and is never overwritten: an expansion
carries the rendered text *and* the original. A template runs only for a session it is bound to
(``"*"`` = all); without a session there is no output and a ``TEMPLATE_SESSION_REQUIRED``
diagnostic. A resource whose metadata asks for an unsupported lifecycle cannot be enabled
(``UNSUPPORTED_EVENT``), and copies always start disabled.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from ..errors import Diagnostic, TemplateError
from .leases import LeaseSet
from .management import Management, TemplateSkipped, combine
from .metadata import inspect_template_metadata
from .mvu import MvuSource, expand_mvu_macros
from .replay import DependencyRead, render_with_dependencies
from .revision import revision_of
from .sources import StaticVariables, TemplateSources

if TYPE_CHECKING:  # pragma: no cover
    from ..sandbox import CancelToken, Limits, Usage

__all__ = ["PromptTemplateResource", "TemplateExpansion", "expand_prompt_template"]

ADAPTER_ID = "tavern.prompt-templates"
ID_PATTERN = re.compile(r"prompt-template:[A-Za-z0-9_.-]{1,100}")
MAX_NAME = 200
MAX_CONTENT = 131072
_FIELDS = {"id", "name", "content", "enabled", "session_ids", "sessionIds", "variables", "variable_resource_id",
           "variableResourceId"}


def _invalid(message: str, path: str) -> TemplateError:
    return TemplateError(message, code="TEMPLATE_RESOURCE_INVALID", path=path)


@dataclass(frozen=True)
class PromptTemplateResource:
    """One validated prompt-template resource (build it with :meth:`from_dict` or the constructor)."""

    id: str
    name: str
    content: str
    enabled: bool = False
    session_ids: tuple[str, ...] = ()
    variables: Any = None
    variable_resource_id: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.id, str) or ID_PATTERN.fullmatch(self.id) is None:
            raise _invalid("id must be 'prompt-template:' and 1-100 letters, digits, '_', '.' or '-'", "$.id")
        if not isinstance(self.name, str) or not self.name.strip() or len(self.name) > MAX_NAME:
            raise _invalid(f"name must be a non-empty string of at most {MAX_NAME} characters", "$.name")
        if not isinstance(self.content, str) or len(self.content) > MAX_CONTENT:
            raise _invalid(f"content must be a string of at most {MAX_CONTENT} characters", "$.content")
        if not isinstance(self.enabled, bool):
            raise _invalid("enabled must be true or false", "$.enabled")
        if not isinstance(self.session_ids, tuple) or not all(isinstance(s, str) and s for s in self.session_ids):
            raise _invalid("session_ids must be a list of non-empty strings ('*' for all sessions)", "$.session_ids")
        if self.variables is not None and self.variable_resource_id is not None:
            raise _invalid("give either variables or variable_resource_id, not both", "$.variable_resource_id")
        if self.variable_resource_id is not None and (
                not isinstance(self.variable_resource_id, str) or re.fullmatch(r"mvu:[^\s]{1,200}",
                                                                               self.variable_resource_id) is None):
            raise _invalid("variable_resource_id must be 'mvu:<id>'", "$.variable_resource_id")
        if self.enabled:
            meta = inspect_template_metadata(self.name, self.content)
            if not meta.supported:
                first = next(d for d in meta.diagnostics if d.severity == "error")
                raise TemplateError(f"{self.id} cannot be enabled: {first.message}", code="UNSUPPORTED_EVENT",
                                    path="$.enabled")

    @classmethod
    def from_dict(cls, raw: Any) -> PromptTemplateResource:
        """Validate a configuration object (snake_case or the seed's camelCase field names)."""
        if not isinstance(raw, Mapping):
            raise _invalid("a prompt-template resource must be an object", "$")
        unknown = sorted(set(raw) - _FIELDS)
        if unknown:
            raise _invalid(f"unknown field {unknown[0]!r}", f"$.{unknown[0]}")
        sessions = raw.get("session_ids", raw.get("sessionIds", []))
        if not isinstance(sessions, list):
            raise _invalid("session_ids must be a list", "$.session_ids")
        return cls(id=raw.get("id"), name=raw.get("name"), content=raw.get("content"),
                   enabled=raw.get("enabled", False), session_ids=tuple(sessions),
                   variables=raw.get("variables"),
                   variable_resource_id=raw.get("variable_resource_id", raw.get("variableResourceId")))

    @property
    def revision(self) -> str:
        return revision_of([self.name, self.content, self.variables, self.variable_resource_id])

    def copy(self, new_id: str, name: str | None = None) -> PromptTemplateResource:
        """A copy under a new id; copies start disabled (enabling is a separate, checked decision)."""
        return replace(self, id=new_id, name=name if name is not None else self.name, enabled=False)

    def bound_to(self, session_id: str) -> bool:
        return "*" in self.session_ids or session_id in self.session_ids


@dataclass(frozen=True)
class TemplateExpansion:
    """One template's outcome: the expansion (or ``None``), the untouched original, what it read."""

    resource_id: str
    original: str
    text: str | None
    diagnostics: tuple[Diagnostic, ...] = ()
    reads: tuple[DependencyRead, ...] = ()
    usage: Usage | None = None
    leases: LeaseSet = field(default_factory=LeaseSet, compare=False, repr=False)

    def check_leases(self, when: str = "after the assembly") -> None:
        """Re-check the template decision and every dependency lease (call after all sources resolved)."""
        self.leases.check(when)


class _LazyMvu:
    """Resolves ``mvu:<id>`` through the registry only when the template reads variables."""

    def __init__(self, resource_id: str, registry: Mapping[str, MvuSource]) -> None:
        self.resource_id = resource_id
        self.registry = registry

    def resolve_variables(self) -> Any:
        source = self.registry.get(self.resource_id)
        if source is None:
            raise TemplateError(f"the MVU resource {self.resource_id} is not available to this request",
                                code="TEMPLATE_DEPENDENCY_MISSING")
        return source.resolve_variables()


def expand_prompt_template(
    resource: PromptTemplateResource,
    *,
    session_id: str | None,
    sources: TemplateSources | None = None,
    mvu: Mapping[str, MvuSource] | None = None,
    management: Management | None = None,
    limits: Limits | None = None,
    cancel: CancelToken | None = None,
    leases: LeaseSet | None = None,
) -> TemplateExpansion:
    """Expand one resource for one request (``before_model_request``).

    ``sources`` supplies world books, preset and character; the resource's own variables (static,
    or ``mvu:<id>`` looked up lazily in ``mvu``) replace ``sources.variables``. ``leases`` are
    leases on the resource itself (its definition read from a library): held from the start
    and checked with the dependencies' at every check point. Returns a
    ``TemplateExpansion`` with ``text=None`` when the template does not run (no session, not
    bound, disabled, or skipped by a usage decision); raises ``TemplateError`` when it fails.
    """
    base = TemplateExpansion(resource.id, resource.content, None)
    if session_id is None:
        return replace(base, diagnostics=(Diagnostic(
            "TEMPLATE_SESSION_REQUIRED", f"{resource.id} needs a session to run; no output without one",
            severity="info"),))
    if not resource.enabled or not resource.bound_to(session_id):
        return base
    manager = management if management is not None else (sources.management if sources is not None else Management())
    scope = {"sessionId": session_id}
    held = LeaseSet()
    if leases is not None:
        held.extend(leases)
    try:
        for check in manager.authorize_template(resource.id, scope):
            held.add(f"template {resource.id}", check)
    except TemplateSkipped as skipped:
        return replace(base, diagnostics=(Diagnostic("TEMPLATE_POLICY_SKIPPED", skipped.message, severity="info"),))
    variables: Any
    if resource.variable_resource_id is not None:
        variables = _LazyMvu(resource.variable_resource_id, mvu or {})
    elif resource.variables is not None:
        variables = StaticVariables(resource.variables, resource_id=f"{resource.id}#variables")
    else:
        variables = None
    base_sources = sources if sources is not None else TemplateSources(management=manager)
    resolver = TemplateSources(variables=variables, world_books=base_sources.world_books, preset=base_sources.preset,
                               character=base_sources.character, management=manager,
                               consumer={"adapterId": ADAPTER_ID, "id": resource.id}, scope=scope,
                               input_leases=base_sources.input_leases)
    result = render_with_dependencies(resource.content, resolver, limits=limits, cancel=cancel, leases=held)
    text, reads = result.text, list(result.reads)
    mvu_source = (mvu or {}).get(resource.variable_resource_id or "")
    if mvu_source is not None:
        text, resolution = expand_mvu_macros(text, mvu_source)
        if resolution is not None:
            check = resolution.check_current
            stored = base_sources.input_leases.get("variables", ())
            held.add(f"{resolution.id} (MVU macros)", combine([check, *stored]) if check and stored else check)
            reads.append(DependencyRead("mvu-macro", "format_message_variable", resolution.id, resolution.adapter_id,
                                        resolution.revision))
    held.check("when the template completed")
    return TemplateExpansion(resource.id, resource.content, text, (), tuple(reads), result.usage, held)
