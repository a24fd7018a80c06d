"""SillyTavern chat-completion presets: prompts, per-character prompt order, injection fields.

A preset is mostly sampler settings (kept as unknown fields, untouched) plus the Prompt Manager's
``prompts`` and ``prompt_order``. Real presets bend the format: ``role: ""``, ``character_id`` written as a
string, ``injection_order`` of 10^18 (past JavaScript's exact integers). We read each the way
SillyTavern's code ends up treating it and say so in a diagnostic with the JSON path:

* ``role`` missing, empty or unknown: SillyTavern's role mapping falls back to ``system``;
* ``character_id`` ``"100000"``: SillyTavern compares ids with ``String(a) === String(b)``, so it is 100000;
* integers beyond 2^53-1: kept exactly here, flagged because JavaScript rounds them.

Old presets keep their prompts in top-level fields (``main_prompt``, ``nsfw_prompt``,
``jailbreak_prompt``); :meth:`Preset.resolved_prompts` turns those into prompts the way SillyTavern's
migration does when a preset has no ``prompts`` list.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, PrivateAttr

from ..errors import Diagnostic, TemplateError
from .base import AssetModel, type_name, validate_model
from .decoding import unsafe_number as _unsafe_number
from .paths import join_path
from .frozen import as_plain

__all__ = [
    "Preset",
    "PresetPrompt",
    "PromptOrder",
    "PromptOrderItem",
    "parse_preset",
    "MARKER_IDENTIFIERS",
    "GLOBAL_CHARACTER_ID",
    "LEGACY_PROMPT_FIELDS",
]

Role = Literal["system", "user", "assistant"]
ROLES = ("system", "user", "assistant")

#: The character id SillyTavern's chat-completion Prompt Manager uses for its global order.
GLOBAL_CHARACTER_ID = 100001
#: The older global bucket that ``Default.json`` still carries.
LEGACY_CHARACTER_ID = 100000

MARKER_IDENTIFIERS = frozenset(
    {
        "worldInfoBefore",
        "worldInfoAfter",
        "charDescription",
        "charPersonality",
        "scenario",
        "personaDescription",
        "dialogueExamples",
        "chatHistory",
    }
)

#: Legacy top-level prompt fields and the prompt identifier SillyTavern migrates each into.
LEGACY_PROMPT_FIELDS: dict[str, tuple[str, str]] = {
    "main_prompt": ("main", "Main Prompt"),
    "nsfw_prompt": ("nsfw", "Auxiliary Prompt"),
    "jailbreak_prompt": ("jailbreak", "Post-History Instructions"),
}


class PresetPrompt(AssetModel):
    """One Prompt Manager prompt; absent fields get SillyTavern's defaults."""

    identifier: str
    name: str = ""
    role: Role = "system"
    content: str = ""
    system_prompt: bool = False
    marker: bool = False
    enabled: bool | None = None
    #: 0 relative (placed by ``prompt_order``), 1 in-chat at ``injection_depth``.
    injection_position: int = 0
    injection_depth: int = 4
    injection_order: int | float = 100
    #: Generation types that may use the prompt; empty means all.
    injection_trigger: list[Any] = Field(default_factory=list)
    forbid_overrides: bool = False

    @property
    def in_chat(self) -> bool:
        """True when the prompt is injected into the chat at a depth (ABSOLUTE position)."""
        return self.injection_position == 1


class PromptOrderItem(AssetModel):
    """One slot of a prompt order: which prompt, and whether it is switched on."""

    identifier: str
    enabled: bool = True


class PromptOrder(AssetModel):
    """The order of prompts for one character id (100001 is the global order)."""

    character_id: int | str
    order: list[PromptOrderItem] = Field(default_factory=list)


