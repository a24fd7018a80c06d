"""The SillyTavern prompt manager as an assembler source: a chat-completion preset plus a card.

The ``preset`` source (upstream id, so exported strategies load unchanged) reads the SillyTavern
chat-completion preset in ``assets["st_preset"]`` (the preset JSON as SillyTavern exports it) and
turns it into blocks the way SillyTavern's prompt manager builds a chat-completion request
(research ``peers.md`` section 6):

* **Which prompts**: the ``prompt_order`` bucket of character id 100001 (the global order the
  chat-completion manager uses), else 100000 (the legacy bucket ``Default.json`` carries), else the
  first bucket; without any, the prompts as listed. Only items switched on in that order are used,
  and a prompt whose ``injection_trigger`` excludes the generation type is skipped.
* **Relative prompts** land in order. ``main`` is replaced by the card's ``system_prompt`` and
  ``jailbreak`` by its ``post_history_instructions`` unless the prompt says ``forbid_overrides``;
  ``{{original}}`` in the card text splices the preset's text in once.
* **Markers** fill from the card, persona and world info: ``charDescription``, ``charPersonality``
  and ``scenario`` (through the preset's ``personality_format``/``scenario_format``),
  ``personaDescription``, ``worldInfoBefore``/``worldInfoAfter`` (the entries joined with newlines in
  SillyTavern's entry order, through ``wi_format``), ``dialogueExamples`` (``mes_example`` split on
  ``<START>`` into one system message per line owner, named ``example_user``/``example_assistant``,
  each dialogue after ``new_example_chat_prompt``; example-position world info joins as extra
  dialogues) and ``chatHistory`` (``new_chat_prompt``, then history and current input).
* **The persona** (``assets.persona``: ``name``, ``description``, ``position`` 0 in the prompt (default),
  2/3 top/bottom of the Author's Note, 4 at ``depth`` (default 2) with ``role``, 9 nowhere).
* **Absolute prompts** (``injection_position`` 1) go into the chat at ``injection_depth``: per depth,
  one message per (``injection_order``, role), higher orders nearer the end, roles of one order
  assistant, user, system (SillyTavern builds the list newest-first and reverses it). Extension
  prompts of the same depth and role (the Author's Note, the card's depth prompt, at-depth world
  info, sorted by SillyTavern's extension keys) join the order-100 message.

Outside ``modules`` placement the preset owns the card, persona and world-info content as
SillyTavern does: a field that no enabled marker uses is claimed and so never sent elsewhere. In
``modules`` placement listed modules keep their rows (the assembler's list ownership), so markers
become references and source macros there.

:func:`squash_system_messages` and :func:`apply_names_behavior` are SillyTavern's two whole-array
transforms (the preset's ``squash_system_messages`` and ``names_behavior``); they work on message
arrays, not on blocks.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..assembler.registry import SourceDescriptor, SourceRegistry, thaw
from ..assembler.render import TAVERN
from ..assembler.sources import builtin_registry, split_authored_text

__all__ = [
    "CARD_FIELD_MARKERS",
    "EXTENSION_ORDER",
    "NAMES_BEHAVIORS",
    "PRESET_SOURCE",
    "apply_names_behavior",
    "inject_order",
    "prompt_sequence",
    "register_preset_source",
    "split_examples",
    "squash_system_messages",
    "st_messages",
    "st_registry",
]

GLOBAL_ID, LEGACY_ID = 100001, 100000
#: SillyTavern walks in-chat depths 0..10000; a prompt outside that range is never injected
MAX_INJECTION_DEPTH = 10_000
#: the enabled prompts of SillyTavern's default order (``Default.json``, character 100001)
DEFAULT_ORDER = ("main", "worldInfoBefore", "personaDescription", "charDescription", "charPersonality", "scenario",
                 "nsfw", "worldInfoAfter", "dialogueExamples", "chatHistory", "jailbreak")
#: SillyTavern's order of roles inside one (depth, order) group, newest-first; reversed when sent
_ROLE_ORDER_NEWEST_FIRST = ("system", "user", "assistant")
#: in-chat extension prompts in the order SillyTavern joins them: it sorts the extension keys as
#: strings, so the Author's Note (``2_floating_prompt``) comes first, then ``DEPTH_PROMPT``,
#: ``PERSONA_DESCRIPTION`` and the world-info groups ``customDepthWI-<depth>-<role>`` (upper case
#: sorts before lower case)
EXTENSION_ORDER = ("2_floating_prompt", "DEPTH_PROMPT", "PERSONA_DESCRIPTION", "customDepthWI")
EXTENSION_ORDER_GROUP = 100
#: marker identifier -> (character/persona source block, the source macro that inlines it)
CARD_FIELD_MARKERS = {
    "charDescription": ("character", "description", "description"),
    "charPersonality": ("character", "personality", "personality"),
    "scenario": ("character", "scenario", "scenario"),
    "personaDescription": ("persona", "persona", "persona"),
}
_KNOWN_MARKERS = {*CARD_FIELD_MARKERS, "worldInfoBefore", "worldInfoAfter", "dialogueExamples", "chatHistory"}
_ORIGINAL = re.compile(r"\{\{\s*original\s*\}\}", re.I)
_START = re.compile(r"<START>", re.I)
NAMES_BEHAVIORS = {-1: "none", 0: "default", 1: "completion", 2: "content"}


def _diag(code: str, message: str, severity: str = "info", **data: Any) -> dict[str, Any]:
    return {"code": code, "message": message, "severity": severity, "data": data}


#: the prompts SillyTavern's prompt manager always has (``chatCompletionDefaultPrompts``): a preset
#: that lacks one gets it on load (``checkForMissingPrompts``)
DEFAULT_PROMPTS: dict[str, dict[str, Any]] = {
    "main": {"name": "Main Prompt", "system_prompt": True, "role": "system",
             "content": "Write {{char}}'s next reply in a fictional chat between {{charIfNotGroup}} and {{user}}."},
    "nsfw": {"name": "Auxiliary Prompt", "system_prompt": True, "role": "system", "content": ""},
    "dialogueExamples": {"name": "Chat Examples", "system_prompt": True, "marker": True},
    "jailbreak": {"name": "Post-History Instructions", "system_prompt": True, "role": "system", "content": ""},
    "chatHistory": {"name": "Chat History", "system_prompt": True, "marker": True},
    "worldInfoAfter": {"name": "World Info (after)", "system_prompt": True, "marker": True},
    "worldInfoBefore": {"name": "World Info (before)", "system_prompt": True, "marker": True},
    "enhanceDefinitions": {"name": "Enhance Definitions", "system_prompt": True, "role": "system", "marker": False,
                           "content": "If you have more knowledge of {{char}}, add to the character's lore and "
                                      "personality to enhance them but keep the Character Sheet's definitions "
                                      "absolute."},
    "charDescription": {"name": "Char Description", "system_prompt": True, "marker": True},
    "charPersonality": {"name": "Char Personality", "system_prompt": True, "marker": True},
    "scenario": {"name": "Scenario", "system_prompt": True, "marker": True},
    "personaDescription": {"name": "Persona Description", "system_prompt": True, "marker": True},
}
#: SillyTavern's default prompt order (used when a preset has no order for character 100001)
DEFAULT_PROMPT_ORDER = (("main", True), ("worldInfoBefore", True), ("personaDescription", True),
                        ("charDescription", True), ("charPersonality", True), ("scenario", True),
                        ("enhanceDefinitions", False), ("nsfw", True), ("worldInfoAfter", True),
                        ("dialogueExamples", True), ("chatHistory", True), ("jailbreak", True))
#: prompts SillyTavern merges into the collection when building a request; one that the order
#: lacks is appended after everything the order has (``preparePromptsForChatCompletion``)
_MERGED = ("worldInfoBefore", "worldInfoAfter", "charDescription", "charPersonality", "scenario")
#: prompts placed by identifier (``populateChatCompletion``'s ``addToChatCompletion`` calls)
_FIXED = ("worldInfoBefore", "main", "worldInfoAfter", "charDescription", "charPersonality", "scenario",
          "personaDescription", "nsfw", "jailbreak", "enhanceDefinitions")


def prompt_sequence(preset: Any, generation_type: str = "normal", *, persona_in_prompt: bool = False
                    ) -> tuple[list[Any], list[dict[str, Any]]]:
    """The prompts SillyTavern sends for a parsed preset, in the order it places them.

    SillyTavern's prompt manager (``getPromptCollection``, ``preparePromptsForChatCompletion``,
    ``populateChatCompletion``):

    * the order is the bucket of character 100001, else SillyTavern's default order; an order
      entry whose prompt does not exist is dropped; a repeated identifier resolves to its first
      prompt; default prompts a preset lacks are added (``checkForMissingPrompts``);
    * the collection holds the enabled entries whose ``injection_trigger`` admits the generation
      type, plus ``main`` even when disabled (with no text, so notes can still go before or after
      it);
    * the world-info, description, personality and scenario markers (and the persona, when it is
      placed in the prompt) that the order lacks altogether are appended after everything else;
      a marker the order switches off stays off;
    * sent are the known prompts (markers, ``main``, ``nsfw``, ``jailbreak``,
      ``enhanceDefinitions``), prompts explicitly marked ``system_prompt: false`` (user prompts,
      whatever their ``marker`` flag says) and every in-chat prompt; any other ``system_prompt``
      prompt is never sent.
    """
    from ..assets.presets import PresetPrompt

    diags: list[dict[str, Any]] = []
    resolved = preset.resolved_prompts()
    by_id: dict[str, Any] = {}
    for p in resolved:
        by_id.setdefault(p.identifier, p)
    for ident, spec in DEFAULT_PROMPTS.items():
        if ident not in by_id:
            by_id[ident] = PresetPrompt(identifier=ident, **spec)
    order = preset.order_for(GLOBAL_ID)
    if order:
        items = [(i.identifier, i.enabled) for i in order]
    else:
        if preset.prompt_order:
            diags.append(_diag("ST_PROMPT_ORDER_DEFAULT", "no prompt_order for character 100001: SillyTavern's default "
                               "order is used"))
        items = list(DEFAULT_PROMPT_ORDER)
    disabled = {ident for ident, enabled in items if not enabled}
    collection: list[Any] = []
    for ident, enabled in items:
        prompt = by_id.get(ident)
        if prompt is None:
            continue
        trigger = [t for t in prompt.injection_trigger if isinstance(t, str)]
        if enabled and (not trigger or generation_type in trigger):
            collection.append(prompt)
        elif ident == "main":
            collection.append(prompt.model_copy(update={"content": "", "forbid_overrides": True}))
    present = {p.identifier for p in collection}
    for ident in (*_MERGED, *(("personaDescription",) if persona_in_prompt else ())):
        if ident not in present:
            collection.append(by_id[ident])
            present.add(ident)
    out = []
    for prompt in collection:
        ident = prompt.identifier
        user_prompt = "system_prompt" in prompt.model_fields_set and prompt.system_prompt is False
        if prompt.in_chat:
            out.append(prompt)
        elif ident in _FIXED or ident in ("dialogueExamples", "chatHistory"):
            if ident in disabled and ident != "main":
                continue
            out.append(prompt)
        elif user_prompt:  # its ``marker`` flag does not matter: SillyTavern sends its text
            out.append(prompt)
        else:
            diags.append(_diag("ST_PROMPT_NOT_SENT", f"prompt {ident!r} is marked as a system prompt SillyTavern has "
                               "no place for; it is never sent", identifier=ident))
    return out, diags


def dsh_prompt_sequence(preset: Any, generation_type: str = "normal") -> tuple[list[Any], list[dict[str, Any]]]:
    """The enabled prompts of a parsed preset as the DSH rule-file strategies read it (not SillyTavern's rules:
    see :func:`prompt_sequence`), in prompt-manager order.

    Returns ``(prompts, diagnostics)``. The order bucket is 100001, else 100000, else the first;
    a preset without ``prompt_order`` uses its prompts as listed (each on unless ``enabled`` is false).
    """
    diags: list[dict[str, Any]] = []
    by_id = {p.identifier: p for p in preset.resolved_prompts()}  # a repeated identifier: the later wins
    order = preset.order_for(GLOBAL_ID) or preset.order_for(LEGACY_ID)
    if not order and preset.prompt_order:
        order = list(preset.prompt_order[0].order)
        diags.append(_diag("ST_PROMPT_ORDER_FALLBACK", "no prompt_order for character 100001 or 100000; the first "
                           f"bucket (character {preset.prompt_order[0].character_id}) is used"))
    if order:
        items = [(i.identifier, i.enabled) for i in order]
    elif preset.prompts is None:
        # a legacy preset: SillyTavern's default order, its markers, and the migrated legacy texts
        from ..assets.presets import PresetPrompt

        for ident in DEFAULT_ORDER:
            if ident not in by_id and ident in _KNOWN_MARKERS:
                by_id[ident] = PresetPrompt(identifier=ident, name=ident, marker=True)
        items = [(ident, True) for ident in DEFAULT_ORDER]
    else:
        items = [(p.identifier, p.enabled is not False) for p in preset.resolved_prompts()]
    out = []
    for identifier, enabled in items:
        prompt = by_id.get(identifier)
        if prompt is None or not enabled:
            continue
        trigger = [t for t in prompt.injection_trigger if isinstance(t, str)]
        if trigger and generation_type not in trigger:
            continue
        out.append(prompt)
    return out, diags


def _wi_entries(context: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """World-info entries in SillyTavern's placement order (ascending ``order``, ties reversed)."""
    entries = [e for e in context["assets"].get("world_info") or () if isinstance(e, Mapping)
               and e.get("id", e.get("uid")) is not None and isinstance(e.get("content"), str) and e.get("content")]
    ranked = sorted(entries, key=lambda e: -(o if isinstance(o := e.get("order"), (int, float)) else 100))
    return list(reversed(ranked))


