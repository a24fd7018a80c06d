"""SillyTavern's template extensions: ST-Prompt-Template (EJS) and Tavern Helper (variable macros).

(The stages it extends call it with their states, :class:`~.loading.Loaded` and :class:`~.front.Front`, typed
``Any`` here: they import this module.)

With both installed, SillyTavern 1.18 sends what :mod:`tavernbox.ejs.st_extensions` computes (recorded:
``tests/golden/st_oracle/ext_scenarios.py``). The extensions act at three points of generation, so this stage has
three parts, each called by the stage it extends:

1. :func:`prepare_templates` (after loading): the request's extension settings and variables (global, the chat's,
   each message's); the chat's own templates as the extension treats them when the chat loads (evaluated, kept with
   ``raw_message_evaluation_enabled``, hidden from generation by its filter).
2. :func:`prepare_books` (in :mod:`.lore`, before the scan): the extension's special entries taken out of world
   info, ``@@if`` conditions evaluated, ``@@private`` entries wrapped; the ``[InitialVariables]`` and the ``@INJECT``
   entries read; the books ``getwi`` reads kept (SillyTavern's macros expanded in their entries).
3. :func:`apply_templates` (in :mod:`.sending`, before post-processing): Tavern Helper's macros in every final
   message, then every final message's templates in one VM, then ``@INJECT``.

Both are on by default and change nothing in a request without ``<%`` or Tavern Helper's macros (no VM is started,
and the template machinery is not even imported: a plain request costs what it did). The writes come back as
``variables_patch`` (:class:`TemplateRun`), never into the request's objects.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from typing import TYPE_CHECKING, Any

from ..macros import expand_macros
from ..macros.st_variables import StVariables
from ..macros.tavern_helper import MACRO_NAMES, MacroUse, expand_variable_macros

if TYPE_CHECKING:
    from ..ejs.st_prompt_template import InjectEntry, PromptTemplateContext, WorldEntry
    from ..macros.st_extension_settings import ExtensionSettings

__all__ = ["TemplateRun", "apply_templates", "prepare_books", "prepare_templates"]


@dataclass(slots=True)
class TemplateRun:
    """The extensions' state for one request: settings, variables, what ``getwi`` reads, and what ran."""

    #: the request's ``extensions`` object as given (parsed by :attr:`settings` when first needed)
    raw_settings: Any
    #: the variables as the request gave them
    given: StVariables
    #: the variables now (after the chat's own templates; after generation once :func:`apply_templates` ran)
    variables: StVariables
    user: str
    char: str
    chat: tuple[Mapping[str, Any], ...] = ()
    books: dict[str, list[WorldEntry]] = field(default_factory=dict)
    default_book: str = ""
    initial: dict[str, Any] = field(default_factory=dict)
    inject: list[InjectEntry] = field(default_factory=list)
    #: what the templates read (``getvar``, ``getwi``, Tavern Helper's macros): the render's dependencies
    reads: list[dict[str, Any]] = field(default_factory=list)
    #: per final message: whether its templates were evaluated
    evaluated: list[bool] = field(default_factory=list)
    character_text: str = ""
    preset_prompts: dict[str, str] = field(default_factory=dict)
    #: the books SillyTavern scans, as :func:`prepare_books` saw them (read by ``getwi`` once a template runs)
    scanned: list[dict[str, Any]] = field(default_factory=list)
    #: the marked evaluation of the final messages (:mod:`..ejs.st_template_marks`), run only when the request's
    #: provenance is read; ``None``: no template changed a final message in place
    marked: Callable[[], Any] | None = None
    _settings: Any = None

    @property
    def settings(self) -> ExtensionSettings:
        if self._settings is None:
            from ..macros.st_extension_settings import parse_extensions

            self._settings = parse_extensions(self.raw_settings)
        return self._settings

    @property
    def variables_patch(self) -> dict[str, list[dict[str, Any]]]:
        """JSON Patch operations per scope from the request's variables to the templates' (``message``: the
        latest message that has variables)."""
        latest_given, latest_now = self.given.latest_message(), self.variables.latest_message()
        scopes = (("global", self.given.global_vars, self.variables.global_vars),
                  ("chat", self.given.chat, self.variables.chat), ("message", latest_given, latest_now))
        if self.variables is self.given:
            return {}
        from ..ejs.st_prompt_template import json_patch

        return {name: ops for name, old, new in scopes if (ops := json_patch(old, new))}

    def context(self) -> PromptTemplateContext:
        from ..ejs.st_prompt_template import PromptTemplateContext

        return PromptTemplateContext(user_name=self.user, char_name=self.char, chat=self.chat,
                                     char_book=self.default_book, character_text=self.character_text,
                                     preset_prompts=self.preset_prompts)

    def expand(self, text: str) -> str:
        """SillyTavern's macros in an entry the templates read (the extension's ``substituteParams``)."""
        ctx = {"user": self.user, "char": self.char,
               "variables": {"local": dict(self.variables.chat), "global": dict(self.variables.global_vars)}}
        return expand_macros(text, ctx).text


