"""Built-in sources, registered under the upstream ids so exported strategies load unchanged.

- ``native-system``, ``history``, ``input``: the native instructions, the history and the current
  input as ``native`` blocks (never rewritten; tool transactions untouched). A native system
  message that comes after included conversation gets a depth that puts it back at its boundary.
- ``custom`` (and the parser-only ``tavern.text``, which first expands EJS tags in the sandbox): authored
  text cut at the slot markers
  ``{{chatHistory}} {{history}} {{input}} {{worldInfoBefore}} {{worldInfoAfter}} {{worldInfo}}``
  into text blocks and references, rendered with the SillyTavern macro engine.
- ``dsh.text``: authored text with ``{{key}}`` native variables (``assets.native_variables``), kept
  otherwise as written.
- ``character``, ``persona``, ``phi``: card fields (chara_card_v2 names) and their text-reference
  macros (``{{description}}``, ``{{persona}}``...); ``worldbook``: the entries of a world-info
  activation record supplied in ``assets.world_info`` (the activation itself is another stage);
  an entry holding ``{{format_message_variable::stat_data}}`` gets the MVU state (``assets.mvu``) as
  YAML through a literal macro.
- ``tavern.mvu/state``: the MVU state as JSON plus update instructions (system, request lifetime).
- ``pmp-dsh-tavern/prompt-template``: the bridge's prompt-template resources rendered in the
  sandbox (:mod:`.templates`).

Sources read only the frozen context; they never write.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from ..errors import TemplateError
from .registry import SourceDescriptor, SourceRegistry, thaw
from .render import TAVERN
from .templates import TAVERN_PLUGIN, TEMPLATE_SOURCE_ID, resolve_prompt_templates

__all__ = [
    "BUILTIN_IDS",
    "builtin_registry",
    "register_builtin_sources",
    "split_authored_text",
    "world_info_from_activation",
]

DSH = "dsh"
_MARKER = re.compile(r"\{\{\s*(chatHistory|history|input|worldInfoBefore|worldInfoAfter|worldInfo)\s*\}\}", re.I)
_MARKER_TARGETS = {
    "chathistory": (("history", None), ("input", None)),
    "history": (("history", None),),
    "input": (("input", None),),
    "worldinfobefore": (("worldbook", "before"),),
    "worldinfoafter": (("worldbook", "after"),),
    "worldinfo": (("worldbook", "before"), ("worldbook", "after")),
}
_TEXT_ROLES = ("system", "user", "assistant")


def _native_system(context: Mapping[str, Any], rule: Mapping[str, Any]) -> dict[str, Any]:
    messages = context["native_messages"]
    inputs = set(context["input_ids"])
    rules = context["preset"]["rules"]

    def kind_included(kind: str) -> bool:
        rs = [r for r in rules if r["kind"] == kind]
        return not rs or any(r["enabled"] for r in rs)

    history_on, input_on = kind_included("history"), kind_included("input")
    included = [
        m["role"] != "system" and (input_on if m["id"] in inputs else history_on) for m in messages
    ]
    after = [0] * (len(messages) + 1)
    for i in range(len(messages) - 1, -1, -1):
        after[i] = after[i + 1] + included[i]
    blocks = []
    seen_conversation = False
    for i, m in enumerate(messages):
        if m["role"] != "system":
            seen_conversation = seen_conversation or included[i]
            continue
        blocks.append(
            {
                "type": "native",
                "id": "native-system" if not blocks else f"native-system:{m['id']}",
                "name": "Native instructions",
                "message_ids": [m["id"]],
                "depth": after[i + 1] if seen_conversation else None,
            }
        )
    return {"blocks": blocks}


def _conversation(wanted_input: bool) -> Any:
    def resolve(context: Mapping[str, Any], rule: Mapping[str, Any]) -> dict[str, Any]:
        inputs = set(context["input_ids"])
        ids = [m["id"] for m in context["native_messages"] if m["role"] != "system" and (m["id"] in inputs) == wanted_input]
        name = "input" if wanted_input else "history"
        return {"blocks": [{"type": "native", "id": name, "name": name.title(), "message_ids": ids}]}

    return resolve


def split_authored_text(text: str, role: str | None, *, world_info: bool = True) -> list[dict[str, Any]]:
    """Cut authored text at slot markers into text blocks ``text:<offset>`` and references.

    Each marker becomes reference blocks to its target module (``{{chatHistory}}`` is history then
    input); without ``world_info`` the world-info markers stay as text.
    """
    blocks: list[dict[str, Any]] = []
    pos = 0
    for m in _MARKER.finditer(text):
        name = m.group(1).lower()
        if not world_info and name.startswith("worldinfo"):
            continue
        if m.start() > pos:
            blocks.append({"type": "text", "id": f"text:{pos}", "text": text[pos : m.start()], "role": role})
        for n, (source, group) in enumerate(_MARKER_TARGETS[name]):
            ref: dict[str, Any] = {"type": "reference", "id": f"ref:{m.start()}:{n}", "source_id": source}
            if group:
                ref["group"] = group
            blocks.append(ref)
        pos = m.end()
    if pos < len(text):
        blocks.append({"type": "text", "id": f"text:{pos}", "text": text[pos:], "role": role})
    return blocks


def _authored(context: Mapping[str, Any], rule: Mapping[str, Any]) -> dict[str, Any]:
    role = rule["role"] if rule["role"] in _TEXT_ROLES else None
    blocks = split_authored_text(rule["text"], role)
    for b in blocks:
        if b["type"] == "text":
            b["name"] = rule["name"] or rule["id"]
            b["source"] = {"resource_id": rule["id"], "field": "text"}
    return {"blocks": blocks}


def _tavern_text(context: Mapping[str, Any], rule: Mapping[str, Any]) -> dict[str, Any]:
    """Tavern text: EJS tags first (in the sandbox), then slot markers and SillyTavern macros.

    The template sees ``assets.template_variables`` as ``variables``. Its output is part of this
    source's output, so it is recorded and a replay never runs the VM again. Without the EJS
    stage the request fails (``TAVERN_TEMPLATE_PARSER_UNAVAILABLE``) rather than sending tags.
    """
    text = rule["text"]
    if "<%" in text:
        try:
            from ..ejs import render_template
        except ImportError:
            render_template = None  # type: ignore[assignment]
        if render_template is None:
            raise TemplateError(
                f"rule {rule['id']!r} holds a template tag '<%' and no prompt-template parser is available",
                code="TAVERN_TEMPLATE_PARSER_UNAVAILABLE",
            )
        variables = context["assets"].get("template_variables")
        text = render_template(text, thaw(variables) if variables is not None else None).text
        return _authored(context, {**rule, "text": text})
    return _authored(context, rule)


_NATIVE_VARIABLE = re.compile(r"\{\{([a-z_][a-z0-9_]*)\}\}")


def _dsh_text(context: Mapping[str, Any], rule: Mapping[str, Any]) -> dict[str, Any]:
    variables = context["assets"].get("native_variables") or {}

    def sub(m: re.Match[str]) -> str:
        value = variables.get(m.group(1))
        if not isinstance(value, str):
            raise TemplateError(
                f"native variable {m.group(1)!r} is not available to rule {rule['id']!r}",
                code="NATIVE_TEXT_VARIABLE_UNAVAILABLE",
            )
        return value

    text = _NATIVE_VARIABLE.sub(sub, rule["text"])
    role = rule["role"] if rule["role"] in _TEXT_ROLES else None
    return {
        "blocks": [
            {"type": "text", "id": "text", "text": text, "role": role, "name": rule["name"] or rule["id"],
             "source": {"resource_id": rule["id"], "field": "text"}}
        ]
    }


_CARD_FIELDS = (
    ("description", "description", "Character description"),
    ("personality", "personality", "Character personality"),
    ("scenario", "scenario", "Scenario"),
    ("examples", "mes_example", "Dialogue examples"),
    ("system", "system_prompt", "Character system prompt"),
    ("phi", "post_history_instructions", "Post-history instructions"),
)
_CARD_MACROS = {
    "description": "description",
    "personality": "personality",
    "scenario": "scenario",
    "mesExamples": "examples",
    "charDescription": "description",
    "charPersonality": "personality",
}


def _card(context: Mapping[str, Any]) -> Mapping[str, Any]:
    card = context["assets"].get("character") or {}
    return card.get("data", card) if isinstance(card, Mapping) else {}


def _character(context: Mapping[str, Any], rule: Mapping[str, Any]) -> dict[str, Any]:
    card = _card(context)
    resource = str(card.get("name") or "character")
    blocks = []
    for block_id, key, name in _CARD_FIELDS:
        value = card.get(key)
        if isinstance(value, str) and value:
            block: dict[str, Any] = {
                "type": "text", "id": block_id, "text": value, "name": name,
                "source": {"resource_id": resource, "field": key},
            }
            if block_id == "phi":
                block["reference_only"] = True
            blocks.append(block)
    greeting = _greeting(context, card)
    if greeting:
        conversation = sum(1 for m in context["native_messages"] if m["role"] != "system")
        blocks.append({
            "type": "text", "id": "greeting", "text": greeting, "name": "Greeting", "role": "assistant",
            "depth": rule["depth"] if rule["depth"] is not None else max(1, conversation),
            "source": {"resource_id": resource, "field": "first_mes"},
        })
    present = {b["id"] for b in blocks}
    return {"blocks": blocks, "macros": {k: v for k, v in _CARD_MACROS.items() if v in present}}


def _greeting(context: Mapping[str, Any], card: Mapping[str, Any]) -> str:
    """The first-turn greeting, when the caller asks for it (``assets.include_greeting_reference``).

    ``assets.greeting_index`` 0 (default) is ``first_mes``; ``n`` the n-th alternate greeting. The
    greeting is an assistant reference before the native conversation; it is never written to
    native history.
    """
    assets = context["assets"]
    if not assets.get("include_greeting_reference"):
        return ""
    index = assets.get("greeting_index") or 0
    alternates = card.get("alternate_greetings") or ()
    if isinstance(index, int) and 0 < index <= len(alternates):
        return str(alternates[index - 1])
    first = card.get("first_mes")
    return first if isinstance(first, str) else ""


def _persona(context: Mapping[str, Any], rule: Mapping[str, Any]) -> dict[str, Any]:
    persona = context["assets"].get("persona") or {}
    text = persona.get("description", "") if isinstance(persona, Mapping) else str(persona)
    if not text:
        return {"blocks": []}
    name = persona.get("name", "persona") if isinstance(persona, Mapping) else "persona"
    return {
        "blocks": [{"type": "text", "id": "persona", "text": text, "name": "Persona",
                    "source": {"resource_id": str(name), "field": "description"}}],
        "macros": {"persona": "persona"},
    }


def _phi(context: Mapping[str, Any], rule: Mapping[str, Any]) -> dict[str, Any]:
    blocks: list[dict[str, Any]] = [
        {"type": "reference", "id": "card-phi", "source_id": "character", "block_ids": ["phi"],
         "honor_enabled": False, "use_owner_rule": True, "lock": False}
    ]
    if rule["text"]:
        blocks.append({"type": "text", "id": "additional", "text": rule["text"], "name": rule["name"] or "Additional PHI",
                       "source": {"resource_id": rule["id"], "field": "text"}})
    return {"blocks": blocks}


#: SillyTavern position numbers -> (assembler group or at_depth, approximated?)
_WI_POSITIONS = {0: ("before", False), 1: ("after", False), 2: ("after", True), 3: ("after", True),
                 4: ("at_depth", False), 5: ("before", True), 6: ("before", True)}
_WI_ROLES = {0: "system", 1: "user", 2: "assistant"}


def world_info_from_activation(activation: Any) -> list[dict[str, Any]]:
    """The ``assets.world_info`` entries for a ``tavernbox.worldinfo`` activation result.

    Author's-note and example-message positions have no slot in list placement: they fall back
    to after/before and are marked ``approximated`` (the source reports
    ``WORLD_BOOK_SLOT_MISSING``); outlet entries are only reachable through their outlet macro and
    are left out here.
    """
    out = []
    for activated in activation.activated:
        entry = activated.entry
        placed = _WI_POSITIONS.get(entry.position)
        if placed is None:
            continue
        position, approximated = placed
        item: dict[str, Any] = {
            "id": f"{entry.book}.{entry.uid}",
            "book": entry.book,
            "uid": entry.uid,  # what the prompt-template source's getwi may read (activated entries only)
            "content": activated.content,
            "comment": entry.comment,
            "position": position,
            "role": _WI_ROLES.get(entry.role, "system"),
            "depth": entry.depth,
            "order": entry.order,
            "constant": entry.constant,
        }
        if approximated:
            item["approximated_from"] = entry.position
        out.append(item)
    return out


MVU_FORMAT_MACRO = "format_message_variable::stat_data"
_MVU_FORMAT = re.compile(r"\{\{\s*format_message_variable::stat_data\s*\}\}", re.I)


def _mvu(context: Mapping[str, Any]) -> tuple[Mapping[str, Any] | None, str, str]:
    """The request's MVU state: ``(stat_data, resource name, revision)``; stat_data None when absent."""
    mvu = context["assets"].get("mvu")
    if not isinstance(mvu, Mapping) or not isinstance(mvu.get("stat_data"), Mapping):
        return None, "", ""
    from .identity import content_hash

    return mvu["stat_data"], str(mvu.get("name") or "mvu"), content_hash(thaw(mvu["stat_data"]))


