"""The text-completion back end: the shared front placed as SillyTavern's one prompt string.

SillyTavern's ``Generate`` for a text-completion API (KoboldCpp, llama.cpp, Ollama, ...) takes the
same front as chat completion (the card's texts, the chat prepared for the generation type, the
activated world info) and writes one string instead of a message list, with the request's
instruct, context and system-prompt templates (``text_completion`` in the request):

- the story string: the context template's Handlebars over the card's fields, the system prompt,
  the persona (when it is "in the prompt"), world info before/after, the Author's Note when it
  sits before/after the scenario (its anchors), then macros (:func:`~tavernbox.instruct.render_story_string`);
- the example dialogues, world info's example entries around them;
- the chat history, with the prompts SillyTavern places at a depth (the Author's Note in the chat
  with world info's Author's-Note entries around it and the persona at its top or bottom, world
  info at depth, the card's depth prompt, a persona at depth, the story string in the chat) and
  the post-history instructions, then the last prompt line (:func:`~tavernbox.instruct.assemble_prompt`);
- the stop strings (:func:`~tavernbox.instruct.stopping_strings`).

The context budget (:mod:`tavernbox.instruct.fitting`) counts with the request's tokenizer; SillyTavern
counts with the model's: ``llama3`` and the sentencepiece models (from the user's copies of
SillyTavern's files) and ``estimate`` (SillyTavern's count without a tokenizer) keep exactly what it
keeps. A quiet generation (``generation.type`` ``quiet``) ends the prompt with its ``quiet_prompt``
as ``generateQuietPrompt`` sends it (not ``quietToLoud``, no ``quietName``). In a group chat the other members' ``Name:`` lines
are stop strings too.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from dataclasses import dataclass, field
from typing import Any

from ..assembler.sources import world_info_from_activation
from ..assets.text_templates import TextTemplate, load_text_template, template_folder
from ..errors import Diagnostic, TemplateError
from ..instruct import (
    ChatItem,
    Context,
    ExtensionPrompt,
    Instruct,
    PromptBudget,
    PromptPieces,
    Speaker,
    StopSettings,
    StoryParams,
    Span,
    assemble_prompt_spans,
    format_examples,
    render_story_string,
    split_example_blocks,
    stopping_strings,
    wrap_story_string,
)
from ..macros import MacroContext, expand_macros
from ..spans import utf16_offset
from ..tokenizers import CHARS_PER_TOKEN, get_tokenizer
from .chat import macro_base_context
from .front import Front, build_front
from .passes import TextPass
from .request import StRequest
from .texts import author_note_block

__all__ = ["TextCompletion", "TextTemplates", "assemble_text_completion", "load_templates", "text_completion"]

_ROLES = ("system", "user", "assistant")
_PERSONA_CODES = {"in_prompt": 0, "top_an": 2, "bottom_an": 3, "at_depth": 4, "none": 9}


@dataclass(frozen=True, slots=True)
class TextTemplates:
    """The request's three templates, read and checked; ``instruct`` None is instruct mode off,
    ``sysprompt`` None a disabled system prompt."""

    instruct: TextTemplate | None
    context: TextTemplate
    sysprompt: TextTemplate | None


@dataclass(slots=True)
class TextCompletion:
    """What SillyTavern sends a text-completion API: the prompt and the stop strings."""

    prompt: str
    stop: list[str]
    templates: TextTemplates
    warnings: list[Diagnostic] = field(default_factory=list)
    #: what produced each part of the prompt (character offsets; :meth:`to_dict` gives UTF-16 ones)
    spans: list[Span] = field(default_factory=list)

    def provenance(self) -> list[dict[str, Any]]:
        """The spans with UTF-16 offsets, as the chat-completion provenance gives them."""
        out = []
        at = 0
        for span in self.spans:
            length = utf16_offset(self.prompt[span.start:span.end], span.end - span.start)
            out.append({"start": at, "end": at + length, "source": span.source})
            at += length
        return out

    def to_dict(self) -> dict[str, Any]:
        return {"prompt": self.prompt, "stop": self.stop,
                "templates": {"instruct": self.templates.instruct.name if self.templates.instruct else None,
                              "context": self.templates.context.name,
                              "sysprompt": self.templates.sysprompt.name if self.templates.sysprompt else None},
                "warnings": [d.to_dict() for d in self.warnings], "provenance": self.provenance()}


def load_templates(spec: Any) -> TextTemplates:
    """The ``text_completion`` field's templates (objects, paths or names in the template folder)."""
    folder = template_folder(spec.templates)
    source = spec.export if spec.export is not None else None

    def pick(kind: str, value: Any) -> Any:
        if value is None and isinstance(source, Mapping) and isinstance(source.get(kind), Mapping):
            return source[kind]
        if value is None and isinstance(source, str):
            return source
        return value

    instruct_ref, context_ref, sysprompt_ref = (pick("instruct", spec.instruct), pick("context", spec.context),
                                                pick("sysprompt", spec.sysprompt))
    if context_ref is None:
        raise TemplateError("text completion needs a context template ($.text_completion.context)",
                            code="REQUEST_INVALID", path="$.text_completion.context")
    context = _load("context", context_ref, folder)
    instruct = _load("instruct", instruct_ref, folder) if instruct_ref is not None else None
    if instruct is not None and instruct.fields.get("enabled") is False:
        instruct = None
    sysprompt = _load("sysprompt", sysprompt_ref, folder) if sysprompt_ref is not None else None
    if sysprompt is not None and sysprompt.fields.get("enabled") is False:
        sysprompt = None
    return TextTemplates(instruct, context, sysprompt)


