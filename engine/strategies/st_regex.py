"""The regex stage of SillyTavern's request: its scripts applied to the chat, the reasoning and world info.

SillyTavern 1.18 runs its regex scripts over what it is about to send, at three places of ``Generate``
(``script.js``) and world info (``world-info.js``):

* every chat message it keeps for the prompt (``coreChat``: hidden messages left out, the swiped
  message popped), by its kind (user input for the user's, AI output for every other) and its depth
  (0 the last message; a continue counts from the continued one, so it is -1);
* then each message's reasoning (``extra.reasoning``), by the reasoning placement and the same depth,
  added before the message as ``options.reasoning`` says (newest first, up to ``max_additions``;
  the continued message's reasoning always, as the start of the reply; in a group chat only the
  replying member's messages);
* every activated world-info entry's content (world-info placement; depth only for entries placed at a
  depth), after activation and its budget: an entry the scripts empty is not sent.

The world-info scan and everything after read the chat as the scripts left it; the chat macros
(``{{lastMessage}}``...) read it as stored. The scripts are the request's global ones, then the
preset's, then the card's (:func:`request_scripts`), each set unless the request says it was not
allowed.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ..errors import TemplateError
from ..strict_json import loads
from ..regexscripts import Placement, RegexRun, RegexScript, macro_substituters, read_scripts, read_scripts_cached
from ..worldinfo.output import ActivatedEntry, build_positions
from .st_chat import ChatMessage
from .st_request import ReasoningOptions, StRequest

__all__ = ["RegexStage", "regex_stage", "request_scripts"]


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


@dataclass(slots=True)
class _Reasoning:
    """``PromptReasoning``: how many reasonings were added so far, against ``max_additions``."""

    options: ReasoningOptions
    added: int = 0

    def limit_reached(self) -> bool:
        return not self.options.add_to_prompts or self.added >= self.options.max_additions


class RegexStage:
    """One request's regex run with the texts it applies to (see the module's docstring)."""

    def __init__(self, run: RegexRun, reasoning: ReasoningOptions, substitute: Any,
                 group_speaker: str | None = None, user: str = "") -> None:
        self.run = run
        self.reasoning = reasoning
        self._substitute = substitute
        #: in a group chat, the member replying now: only that member's messages carry their reasoning in
        self.group_speaker = group_speaker
        self._user = user

    def _someone_else(self, message: ChatMessage) -> bool:
        if self.group_speaker is None:
            return False
        speaker = self._user if message.role == "user" else (message.name or self.group_speaker)
        return speaker != self.group_speaker

    def chat(self, chat: Sequence[ChatMessage], continued: bool, sent_now: bool = False) -> list[ChatMessage]:
        """The chat as the prompt is built from it: scripts applied to each message, reasoning added.

        ``sent_now``: the last message is what this generation sends first (the send box's text or
        ``send_if_empty``), which SillyTavern stores through the scripts that run on stored messages.
        """
        run, n, shift = self.run, len(chat), 2 if continued else 1
        out = list(chat)
        if sent_now and out:
            last = out[-1]
            stored = run.apply_stored(last.content, Placement.USER_INPUT, f"chat[{n - 1}]")
            if stored != last.content:
                out[-1] = last._replace(content=stored)
        chat_scripts = run.has_scripts(Placement.USER_INPUT) or run.has_scripts(Placement.AI_OUTPUT)
        for i, message in enumerate(out):
            if not chat_scripts or not message.content:
                continue
            text = message.content
            if i == 0 and "{{" in text:  # ``Generate`` substitutes the first message's macros before
                text = self._substitute(text)
            kind = Placement.USER_INPUT if message.role == "user" else Placement.AI_OUTPUT
            done = run.apply(text, kind, n - i - shift, f"chat[{i}]")
            if done != text or text != message.content:
                out[i] = message._replace(content=done)
        self._add_reasoning(out, continued, shift)
        return out

    def _add_reasoning(self, out: list[ChatMessage], continued: bool, shift: int) -> None:
        state, n = _Reasoning(self.reasoning), len(out)
        for i in range(n - 1, -1, -1):
            message = out[i]
            as_prefix = continued and i == n - 1
            if message.reasoning and (as_prefix or not state.limit_reached()) and not self._someone_else(message):
                thought = self.run.apply(message.reasoning, Placement.REASONING, n - i - shift, f"chat[{i}].reasoning")
                if thought and thought != "\u200b":  # SillyTavern's old placeholder for "no reasoning"
                    state.added += 1
                    out[i] = message._replace(content=self._with_reasoning(message.content, thought, as_prefix))
            if state.limit_reached():
                break

    def _with_reasoning(self, content: str, thought: str, as_prefix: bool) -> str:
        opts, sub = self.reasoning, self._substitute
        prefix = sub(opts.prefix) if opts.prefix else ""
        if as_prefix and not content:  # the reply continues inside its reasoning
            return prefix + thought
        suffix = sub(opts.suffix) if opts.suffix else ""
        separator = sub(opts.separator) if opts.separator else ""
        return f"{prefix}{thought}{suffix}{separator}{content}"

    def world_info(self, activation: Any) -> Any:
        """The activation with each entry's content as the scripts leave it (emptied entries are not sent)."""
        run = self.run
        if activation is None or not run.has_scripts(Placement.WORLD_INFO):
            return activation
        kept: list[ActivatedEntry] = []
        for item in activation.activated:
            entry = item.entry
            depth = entry.depth if entry.position == 4 else None
            text = run.apply(item.content, Placement.WORLD_INFO, depth, f"world_info:{entry.book}.{entry.uid}")
            if text:
                kept.append(item if text == item.content else ActivatedEntry(entry, text, item.step))
        return replace(activation, activated=tuple(kept), by_position=build_positions(kept))


def regex_stage(request: StRequest, preset: Mapping[str, Any], preset_name: str, card: Mapping[str, Any] | None,
                macro_context: Mapping[str, Any], seed: int, base_dir: Path | None = None) -> RegexStage | None:
    """The request's regex stage, or ``None`` when no script can apply and no reasoning is added."""
    scripts = request_scripts(request, preset, preset_name, card, base_dir)
    reasoning = request.options.reasoning
    if not scripts and not reasoning.add_to_prompts and request.generation.type != "continue":
        return None
    plain, escaped = macro_substituters(macro_context, seed)
    run = RegexRun(scripts, plain, escaped, time_limit=request.extensions.regex.time_limit)
    speaker = str(macro_context.get("char") or "") if request.group is not None else None
    return RegexStage(run, reasoning, plain, speaker, request.user.name)