class Preset(AssetModel):
    """A chat-completion preset. Sampler and extension settings are kept as unknown fields."""

    prompts: list[PresetPrompt] | None = None
    prompt_order: list[PromptOrder] = Field(default_factory=list)
    main_prompt: str | None = None
    nsfw_prompt: str | None = None
    jailbreak_prompt: str | None = None
    impersonation_prompt: str | None = None
    new_chat_prompt: str | None = None
    new_group_chat_prompt: str | None = None
    new_example_chat_prompt: str | None = None
    continue_nudge_prompt: str | None = None
    group_nudge_prompt: str | None = None
    wi_format: str | None = None
    scenario_format: str | None = None
    personality_format: str | None = None
    _name: str | None = PrivateAttr(default=None)

    @property
    def name(self) -> str | None:
        """The preset's name: SillyTavern names presets by file, so this is the file stem given at load."""
        return self._name

    def resolved_prompts(self) -> list[PresetPrompt]:
        """``prompts``, or for a legacy preset the prompts its top-level fields migrate into."""
        if self.prompts is not None:
            return list(self.prompts)
        out: list[PresetPrompt] = []
        for field, (identifier, title) in LEGACY_PROMPT_FIELDS.items():
            text = getattr(self, field)
            if text is not None:
                out.append(PresetPrompt(identifier=identifier, name=title, system_prompt=True, content=text))
        return out

    def prompt(self, identifier: str) -> PresetPrompt | None:
        """The prompt with this identifier (the last one, if a preset repeats an identifier)."""
        found = None
        for p in self.resolved_prompts():
            if p.identifier == identifier:
                found = p
        return found

    def order_for(self, character_id: int = GLOBAL_CHARACTER_ID) -> list[PromptOrderItem]:
        """The prompt order for ``character_id``, compared as strings like SillyTavern; [] when absent."""
        for po in self.prompt_order:
            if str(po.character_id) == str(character_id):
                return list(po.order)
        return []


def _normalise_prompt(raw: dict[str, Any], path: str, diags: list[Diagnostic]) -> dict[str, Any]:
    prompt = dict(raw)
    role = prompt.get("role")
    if "role" in prompt and role not in ROLES:
        shown = '""' if role == "" else repr(role)
        diags.append(
            Diagnostic(
                "ASSET_VALUE_NORMALISED",
                f"role {shown} is not system/user/assistant; read as 'system' as SillyTavern's role mapping does",
                severity="warning",
                path=join_path(path, "role"),
                data={"original": role},
            )
        )
        prompt["role"] = "system"
    pos = prompt.get("injection_position")
    if isinstance(pos, int) and not isinstance(pos, bool) and pos not in (0, 1):
        diags.append(
            Diagnostic(
                "ASSET_VALUE_NORMALISED",
                f"injection_position {pos} is neither 0 (relative) nor 1 (in-chat); SillyTavern places it as relative",
                severity="warning",
                path=join_path(path, "injection_position"),
                data={"original": pos},
            )
        )
        prompt["injection_position"] = 0
    depth = prompt.get("injection_depth")
    if isinstance(depth, int) and not isinstance(depth, bool) and depth < 0 and pos == 1:
        diags.append(
            Diagnostic(
                "ASSET_VALUE_NORMALISED",
                f"injection_depth {depth} is negative; SillyTavern never injects such a prompt",
                severity="warning",
                path=join_path(path, "injection_depth"),
            )
        )
    for field in ("injection_order", "injection_depth", "injection_position"):
        d = _unsafe_number(prompt.get(field), join_path(path, field), field)
        if d is not None:
            diags.append(d)
    for field, default in (("injection_depth", 4), ("injection_order", 100), ("injection_position", 0)):
        if field in prompt and prompt[field] is None:
            prompt[field] = default
            diags.append(
                Diagnostic(
                    "ASSET_VALUE_NORMALISED",
                    f"{field} is null; SillyTavern's default {default} is used",
                    severity="info",
                    path=join_path(path, field),
                )
            )
    return prompt


def _first_of_each(items: list[Any], path: str, diags: list[Diagnostic]) -> list[Any]:
    """A prompt order with each identifier kept at its first entry only, as SillyTavern sends it.

    SillyTavern places a prompt at the first slot its identifier has in the order and reads the
    enabled flag of that first entry (its ``find``); a later entry for the same identifier adds
    nothing to the request. We drop it with an ``ASSET_DUPLICATE_ID`` warning at its JSON path, so
    ``import`` says so and ``assemble`` sends what SillyTavern sends instead of failing.
    """
    seen: dict[str, int] = {}
    out: list[Any] = []
    for j, item in enumerate(items):
        ident = item.get("identifier") if isinstance(item, dict) else None
        if isinstance(ident, str):
            if ident in seen:
                diags.append(
                    Diagnostic(
                        "ASSET_DUPLICATE_ID",
                        f"prompt_order lists {ident!r} again (first at order[{seen[ident]}]); SillyTavern sends "
                        "the prompt once, at its first entry and as that entry enables it, so this entry is dropped",
                        severity="warning",
                        path=join_path(path, j),
                        data={"identifier": ident, "first": seen[ident]},
                    )
                )
                continue
            seen[ident] = j
        out.append(item)
    return out


