"""Group chats in SillyTavern's "join character cards" modes: the card and depth prompts a group sends.

In a group, SillyTavern builds the prompt for the member asked to reply (the request's ``card``).
Its default generation mode, ``swap``, uses that member's card alone. The two join modes build one
card out of the members' cards (``getGroupCharacterCardsLazy``) and send every member's depth prompt
(``getGroupDepthPrompts``):

* ``append``: the enabled members; a muted member (``disabled_members``) only when it is the one
  replying;
* ``append_disabled``: every member, muted or not.

Each of description, personality, scenario and example messages becomes the members' values of that
field, in member order, each trimmed, wrapped in the group's join prefix and suffix, with
``<FIELDNAME>`` (any case) read as the field's display name ("Description", "Personality",
"Scenario", "Example Messages") and ``{{char}}`` as that member's name; empty values are skipped and
the rest joined with newlines. Example messages that do not start with ``<START>`` get one first.
Depth prompts come from the enabled members and the one replying, in both join modes (the muted
members' prompts are not sent even under ``append_disabled``), each with ``{{char}}`` as its member.

Why a module of its own: this is the one place the group's cards are combined, so the rest of the
request builder sees an ordinary card and an ordinary list of in-chat prompts.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from ..errors import Diagnostic, TemplateError
from ..macros.evaluator import MAX_OUTPUT_CHARS

__all__ = ["JOIN_MODES", "MAX_JOINED_CHARS", "group_depth_prompts", "join_group_cards", "joined_card", "member_names_text"]

#: the generation modes that join the members' cards (SillyTavern's APPEND and APPEND_DISABLED)
JOIN_MODES = ("append", "append_disabled")
#: the longest joined field (and all depth prompts together): what one macro may expand to, since
#: the joined text is sent through ``{{description}}`` and its kin
MAX_JOINED_CHARS = MAX_OUTPUT_CHARS

#: (card field, the display name ``<FIELDNAME>`` stands for)
_JOINED_FIELDS = (("description", "Description"), ("personality", "Personality"), ("scenario", "Scenario"),
                  ("mes_example", "Example Messages"))
_FIELDNAME = re.compile(r"<FIELDNAME>", re.IGNORECASE)
_NAMES = re.compile(r"\{\{(user|char)\}\}|<(USER|BOT|CHAR)>", re.IGNORECASE)


def member_names_text(value: str, user: str, char: str) -> str:
    """``value`` with the names substituted for one member, as SillyTavern's card-field pass does
    (``baseChatReplace`` with the member as ``{{char}}``), carriage returns removed."""
    value = value.replace("\r", "")
    if "{" not in value and "<" not in value:
        return value
    return _NAMES.sub(lambda m: user if (m.group(1) or m.group(2)).lower() == "user" else char, value)


def _included(name: str, mode: str, disabled: Collection[str], speaker: str) -> bool:
    return name == speaker or name not in disabled or mode == "append_disabled"


def _text(card: Mapping[str, Any], key: str) -> str:
    value = card.get(key)
    return value if isinstance(value, str) else ""


class _Affix:
    """A join prefix or suffix for one field, ``<FIELDNAME>`` replaced, with its name macros counted
    once, so the size it takes for each member is known before it is written."""

    __slots__ = ("text", "fixed", "users", "chars")

    def __init__(self, text: str, display: str) -> None:
        self.text = _FIELDNAME.sub(display, text) if text else ""
        self.fixed, self.users, self.chars = len(self.text), 0, 0
        for m in _NAMES.finditer(self.text):
            self.fixed -= m.end() - m.start()
            if (m.group(1) or m.group(2)).lower() == "user":
                self.users += 1
            else:
                self.chars += 1

    def size(self, user: str, char: str) -> int:
        return self.fixed + self.users * len(user) + self.chars * len(char)


def _names_size(text: str, user: str, char: str) -> int:
    """The length of :func:`member_names_text` of ``text``, without building it."""
    size = len(text)
    for m in _NAMES.finditer(text):
        size += len(user if (m.group(1) or m.group(2)).lower() == "user" else char) - (m.end() - m.start())
    return size


def _too_long(what: str) -> TemplateError:
    return TemplateError(f"the group's joined {what} would pass {MAX_JOINED_CHARS:,} characters (the macro output "
                         "limit); shorten the join prefix, suffix or member names", code="ST_GROUP_JOIN_LIMIT",
                         path="$.group")


def joined_card(card: Mapping[str, Any], members: Sequence[tuple[str, Mapping[str, Any] | None]], *, mode: str,
                prefix: str, suffix: str, disabled: Sequence[str], speaker: str, user: str) -> dict[str, Any]:
    """The speaking member's ``card`` with the four joined fields of a join mode.

    ``members`` are ``(name, card or None)`` in group order; a member without a card is skipped, as
    SillyTavern skips a member whose character it cannot find. The joined fields are final: they are
    not trimmed again (a suffix that ends in a newline is sent).
    """
    out = dict(card)
    muted = frozenset(disabled)
    for key, display in _JOINED_FIELDS:
        head, tail = _Affix(prefix, display), _Affix(suffix, display)
        parts: list[str] = []
        size = 0
        for name, member in members:
            if member is None or not _included(name, mode, muted, speaker):
                continue
            value = _text(member, key).strip()
            if not value:
                continue
            if key == "mes_example" and not value.startswith("<START>"):
                value = "<START>\n" + value
            value = _FIELDNAME.sub(display, value).strip()
            # sized before it is built: the affixes repeat for every member, and names can be long
            size += head.size(user, name) + _names_size(value, user, name) + tail.size(user, name) + 1
            if size > MAX_JOINED_CHARS + 1:
                raise _too_long(display.lower())
            parts.append(member_names_text(head.text, user, name) + member_names_text(value, user, name)
                         + member_names_text(tail.text, user, name))
        out[key] = "\n".join(p for p in parts if p)
    return out


def group_depth_prompts(members: Sequence[tuple[str, Mapping[str, Any] | None]], *, disabled: Sequence[str],
                        speaker: str, user: str) -> list[dict[str, Any]]:
    """The members' depth prompts in a join mode: ``[{text, depth, role}]`` in member order.

    Muted members are left out unless replying (in both join modes); a member without a depth
    prompt adds nothing. Depth 4 and role system when the card does not say.
    """
    out: list[dict[str, Any]] = []
    muted = frozenset(disabled)
    size = 0
    for name, member in members:
        if member is None or (name in muted and name != speaker):
            continue
        ext = member.get("extensions")
        dp = ext.get("depth_prompt") if isinstance(ext, Mapping) else None
        if not isinstance(dp, Mapping):
            continue
        text = _text(dp, "prompt").strip()
        size += _names_size(text, user, name) + 1
        if size > MAX_JOINED_CHARS + 1:
            raise _too_long("depth prompts")
        text = member_names_text(text, user, name)
        if not text:
            continue
        depth = dp.get("depth")
        out.append({"text": text, "depth": depth if isinstance(depth, int) and not isinstance(depth, bool) else 4,
                    "role": dp.get("role") if dp.get("role") is not None else "system"})
    return out


def join_group_cards(card: Mapping[str, Any] | None, members: Mapping[str, Mapping[str, Any]], group: Any, user: str,
                     read: Any, overrides: Mapping[str, str] | None = None,
                     ) -> tuple[dict[str, Any], list[dict[str, Any]], list[Diagnostic]]:
    """The replying member's card as a join mode builds it, the members' depth prompts, and warnings.

    ``card`` is the request's card (as SillyTavern reads it), ``members`` the group's cards by name
    (raw; ``read`` gives them SillyTavern's reading), ``group`` the request's :class:`GroupChat`,
    ``overrides`` the chat's ``scenario`` / ``mes_example``: one that is not blank after trimming
    replaces the joined field.
    The replying member must be a member; a member whose card is not given is skipped with a
    warning naming it (``ST_GROUP_CARD_MISSING``), never silently.
    """
    if card is None:
        raise TemplateError(f"a group in {group.generation_mode!r} mode needs the replying member's card at $.card",
                            code="REQUEST_INVALID", path="$.card")
    speaker = str(card.get("name") or "")
    if speaker not in group.members:
        raise TemplateError(f"the card's character {speaker!r} is not a member of the group ($.group.members)",
                            code="REQUEST_INVALID", path="$.card")
    listed: list[tuple[str, Mapping[str, Any] | None]] = []
    missing: list[str] = []
    for name in group.members:
        if name == speaker:
            listed.append((name, card))
        elif name in members:
            listed.append((name, read(members[name])))
        else:
            listed.append((name, None))
            if group.generation_mode == "append_disabled" or name not in group.disabled_members:
                missing.append(name)
    diags = [Diagnostic("ST_GROUP_CARD_MISSING", f"no card for the group member {name!r} ($.group.cards): its "
                        "fields and depth prompt are not joined", path="$.group.cards") for name in missing]
    joined = joined_card(card, listed, mode=group.generation_mode, prefix=group.join_prefix,
                         suffix=group.join_suffix, disabled=group.disabled_members, speaker=speaker, user=user)
    for key, value in (overrides or {}).items():
        if value.strip():
            joined[key] = value.strip().replace("\r", "")
    prompts = group_depth_prompts(listed, disabled=group.disabled_members, speaker=speaker, user=user)
    return joined, prompts, diags
