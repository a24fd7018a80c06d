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
each set unless the request says it was not allowed. :func:`build_pass` makes the pass when the request
is loaded (:func:`~.passes.request_passes`); the macros of patterns and replacements read the chat's
macro context, which the stages hand over with each text (fact ``macros``). The run's warnings go into
the request's, and the pass reports which script changed which text (``TextPass.report``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..errors import TemplateError
from ..regexscripts import Placement, RegexRun, RegexScript, macro_substituters, read_scripts, read_scripts_cached
from ..strict_json import loads
from .passes import Text, TextKind, TextPass
from .request import StRequest

__all__ = ["RegexStage", "build_pass", "request_scripts"]

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
    """One request's regex run as a text pass (see the module's docstring).

    The macro substitution the run uses is bound on the first text, to the macro context the stages
    hand over with it (the same for every text of a request).
    """

    def __init__(self, scripts: list[RegexScript], seed: int, time_limit: float, warnings: list[Any]) -> None:
        self._seed = seed
        self._substitute: Any = None
        self._escaped: Any = None
        self.run = RegexRun(scripts, self._plain, self._escape, time_limit=time_limit, diagnostics=warnings)

    def _bind(self, facts: Mapping[str, Any]) -> None:
        if self._substitute is None:
            self._substitute, self._escaped = macro_substituters(facts.get("macros") or {}, self._seed)

    def _plain(self, text: str) -> str:
        return self._substitute(text) if self._substitute is not None else text

    def _escape(self, text: str) -> str:
        return self._escaped(text) if self._escaped is not None else text

    def text_pass(self) -> TextPass:
        """The pass over the kinds of text some script can touch."""
        run = self.run
        kinds = frozenset(k for k, placements in _KINDS.items() if any(run.has_scripts(p) for p in placements)
                          or (k == "chat_message" and run.has_stored_scripts(Placement.USER_INPUT)))
        return TextPass("regex", kinds, self.apply, report=run.provenance)

    def apply(self, text: Text) -> str:
        facts, run = text.facts, self.run
        self._bind(facts)
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


def build_pass(loaded: Any) -> TextPass | None:
    """The request's regex pass (:func:`~.passes.request_passes`), or ``None`` when it has no script."""
    req = loaded.req
    scripts = request_scripts(req, loaded.preset, loaded.inputs.preset_name, loaded.inputs.card, loaded.base_dir)
    if not scripts:
        return None
    stage = RegexStage(scripts, req.options.seed, req.extensions.regex.time_limit, loaded.warnings)
    return stage.text_pass()