def _load(kind: str, ref: Any, folder: Any = None) -> TextTemplate:
    try:
        return load_text_template(kind, ref, folder)
    except TemplateError as exc:
        where = f"$.text_completion.{kind}" + (exc.path[1:] if exc.path and exc.path.startswith("$") else "")
        raise TemplateError(f"{where}: {exc.message}", code=exc.code, path=where) from None


@dataclass(frozen=True, slots=True)
class _Lore:
    """World info by where text completion puts it."""

    before: str = ""
    after: str = ""
    an_top: tuple[str, ...] = ()
    an_bottom: tuple[str, ...] = ()
    #: example-message entries before the examples (each put first in turn, so the last ends first)
    em_top: tuple[str, ...] = ()
    em_bottom: tuple[str, ...] = ()
    depth: tuple[ExtensionPrompt, ...] = ()


def _lore(front: Front) -> _Lore:
    activation = front.lore.activation
    if activation is None:
        return _Lore()
    entries = [e for e in world_info_from_activation(activation) if e.get("content")]
    ranked = sorted(entries, key=lambda e: -(o if isinstance(o := e.get("order"), (int, float)) else 100))
    ordered = list(reversed(ranked))

    def slot(entry: Mapping[str, Any]) -> int:
        origin = entry.get("approximated_from")
        return int(origin) if origin is not None else {"before": 0, "after": 1, "at_depth": 4}[entry["position"]]

    by_slot: dict[int, list[Mapping[str, Any]]] = {}
    for entry in ordered:
        by_slot.setdefault(slot(entry), []).append(entry)
    depth: dict[tuple[int, str], list[str]] = {}
    for entry in by_slot.get(4, []):
        depth.setdefault((int(entry["depth"]), str(entry["role"])), []).append(str(entry["content"]))
    texts = {k: [str(e["content"]) for e in v] for k, v in by_slot.items()}
    return _Lore("\n".join(texts.get(0, [])), "\n".join(texts.get(1, [])), tuple(texts.get(2, [])),
                 tuple(texts.get(3, [])), tuple(texts.get(5, [])), tuple(texts.get(6, [])),
                 tuple(ExtensionPrompt(f"customDepthWI_{d}_{_ROLES.index(r)}", "\n".join(v), d, r)
                       for (d, r), v in depth.items()))


class _Names:
    """The request's macro context (names, persona, card, chat) as one substitution.

    The context is built once a request, and each distinct text is expanded once: instruct
    sequences are substituted for every message, and expanding is deterministic for a request
    (random macros are seeded).
    """

    def __init__(self, front: Front) -> None:
        self.base = {**macro_base_context(front.texts), **front.chat.macro_chat}
        self.seed = self.base.get("seed", 0)
        self._context: MacroContext | None = None
        self._done: dict[str, str] = {}

    def __call__(self, text: str) -> str:
        if not text or ("{{" not in text and "<" not in text):
            return text
        done = self._done.get(text)
        if done is None:
            if self._context is None:
                self._context = MacroContext.from_dict(self.base)
            done = self._done[text] = expand_macros(text, self._context, seed=self.seed).text
        return done

    def expand(self, text: str, original: str | None = None) -> str:
        """``text`` with ``{{original}}`` standing for ``original``."""
        if original is None:
            return self(text)
        if not text or ("{{" not in text and "<" not in text):
            return text
        return expand_macros(text, {**self.base, "original": original}, seed=self.seed).text


def _settings(spec: Any) -> dict[str, Any]:
    defaults = {"trim_spaces": True, "collapse_newlines": False, "always_force_name2": True, "single_line": False,
                "custom_stopping_strings": "", "custom_stopping_strings_macro": True,
                "prefer_character_prompt": True, "prefer_character_jailbreak": True}
    return {**defaults, **dict(spec.settings)}


