"""The standard dependency resolver: one request's variables, world books, preset and character.

``TemplateSources`` routes each lookup kind to its source, asks ``Management`` whether the
consumer template may use that resource (``TEMPLATE_DEPENDENCY_DENIED`` otherwise) and returns a
resolution whose lease is current only while the source's lease *and* every permission are.
A missing source answers like an empty one (no variables, no books, an empty preset/character),
which is what a template sees in SillyTavern when nothing is loaded.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from .character import CharacterSource
from .leases import Resolution, Revocable
from .management import Management, combine
from .mvu import MvuSource
from .preset import PresetSource
from .resolver import LookupRequest
from .revision import revision_of
from .worldbook import WorldBookSource

__all__ = ["StaticVariables", "TemplateSources"]


class StaticVariables:
    """A resource's static ``variables`` (a JSON snapshot fixed when the resource was configured)."""

    adapter_id = "tavern.prompt-templates"

    def __init__(self, variables: Any, *, resource_id: str = "variables:static") -> None:
        self.id = resource_id
        self._data = json.loads(json.dumps(variables, ensure_ascii=False, allow_nan=False))
        self.lease = Revocable()
        self.reads = 0

    def resolve_variables(self) -> Resolution:
        self.reads += 1
        return Resolution(self.id, self.adapter_id, self._data, revision_of(self._data), None,
                          self.lease.check_current)


class TemplateSources:
    """A ``DependencyResolver`` over the sources selected for one request.

    ``consumer`` is the template reading (``{"adapterId", "id"}``): context for usage handlers,
    never a permission of its own.
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
    ) -> None:
        self.variables = variables
        self.world_books = world_books
        self.preset = preset
        self.character = character
        self.management = management if management is not None else Management()
        self.consumer = dict(consumer or {"adapterId": "tavern.prompt-templates", "id": "prompt-template:inline"})
        self.scope = dict(scope or {})

    def for_consumer(self, consumer: Mapping[str, Any], scope: Mapping[str, Any] | None = None) -> TemplateSources:
        """The same sources read on behalf of another template."""
        return TemplateSources(variables=self.variables, world_books=self.world_books, preset=self.preset,
                               character=self.character, management=self.management, consumer=consumer,
                               scope=scope if scope is not None else self.scope)

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
                from ..errors import TemplateError

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
        checks = self.management.authorize_dependency(resource, self.consumer, self.scope)
        source_check = resolution.check_current
        return replace(resolution, check_current=combine([source_check, *checks]) if source_check else None)
