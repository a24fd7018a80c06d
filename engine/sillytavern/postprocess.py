"""SillyTavern's whole-array steps around the prompt manager: chat names, and prompt post-processing.

Three steps that SillyTavern applies outside the prompt manager, each as SillyTavern 1.18 does it:

* :func:`history_messages` turns chat messages into the history the prompt manager places
  (``setOpenAIMessages`` and ``populateChatHistory`` in ``openai.js``): carriage returns removed,
  the speaker's name prefixed to the content by ``names_behavior`` (default: only in groups and for
  messages sent as another character; content: every non-narrator message), or kept as the
  ``name`` field in completion mode, sanitised to ``[A-Za-z0-9_]{1,64}``.
* :func:`post_process` is the server-side "Prompt Post-Processing" of the Custom and OpenRouter
  sources (``postProcessPrompt``/``mergeMessages`` in ``src/prompt-converters.js``), for back ends
  that refuse system messages after the first: ``merge`` joins consecutive messages of one role,
  ``semi`` also turns every system message after the first into a user message, ``strict`` adds
  the placeholder user message where the first message is not followed by one, ``single`` sends
  one user message. Names become content prefixes first (example messages take the user's or
  character's name), since those back ends drop ``name``.
* :func:`to_claude` and :func:`to_google` are the server's conversions for the Claude and Google
  sources (``convertClaudeMessages``, ``convertGooglePrompt``): the leading system messages become
  the system prompt when ``use_sysprompt`` is on, every later one is sent as a user message.
* :func:`squash_system_messages` lives in :mod:`tavernbox.strategies.sillytavern` (it works on the
  assembler's nodes).

The stage that applies them to the fitted messages is :mod:`.sending`.

Why here and not in the assembler: these are properties of SillyTavern's request, applied to the
finished array, and other strategies (the DSH projection) must not inherit them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "PLACEHOLDER",
    "PromptNames",
    "history_item",
    "history_messages",
    "is_valid_name",
    "post_process",
    "sanitize_name",
    "to_claude",
    "to_google",
]

#: the user message SillyTavern inserts where strict post-processing needs one (its config
#: ``promptPlaceholder``, as its shipped config.yaml sets it)
PLACEHOLDER = "[Start a new chat]"
_VALID_NAME = re.compile(r"[a-zA-Z0-9_]{1,64}")
_INVALID_NAME_CHAR = re.compile(r"[^a-zA-Z0-9_]")
_MODES = {
    "merge": (False, False, False, False),
    "claude": (False, False, False, False),
    "merge_tools": (False, False, False, True),
    "semi": (True, False, False, False),
    "semi_tools": (True, False, False, True),
    "strict": (True, True, False, False),
    "strict_tools": (True, True, False, True),
    "single": (True, False, True, False),
}


def is_valid_name(name: str) -> bool:
    """Whether a chat-completion ``name`` field is acceptable as it is (1-64 of ``[A-Za-z0-9_]``)."""
    return _VALID_NAME.fullmatch(name) is not None


def sanitize_name(name: str) -> str:
    """A name made acceptable: every other character becomes ``_``, cut to 64 (UTF-16 units, as JS)."""
    cleaned = _INVALID_NAME_CHAR.sub("_", name)
    return cleaned[:64]


def history_messages(
    chat: Sequence[Mapping[str, Any]],
    *,
    behavior: int,
    user: str,
    char: str,
    group: bool = False,
) -> list[dict[str, Any]]:
    """Chat messages (oldest first) as the prompt manager's history: ``{"id", "role", "content", "name"?}``.

    Each input message has ``role`` (``system`` is a narrator message), ``content``, optional
    ``name`` (the speaker; default the user's or character's name) and ``force_avatar``.
    """
    return [history_item(i, m["role"], m.get("content") or "", m.get("name"), bool(m.get("force_avatar")), m.get("id"),
                         behavior=behavior, user=user, char=char, group=group) for i, m in enumerate(chat)]


def history_item(index: int, role: str, content: str, name: str | None, force_avatar: bool, mid: str | None, *,
                 behavior: int, user: str, char: str, group: bool) -> dict[str, Any]:
    """One chat message (the ``index``-th, oldest first) as :func:`history_messages` gives it.

    Apart so that a long chat's history can be built message by message, newest first, only as
    far back as its budget can reach."""
    narrator = role == "system"
    speaker = name or (user if role == "user" else ("System" if narrator else char))
    if behavior == 0:
        if (group and speaker != user) or (force_avatar and speaker != user and not narrator):
            content = f"{speaker}: {content}"
    elif behavior == 2 and not narrator:
        content = f"{speaker}: {content}"
    content = content.replace("\r", "")
    item: dict[str, Any] = {"id": mid or f"chat-{index}", "role": role, "content": content}
    if behavior == 1 and speaker:
        item["name"] = speaker if is_valid_name(speaker) else sanitize_name(speaker)
    return item


@dataclass(frozen=True, slots=True)
class PromptNames:
    """The names post-processing prefixes (``char_name``, ``user_name``, ``group_names`` of the request)."""

    char: str = ""
    user: str = ""
    group: tuple[str, ...] = ()

    def starts_with_group_name(self, text: str) -> bool:
        return any(text.startswith(f"{n}: ") for n in self.group)


def _flatten(content: Any) -> str:
    if isinstance(content, list):
        return "\n\n".join(str(p.get("text", "")) if isinstance(p, Mapping) and p.get("type") == "text" else ""
                           for p in content)
    return content if isinstance(content, str) else ""


def post_process(messages: Sequence[Mapping[str, Any]], kind: str, names: PromptNames) -> list[dict[str, Any]]:
    """SillyTavern's prompt post-processing of a finished message array (``""``/``none``: unchanged)."""
    if kind not in _MODES:
        return [dict(m) for m in messages]
    strict, placeholders, single, tools = _MODES[kind]
    return _merge([dict(m) for m in messages], names, strict=strict, placeholders=placeholders, single=single,
                  tools=tools)