def _wi_block_id(entry: Mapping[str, Any]) -> str:
    return f"worldbook:{entry.get('id', entry.get('uid'))}"


def _wi_slot(entry: Mapping[str, Any]) -> str:
    """Where SillyTavern puts an entry: before, after, an_top, an_bottom, em_top, em_bottom, at_depth."""
    origin = entry.get("approximated_from")
    if origin is not None:
        return {2: "an_top", 3: "an_bottom", 5: "em_top", 6: "em_bottom"}.get(origin, "after")
    position = entry.get("position", "after")
    return position if position in ("before", "after", "at_depth") else "after"


_USER_MACRO = re.compile(r"\{\{user\}\}", re.I)
_CHAR_MACRO = re.compile(r"\{\{char\}\}", re.I)


def split_examples(text: str, user: str, char: str, group: Sequence[str] = (),
                   name_prefix: bool = False) -> list[list[tuple[str, str]]]:
    """``mes_example`` as SillyTavern's chat completion sees it: dialogues of ``(speaker, content)``.

    SillyTavern's two steps (``parseMesExamples``, ``parseExampleIntoIndividual``), names first
    substituted for ``{{user}}``/``{{char}}`` as its card-field macro pass does:

    * ``<START>`` (any case) opens a dialogue; text that does not begin with one (case-sensitive)
      gets one; each dialogue is trimmed;
    * in a dialogue, a line starting ``User:`` opens a user message, ``Char:`` (or a group
      member's name) a character message; every line, including lines before the first speaker,
      joins the current message, which ends when the other speaker starts;
    * a message is its lines joined by newlines, with the first ``Name:`` anywhere in it removed,
      trimmed. A dialogue without speaker lines is an empty dialogue: SillyTavern still sends its
      separator (``populateDialogueExamples`` inserts one per dialogue, messages or not).
    * ``name_prefix`` (a group chat): each message then starts with its speaker's name and ``: ``
      (the user's, or the member whose line opened it), as ``parseExampleIntoIndividual`` writes
      examples for a group.
    """
    text = _CHAR_MACRO.sub(lambda _m: char, _USER_MACRO.sub(lambda _m: user, text))
    if not text.strip() or text == "<START>":  # a card field arrives trimmed; so does nothing here
        return []
    if not text.startswith("<START>"):
        text = "<START>\n" + text.strip()
    blocks = ["<START>\n" + block.strip() + "\n" for block in _START.split(text)[1:]]
    group_prefixes = [f"{g}:" for g in group]
    dialogues = []
    for block in blocks:
        messages: list[tuple[str, str]] = []
        lines: list[str] = []
        in_user = in_bot = False
        bot_name = char

        def add(name: str, speaker: str) -> None:
            joined = "\n".join(lines).replace(f"{name}:", "", 1).strip()
            messages.append((speaker, f"{name}: {joined}" if name_prefix else joined))
            lines.clear()

        for line in block.split("\n")[1:]:
            if line.startswith(f"{user}:"):
                if in_bot:
                    add(bot_name, "example_assistant")
                in_user, in_bot = True, False
            elif line.startswith(f"{char}:") or any(line.startswith(g) for g in group_prefixes):
                if not line.startswith(f"{char}:") and group_prefixes:
                    bot_name = line.split(":")[0]
                if in_user:
                    add(user, "example_user")
                in_user, in_bot = False, True
            lines.append(line)
        if in_user:
            add(user, "example_user")
        elif in_bot:
            add(bot_name, "example_assistant")
        dialogues.append(messages)
    return dialogues


