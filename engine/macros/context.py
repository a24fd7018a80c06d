"""What the macros can see: names, card fields, chat, variables, seed and clock.

``MacroContext.from_dict`` reads the context JSON of the CLI contract (field names follow the
chara_card_v2 spec). Every field is optional; missing card fields read as ``''`` and a missing
clock means "now, in UTC" (time macros are the only ones that look at it).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from ..errors import Diagnostic, TemplateError
from ..unknown_keys import unknown_key_warnings

__all__ = ["CARD_FIELDS", "CONTEXT_KEYS", "ChatMessage", "MacroContext"]

#: The card fields the context understands (chara_card_v2 names).
CARD_FIELDS = (
    "description",
    "personality",
    "scenario",
    "mes_example",
    "system_prompt",
    "post_history_instructions",
    "character_version",
    "creator_notes",
    "first_mes",
    "depth_prompt",
)


#: The top-level keys of the context JSON (the last two are read by macros from ``extras``).
CONTEXT_KEYS = frozenset({
    "user", "char", "persona", "character", "chat", "chat_omitted", "chat_id_hash", "pick_reroll_seed", "variables",
    "seed", "now", "original", "model", "input", "group", "muted", "is_mobile", "extensions",
    "outlets", "limits", "instruct", "system_prompt", "example_separator", "chat_start",
    "last_generation_type", "first_included_message_id", "_banned_words",
})
#: Keys of ``character``: the card fields macros read, and the rest of a v2/v3 card's ``data``.
CHARACTER_KEYS = frozenset(CARD_FIELDS) | {
    "name", "alternate_greetings", "group_only_greetings", "tags", "creator", "extensions", "character_book",
    "nickname", "creator_notes_multilingual", "source", "creation_date", "modification_date", "assets",
}
#: Names people write for a context key, mapped to the key the contract uses.
_ALIASES = {
    "card": "character", "character_card": "character", "messages": "chat", "history": "chat",
    "vars": "variables", "name": "char", "char_name": "char", "character_name": "char", "user_name": "user",
    "persona_description": "persona", "date": "now", "time": "now",
}


@dataclass(frozen=True, slots=True)
class ChatMessage:
    """One chat message. ``swipes``/``swipe_id`` follow SillyTavern's message object."""

    role: str
    content: str
    name: str = ""
    swipes: tuple[str, ...] = ()
    swipe_id: int | None = None
    send_date: str | None = None

    @property
    def is_user(self) -> bool:
        return self.role == "user"

    @property
    def is_system(self) -> bool:
        return self.role == "system"


def _str(value: Any, path: str) -> str:
    if value is None:
        return ""
    if isinstance(value, (str, int, float)) and not isinstance(value, bool):
        return str(value)
    raise TemplateError(f"{path} must be a string", code="INPUT_INVALID", path=path)


def _parse_now(value: Any) -> datetime | None:
    if value is None:
        return None
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=timezone.utc)
    if not isinstance(value, str):
        raise TemplateError("$.now must be an ISO 8601 date-time string", code="INPUT_INVALID", path="$.now")
    text = value.strip()
    if text.endswith(("Z", "z")):
        text = text[:-1] + "+00:00"
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        raise TemplateError(
            f"$.now is not an ISO 8601 date-time: {value!r}", code="INPUT_INVALID", path="$.now"
        ) from None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=timezone.utc)


