"""The standard dependency resolver: one request's variables, world books, preset and character.

``TemplateSources`` routes each lookup kind to its source, asks ``Management`` whether the
consumer template may use that resource (``TEMPLATE_DEPENDENCY_DENIED`` otherwise) and returns a
resolution whose lease is current only while the source's lease *and* every permission are.
A missing source answers like an empty one (no variables, no books, an empty preset/character),
which is what a template sees in SillyTavern when nothing is loaded.

``input_leases`` binds the leases of stored inputs to the lookups that answer from them: a
preset, card, book or MVU state the host read from its library (``{"ref": ...}``) is held under
an :class:`~tavernbox.bridge.leases.AssetLease`, and every resolution of ``getpreset``,
``getchar``, ``getwi``/the catalog of that book, or ``getvar`` over MVU carries it, so the bridge
re-checks the library revision at each of its check points.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from ..errors import TemplateError
from .character import CharacterSource
from .leases import CheckCurrent, Resolution, Revocable
from .management import Management, combine
from .mvu import MvuSource
from .preset import PresetSource
from .resolver import LookupRequest
from .revision import revision_of
from .worldbook import ActivationRecord, WorldBookSource

__all__ = ["StaticVariables", "TemplateSources", "render_with_sources", "sources_from_inputs"]


class StaticVariables:
    """A resource's static ``variables`` (a JSON snapshot fixed when the resource was configured)."""

    adapter_id = "tavern.prompt-templates"

    def __init__(self, variables: Any, *, resource_id: str = "variables:static") -> None:
        self.id = resource_id
        try:
            self._data = json.loads(json.dumps(variables, ensure_ascii=False, allow_nan=False))
        except RecursionError:
            raise TemplateError("variables are nested too deeply", code="TEMPLATE_INPUT_LIMIT",
                                path="$.variables") from None
        except (TypeError, ValueError) as exc:
            raise TemplateError(f"variables are not JSON data: {exc}", code="INPUT_INVALID", path="$.variables") from None
        self.lease = Revocable()
        self.reads = 0

    def resolve_variables(self) -> Resolution:
        self.reads += 1
        return Resolution(self.id, self.adapter_id, self._data, revision_of(self._data), None,
                          self.lease.check_current)


class TemplateSources:
    """A ``DependencyResolver`` over the sources selected for one request.

    ``consumer`` is the template reading (``{"adapterId", "id"}``): context for usage handlers,
    never a permission of its own. ``input_leases`` maps ``"preset"``, ``"character"``,
    ``"variables"`` and ``"world-book:<name>"`` to the leases of the stored assets those lookups
    read (see the module docstring).
    """

    def __init__(
        self,
        *,
        variables: StaticVariables | MvuSource | None = None,
        world_books: WorldBookSource | None = None,
        preset: PresetSource | None = None,
        character: CharacterSource | None = None,
        management: Management | None = None,
        consumer: Mapping[str, Any] | None = None,
        scope: Mapping[str, Any] | None = None,
        input_leases: Mapping[str, Sequence[CheckCurrent]] | None = None,
    ) -> None:
        self.variables = variables
        self.world_books = world_books
        self.preset = preset
        self.character = character
        self.management = management if management is not None else Management()
        self.consumer = dict(consumer or {"adapterId": "tavern.prompt-templates", "id": "prompt-template:inline"})
        self.scope = dict(scope or {})
        self.input_leases = {key: tuple(checks) for key, checks in (input_leases or {}).items() if checks}

    def _input_checks(self, kind: str, resource: str) -> list[CheckCurrent]:
        """The stored-asset leases a lookup of ``kind`` answered from ``resource`` depends on."""
        if not self.input_leases or kind == "variables" and isinstance(self.variables, StaticVariables):
            return []  # a resource's own static variables are part of the template (leased with it)
        if kind in ("worldbook-catalog", "worldbook-entry"):
            keys = [k for k in self.input_leases if k.startswith("world-book:")] if resource == "world-book:*" \
                else [resource]
        else:
            keys = [{"variables": "variables", "preset-prompt": "preset"}.get(kind, "character")]
        return [check for key in keys for check in self.input_leases.get(key, ())]

    def for_consumer(self, consumer: Mapping[str, Any], scope: Mapping[str, Any] | None = None) -> TemplateSources:
        """The same sources read on behalf of another template."""
        return TemplateSources(variables=self.variables, world_books=self.world_books, preset=self.preset,
                               character=self.character, management=self.management, consumer=consumer,
                               scope=scope if scope is not None else self.scope, input_leases=self.input_leases)

    def resolve(self, request: LookupRequest) -> Resolution:
        kind, args = request.kind, request.args
        if kind == "variables":
            if self.variables is None:
                resolution = Resolution("variables:none", "tavern.prompt-templates", None, revision_of(None), None,
                                        lambda: "current")
            else:
                resolution = self.variables.resolve_variables()
        elif kind == "worldbook-catalog":
            resolution = (self.world_books.catalog(args[0]) if self.world_books is not None else
                          Resolution("world-book:*", WorldBookSource.adapter_id, [], revision_of([]), None,
                                     lambda: "current"))
        elif kind == "worldbook-entry":
            if self.world_books is None:
                raise TemplateError("no world books are selected for this request", code="TEMPLATE_DEPENDENCY_MISSING")
            resolution = self.world_books.entry(args[0], args[1])
        elif kind == "preset-prompt":
            resolution = (self.preset.prompt(args[0]) if self.preset is not None else
                          Resolution("preset:none", PresetSource.adapter_id, "", revision_of(""), None, lambda: "current"))
        else:  # character
            resolution = (self.character.describe(args[0]) if self.character is not None else
                          Resolution("character:none", CharacterSource.adapter_id, "", revision_of(""), None,
                                     lambda: "current"))
        resource = resolution.id.split("#", 1)[0]
        stored = self._input_checks(kind, resource)
        if stored and resolution.check_current is not None:
            resolution = replace(resolution, check_current=combine([resolution.check_current, *stored]))
        if isinstance(self.variables, StaticVariables) and kind == "variables" or resource.endswith(":none"):
            # A resource's own static variables are part of the template, and an absent source
            # holds nothing to protect: neither is a dependency to authorise.
            return resolution
        checks = self.management.authorize_dependency(resource, self.consumer, self.scope)
        source_check = resolution.check_current
        return replace(resolution, check_current=combine([source_check, *checks]) if source_check else None)