def text_completion(front: Front) -> TextCompletion:
    """The text-completion prompt and stop strings for the front (the request's ``text_completion``)."""
    req = front.req
    spec = req.text_completion
    if spec is None:
        raise TemplateError("the request has no text_completion field", code="REQUEST_INVALID",
                            path="$.text_completion")
    templates = load_templates(spec)
    settings = _settings(spec)
    instruct = Instruct.from_fields(templates.instruct.fields) if templates.instruct is not None else None
    context = Context.from_fields(templates.context.fields)
    texts = front.texts
    speaker = Speaker(texts.user, texts.char, in_group=req.group is not None)
    names = _Names(front)
    lore = _lore(front)
    card = texts.read_card or {}
    persona_position = _PERSONA_CODES[req.user.persona.position]
    prompts, before, after = _placed_prompts(front, names, lore, persona_position)
    params = StoryParams(
        description=names(card.get("description") or ""), personality=names(card.get("personality") or ""),
        persona=names(texts.persona_text) if persona_position == 0 else "", scenario=names(card.get("scenario") or ""),
        system=_system_prompt(templates, card, settings, names), char=texts.char, user=texts.user,
        wiBefore=lore.before, wiAfter=lore.after, loreBefore=lore.before, loreAfter=lore.after,
        anchorBefore=before, anchorAfter=after)
    examples, raw_examples = _examples(card, context, instruct, speaker, names, lore)
    params = StoryParams(**{**params.data(), "mesExamples": "".join(examples), "mesExamplesRaw": "".join(raw_examples)})
    story = _story(context, instruct, params, names)
    if instruct is not None:
        story = wrap_story_string(story, context, instruct, names)
    if context.in_chat and story:
        prompts.append(ExtensionPrompt("__STORY_STRING__", story, context.story_string_depth,
                                       _ROLES[context.story_string_role]))
        story = ""
    history = _history(front, names)
    pieces = PromptPieces(instruct=instruct, context=context, speaker=speaker, story=story, examples=examples,
                          history=history, injections=prompts, generation=front.chat.gen,
                          quiet_prompt=front.chat.quiet_prompt if front.chat.gen == "quiet" else "",
                          post_history=_post_history(templates, card, settings, names),
                          # a quiet prompt is generated with ``force_name2`` (``generateQuietPrompt``)
                          force_name2=bool(settings["always_force_name2"]) or front.chat.gen == "quiet",
                          collapse_newlines=bool(settings["collapse_newlines"]),
                          budget=_budget(front, settings))
    assembled = assemble_prompt_spans(pieces, names)
    prompt = assembled.text
    stop = stopping_strings(instruct, context, speaker, names, StopSettings(
        custom_stopping_strings=str(settings["custom_stopping_strings"] or ""),
        custom_stopping_strings_macro=bool(settings["custom_stopping_strings_macro"]),
        single_line=bool(settings["single_line"])), impersonate=front.chat.gen == "impersonate",
        continue_after_user=front.chat.gen == "continue" and bool(history) and history[-1].is_user,
        group_members=tuple(req.group.members) if req.group is not None else ())
    warnings = list(front.loaded.warnings)
    for template in (templates.instruct, templates.context, templates.sysprompt):
        if template is not None:
            warnings.extend(template.diagnostics)
    return TextCompletion(prompt, stop, templates, warnings, list(assembled.spans))


def _story(context: Context, instruct: Instruct | None, params: StoryParams, names: _Names) -> str:
    """The rendered story string; a Handlebars error names the context template's ``story_string``
    (its line and column are in the story string)."""
    try:
        return render_story_string(context, instruct, params, names)
    except TemplateError as exc:
        if exc.code.startswith("HANDLEBARS_") and exc.path is None:
            exc.path = "$.text_completion.context.story_string"
        raise


def _guesstimate(text: str) -> int:
    """SillyTavern's count without a tokenizer (``guesstimate``): UTF-8 bytes / 3.35, rounded up."""
    return math.ceil(len(text.encode("utf-8", "surrogatepass")) / CHARS_PER_TOKEN)


def _budget(front: Front, settings: Mapping[str, Any]) -> PromptBudget:
    """The room for the prompt (``max_context - max_tokens``), counted with the request's tokenizer
    (``estimate`` as SillyTavern's text path guesses: by UTF-8 bytes) plus ``token_padding``."""
    name = front.req.budget.tokenizer
    count = _guesstimate if name == "estimate" else get_tokenizer(name).count
    return PromptBudget(count=count, max_prompt=front.max_context - front.max_tokens,
                        padding=int(settings.get("token_padding", 64)))