def _card(context: Mapping[str, Any]) -> Mapping[str, Any]:
    card = context["assets"].get("character") or {}
    return card.get("data", card) if isinstance(card, Mapping) else {}


def _names(context: Mapping[str, Any]) -> tuple[str, str]:
    assets = context["assets"]
    persona = assets.get("persona") or {}
    user = assets.get("user") or (persona.get("name") if isinstance(persona, Mapping) else None) or "User"
    card = _card(context)
    return str(user), str(card.get("nickname") or card.get("name") or "Assistant")


def _override(prompt: Any, card_text: Any, allowed: bool) -> tuple[str, bool]:
    """The prompt text after a card override: ``(text, overridden)``."""
    if not allowed or prompt.forbid_overrides or not isinstance(card_text, str) or not card_text.strip():
        return prompt.content, False
    original = [prompt.content]  # the first {{original}} gets the prompt, any later one nothing
    return _ORIGINAL.sub(lambda _m: original.pop() if original else "", card_text), True


def inject_order(items: list[tuple[int, float, str, str]]) -> list[tuple[int, float, str, str]]:
    """In-chat items ``(depth, order, role, text)`` merged and ordered as SillyTavern sends them.

    One message per (depth, order, role), texts joined with a newline; within a depth, ascending
    order; within an order, assistant, user, system. Depths come deepest first, which is the order
    the assembler must insert them in so that depths beyond the chat keep SillyTavern's order.
    """
    groups: dict[tuple[int, float, str], list[str]] = {}
    for depth, order, role, text in items:
        groups.setdefault((depth, order, role), []).append(text)
    rank = {r: i for i, r in enumerate(reversed(_ROLE_ORDER_NEWEST_FIRST))}
    keys = sorted(groups, key=lambda k: (-k[0], k[1], rank.get(k[2], 3)))
    return [(d, o, r, "\n".join(t.strip() for t in groups[(d, o, r)] if t.strip())) for d, o, r in keys]