def sources_from_inputs(
    *,
    variables: Any = None,
    mvu: Any = None,
    world_books: Any = None,
    activated: Mapping[str, Any] | None = None,
    preset: Any = None,
    card: Any = None,
    management: Management | None = None,
) -> TemplateSources:
    """Build the standard sources from plain inputs (what the CLI and ``--jsonl`` rows give).

    ``mvu``: MVU variables (an object holding ``stat_data``, or a bare initvar tree); with it,
    ``variables``/``getvar`` read the MVU variables and ``variables`` is ignored.
    ``world_books``: SillyTavern world books (each with a ``name``) or ``WorldBook`` models;
    ``activated``: ``{"<book name>": [uid, ...]}``, the entries the scan activated.
    """
    var_source: StaticVariables | MvuSource | None = None
    if mvu is not None:
        var_source = mvu if isinstance(mvu, MvuSource) else MvuSource(mvu, resource_id="mvu:input")
    elif variables is not None:
        var_source = StaticVariables(variables)
    books = None
    if world_books is not None:
        if not isinstance(world_books, (list, tuple)):
            raise TemplateError("world_books must be a list of world books", code="INPUT_INVALID", path="$.world_books")
        if activated is not None and not isinstance(activated, Mapping):
            raise TemplateError('activated must be {"<book name>": [uid, ...]}', code="INPUT_INVALID",
                                path="$.activated")
        record = {}
        for name, uids in (activated or {}).items():
            if not isinstance(uids, (list, tuple)) or not all(isinstance(u, (int, str)) and not isinstance(u, bool)
                                                              for u in uids):
                raise TemplateError(f"activated[{name!r}] must be a list of uids", code="INPUT_INVALID",
                                    path=f"$.activated.{name}")
            record[name] = uids
        books = WorldBookSource(list(world_books), ActivationRecord.from_uids(record))
    return TemplateSources(
        variables=var_source,
        world_books=books,
        preset=None if preset is None else preset if isinstance(preset, PresetSource) else PresetSource(preset),
        character=None if card is None else card if isinstance(card, CharacterSource) else CharacterSource(card),
        management=management,
    )


def render_with_sources(source: str, sources: TemplateSources, *, limits: Any = None, cancel: Any = None,
                        now: Any = None, leases: Any = None) -> Any:
    """Render ``source`` through the bridge, then the MVU macros of its output (if MVU is a source).

    ``{{format_message_variable::…}}``/``{{get_message_variable::…}}`` read the MVU state only
    when the output holds one of them; that read is reported and leased like any other.
    ``leases`` (a :class:`~tavernbox.bridge.LeaseSet`) are held from the start, checked with the
    dependencies' at every check point and once more after the MVU macros (the template's own
    source and inputs read from a library, for instance).
    """
    from dataclasses import replace as _replace

    from .mvu import expand_mvu_macros
    from .replay import DependencyRead, render_with_dependencies

    result = render_with_dependencies(source, sources, limits=limits, cancel=cancel, now=now, leases=leases)
    if isinstance(sources.variables, MvuSource):
        text, resolution = expand_mvu_macros(result.text, sources.variables)
        if resolution is not None:
            check = resolution.check_current
            stored = sources.input_leases.get("variables", ())
            result.leases.add(f"{resolution.id} (MVU macros)", combine([check, *stored]) if check and stored else check)
            read = DependencyRead("mvu-macro", "format_message_variable", resolution.id, resolution.adapter_id,
                                  resolution.revision)
            result = _replace(result, text=text, reads=(*result.reads, read))
            result.leases.check("after the MVU macros")
    return result
