"""Chat-completion preset checks: identifiers, prompt order, injection depth, markers, overrides.

Read from the raw JSON (so every finding names the field as written: ``$.prompts[3].identifier``),
with SillyTavern's prompt-collection rules as ``strategies.sillytavern`` implements them: the order
of character 100001, else SillyTavern's default order; a repeated identifier resolves to its first
prompt; default prompts a preset lacks are added (so an order naming one is not dangling); legacy
presets keep their prompts in top-level fields.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..assets.paths import join_path
from ..assets.presets import GLOBAL_CHARACTER_ID, LEGACY_PROMPT_FIELDS
from .codes import LINT_CODES
from .model import Finding

__all__ = ["PresetFacts", "lint_preset", "preset_prompt_paths"]


@dataclass
class PresetFacts:
    """What the cross-file checks need from a preset: its enabled main/jailbreak prompts."""

    file: str
    overridable: dict[str, str] = field(default_factory=dict)  # identifier -> JSON path of its content


def _active_order(raw: Mapping[str, Any]) -> tuple[int | None, list[tuple[str, bool]]]:
    """``(index in prompt_order or None, [(identifier, enabled)])`` of the order SillyTavern uses:
    character 100001's, else its default order."""
    from ..strategies.sillytavern import DEFAULT_PROMPT_ORDER

    orders = raw.get("prompt_order")
    if isinstance(orders, list):
        for j, o in enumerate(orders):
            if isinstance(o, Mapping) and str(o.get("character_id")) == str(GLOBAL_CHARACTER_ID):
                items = o.get("order") if isinstance(o.get("order"), list) else []
                return j, [(str(i.get("identifier", "")), i.get("enabled", True) is not False)
                           for i in items if isinstance(i, Mapping)]
    return None, list(DEFAULT_PROMPT_ORDER)


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


def lint_preset(raw: Mapping[str, Any], file: str) -> tuple[list[Finding], PresetFacts]:
    """The structural findings of one preset, and its facts for the cross-file checks."""
    # SillyTavern's prompt-collection rules live with the strategy that places prompts; imported
    # here, when a preset is linted, because that module brings the assembler with it
    from ..strategies.sillytavern import DEFAULT_PROMPTS, MAX_INJECTION_DEPTH

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
            emit("PRESET_DUPLICATE_IDENTIFIER", f"prompt identifier {identifier!r} is already used by "
                 f"prompts[{seen[identifier]}], which SillyTavern uses instead of this one",
                 join_path("$.prompts", i, "identifier"), "give each prompt its own identifier")
        else:
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
                if identifier not in known and identifier not in DEFAULT_PROMPTS:
                    emit("PRESET_ORDER_UNKNOWN_PROMPT", f"prompt_order names {identifier!r}, which the preset does not "
                         "have; SillyTavern drops it", join_path("$.prompt_order", j, "order", k, "identifier"),
                         "remove the entry, or add the prompt")
                elif item.get("enabled", True) is not False:
                    enabled_anywhere.add(identifier)
    j, active = _active_order(raw)
    enabled = {identifier for identifier, on in active if on}
    if j is None:
        enabled_anywhere |= enabled  # no order of its own for 100001: SillyTavern's default order applies
    for i, p in enumerate(prompts):
        if not isinstance(p, Mapping):
            continue
        identifier = str(p.get("identifier", ""))
        if identifier not in enabled_anywhere and (p.get("content") or p.get("marker")):
            emit("PRESET_PROMPT_UNUSED", f"prompt {identifier!r} ({str(p.get('name', ''))[:40]!r}) is enabled in no "
                 "prompt order; it is never sent", join_path("$.prompts", i), "enable it in the prompt manager, or "
                 "delete it")
    if "chatHistory" not in enabled:
        emit("PRESET_MARKER_MISSING", "the prompt order SillyTavern uses (character 100001) does not enable the "
             "chatHistory marker; the chat history is not sent", join_path("$.prompt_order", j, "order"),
             "enable Chat History in the order")
    for identifier in ("main", "jailbreak"):
        index = seen.get(identifier)  # a repeated identifier resolves to its first prompt
        if index is None or identifier not in enabled:
            continue
        prompt = prompts[index]
        if prompt.get("forbid_overrides") is True or not str(prompt.get("content") or "").strip():
            continue
        facts.overridable[identifier] = join_path("$.prompts", index, "content")
    return out, facts