def _system_prompt(templates: TextTemplates, card: Mapping[str, Any], settings: Mapping[str, Any],
                   names: _Names) -> str:
    if templates.sysprompt is None:
        return ""
    system = names(str(templates.sysprompt.fields.get("content") or ""))
    if card.get("system_prompt") and settings["prefer_character_prompt"]:
        system = names.expand(str(card["system_prompt"]), original=system)
    return system


def _post_history(templates: TextTemplates, card: Mapping[str, Any], settings: Mapping[str, Any],
                  names: _Names) -> str:
    if templates.sysprompt is None:
        return ""
    original = str(templates.sysprompt.fields.get("post_history") or "")
    if card.get("post_history_instructions") and settings["prefer_character_jailbreak"]:
        return names.expand(str(card["post_history_instructions"]), original=original)
    return names(original)


def _placed_prompts(front: Front, names: _Names, lore: _Lore,
                    persona_position: int) -> tuple[list[ExtensionPrompt], str, str]:
    """The prompts placed in the chat at a depth, and the Author's Note as the story string's
    anchors when it sits before or after the scenario."""
    req, texts = front.req, front.texts
    users = sum(1 for m in front.chat.messages if m.role == "user")
    note = author_note_block(req, users, front.loaded.passes)
    prompts: list[ExtensionPrompt] = list(lore.depth)
    before = after = ""
    if note["active"]:
        text = note["content"]
        if lore.an_top or lore.an_bottom:
            text = ("\n".join(lore.an_top) + "\n" + text + "\n" + "\n".join(lore.an_bottom)).strip("\n")
        persona = texts.persona_text
        if persona and persona_position == 2:
            text = f"{persona}\n{text}"
        elif persona and persona_position == 3:
            text = f"{text}\n{persona}"
        if note["position"] == "chat":
            prompts.append(ExtensionPrompt("2_floating_prompt", text, int(note["depth"]), str(note["role"])))
        elif note["position"] == "before":
            before = names(text.strip()).strip()
        else:
            after = names(text.strip()).strip()
    if texts.persona_text and persona_position == 4:
        persona = req.user.persona
        prompts.append(ExtensionPrompt("PERSONA_DESCRIPTION", texts.persona_text, persona.depth, persona.role))
    depth_prompt = ((texts.read_card or {}).get("extensions") or {}).get("depth_prompt") or {}
    if isinstance(depth_prompt, Mapping) and depth_prompt.get("prompt"):
        prompts.append(ExtensionPrompt("DEPTH_PROMPT", names(str(depth_prompt["prompt"]).strip()),
                                       int(depth_prompt.get("depth", 4)), str(depth_prompt.get("role", "system"))))
    return prompts, before, after


def _examples(card: Mapping[str, Any], context: Context, instruct: Instruct | None, speaker: Speaker,
              names: Callable[[str], str], lore: _Lore) -> tuple[list[str], list[str]]:
    """The example dialogues as sent (formatted for instruct mode) and as written (``mesExamplesRaw``)."""
    on = instruct is not None
    blocks = split_example_blocks(names(str(card.get("mes_example") or "")), context, names, instruct_on=on)
    for text in lore.em_top:
        blocks = split_example_blocks(names(text), context, names, instruct_on=on) + blocks
    for text in lore.em_bottom:
        blocks += split_example_blocks(names(text), context, names, instruct_on=on)
    if instruct is None:
        return blocks, blocks
    return format_examples(blocks, instruct, context, speaker, names), blocks


def _history(front: Front, names: _Names) -> list[ChatItem]:
    """The chat as ``Generate`` formats it: every message through its macros, the continued one last."""
    texts, chat = front.texts, front.chat
    items: list[ChatItem] = []
    messages: Sequence[Any] = chat.messages
    for message in messages:
        role = message.role
        default = {"user": texts.user, "assistant": texts.char}.get(role, "System")
        name = getattr(message, "name", None) or default
        items.append(ChatItem(name=name, mes=chat.expand(message.content), is_user=role == "user",
                              is_narrator=role == "system", force_avatar=bool(getattr(message, "force_avatar", None)),
                              source=f"chat[{len(items)}]"))
    return items


def assemble_text_completion(request: Mapping[str, Any] | StRequest, *, base_dir: str | Path | None = None,
                             passes: Sequence[TextPass] = ()) -> TextCompletion:
    """What SillyTavern sends a text-completion API for ``request`` (one with ``text_completion``)."""
    return text_completion(build_front(request, base_dir=base_dir, passes=passes))
