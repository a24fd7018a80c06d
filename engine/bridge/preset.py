"""The preset source: ``getpreset(name)`` reads a chat-completion preset prompt's raw content."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..errors import TemplateError
from .leases import Resolution, Revocable
from .revision import revision_of

__all__ = ["PresetSource"]


class PresetSource:
    """The current preset: prompts matched by identifier first, then by name ("" when none)."""

    adapter_id = "tavern.presets"

    def __init__(self, preset: Any, *, name: str | None = None) -> None:
        if hasattr(preset, "resolved_prompts"):
            prompts = [(p.identifier, p.name, p.content) for p in preset.resolved_prompts()]
            name = name or preset.name
        elif isinstance(preset, Mapping):
            from ..assets import parse_preset

            model = parse_preset(dict(preset), name=name)
            prompts = [(p.identifier, p.name, p.content) for p in model.resolved_prompts()]
        else:
            raise TemplateError("the preset is neither a Preset nor a preset object", code="INPUT_INVALID")
        self.id = f"preset:{name or 'current'}"
        self._prompts = prompts
        self.lease = Revocable()

    def prompt(self, name: str | int | float) -> Resolution:
        key = str(name)
        content = next((c for ident, _, c in self._prompts if ident == key), None)
        if content is None:
            content = next((c for _, title, c in self._prompts if title == key), "")
        return Resolution(self.id, self.adapter_id, content, revision_of(content), None, self.lease.check_current)