def _names(loaded: Any) -> tuple[str, str]:
    req, inputs = loaded.req, loaded.inputs
    card = inputs.card or {}
    user = req.user.name if req.user.name else (inputs.chat.user_name or "User")
    char = str(card.get("name") or inputs.chat.character_name or "Assistant")
    return user, char


def prepare_templates(loaded: Any) -> None:
    """Part 1, after loading: the settings and variables (``loaded.templates``), and the chat as the extension
    leaves it when the chat loads (``loaded.inputs.chat``)."""
    req, inputs = loaded.req, loaded.inputs
    chat = inputs.chat
    given = StVariables.build(global_vars=req.global_variables or {}, chat=chat.variables or {},
                              messages=[m.variables for m in chat.messages], card=inputs.card,
                              preset=loaded.preset)
    user, char = _names(loaded)
    run = TemplateRun(req.extensions.template_settings(), given, given, user, char,
                      tuple({"mes": m.content, "is_user": m.role == "user", "is_system": m.role == "system",
                             "name": m.name or (user if m.role == "user" else char)} for m in chat.messages))
    card = inputs.card or {}
    run.character_text = str(card.get("description") or "")
    loaded.templates = run
    if req.extensions.template_settings() is not None:
        run.settings  # noqa: B018 - a malformed extensions object is refused whether or not a template runs
    if not any("<%" in m.content for m in chat.messages) or not run.settings.prompt_template.get("enabled"):
        return
    from ..ejs.st_extensions import load_chat

    load = load_chat([m.content for m in chat.messages], settings=run.settings, variables=given,
                     context=run.context(), now_ms=None)
    loaded.warnings.extend(load.warnings)
    run.reads.extend(load.reads)
    run.variables = load.variables
    messages = tuple(m._replace(content=text) for m, text in zip(chat.messages, load.contents, strict=True))
    inputs.chat = replace(chat, messages=messages)


_BOOK_MARKERS = ("<%", "@@", "@INJECT", "[GENERATE:", "[RENDER:", "[InitialVariables]")


def prepare_books(books: list[dict[str, Any]], loaded: Any) -> list[dict[str, Any]]:
    """Part 2, before the world-info scan: the books as SillyTavern's world info gets them with the extension on
    (a book with none of the extension's markers is passed on untouched), and what the templates will read of them
    (``getwi``'s books, initial variables, ``@INJECT`` entries)."""
    run: TemplateRun | None = getattr(loaded, "templates", None)
    if run is None:
        return books
    card = loaded.inputs.card or {}
    ext = card.get("extensions") if isinstance(card.get("extensions"), Mapping) else {}
    linked = ext.get("world") if isinstance(ext.get("world"), str) else ""
    run.default_book = linked or loaded.req.user.persona.lorebook or loaded.inputs.chat.lorebook or ""
    run.scanned = books
    marked = [any(any(m in str(e.get(k) or "") for m in _BOOK_MARKERS) for e in (b.get("entries") or {}).values()
                  for k in ("content", "comment")) for b in books]
    if not any(marked) or not run.settings.prompt_template.get("enabled"):
        return books
    from ..ejs.st_extensions import initial_variables, inject_entries, prepare_world_entries

    out = []
    for book, has_marks in zip(books, marked, strict=True):
        if not has_marks:
            out.append(book)
            continue
        entries = list((book.get("entries") or {}).values())
        name = str(book.get("name") or "")
        run.inject.extend(inject_entries(entries, world=name, settings=run.settings, expand=run.expand,
                                         seed=loaded.req.options.seed))
        initial, diags = initial_variables(entries, settings=run.settings, expand=run.expand)
        loaded.warnings.extend(diags)
        run.initial.update(initial)
        kept, diags = prepare_world_entries(entries, settings=run.settings, variables=run.variables,
                                            context=run.context())
        loaded.warnings.extend(diags)
        if len(kept) != len(entries) or any(a is not b for a, b in zip(kept, entries, strict=False)):
            book = {**book, "entries": {str(e.get("uid", i)): e for i, e in enumerate(kept)}}
        out.append(book)
    return out