#: an in-chat prompt before its group is merged: ``(depth, order, role, text, identifiers)``
_Injection = tuple[int, float, str, str, list[str]]


def _preset_source(context: Mapping[str, Any], rule: Mapping[str, Any]) -> dict[str, Any]:
    """Blocks of the SillyTavern preset in ``assets["st_preset"]`` (see the module docstring)."""
    raw = context["assets"].get("st_preset")
    if raw is None:
        return {"blocks": [], "diagnostics": [_diag("ST_PRESET_ABSENT", "no SillyTavern preset (assets.st_preset): "
                                                     "the preset source contributes nothing")]}
    walk = _PresetWalk.start(context, raw)
    walk.place_prompts(walk.sequence(raw))
    if not walk.modules:  # outside modules placement the preset owns the card, persona and world info
        walk.place_control_blocks()
        walk.place_depth_world_info()
        walk.claim_owned()
        walk.report_unplaced_world_info()
    walk.place_injections()
    return walk.result()


def _rule_on(rules: Sequence[Mapping[str, Any]], kind: str) -> bool:
    """A rule kind is on when no rule lists it or any rule listing it is enabled."""
    listed = [r for r in rules if r["kind"] == kind]
    return not listed or any(r["enabled"] for r in listed)


def _parse_st_preset(raw: Any) -> tuple[Any, list[dict[str, Any]]]:
    """The parsed preset and its non-info diagnostics (as this source's); a bad preset is ``ST_PRESET_INVALID``."""
    from ..assembler.registry import memoized
    from ..assets.presets import parse_preset as parse_st_preset
    from ..errors import TemplateError

    def parse() -> tuple[Any, list[Any]]:
        found: list[Any] = []
        return parse_st_preset(thaw(raw), base_path="$.assets.st_preset", diagnostics=found), found

    try:
        # parsed once per frozen preset: the assembler shares an unchanged asset between requests
        st, asset_diags = memoized(raw, "tavernbox.strategies.sillytavern:st_preset", parse)
    except TemplateError as exc:
        raise TemplateError(f"the SillyTavern preset is invalid: {exc.message}", code="ST_PRESET_INVALID",
                            path=exc.path) from None
    return st, [_diag(d.code, d.message, d.severity, path=d.path) for d in asset_diags if d.severity != "info"]