@dataclass(frozen=True)
class MacroContext:
    """Everything a render reads. Immutable: variables are copied into each render."""

    user: str = "User"
    char: str = ""
    persona: str = ""
    character: Mapping[str, Any] = field(default_factory=dict)
    chat: tuple[ChatMessage, ...] = ()
    #: how many messages of the whole chat ``chat`` leaves out: a host with a long chat may send
    #: only the messages the chat macros read (the last one, the last user and character messages,
    #: the user message before the last: ``chat`` keeps their order) and still have
    #: ``{{lastMessageId}}`` and ``{{allChatRange}}`` count the whole chat
    chat_omitted: int = 0
    chat_id_hash: int | str | None = None
    pick_reroll_seed: str | None = None
    local_variables: Mapping[str, Any] = field(default_factory=dict)
    global_variables: Mapping[str, Any] = field(default_factory=dict)
    seed: int | None = None
    now: datetime | None = None
    original: str | None = None
    model: str = ""
    input: str = ""
    group: tuple[str, ...] = ()
    muted: tuple[str, ...] = ()
    is_mobile: bool = False
    extensions: tuple[str, ...] = ()
    outlets: Mapping[str, str] = field(default_factory=dict)
    limits: Mapping[str, int] = field(default_factory=dict)
    instruct: Mapping[str, str] = field(default_factory=dict)
    system_prompt: str = ""
    example_separator: str = ""
    chat_start: str = ""
    last_generation_type: str = ""
    extras: Mapping[str, Any] = field(default_factory=dict)

    @property
    def chat_length(self) -> int:
        """How many messages the whole chat has (the given ones and the omitted ones)."""
        return self.chat_omitted + len(self.chat)

    def card(self, name: str) -> str:
        """A card field as text (``''`` when absent)."""
        value = self.character.get(name)
        return "" if value is None else str(value)

    @property
    def alternate_greetings(self) -> tuple[str, ...]:
        value = self.character.get("alternate_greetings") or ()
        return tuple(str(v) for v in value)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> MacroContext:
        """Read the context JSON; wrong shapes raise ``TemplateError(INPUT_INVALID)`` with a path."""
        if data is None:
            return cls()
        if not isinstance(data, Mapping):
            raise TemplateError("the context must be a JSON object", code="INPUT_INVALID", path="$")
        character = data.get("character") or {}
        if not isinstance(character, Mapping):
            raise TemplateError("$.character must be an object", code="INPUT_INVALID", path="$.character")
        chat_raw = data.get("chat") or []
        if not isinstance(chat_raw, list):
            raise TemplateError("$.chat must be a list", code="INPUT_INVALID", path="$.chat")
        chat: list[ChatMessage] = []
        for i, msg in enumerate(chat_raw):
            path = f"$.chat[{i}]"
            if not isinstance(msg, Mapping):
                raise TemplateError(f"{path} must be an object", code="INPUT_INVALID", path=path)
            role = msg.get("role")
            if role is None:
                role = "user" if msg.get("is_user") else ("system" if msg.get("is_system") else "assistant")
            if role not in ("user", "assistant", "system"):
                raise TemplateError(
                    f"{path}.role must be user, assistant or system", code="INPUT_INVALID", path=f"{path}.role"
                )
            content = msg.get("content", msg.get("mes", ""))
            swipes = msg.get("swipes") or ()
            if not isinstance(swipes, (list, tuple)):
                raise TemplateError(f"{path}.swipes must be a list", code="INPUT_INVALID", path=f"{path}.swipes")
            swipe_id = msg.get("swipe_id")
            if swipe_id is not None and (not isinstance(swipe_id, int) or isinstance(swipe_id, bool)):
                raise TemplateError(
                    f"{path}.swipe_id must be an integer", code="INPUT_INVALID", path=f"{path}.swipe_id"
                )
            chat.append(
                ChatMessage(
                    role=role,
                    content=_str(content, f"{path}.content"),
                    name=_str(msg.get("name"), f"{path}.name"),
                    swipes=tuple(_str(s, f"{path}.swipes") for s in swipes),
                    swipe_id=swipe_id,
                    send_date=msg.get("send_date"),
                )
            )
        omitted = data.get("chat_omitted") or 0
        if not isinstance(omitted, int) or isinstance(omitted, bool) or omitted < 0:
            raise TemplateError("$.chat_omitted must be a whole number of messages (0 or more)",
                                code="INPUT_INVALID", path="$.chat_omitted")
        variables = data.get("variables") or {}
        if not isinstance(variables, Mapping):
            raise TemplateError("$.variables must be an object", code="INPUT_INVALID", path="$.variables")
        local = variables.get("local") or {}
        glob = variables.get("global") or {}
        for key, value in (("local", local), ("global", glob)):
            if not isinstance(value, Mapping):
                raise TemplateError(
                    f"$.variables.{key} must be an object", code="INPUT_INVALID", path=f"$.variables.{key}"
                )
        seed = data.get("seed")
        if seed is not None and (not isinstance(seed, int) or isinstance(seed, bool)):
            raise TemplateError("$.seed must be an integer", code="INPUT_INVALID", path="$.seed")
        group = data.get("group") or ()
        if isinstance(group, str):
            group = (group,)
        known = CONTEXT_KEYS
        char_name = data.get("char")
        if char_name is None:
            char_name = character.get("name", "")
        return cls(
            user=_str(data.get("user", "User"), "$.user"),
            char=_str(char_name, "$.char"),
            persona=_str(data.get("persona"), "$.persona"),
            character=dict(character),
            chat=tuple(chat),
            chat_omitted=omitted,
            chat_id_hash=data.get("chat_id_hash"),
            pick_reroll_seed=data.get("pick_reroll_seed"),
            local_variables=dict(local),
            global_variables=dict(glob),
            seed=seed,
            now=_parse_now(data.get("now")),
            original=None if data.get("original") is None else _str(data.get("original"), "$.original"),
            model=_str(data.get("model"), "$.model"),
            input=_str(data.get("input"), "$.input"),
            group=tuple(str(g) for g in group),
            muted=tuple(str(g) for g in (data.get("muted") or ())),
            is_mobile=bool(data.get("is_mobile", False)),
            extensions=tuple(str(e) for e in (data.get("extensions") or ())),
            outlets=dict(data.get("outlets") or {}),
            limits=dict(data.get("limits") or {}),
            instruct=dict(data.get("instruct") or {}),
            system_prompt=_str(data.get("system_prompt"), "$.system_prompt"),
            example_separator=_str(data.get("example_separator"), "$.example_separator"),
            chat_start=_str(data.get("chat_start"), "$.chat_start"),
            last_generation_type=_str(data.get("last_generation_type"), "$.last_generation_type"),
            extras={k: v for k, v in data.items() if k not in known},
        )

    @staticmethod
    def unknown_keys(data: Any) -> list[Diagnostic]:
        """``INPUT_UNKNOWN_KEY`` warnings for context keys (and ``character`` keys) no macro reads.

        Unknown keys are still accepted (``extras``), so a context written for another tool renders; the
        warning names the JSON path and the key most likely meant (``card`` -> ``character``).
        """
        if not isinstance(data, Mapping):
            return []
        out = unknown_key_warnings(data, CONTEXT_KEYS, path="$", what="context key", aliases=_ALIASES)
        character = data.get("character")
        if isinstance(character, Mapping):
            out += unknown_key_warnings(character, CHARACTER_KEYS, path="$.character", what="card field")
        return out

    def clock(self) -> datetime:
        """The render's notion of now: the injected ``now``, else the current UTC time."""
        return self.now if self.now is not None else datetime.now(timezone.utc)