def _worldbook(context: Mapping[str, Any], rule: Mapping[str, Any]) -> dict[str, Any]:
    blocks = []
    diagnostics = []
    mvu_yaml: str | None = None
    # a SillyTavern preset outside list placement gives Author's-Note and example positions their
    # real slots (tavernbox.strategies.sillytavern), so nothing is approximated then
    st_places = context["assets"].get("st_preset") is not None and context["preset"].get("placement") != "modules" \
        and any(r["kind"] == "preset" and r["enabled"] for r in context["preset"]["rules"])
    for entry in context["assets"].get("world_info") or ():
        if not isinstance(entry, Mapping):
            continue
        uid = entry.get("id", entry.get("uid"))
        content = entry.get("content")
        if uid is None or not isinstance(content, str):
            continue
        position = entry.get("position", "after")
        block: dict[str, Any] = {
            "type": "text",
            "id": f"worldbook:{uid}",
            "text": content,
            "name": entry.get("comment") or f"entry {uid}",
            "role": entry.get("role") or "system",
            "group": "before" if position == "before" else "after",
            "stability": "asset" if entry.get("constant") else "conversation",
            "source": {"resource_id": str(entry.get("book", uid)), "field": "content"},
        }
        if position == "at_depth":
            block["depth"] = entry.get("depth") if isinstance(entry.get("depth"), int) else 0
        if isinstance(entry.get("order"), (int, float)) and not isinstance(entry.get("order"), bool):
            block["order"] = entry["order"]
        if _MVU_FORMAT.search(content):
            stat_data, name, revision = _mvu(context)
            if stat_data is not None:
                # the state is data, inserted after macro expansion and never expanded itself
                if mvu_yaml is None:
                    # MVU's own formatting; imported here because the bridge is slow to import
                    # and only a book that uses the macro needs it
                    from ..bridge.mvu import format_stat_data

                    mvu_yaml = format_stat_data(thaw(stat_data))
                    diagnostics.append({"code": "WORLD_BOOK_MVU_VARIABLE_VERSION", "severity": "info",
                                        "message": f"world info read MVU state {name!r} at revision {revision}",
                                        "data": {"resource_id": name, "revision": revision}})
                block["text"] = _MVU_FORMAT.sub("{{" + MVU_FORMAT_MACRO + "}}", content)
                block["literal_macros"] = {MVU_FORMAT_MACRO: mvu_yaml}
        if entry.get("approximated_from") is not None and not st_places:
            diagnostics.append({"code": "WORLD_BOOK_SLOT_MISSING",
                                "message": f"entry {uid}: position {entry['approximated_from']} has no slot here; "
                                           f"placed in the {block['group']} group",
                                "data": {"entry": str(uid)}})
        blocks.append(block)
    return {"blocks": blocks, "diagnostics": diagnostics}