def parse_preset(
    raw: Any, *, name: str | None = None, base_path: str = "$", diagnostics: list[Diagnostic] | None = None
) -> Preset:
    """Validate a chat-completion preset, normalising the quirks listed in the module docstring."""
    raw = as_plain(raw)  # a cached asset's frozen views (or a dict around them) read as plain data
    diags = diagnostics if diagnostics is not None else []
    if not isinstance(raw, dict):
        raise TemplateError(f"a preset must be an object, not {type_name(raw)}", code="ASSET_INVALID", path=base_path)
    data = dict(raw)
    prompts = raw.get("prompts")
    identifiers: set[str] = set()
    if prompts is None:
        legacy = [f for f in LEGACY_PROMPT_FIELDS if isinstance(raw.get(f), str)]
        diags.append(
            Diagnostic(
                "ASSET_FIELD_MISSING",
                "the preset has no 'prompts'; "
                + (f"its legacy fields ({', '.join(legacy)}) are used" if legacy else "SillyTavern would keep its default prompts"),
                severity="info",
                path=join_path(base_path, "prompts"),
            )
        )
        identifiers = {LEGACY_PROMPT_FIELDS[f][0] for f in legacy}
    elif not isinstance(prompts, list):
        raise TemplateError(
            f"'prompts' must be an array, not {type_name(prompts)}", code="ASSET_INVALID", path=join_path(base_path, "prompts")
        )
    else:
        fixed = []
        for i, p in enumerate(prompts):
            path = join_path(base_path, "prompts", i)
            if not isinstance(p, dict):
                raise TemplateError(f"a prompt must be an object, not {type_name(p)}", code="ASSET_INVALID", path=path)
            if "identifier" not in p:
                raise TemplateError("the prompt has no identifier", code="ASSET_FIELD_MISSING", path=join_path(path, "identifier"))
            ident = p["identifier"]
            if isinstance(ident, str) and ident in identifiers:
                diags.append(
                    Diagnostic(
                        "ASSET_DUPLICATE_ID",
                        f"prompt identifier {ident!r} is used twice; the later prompt wins",
                        severity="warning",
                        path=join_path(path, "identifier"),
                    )
                )
            if isinstance(ident, str):
                identifiers.add(ident)
            fixed.append(_normalise_prompt(p, path, diags))
        data["prompts"] = fixed
    order = raw.get("prompt_order")
    if isinstance(order, list):
        fixed_order = []
        for i, po in enumerate(order):
            path = join_path(base_path, "prompt_order", i)
            if isinstance(po, dict):
                cid = po.get("character_id")
                if isinstance(cid, str):
                    if cid.strip().lstrip("-").isdigit():
                        po = {**po, "character_id": int(cid)}
                        diags.append(
                            Diagnostic(
                                "ASSET_VALUE_NORMALISED",
                                f"character_id is the string {cid!r}; SillyTavern compares ids as strings, so it is read as {int(cid)}",
                                severity="info",
                                path=join_path(path, "character_id"),
                                data={"original": cid},
                            )
                        )
                    else:
                        diags.append(
                            Diagnostic(
                                "ASSET_VALUE_NORMALISED",
                                f"character_id {cid!r} is not a number; it matches no character",
                                severity="warning",
                                path=join_path(path, "character_id"),
                            )
                        )
                items = po.get("order")
                if isinstance(items, list) and prompts is not None:
                    for j, item in enumerate(items):
                        ident = item.get("identifier") if isinstance(item, dict) else None
                        if isinstance(ident, str) and ident not in identifiers:
                            diags.append(
                                Diagnostic(
                                    "ASSET_REFERENCE_MISSING",
                                    f"prompt_order names {ident!r}, which is not among the prompts; SillyTavern skips it",
                                    severity="info",
                                    path=join_path(path, "order", j, "identifier"),
                                )
                            )
                if isinstance(items, list):
                    po = {**po, "order": _first_of_each(items, join_path(path, "order"), diags)}
            fixed_order.append(po)
        data["prompt_order"] = fixed_order
    preset = validate_model(Preset, data, base_path)
    preset._name = name
    return preset