def _merge(messages: list[dict[str, Any]], names: PromptNames, *, strict: bool, placeholders: bool, single: bool,
           tools: bool) -> list[dict[str, Any]]:
    for m in messages:
        content = _flatten(m.get("content")) if m.get("content") else ""
        role, name = m.get("role"), m.get("name")
        if role == "system":
            content = _example_prefix(m, content, names)
        if name and role != "system" and not content.startswith(f"{name}: "):
            content = f"{name}: {content}"
        if role == "tool" and not tools:
            m["role"] = role = "user"
        if single:
            if role == "assistant" and names.char and not content.startswith(f"{names.char}: ") \
                    and not names.starts_with_group_name(content):
                content = f"{names.char}: {content}"
            if role == "user" and names.user and not content.startswith(f"{names.user}: "):
                content = f"{names.user}: {content}"
            m["role"] = "user"
        m["content"] = content
        m.pop("name", None)
        if not tools:
            m.pop("tool_calls", None)
            m.pop("tool_call_id", None)
    merged: list[dict[str, Any]] = []
    for m in messages:
        if merged and merged[-1]["role"] == m["role"] and m["content"] and m["role"] != "tool":
            merged[-1]["content"] += "\n\n" + m["content"]
        else:
            merged.append(m)
    if not merged:
        merged.append({"role": "user", "content": PLACEHOLDER})
    if strict:
        for i in range(1, len(merged)):
            if merged[i]["role"] == "system":
                merged[i]["role"] = "user"
        if merged and placeholders:
            if merged[0]["role"] == "system" and (len(merged) == 1 or merged[1]["role"] != "user"):
                merged.insert(1, {"role": "user", "content": PLACEHOLDER})
            elif merged[0]["role"] not in ("system", "user"):
                merged.insert(0, {"role": "user", "content": PLACEHOLDER})
        return _merge(merged, names, strict=False, placeholders=placeholders, single=False, tools=tools)
    return merged


def _example_prefix(m: Mapping[str, Any], content: str, names: PromptNames) -> str:
    if names.user and m.get("name") == "example_user" and not content.startswith(f"{names.user}: "):
        return f"{names.user}: {content}"
    if names.char and m.get("name") == "example_assistant" and not content.startswith(f"{names.char}: ") \
            and not names.starts_with_group_name(content):
        return f"{names.char}: {content}"
    return content


def to_claude(messages: Sequence[Mapping[str, Any]], names: PromptNames, *, use_sysprompt: bool,
              prefill: str = "") -> dict[str, Any]:
    """The Claude Messages body SillyTavern's server builds (``convertClaudeMessages``), text only.

    With ``use_sysprompt`` the leading system messages become the ``system`` blocks (an empty rest
    gets the placeholder user message); every other system message is sent as user, example
    messages with their speaker's name; names become content prefixes; the prefill (trailing
    whitespace removed) is a final assistant message; runs of one role are merged into one
    message of several text blocks.
    """
    work = [dict(m) for m in messages]
    system: list[dict[str, Any]] = []
    if use_sysprompt:
        i = 0
        while i < len(work) and work[i].get("role") == "system":
            system.append({"type": "text", "text": _example_prefix(work[i], _flatten(work[i].get("content")), names)})
            i += 1
        work = work[i:]
        if not work:
            work.append({"role": "user", "content": PLACEHOLDER})
    out: list[dict[str, Any]] = []
    for m in work:
        role = m.get("role")
        content = _flatten(m.get("content"))
        name = m.get("name")
        if role == "tool":
            role = "user"
        if role == "system":
            content = _example_prefix(m, content, names)
            role, name = "user", None
        if name:
            content = f"{name}: {content}"
        out.append({"role": role, "content": [{"type": "text", "text": content}]})
    if prefill:
        out.append({"role": "assistant", "content": [{"type": "text", "text": prefill.rstrip()}]})
    merged: list[dict[str, Any]] = []
    for m in out:
        if merged and merged[-1]["role"] == m["role"]:
            merged[-1]["content"].extend(m["content"])
        else:
            merged.append(m)
    return {"system": system, "messages": merged}


def to_google(messages: Sequence[Mapping[str, Any]], names: PromptNames, *, use_sysprompt: bool) -> dict[str, Any]:
    """The Gemini body SillyTavern's server builds (``convertGooglePrompt``), text only.

    With ``use_sysprompt`` the leading system messages (all but a last one) become
    ``system_instruction`` parts; later system messages are sent as user, assistant as ``model``;
    names become content prefixes (example messages take the user's or character's name); runs of
    one role are merged with a blank line.
    """
    work = [dict(m) for m in messages]
    system: list[str] = []
    if use_sysprompt:
        while len(work) > 1 and work[0].get("role") == "system":
            system.append(_example_prefix(work[0], _flatten(work[0].get("content")), names))
            work.pop(0)
    contents: list[dict[str, Any]] = []
    for m in work:
        role = {"system": "user", "tool": "user", "assistant": "model"}.get(str(m.get("role")), str(m.get("role")))
        text = _flatten(m.get("content"))
        name = m.get("name")
        if name:
            if name in ("example_user", "example_assistant"):
                text = _example_prefix(m, text, names)
            elif not text.startswith(f"{name}: "):
                text = f"{name}: {text}"
        if contents and contents[-1]["role"] == role:
            if text:
                contents[-1]["parts"][0]["text"] += "\n\n" + text
        else:
            contents.append({"role": role, "parts": [{"text": text}]})
    return {"contents": contents, "system_instruction": {"parts": [{"text": t} for t in system]}}
