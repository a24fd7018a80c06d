"""The regex pass: SillyTavern's regex scripts over the texts of the request, as SillyTavern 1.18 runs them.

SillyTavern runs its regex scripts (``public/scripts/extensions/regex/engine.js``) over what it is about
to send, at three points, each a text kind of :mod:`.passes`:

* ``chat_message``: every chat message ``Generate`` keeps for the prompt (``coreChat``: hidden messages
  left out, the swiped message popped), by its kind (user input for the user's, AI output for every
  other) and depth (0 the last message; a continue counts from the continued one, at -1). The message
  the send box adds is first stored through the scripts that run on stored messages
  (``sendMessageAsUser``; fact ``sent_now``);
* ``chat_reasoning``: a message's reasoning, by the reasoning placement and the message's depth, where
  :mod:`.reasoning` adds it before the message;
* ``world_info_entry``: every activated entry's content (world-info placement; depth only for entries
  placed at a depth); an entry the scripts empty is not sent.

The scripts are the request's global ones, then the preset's, then the card's (:func:`request_scripts`),
each set unless the request says it was not allowed. The pass is built by :func:`regex_pass` where the
chat is prepared, with the macro context the replacements' macros read; it keeps the run's warnings in
the request's and which script changed which text (:attr:`RegexStage.run`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..errors import Diagnostic, TemplateError
from ..regexscripts import Placement, RegexRun, RegexScript, macro_substituters, read_scripts, read_scripts_cached
from ..strict_json import loads
from .passes import Text, TextKind, TextPass
from .request import StRequest

__all__ = ["RegexStage", "regex_pass", "request_scripts"]

#: the text kinds a placement's scripts read
_KINDS: dict[TextKind, tuple[Placement, ...]] = {
    "chat_message": (Placement.USER_INPUT, Placement.AI_OUTPUT),
    "chat_reasoning": (Placement.REASONING,),
    "world_info_entry": (Placement.WORLD_INFO,),
}


def _global_scripts(value: Any, base_dir: Path | None) -> Any:
    """The global scripts as given: objects, or the path of a SillyTavern regex export (relative to the request)."""
    if not isinstance(value, str):
        return value
    path = Path(value) if base_dir is None else base_dir / value
    try:
        text = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise TemplateError(f"$.extensions.regex.scripts: cannot read {value!r}: {exc}", code="REQUEST_INVALID",
                            path="$.extensions.regex.scripts") from None
    try:
        return loads(text, what=f"the regex export {value!r}", code="REQUEST_INVALID")
    except json.JSONDecodeError as exc:
        raise TemplateError(f"the regex export {value!r} is not JSON: {exc.msg}", code="REQUEST_INVALID",
                            line=exc.lineno, column=exc.colno, path="$.extensions.regex.scripts") from None


def request_scripts(request: StRequest, preset: Mapping[str, Any], preset_name: str,
                    card: Mapping[str, Any] | None, base_dir: Path | None = None) -> list[RegexScript]:
    """The scripts SillyTavern runs for this request, in its order: global, the preset's, the card's."""
    settings = request.extensions.regex
    scripts = read_scripts(_global_scripts(settings.scripts, base_dir), "global", "request",
                           "$.extensions.regex.scripts")
    if settings.preset_scripts:
        ext = preset.get("extensions")
        found = ext.get("regex_scripts") if isinstance(ext, Mapping) else None
        scripts += read_scripts_cached(found, "preset", preset_name or "preset", "$.preset.extensions.regex_scripts")
    if settings.card_scripts and card is not None:
        ext = card.get("extensions")
        found = ext.get("regex_scripts") if isinstance(ext, Mapping) else None
        scripts += read_scripts_cached(found, "card", str(card.get("name") or "card"),
                                       "$.card.data.extensions.regex_scripts")
    return scripts


class RegexStage:
    """One request's regex run as a text pass (see the module's docstring)."""

    def __init__(self, run: RegexRun) -> None:
        self.run = run

    def text_pass(self) -> TextPass:
        """The pass over the kinds of text some script can touch."""
        kinds = frozenset(k for k, placements in _KINDS.items() if any(self.run.has_scripts(p) for p in placements)
                          or (k == "chat_message" and self.run.has_stored_scripts(Placement.USER_INPUT)))
        return TextPass("regex", kinds, self.apply)

    def apply(self, text: Text) -> str:
        facts, run = text.facts, self.run
        if text.kind == "chat_message":
            content, index = text.text, facts.get("index")
            if facts.get("sent_now"):
                content = run.apply_stored(content, Placement.USER_INPUT, f"chat[{index}]")
            kind = Placement.USER_INPUT if facts.get("is_user") else Placement.AI_OUTPUT
            return run.apply(content, kind, facts.get("depth"), f"chat[{index}]")
        if text.kind == "chat_reasoning":
            return run.apply(text.text, Placement.REASONING, facts.get("depth"), f"chat[{facts.get('index')}].reasoning")
        if text.kind == "world_info_entry":
            depth = facts.get("depth") if facts.get("position") == "at_depth" else None
            return run.apply(text.text, Placement.WORLD_INFO, depth,
                             f"world_info:{facts.get('book')}.{facts.get('uid')}")
        return text.text


def regex_pass(request: StRequest, preset: Mapping[str, Any], preset_name: str, card: Mapping[str, Any] | None,
               macro_context: Mapping[str, Any], warnings: list[Diagnostic],
               base_dir: Path | None = None) -> RegexStage | None:
    """The request's regex stage, or ``None`` when it has no script."""
    scripts = request_scripts(request, preset, preset_name, card, base_dir)
    if not scripts:
        return None
    plain, escaped = macro_substituters(macro_context, request.options.seed)
    return RegexStage(RegexRun(scripts, plain, escaped, time_limit=request.extensions.regex.time_limit,
                               diagnostics=warnings))