@dataclass(slots=True)
class _PresetWalk:
    """One request's walk over a preset's prompts: what it reads from and what it has placed so far.

    ``blocks`` grow in prompt order, one ``place_*`` method per kind of prompt; in-chat prompts
    collect in ``injections`` and are placed last, each (depth, order, role) group where ``anchors``
    says its first prompt stood; ``absorbed`` is the at-depth world info per (depth, role) and
    ``owned`` the fields the preset owns outside ``modules`` placement.
    """

    context: Mapping[str, Any]
    assets: Mapping[str, Any]
    st: Any  # the parsed preset (tavernbox.assets.presets)
    placement: str
    modules: bool  # ``modules`` placement: markers become references and source macros
    phi_on: bool
    card: Mapping[str, Any]
    user: str
    char: str
    persona_text: str
    persona_position: int
    entries: list[Mapping[str, Any]]  # the activated world info the preset places (none in modules placement)
    resource: str
    diags: list[dict[str, Any]]
    blocks: list[dict[str, Any]] = field(default_factory=list)
    injections: list[_Injection] = field(default_factory=list)
    #: (depth, order, role) -> where its first in-chat prompt stands among the blocks: SillyTavern
    #: expands every prompt's macros in prompt-order (``getPromptCollection``), so a group of
    #: in-chat prompts is rendered there, not after everything (extension prompts are, at the end)
    anchors: dict[tuple[int, float, str], int] = field(default_factory=dict)
    absorbed: dict[tuple[int, str], list[str]] = field(default_factory=dict)  # (depth, role) -> block ids
    owned: list[dict[str, str]] = field(default_factory=list)

    @classmethod
    def start(cls, context: Mapping[str, Any], raw: Any) -> _PresetWalk:
        """The walk's state: the parsed preset, the rule switches, the card, names and world info."""
        st, diags = _parse_st_preset(raw)
        assets = context["assets"]
        preset = context["preset"]
        placement = preset.get("placement", "modules")
        modules = placement == "modules"
        rules = preset["rules"]
        user, char = _names(context)
        persona_text, persona_position, _persona_data = _persona(context)
        return cls(context=context, assets=assets, st=st, placement=placement, modules=modules,
                   phi_on=any(r["kind"] == "phi" and r["enabled"] for r in rules), card=_card(context),
                   user=user, char=char, persona_text=persona_text, persona_position=persona_position,
                   entries=_wi_entries(context) if _rule_on(rules, "worldbook") and not modules else [],
                   resource=st.name or str(assets.get("st_preset_name") or "preset"), diags=diags)

    def sequence(self, raw: Any) -> list[Any]:
        """The prompts to place, in order (SillyTavern's reading under ``st`` placement, DSH's otherwise)."""
        from ..assembler.registry import memoized

        st, gen = self.st, str(self.assets.get("generation_type") or "normal")
        # a pure function of the parsed preset and these arguments: once per frozen preset, as the parse
        if self.placement == "st":
            in_prompt = bool(self.persona_text) and self.persona_position == PERSONA_IN_PROMPT
            prompts, order_diags = memoized(raw, f"tavernbox.strategies.sillytavern:st_sequence:{gen}:{in_prompt}",
                                            lambda: prompt_sequence(st, gen, persona_in_prompt=in_prompt))
        else:  # the rule-file strategies keep the DSH reading of a preset
            prompts, order_diags = memoized(raw, f"tavernbox.strategies.sillytavern:dsh_sequence:{gen}",
                                            lambda: dsh_prompt_sequence(st, gen))
        self.diags.extend(dict(d) for d in order_diags)  # copies: the kept sequence is shared by later requests
        return prompts

    # -- building blocks ---------------------------------------------------------------------------

    def text_block(self, bid: str, text: str, role: str, name: str, source_field: str,
                   **extra: Any) -> dict[str, Any]:
        return {"type": "text", "id": bid, "text": text, "role": role, "name": name,
                "source": {"resource_id": self.resource, "field": source_field}, **extra}

    def authored(self, prompt: Any, text: str, **extra: Any) -> None:
        """A prompt's own text, split into text and world-info blocks as the assembler's sources split it."""
        ident, resource, append = prompt.identifier, self.resource, self.blocks.append
        for b in split_authored_text(text, prompt.role, world_info=self.modules):
            b = {**b, "id": f"preset:{ident}:{b['id']}"}
            if b["type"] == "text":
                b.update(name=prompt.name or ident, source={"resource_id": resource, "field": ident}, **extra)
            append(b)

    def main_text(self, prompt: Any) -> str:
        """``main`` after the card's ``system_prompt`` override."""
        return _override(prompt, self.card.get("system_prompt"),
                         self.assets.get("prefer_character_prompt", True) is not False)[0]

    def jailbreak_text(self, prompt: Any) -> str:
        """``jailbreak`` after the card's ``post_history_instructions`` override."""
        return _override(prompt, self.card.get("post_history_instructions"),
                         self.assets.get("prefer_character_jailbreak", True) is not False)[0]

    def author_note(self) -> tuple[str, Any, Mapping[str, Any]]:
        """The Author's Note ``main`` carries: ``(text, "before"/"after"/other position or None, note)``."""
        text, note = author_note_text(self.context, self.entries) if not self.modules else ("", {})
        return text, note.get("position") if text else None, note

    # -- one method per kind of prompt -------------------------------------------------------------

    def place_prompts(self, prompts: Sequence[Any]) -> None:
        """Place the sequence's prompts in order, each by the method for its kind; any other prompt is authored text."""
        authored, markers_unsupported = self.authored, self.placement != "st"
        for prompt in prompts:
            ident = prompt.identifier
            if prompt.in_chat and ident not in _KNOWN_MARKERS:
                self.place_in_chat(prompt)
            elif ident in _PLACERS:
                _PLACERS[ident](self, prompt)
            elif prompt.marker and markers_unsupported:
                self.skip_unsupported_marker(prompt)
            else:
                authored(prompt, prompt.content)

    def skip_unsupported_marker(self, prompt: Any) -> None:
        """A marker with no SillyTavern content outside ``st`` placement: ``UNSUPPORTED_MARKER``, nothing placed."""
        self.diags.append(_diag("UNSUPPORTED_MARKER", f"marker {prompt.identifier!r} has no SillyTavern content here; "
                                "skipped", "warning", identifier=prompt.identifier))

    def place_in_chat(self, prompt: Any) -> None:
        """An in-chat prompt joins its (depth, order, role) group; an in-chat ``main`` brings the Author's Note."""
        ident, depth = prompt.identifier, prompt.injection_depth
        text = (self.main_text(prompt) if ident == "main" else
                self.jailbreak_text(prompt) if ident == "jailbreak" else prompt.content)
        note_text, note_at, _note = self.author_note() if ident == "main" else ("", None, {})
        if not 0 <= depth <= MAX_INJECTION_DEPTH:
            self.diags.append(_diag("ST_INJECTION_SKIPPED", f"prompt {ident!r}: injection_depth {depth} is outside "
                                    f"0..{MAX_INJECTION_DEPTH}; SillyTavern never injects it", "warning",
                                    identifier=ident))
            return
        key: tuple[int, float, str] = (depth, prompt.injection_order, prompt.role)
        # the Author's Note before/after an in-chat main joins main's (depth, order, role) group
        if note_at == "before":
            self.injections.append((depth, prompt.injection_order, prompt.role, note_text, ["authorsNote"]))
        if text:
            self.injections.append((depth, prompt.injection_order, prompt.role, text, [ident]))
            self.anchors.setdefault(key, len(self.blocks))
        if note_at == "after":
            self.injections.append((depth, prompt.injection_order, prompt.role, note_text, ["authorsNote"]))

    def place_main(self, prompt: Any) -> None:
        """``main`` (or the card's system prompt), with the Author's Note before or after it."""
        text = self.main_text(prompt)
        note_text, note_at, note = self.author_note()
        if note_at == "before":  # SillyTavern inserts the note into main's collection, before main
            self.blocks.append(self.text_block("preset:authorsNote", note_text, _role(note.get("role")),
                                               "Author's Note", "authorsNote"))
        self.authored(prompt, text, claims=[{"source_id": "character", "block_id": "system"}])
        if note_at == "after":
            self.blocks.append(self.text_block("preset:authorsNote", note_text, _role(note.get("role")),
                                               "Author's Note", "authorsNote"))

    def place_jailbreak(self, prompt: Any) -> None:
        """``jailbreak`` (or the card's post-history instructions); the ``phi`` module's in modules placement."""
        extra: dict[str, Any] = {"claims": [{"source_id": "character", "block_id": "phi"}]}
        if self.modules and self.phi_on:
            extra["target_source_id"] = "phi"
        self.authored(prompt, self.jailbreak_text(prompt), **extra)

    def place_card_field(self, prompt: Any) -> None:
        """A card or persona field marker: the field's macro, through the preset's format for it."""
        ident = prompt.identifier
        source, block_id, macro = CARD_FIELD_MARKERS[ident]
        if source == "persona" and self.persona_position not in (PERSONA_IN_PROMPT, 1):
            return  # the persona goes to the Author's Note, a depth, or nowhere
        value = self.card.get(block_id) if source == "character" else None
        if source == "character" and not (isinstance(value, str) and value.strip()):
            return  # SillyTavern sends a format only around a non-empty field
        fmt = (self.st.personality_format if ident == "charPersonality" else
               self.st.scenario_format if ident == "scenario" else None)
        text = fmt if fmt is not None and fmt != "" else "{{" + macro + "}}"
        self.blocks.append(self.text_block(f"preset:{ident}", text, prompt.role, prompt.name or ident, ident,
                                           claims=[] if self.modules else [{"source_id": source,
                                                                            "block_id": block_id}]))

    def place_world_info(self, prompt: Any) -> None:
        """``worldInfoBefore``/``worldInfoAfter``: that slot's entries joined, through ``wi_format``."""
        ident = prompt.identifier
        if self.modules:
            self.authored(prompt, "{{" + ident + "}}")
            return
        slot = "before" if ident == "worldInfoBefore" else "after"
        chosen = [e for e in self.entries if _wi_slot(e) == slot]
        if not chosen:
            return
        joined = "\n".join(str(e["content"]) for e in chosen)
        fmt = self.st.wi_format if self.st.wi_format else "{0}"
        self.blocks.append(self.text_block(
            f"preset:{ident}", fmt.replace("{0}", joined), prompt.role, prompt.name or ident, ident,
            claims=[{"source_id": "worldbook", "block_id": _wi_block_id(e)} for e in chosen]))

    def place_examples(self, prompt: Any) -> None:
        """``dialogueExamples``: the card's and example-position world info's dialogues, one message per line."""
        if self.modules:
            self.blocks.append(self.text_block("preset:dialogueExamples", "{{mesExamples}}", prompt.role,
                                               prompt.name or prompt.identifier, prompt.identifier))
            return
        self.blocks.extend(_example_blocks(self.st, self.card, self.entries, self.user, self.char, self.resource,
                                           group=[str(g) for g in self.assets.get("group") or ()]))

    def place_chat_history(self, prompt: Any) -> None:
        """``chatHistory``: the new-chat prompt, the history, then send-if-empty and the group nudge.

        In a group: the group's new-chat prompt, and the group nudge after the history
        (``populateChatHistory``; no nudge when impersonating).
        """
        st, assets = self.st, self.assets
        group = bool(assets.get("group"))
        new_chat = st.new_group_chat_prompt if group else st.new_chat_prompt
        if new_chat:
            self.blocks.append(self.text_block("preset:chatHistory:newChat", new_chat, "system", "New chat",
                                               "new_group_chat_prompt" if group else "new_chat_prompt"))
        self.authored(prompt, "{{chatHistory}}")
        send_if_empty = getattr(st, "send_if_empty", None) or (st.model_extra or {}).get("send_if_empty")
        if isinstance(send_if_empty, str) and send_if_empty and assets.get("last_chat_role") == "assistant":
            # a user message after a trailing assistant message (``populateChatHistory``)
            self.blocks.append(self.text_block("preset:chatHistory:sendIfEmpty", send_if_empty, "user",
                                               "Send if empty", "send_if_empty"))
        if group and st.group_nudge_prompt and assets.get("generation_type", "normal") != "impersonate":
            self.blocks.append(self.text_block("preset:chatHistory:groupNudge", st.group_nudge_prompt, "system",
                                               "Group nudge", "group_nudge_prompt"))

    # -- after the walk ----------------------------------------------------------------------------

    def place_control_blocks(self) -> None:
        """The continue nudge, impersonation and quiet prompts, after every prompt."""
        self.blocks.extend(_control_blocks(self.st, self.assets, self.text_block))

    def place_depth_world_info(self) -> None:
        """At-depth world info grouped per (depth, role), then the order-100 extension prompts it joins."""
        for e in self.entries:
            if _wi_slot(e) == "at_depth":
                depth = d if isinstance(d := e.get("depth"), int) else 4
                self.absorbed.setdefault((depth, str(e.get("role") or "system")), []).append(_wi_block_id(e))
        _extension_injections(self.context, self.card, self.entries, self.absorbed, self.injections)

    def claim_owned(self) -> None:
        """The card, persona and world-info fields the preset owns, used by a marker or not."""
        owned = [{"source_id": "character", "block_id": b} for b in
                 ("description", "personality", "scenario", "examples", "system", "phi")]
        owned += [{"source_id": "persona", "block_id": "persona"}]
        owned += [{"source_id": "worldbook", "block_id": _wi_block_id(e)} for e in self.entries]
        self.owned = owned

    def report_unplaced_world_info(self) -> None:
        """``ST_WORLD_INFO_UNPLACED`` for activated entries no marker or depth placed."""
        used = {c["block_id"] for b in self.blocks for c in b.get("claims", ()) if c["source_id"] == "worldbook"}
        used.update(b for ids in self.absorbed.values() for b in ids)
        unplaced = [_wi_block_id(e) for e in self.entries if _wi_block_id(e) not in used]
        if unplaced:
            self.diags.append(_diag("ST_WORLD_INFO_UNPLACED", f"{len(unplaced)} activated world-info entries have no "
                                    "enabled marker or position in this preset and are not sent", "warning",
                                    blocks=unplaced))

    def place_injections(self) -> None:
        """Each in-chat group as one block, at its anchor (or the end); none without a chat history."""
        merged = _merge_injections([] if self.assets.get("no_chat_history") else self.injections)
        placed: list[tuple[int, dict[str, Any]]] = []
        rank = {r: i for i, r in enumerate(reversed(_ROLE_ORDER_NEWEST_FIRST))}
        for depth, order, role, text in inject_order([(d, o, r, t) for (d, o, r), (ts, _) in merged.items()
                                                      for t in ts]):
            who = list(dict.fromkeys(merged[(depth, order, role)][1]))
            claims = [{"source_id": "worldbook", "block_id": b} for b in self.absorbed.get((depth, role), ())] \
                if order == EXTENSION_ORDER_GROUP else []
            # one order holds up to three messages: assistant, user, system (a fraction keeps them apart
            # whatever order the blocks are rendered in)
            block = self.text_block(f"preset:inject:{depth}:{order:g}:{role}", text, role,
                                    "In-chat: " + ", ".join(who), "+".join(who), depth=depth,
                                    order=order + rank.get(role, 3) * 1e-6, claims=claims)
            placed.append((self.anchors.get((depth, order, role), len(self.blocks)), block))
        for at, block in sorted(placed, key=lambda item: -item[0]):
            self.blocks.insert(at, block)

    def result(self) -> dict[str, Any]:
        """The source's answer: the blocks (and the ownership block, when the preset owns fields) and diagnostics."""
        if self.owned:
            self.blocks.append({"type": "text", "id": "preset:owned", "text": "", "claims": self.owned,
                                "name": "Preset ownership"})
        return {"blocks": self.blocks, "diagnostics": self.diags}


