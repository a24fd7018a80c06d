"""SillyTavern's variables as it keeps them, in their three scopes (plus Tavern Helper's two).

- **global**: ``extension_settings.variables.global`` (``{{getglobalvar}}``, ``getvar(k, {scope: 'global'})``);
- **chat** ("local"): ``chat_metadata.variables`` of the open chat (``{{getvar}}``, a chat export's first line);
- **message**: each chat message's ``variables[swipe_id]``, the object of the swipe shown (where MVU keeps
  ``stat_data``; ST-Prompt-Template and Tavern Helper read it);
- Tavern Helper's **character** (``data.extensions.tavern_helper.variables`` of the card) and **preset**
  (``extensions.tavern_helper.variables`` of the preset) scopes.

Nothing here writes: templates' writes come back as a patch per scope (``VariablesPatch``), never into these
objects or the caller's files.
"""

from __future__ import annotations

import json

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["StVariables", "copied_forward", "message_variables"]


def message_variables(message: Mapping[str, Any]) -> Any:
    """The variables object of the swipe a stored SillyTavern message shows (``variables[swipe_id ?? 0]``).

    ``None`` when the message has none. A message written by hand may give ``variables`` as the object itself
    (not a per-swipe list): that object is the current swipe's.
    """
    variables = message.get("variables")
    if variables is None:
        return None
    if isinstance(variables, list):
        swipe = message.get("swipe_id")
        index = swipe if isinstance(swipe, int) and not isinstance(swipe, bool) else 0
        return variables[index] if 0 <= index < len(variables) else None
    return variables


def _settings_variables(holder: Any) -> Mapping[str, Any]:
    """Tavern Helper's ``variables`` under ``extensions.tavern_helper`` (an object, or its entries as pairs)."""
    if not isinstance(holder, Mapping):
        return {}
    extensions = holder.get("extensions")
    settings = extensions.get("tavern_helper") if isinstance(extensions, Mapping) else None
    if isinstance(settings, list):
        try:
            settings = dict(settings)
        except (TypeError, ValueError):
            return {}
    variables = settings.get("variables") if isinstance(settings, Mapping) else None
    return variables if isinstance(variables, Mapping) else {}


@dataclass(frozen=True)
class StVariables:
    """The variables a generation sees. ``messages`` holds each chat message's current-swipe object, in chat
    order (``None`` for a message without variables)."""

    global_vars: Mapping[str, Any] = field(default_factory=dict)
    chat: Mapping[str, Any] = field(default_factory=dict)
    messages: tuple[Any, ...] = ()
    character: Mapping[str, Any] = field(default_factory=dict)
    preset: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def build(cls, *, global_vars: Any = None, chat: Any = None, messages: Sequence[Any] = (), card: Any = None,
              preset: Any = None) -> StVariables:
        """From the request's pieces: ``global_variables``, ``chat.variables``, each message's ``variables``
        (already the current swipe's object), the card and the preset (Tavern Helper's scopes)."""
        data = card.get("data") if isinstance(card, Mapping) and isinstance(card.get("data"), Mapping) else card
        return cls(global_vars=global_vars if isinstance(global_vars, Mapping) else {},
                   chat=chat if isinstance(chat, Mapping) else {}, messages=tuple(messages),
                   character=_settings_variables(data), preset=_settings_variables(preset))

    def scope(self, kind: str) -> Any:
        """A scope's object by Tavern Helper's name (``message`` is the latest message with variables);
        ``None`` for an unknown name (Tavern Helper reads nothing then)."""
        if kind == "message":
            return self.latest_message()
        if kind == "chat":
            return self.chat
        if kind == "global":
            return self.global_vars
        if kind == "character":
            return self.character
        if kind == "preset":
            return self.preset
        return None

    def latest_message(self) -> Any:
        """Tavern Helper's message scope without a message id: the last message whose current swipe has an
        object of variables; when none has, the last message's (so an empty object)."""
        for value in reversed(self.messages):
            if isinstance(value, (dict, list)):
                return value
        last = self.messages[-1] if self.messages else None
        return last if last is not None else {}


def copied_forward(messages: Sequence[Any], steps: Sequence[int], initial: Mapping[str, Any] | None = None,
                   initialized: Sequence[bool] = ()) -> tuple[Any, ...]:
    """The messages' variables after the load of a chat without templates: each evaluated message after the first
    takes a copy of the nearest earlier message's variables (``initial`` when none has any), its own keys winning;
    the first, and one ``initialized`` before (an export's ``variables_initialized``), gets an empty object when it
    has none. (The runtime's ``enterMessage`` does the same in the VM.)"""
    out = list(messages)
    for index in steps:
        if index > 0 and not (index < len(initialized) and initialized[index]):
            prev = next((out[j] for j in range(index - 1, -1, -1) if out[j] is not None), None)
            base = prev if isinstance(prev, Mapping) else (initial or {}) if prev is None else {}
            own = out[index] if isinstance(out[index], Mapping) else {}
            out[index] = json.loads(json.dumps({**base, **own}))
        elif out[index] is None:
            out[index] = {}
    return tuple(out)