def _getwi_books(run: TemplateRun) -> dict[str, list[WorldEntry]]:
    """The entries ``getwi`` reads, by book (the books as SillyTavern scans them, before the extension's changes),
    built when a template first needs them."""
    if not run.books and run.scanned:
        from ..ejs.st_extensions import world_entries

        for book in run.scanned:
            name = str(book.get("name") or "")
            entries = list((book.get("entries") or {}).values())
            run.books[name] = world_entries(name, {str(i): e for i, e in enumerate(entries)}, run.expand)
    return run.books


_TH_MARK = re.compile(r"\{\{(?:get|format)_[a-z]+_variable::", re.I)


def apply_templates(final: list[dict[str, Any]], front: Any) -> list[dict[str, Any]]:
    """Part 3, on the messages about to be sent: Tavern Helper's macros, then the templates, then ``@INJECT``.
    Raises ``TemplateError`` when a template budget trips."""
    loaded = front.loaded
    run: TemplateRun | None = getattr(loaded, "templates", None)
    if run is None:
        return final
    unknown_th = [d for d in loaded.warnings if d.code == "MACRO_UNKNOWN" and str(
        (d.data or {}).get("name") or _macro_name(d.message)).lower() in MACRO_NAMES]
    if unknown_th and run.settings.tavern_helper:
        # SillyTavern's engine left Tavern Helper's macros as written for its pass: they are not unknown
        loaded.warnings[:] = [d for d in loaded.warnings if d not in unknown_th]
    texts = [m["content"] if isinstance(m.get("content"), str) else None for m in final]
    if run.settings.tavern_helper and any(t is not None and _TH_MARK.search(t) for t in texts):
        uses: list[MacroUse] = []
        texts = [expand_variable_macros(t, run.variables, uses) if t is not None else None for t in texts]
        run.reads.extend({"kind": u.name, "scope": u.scope, "key": u.path} for u in uses)
    injecting = bool(run.inject) and bool(run.settings.prompt_template.get("inject_loader_enabled"))
    if run.settings.templates_on and (injecting or any(t is not None and "<%" in t for t in texts)):
        return _evaluated(final, texts, run, loaded)
    return [{**m, "content": t} if t is not None and t != m["content"] else m
            for m, t in zip(final, texts, strict=True)]


def _evaluated(final: list[dict[str, Any]], texts: list[str | None], run: TemplateRun, loaded: Any
               ) -> list[dict[str, Any]]:
    """The templates of every final message (and the ``@INJECT`` entries) in one VM."""
    from ..ejs.st_extensions import run_extensions

    items = [{**m, "content": t} for m, t in zip(final, texts, strict=True) if t is not None]
    if _reads_presets(run, items):
        # the preset's prompts by name, SillyTavern's macros expanded (what ``getpreset`` answers)
        run.preset_prompts = {str(p.get("name")): run.expand(str(p.get("content") or ""))
                              for p in loaded.preset.get("prompts") or [] if isinstance(p, Mapping) and p.get("name")}
    settings = replace(run.settings, tavern_helper=False)  # its pass ran above
    evaluation = partial(run_extensions, items, settings=settings, variables=run.variables, books=_getwi_books(run),
                         default_book=run.default_book, context=run.context(), initial=run.initial,
                         inject_entries=run.inject, now_ms=_now_ms(loaded.req.options.now))
    result = evaluation()
    loaded.warnings.extend(result.warnings)
    run.reads.extend(result.reads)
    run.evaluated = result.evaluated
    if result.variables_after is not None:
        run.variables = result.variables_after
    run.marked = partial(evaluation, marks=True) if result.injected is None else None
    if result.injected is not None:
        others = [m for m in final if not isinstance(m.get("content"), str)]
        return [{"role": role, "content": content} for role, content in result.injected] + others
    contents = iter(result.contents)
    return [{**m, "content": next(contents)} if isinstance(m.get("content"), str) else m for m in final]


def _reads_presets(run: TemplateRun, items: Sequence[Mapping[str, Any]]) -> bool:
    names = ("getpreset", "getprp", "getPresetPrompt")
    texts = [str(m["content"]) for m in items] + [str(e.get("content") or "") for b in run.scanned
                                                  for e in (b.get("entries") or {}).values()]
    return any("<%" in t and any(n in t for n in names) for t in texts)


def _macro_name(message: str) -> str:
    start = message.find("{{")
    end = message.find("}}", start)
    return message[start + 2:end] if start >= 0 and end > start else ""


def _now_ms(now: str | None) -> int | None:
    if not now:
        return None
    from ..ejs.render import clock_ms

    return clock_ms(now)