#: the prompts placed by their own method (any other is authored text, or an unsupported marker)
_PLACERS: dict[str, Callable[[_PresetWalk, Any], None]] = {
    "main": _PresetWalk.place_main,
    "jailbreak": _PresetWalk.place_jailbreak,
    **dict.fromkeys(CARD_FIELD_MARKERS, _PresetWalk.place_card_field),
    "worldInfoBefore": _PresetWalk.place_world_info,
    "worldInfoAfter": _PresetWalk.place_world_info,
    "dialogueExamples": _PresetWalk.place_examples,
    "chatHistory": _PresetWalk.place_chat_history,
}


def _merge_injections(injections: list[_Injection]) -> dict[tuple[int, float, str], tuple[list[str], list[str]]]:
    """In-chat items per (depth, order, role): their texts and the identifiers they came from, in order."""
    merged: dict[tuple[int, float, str], tuple[list[str], list[str]]] = {}
    for depth, order, role, text, idents in injections:
        texts, who = merged.setdefault((depth, order, role), ([], []))
        texts.append(text)
        who.extend(idents)
    return merged


def _control_blocks(st: Any, assets: Mapping[str, Any], text_block: Callable[..., dict[str, Any]]
                    ) -> list[dict[str, Any]]:
    """What SillyTavern sends after every prompt, by generation type (``populateChatCompletion``).

    ``continue`` without prefill: the continue nudge (the continued message itself is moved in
    front of it after placement); then the control prompts: the impersonation prompt, and the quiet
    prompt last.
    """
    gen = str(assets.get("generation_type") or "normal")
    extra = st.model_extra or {}
    out: list[dict[str, Any]] = []
    if gen == "continue" and not assets.get("continue_prefill"):
        nudge = getattr(st, "continue_nudge_prompt", None) or extra.get("continue_nudge_prompt")
        if nudge:
            out.append(text_block("preset:control:continueNudge", nudge, "system", "Continue nudge",
                                  "continue_nudge_prompt"))
    if gen == "impersonate":
        text = getattr(st, "impersonation_prompt", None) or extra.get("impersonation_prompt")
        if text:
            out.append(text_block("preset:control:impersonate", text, "system", "Impersonation prompt",
                                  "impersonation_prompt"))
    quiet = assets.get("quiet_prompt")
    if gen == "quiet" and isinstance(quiet, str) and quiet:
        out.append(text_block("preset:control:quietPrompt", quiet, "system", "Quiet prompt", "quiet_prompt"))
    return out