MVU_INSTRUCTIONS = (
    "To change these variables, end your reply with <JSONPatch>[...]</JSONPatch>: a JSON Patch array whose paths "
    "point into the state above. Use \"delta\" to add to a number and \"replace\" to set a value; write literal "
    "values only."
)


def _mvu_state(context: Mapping[str, Any], rule: Mapping[str, Any]) -> dict[str, Any]:
    """The MVU state as JSON, then how to update it (``rule.text`` replaces the default instructions)."""
    import json

    stat_data, name, revision = _mvu(context)
    if stat_data is None:
        return {"blocks": []}
    state = json.dumps(thaw(stat_data), ensure_ascii=False)
    return {
        "blocks": [{"type": "text", "id": "state", "name": "MVU state", "role": "system",
                    "text": f"{state}\n{rule['text'] or MVU_INSTRUCTIONS}",
                    "source": {"resource_id": name, "field": "stat_data"}}],
        "diagnostics": [{"code": "MVU_RESOURCE_VERSION", "severity": "info",
                         "message": f"MVU state {name!r} at revision {revision}",
                         "data": {"resource_id": name, "revision": revision}}],
    }


_AUTHORED_DEPS = ("history", "input", "worldbook", "character", "persona")

BUILTINS: tuple[SourceDescriptor, ...] = (
    SourceDescriptor("native-system", DSH, "Native instructions", resolve=_native_system, stability="assembly",
                     roles=("preserve",), lifetimes=("request",), depth=False),
    SourceDescriptor("history", DSH, "History", resolve=_conversation(False), stability="conversation",
                     roles=("preserve",), lifetimes=("request",), depth=False),
    SourceDescriptor("input", DSH, "Current input", resolve=_conversation(True), stability="evaluation",
                     roles=("preserve",), lifetimes=("request",), depth=False),
    SourceDescriptor("custom", TAVERN_PLUGIN, "Custom text", resolve=_authored, multiple=True, roles=_TEXT_ROLES,
                     dependencies=_AUTHORED_DEPS, renderer=TAVERN),
    SourceDescriptor("tavern.text", TAVERN_PLUGIN, "Tavern text", parse_text=_tavern_text, multiple=True,
                     lifetimes=("request",), dependencies=_AUTHORED_DEPS, renderer=TAVERN),
    SourceDescriptor("dsh.text", DSH, "DSH text", parse_text=_dsh_text, multiple=True, roles=_TEXT_ROLES),
    SourceDescriptor("character", TAVERN_PLUGIN, "Character", resolve=_character, stability="asset", renderer=TAVERN),
    SourceDescriptor("persona", TAVERN_PLUGIN, "Persona", resolve=_persona, stability="asset", renderer=TAVERN),
    SourceDescriptor("phi", TAVERN_PLUGIN, "Post-history instructions", resolve=_phi, dependencies=("character",),
                     renderer=TAVERN),
    SourceDescriptor("worldbook", TAVERN_PLUGIN, "World info", resolve=_worldbook, renderer=TAVERN),
    SourceDescriptor("tavern.mvu/state", "tavern.mvu", "MVU state", resolve=_mvu_state, roles=("preserve", "system"),
                     lifetimes=("request",)),
    SourceDescriptor(TEMPLATE_SOURCE_ID, TAVERN_PLUGIN, "Prompt templates", resolve=resolve_prompt_templates,
                     stability="evaluation", lifetimes=("request",)),
)
BUILTIN_IDS = tuple(d.id for d in BUILTINS)


def register_builtin_sources(registry: SourceRegistry) -> list[Any]:
    """Register every built-in source; returns their disposers."""
    return [registry.register(d) for d in BUILTINS]


def builtin_registry() -> SourceRegistry:
    """A registry holding the built-in sources (native instructions, history, input, custom...)."""
    registry = SourceRegistry()
    register_builtin_sources(registry)
    return registry
