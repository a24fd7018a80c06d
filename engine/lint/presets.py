"""Chat-completion preset checks: identifiers, prompt order, injection depth, markers, overrides.

Read from the raw JSON (so every finding names the field as written: ``$.prompts[3].identifier``)
with the importer's model (``assets.presets.Preset``) for the semantics SillyTavern applies: which
prompt order is active (character 100001, else 100000, else the first) and legacy presets whose
prompts live in top-level fields.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..assets.paths import join_path
from ..assets.presets import GLOBAL_CHARACTER_ID, LEGACY_CHARACTER_ID, LEGACY_PROMPT_FIELDS, Preset
from .codes import LINT_CODES
from .model import Finding

__all__ = ["PresetFacts", "lint_preset", "preset_prompt_paths"]

#: SillyTavern's bound for in-chat injection depths (outside it a prompt is never injected)
MAX_INJECTION_DEPTH = 10_000


@dataclass
class PresetFacts:
    """What the cross-file checks need from a preset: its enabled main/jailbreak prompts."""

    file: str
    overridable: dict[str, str] = field(default_factory=dict)  # identifier -> JSON path of its content


def _active_order(raw: Mapping[str, Any]) -> tuple[int, list[Any]] | None:
    orders = raw.get("prompt_order")
    if not isinstance(orders, list) or not orders:
        return None
    indexed = [(j, o) for j, o in enumerate(orders) if isinstance(o, Mapping)]
    for wanted in (GLOBAL_CHARACTER_ID, LEGACY_CHARACTER_ID):
        for j, o in indexed:
            if str(o.get("character_id")) == str(wanted):
                return j, o.get("order") if isinstance(o.get("order"), list) else []
    if indexed:
        j, o = indexed[0]
        return j, o.get("order") if isinstance(o.get("order"), list) else []
    return None


def preset_prompt_paths(raw: Mapping[str, Any]) -> list[tuple[str, str, str]]:
    """``(identifier, name, JSON path of the content)`` of every prompt with text."""
    out: list[tuple[str, str, str]] = []
    prompts = raw.get("prompts")
    if isinstance(prompts, list):
        for i, p in enumerate(prompts):
            if isinstance(p, Mapping) and isinstance(p.get("content"), str) and p.get("content"):
                out.append((str(p.get("identifier", "")), str(p.get("name", "")), join_path("$.prompts", i, "content")))
    else:
        for fld, (identifier, title) in LEGACY_PROMPT_FIELDS.items():
            if isinstance(raw.get(fld), str) and raw.get(fld):
                out.append((identifier, title, join_path("$", fld)))
    return out


def lint_preset(raw: Mapping[str, Any], model: Preset, file: str) -> tuple[list[Finding], PresetFacts]:
    """The structural findings of one preset, and its facts for the cross-file checks."""
    out: list[Finding] = []
    facts = PresetFacts(file)

    def emit(code: str, message: str, path: str, suggestion: str | None = None) -> None:
        out.append(Finding(code, LINT_CODES[code].severity, file, message, path, suggestion=suggestion))

    prompts = raw.get("prompts")
    if not isinstance(prompts, list):
        return out, facts  # a legacy preset: its prompts are fields, with nothing to order
    seen: dict[str, int] = {}
    known: set[str] = set()
    for i, p in enumerate(prompts):
        if not isinstance(p, Mapping):
            continue
        identifier = str(p.get("identifier", ""))
        known.add(identifier)
        if identifier in seen:
            emit("PRESET_DUPLICATE_IDENTIFIER", f"prompt identifier {identifier!r} is also used by prompts[{seen[identifier]}];"
                 " only the last one is used", join_path("$.prompts", i, "identifier"), "give each prompt its own identifier")
        seen[identifier] = i
        position = p.get("injection_position")
        depth = p.get("injection_depth")
        if position == 1 and isinstance(depth, (int, float)) and not isinstance(depth, bool) \
                and not 0 <= depth <= MAX_INJECTION_DEPTH:
            emit("PRESET_INJECTION_DEPTH", f"prompt {identifier!r} is injected in-chat at depth {depth}, outside "
                 f"0..{MAX_INJECTION_DEPTH}; SillyTavern never injects it", join_path("$.prompts", i, "injection_depth"),
                 "use a depth the chat can have, e.g. 0-100")
    enabled_anywhere: set[str] = set()
    orders = raw.get("prompt_order")
    if isinstance(orders, list):
        for j, o in enumerate(orders):
            items = o.get("order") if isinstance(o, Mapping) else None
            if not isinstance(items, list):
                continue
            for k, item in enumerate(items):
                if not isinstance(item, Mapping):
                    continue
                identifier = str(item.get("identifier", ""))
                if identifier not in known:
                    emit("PRESET_ORDER_UNKNOWN_PROMPT", f"prompt_order names {identifier!r}, which the preset does not "
                         "have; SillyTavern skips it", join_path("$.prompt_order", j, "order", k, "identifier"),
                         "remove the entry, or add the prompt")
                elif item.get("enabled", True) is not False:
                    enabled_anywhere.add(identifier)
    active = _active_order(raw)
    if active is not None:
        for i, p in enumerate(prompts):
            if not isinstance(p, Mapping):
                continue
            identifier = str(p.get("identifier", ""))
            if identifier not in enabled_anywhere and (p.get("content") or p.get("marker")):
                emit("PRESET_PROMPT_UNUSED", f"prompt {identifier!r} ({str(p.get('name', ''))[:40]!r}) is enabled in no "
                     "prompt order; it is never sent", join_path("$.prompts", i), "enable it in the prompt manager, or "
                     "delete it")
        j, items = active
        enabled = {str(it.get("identifier")) for it in items if isinstance(it, Mapping) and it.get("enabled", True) is not False}
        if "chatHistory" not in enabled:
            emit("PRESET_MARKER_MISSING", "the active prompt order does not enable the chatHistory marker; the chat "
                 "history is not sent", join_path("$.prompt_order", j, "order"), "enable Chat History in the order")
        for identifier in ("main", "jailbreak"):
            prompt = model.prompt(identifier)
            if prompt is None or identifier not in enabled or prompt.forbid_overrides or not prompt.content.strip():
                continue
            index = max(i for i, p in enumerate(prompts) if isinstance(p, Mapping) and p.get("identifier") == identifier)
            facts.overridable[identifier] = join_path("$.prompts", index, "content")
    return out, facts