#: SillyTavern's persona description positions (``assets.persona.position``)
PERSONA_IN_PROMPT, PERSONA_TOP_AN, PERSONA_BOTTOM_AN, PERSONA_AT_DEPTH, PERSONA_NONE = 0, 2, 3, 4, 9
_ROLE_NUMBERS = {0: "system", 1: "user", 2: "assistant"}


def _role(value: Any, default: str = "system") -> str:
    """A role given as SillyTavern's number (0 system, 1 user, 2 assistant) or as its name."""
    if isinstance(value, int) and not isinstance(value, bool):
        return _ROLE_NUMBERS.get(value, default)
    return value if value in ("system", "user", "assistant") else default


def _persona(context: Mapping[str, Any]) -> tuple[str, int, Mapping[str, Any]]:
    """``(description, position, persona)``; the position defaults to in-prompt (the marker)."""
    persona = context["assets"].get("persona") or {}
    if not isinstance(persona, Mapping):
        return str(persona), PERSONA_IN_PROMPT, {}
    position = persona.get("position", PERSONA_IN_PROMPT)
    position = position if isinstance(position, int) and not isinstance(position, bool) else PERSONA_IN_PROMPT
    return str(persona.get("description") or ""), position, persona


def author_note_text(context: Mapping[str, Any], entries: list[Mapping[str, Any]]) -> tuple[str, Mapping[str, Any]]:
    """The Author's Note as SillyTavern sends it: ``(text, note settings)``; empty when it is not due.

    SillyTavern builds it in three steps (``setFloatingPrompt``, then world info, then the persona):
    the note's text when its interval is due; the Author's-Note world-info entries around it (top
    entries, the note, bottom entries, each list joined with newlines, one leading and one trailing
    newline removed); then a persona placed at the note's top or bottom, joined with a newline.
    Nothing of this is added when the interval is not due (``note["active"]`` false).
    """
    assets = context["assets"]
    note = assets.get("author_note")
    note = note if isinstance(note, Mapping) else {}
    if note.get("active") is False:
        return "", note
    an_top = [str(e["content"]) for e in entries if _wi_slot(e) == "an_top"]
    an_bottom = [str(e["content"]) for e in entries if _wi_slot(e) == "an_bottom"]
    persona_text, persona_position, _persona_data = _persona(context)
    text = str(note.get("content") or "")
    if an_top or an_bottom or note:
        text = "\n".join(an_top) + "\n" + text + "\n" + "\n".join(an_bottom)
        text = text[1:] if text.startswith("\n") else text
        text = text[:-1] if text.endswith("\n") else text
    if persona_text and persona_position == PERSONA_TOP_AN:
        text = f"{persona_text}\n{text}"
    elif persona_text and persona_position == PERSONA_BOTTOM_AN:
        text = f"{text}\n{persona_text}"
    return text, note


def _extension_injections(
    context: Mapping[str, Any],
    card: Mapping[str, Any],
    entries: list[Mapping[str, Any]],
    absorbed: dict[tuple[int, str], list[str]],
    injections: list[tuple[int, float, str, str, list[str]]],
) -> None:
    """The order-100 in-chat extension prompts: Author's Note, the card's depth prompt, at-depth world info."""
    assets = context["assets"]
    found: dict[tuple[int, str], list[tuple[str, str, str]]] = {}  # (depth, role) -> (key, text, ident)
    note = assets.get("author_note")
    persona_text, persona_position, persona = _persona(context)
    text, note = author_note_text(context, entries)
    if text.strip() and note.get("position", "chat") == "chat":
        depth = d if isinstance(d := note.get("depth"), int) else 4
        found.setdefault((depth, _role(note.get("role"))), []).append(("2_floating_prompt", text, "authorsNote"))
    dp = (card.get("extensions") or {}).get("depth_prompt") if isinstance(card.get("extensions"), Mapping) else None
    members_dp = assets.get("group_depth_prompts")
    if members_dp:  # a group joining its cards: every member's depth prompt, keyed by its place in the list
        for i, item in enumerate(members_dp):
            found.setdefault((item["depth"], _role(item.get("role"))), []).append(
                (f"DEPTH_PROMPT_{i}", item["text"], "depthPrompt"))
    elif isinstance(dp, Mapping) and isinstance(dp.get("prompt"), str) and dp["prompt"].strip():
        depth = d if isinstance(d := dp.get("depth"), int) else 4
        found.setdefault((depth, _role(dp.get("role"))), []).append(("DEPTH_PROMPT", dp["prompt"], "depthPrompt"))
    if persona_text and persona_position == PERSONA_AT_DEPTH:
        depth = d if isinstance(d := persona.get("depth"), int) else 2
        found.setdefault((depth, _role(persona.get("role"))), []).append(
            ("PERSONA_DESCRIPTION", persona_text, "personaDescription"))
    by_id = {_wi_block_id(e): e for e in entries}
    for (depth, role), ids in absorbed.items():
        text = "\n".join(str(by_id[b]["content"]) for b in ids)
        found.setdefault((depth, role), []).append((f"customDepthWI-{depth}-{role}", text, "worldInfoDepth"))
    for (depth, role), items in found.items():
        # SillyTavern joins one depth's extension prompts in the sorted order of their keys
        # (``getExtensionPrompt``): EXTENSION_ORDER, and DEPTH_PROMPT_10 before DEPTH_PROMPT_2
        for _key, text, ident in sorted(items, key=lambda t: t[0]):
            injections.append((depth, EXTENSION_ORDER_GROUP, role, text, [ident]))


def _example_blocks(st: Any, card: Mapping[str, Any], entries: list[Mapping[str, Any]], user: str, char: str,
                    resource: str, group: Sequence[str] = ()) -> list[dict[str, Any]]:
    """The dialogue-example messages: one separator plus system messages named by speaker, per dialogue.

    In a group chat (``group``: the members' names) a line may open with any member's name, and each
    message carries its speaker's name in front (``parseExampleIntoIndividual``).
    """
    # SillyTavern unshifts each top entry's dialogues in turn and pushes the bottom ones
    texts = list(reversed([str(e["content"]) for e in entries if _wi_slot(e) == "em_top"]))
    if isinstance(card.get("mes_example"), str):
        texts.append(card["mes_example"])
    texts += [str(e["content"]) for e in entries if _wi_slot(e) == "em_bottom"]
    claims = [{"source_id": "character", "block_id": "examples"}]
    claims += [{"source_id": "worldbook", "block_id": _wi_block_id(e)} for e in entries
               if _wi_slot(e) in ("em_top", "em_bottom")]
    blocks: list[dict[str, Any]] = []
    n = 0
    for text in texts:
        for dialogue in split_examples(text, user, char, group, name_prefix=bool(group)):
            if st.new_example_chat_prompt:
                blocks.append({"type": "text", "id": f"preset:dialogueExamples:{n}:newChat", "role": "system",
                               "text": st.new_example_chat_prompt, "name": "Example separator",
                               "source": {"resource_id": resource, "field": "new_example_chat_prompt"}})
            for i, (speaker, content) in enumerate(dialogue):
                blocks.append({"type": "text", "id": f"preset:dialogueExamples:{n}:{i}", "role": "system",
                               "text": content, "speaker": speaker, "name": f"Example {n + 1}.{i + 1}",
                               "source": {"resource_id": str(card.get("name") or "character"), "field": "mes_example"}})
            n += 1
    if blocks:
        blocks[0]["claims"] = claims
    return blocks


PRESET_SOURCE = SourceDescriptor(
    "preset",
    "pmp-dsh-tavern",
    "SillyTavern preset",
    resolve=_preset_source,
    stability="asset",
    dependencies=("character", "persona", "history", "input", "worldbook", "phi"),
    lifetimes=("request",),
    renderer=TAVERN,
)


def register_preset_source(registry: SourceRegistry) -> Any:
    """Register the ``preset`` source; returns its disposer."""
    return registry.register(PRESET_SOURCE)


def st_registry() -> SourceRegistry:
    """The built-in sources plus the SillyTavern ``preset`` source: what the built-in strategies need."""
    registry = builtin_registry()
    register_preset_source(registry)
    return registry


def squash_system_messages(messages: Sequence[Mapping[str, Any]], keep: frozenset[str] | set[str] = frozenset(),
                           spans_of: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """SillyTavern's "squash system messages": adjacent unnamed system messages become one.

    Contents join with a newline; empty system messages are dropped; named system messages (the
    dialogue examples) and the messages whose ids are in ``keep`` (SillyTavern's new-chat and
    example separators; :func:`st_messages` fills it from the nodes) are never merged.
    SillyTavern squashes only real sends (its token preview is unsquashed), so this is a separate
    step on the final array. ``spans_of`` (message id -> character ranges), when given, is updated so
    that a merged message's ranges cover its parts at their new offsets.
    """
    out: list[dict[str, Any]] = []

    def squashable(m: Mapping[str, Any]) -> bool:
        return m.get("role") == "system" and not m.get("name") and m.get("id") not in keep \
            and isinstance(m.get("content"), str)

    for m in messages:
        if m.get("role") == "system" and not m.get("content"):
            continue
        if squashable(m) and out and squashable(out[-1]):
            prev = out[-1]
            if spans_of is not None:
                shift = len(prev["content"]) + 1
                spans_of[prev["id"]] = list(spans_of.get(prev["id"], [])) + [
                    (a + shift, b + shift, info) for a, b, info in spans_of.get(m["id"], [])]
            out[-1] = {**prev, "content": prev["content"] + "\n" + m["content"]}
        else:
            out.append(dict(m))
    return out


def st_messages(result: Any, *, squash: bool = False) -> list[dict[str, Any]]:
    """The message array SillyTavern itself would send for an assembly (before any DSH projection).

    That is ``result.logical_messages``, squashed when ``squash`` (the preset's
    ``squash_system_messages``) with the new-chat and example separators kept apart.
    """
    messages = list(result.logical_messages)
    if not squash:
        return [dict(m) for m in messages]
    separators = {mid for n in result.nodes if str(n.get("block_id", "")).endswith((":newChat", ":groupNudge"))
                  for mid in n.get("input_message_ids", ())}
    return squash_system_messages(messages, separators)


def apply_names_behavior(messages: Sequence[Mapping[str, Any]], behavior: int, user: str, char: str, *,
                         group: bool = False) -> list[dict[str, Any]]:
    """Chat messages as SillyTavern's ``names_behavior`` sends them (applied to native history).

    -1 (none) and 0 (default, outside groups) drop names; 1 (completion) keeps a ``name`` field
    (user -> the user's name, assistant -> the character's, sanitised to ``[A-Za-z0-9_-]``, at most
    64 characters); 2 (content) prefixes ``Name: `` to user and assistant text. In a group, default
    behaves like content for assistant messages. System and tool messages are left alone.
    """
    if behavior not in NAMES_BEHAVIORS:
        from ..errors import TemplateError

        raise TemplateError(f"names_behavior must be one of {sorted(NAMES_BEHAVIORS)}", code="INPUT_INVALID")
    out = []
    for m in messages:
        m = dict(m)
        role = m.get("role")
        if role not in ("user", "assistant"):
            out.append(m)
            continue
        name = m.get("name") or (user if role == "user" else char)
        m.pop("name", None)
        content = m.get("content")
        if behavior == 1:
            m["name"] = re.sub(r"[^A-Za-z0-9_-]", "_", str(name))[:64]
        elif (behavior == 2 or (behavior == 0 and group and role == "assistant")) and isinstance(content, str):
            if not content.startswith(f"{name}: "):
                m["content"] = f"{name}: {content}"
        out.append(m)
    return out
