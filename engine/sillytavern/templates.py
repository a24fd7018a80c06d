"""SillyTavern's template extensions: ST-Prompt-Template (EJS) and Tavern Helper (variable macros).

(The stages it extends call it with their states, :class:`~.loading.Loaded` and :class:`~.front.Front`, typed
``Any`` here: they import this module.)

With both installed, SillyTavern 1.18 sends what :mod:`tavernbox.ejs.st_extensions` computes (recorded:
``tests/golden/st_oracle/ext_scenarios.py``). The extensions act at three points of generation, so this stage has
three parts, each called by the stage it extends:

1. :func:`prepare_templates` (after loading): the request's extension settings and variables (global, the chat's,
   each message's); the chat's own templates as the extension treats them when the chat loads (each shown message
   evaluated in its own message scope, kept with ``raw_message_evaluation_enabled``, hidden from generation by its
   filter), and the message generation reads and writes (:attr:`TemplateRun.current`).
2. :func:`prepare_books` (in :mod:`.lore`, before the scan): the extension's special entries taken out of world
   info; in one VM, the ``[GENERATE:BEFORE]`` entries evaluated (kept for part 3), then ``@@if`` conditions and
   ``@@preprocessing`` entries (the scan sees their output); ``@@private`` entries wrapped; the
   ``[InitialVariables]``, ``@INJECT`` and ``[GENERATE:*]`` entries read; the books ``getwi`` reads kept
   (SillyTavern's macros expanded in their entries).
3. :func:`apply_templates` (in :mod:`.sending`, before post-processing): Tavern Helper's macros in every final
   message, then every final message's templates in one VM, each between its ``[GENERATE:n:BEFORE]`` and
   ``[GENERATE:n:AFTER]`` entries, then ``[GENERATE:AFTER]`` and ``@INJECT``.

Between 2 and 3, SillyTavern's own variable macros (``{{setvar}}``...) write the chat and global variables: the chat's
messages' (:func:`chat_macro_variables`) and the prompts' (:func:`take_macro_writes`, after placement).

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
from ..macros.st_extension_settings import load_steps
from ..macros.st_variables import StVariables, copied_forward
from ..macros.tavern_helper import MACRO_NAMES, MacroUse, expand_variable_macros

if TYPE_CHECKING:
    from ..ejs.st_prompt_template import (
        GenerateEntry,
        GeneratedPiece,
        GenerateSpec,
        InjectEntry,
        PromptTemplateContext,
        WorldEntry,
    )
    from ..macros.st_extension_settings import ExtensionSettings

__all__ = ["TemplateRun", "apply_templates", "prepare_books", "prepare_templates", "take_macro_writes"]


@dataclass(slots=True)
class ChatMacroVariables:
    """The chat and global variables SillyTavern's macros in the chat's messages read and write (``{{setvar}}`` in a
    message), from what they were when the first such message was expanded."""

    start_local: dict[str, Any]
    start_global: dict[str, Any]
    local: dict[str, Any]
    global_vars: dict[str, Any]

    def applied(self, local: Mapping[str, Any], global_vars: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
        """``local`` and ``global_vars`` with the messages' writes (set or removed names) applied."""
        return _changes(self.start_local, self.local, local), _changes(self.start_global, self.global_vars, global_vars)


def _changes(start: Mapping[str, Any], now: Mapping[str, Any], onto: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(onto)
    for key in start:
        if key not in now:
            out.pop(key, None)
    for key, value in now.items():
        if key not in start or start[key] != value:
            out[key] = value
    return out


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
    #: the chat message whose variables generation reads and writes (the message scope; -1: none)
    current: int = -1
    #: what the chat's messages' own macros wrote (``None``: none ran)
    chat_macros: ChatMacroVariables | None = None
    #: the generate loader's ``[GENERATE:*]`` / ``@@generate_*`` entries, and the ``[GENERATE:BEFORE]`` output
    #: evaluated before the scan
    generate: list[GenerateEntry] = field(default_factory=list)
    generate_before: list[GeneratedPiece] = field(default_factory=list)
    #: per final message: its pieces when the generate loader built it, for the provenance
    pieces: list[list[GeneratedPiece] | None] | None = None
    #: the marked evaluation of the final messages (:mod:`..ejs.st_template_marks`), run only when the request's
    #: provenance is read; ``None``: no template changed a final message in place
    marked: Callable[[], Any] | None = None
    #: the CPU the request's template VMs have used (:class:`~..ejs.st_prompt_template.TemplateMeter`): the chat's
    #: load, the run before the scan and the generation's evaluation share the request's ``time_limit``
    meter: Any = None
    _settings: Any = None

    def limits(self) -> Any:
        """The budgets of the request's next template VM: what is left of its ``time_limit``, each template's."""
        from ..ejs.st_extensions import request_limits
        from ..ejs.st_prompt_template import TemplateMeter

        if self.meter is None:
            self.meter = TemplateMeter()
        return request_limits(self.settings, self.meter)

    @property
    def settings(self) -> ExtensionSettings:
        if self._settings is None:
            from ..macros.st_extension_settings import parse_extensions

            self._settings = parse_extensions(self.raw_settings)
        return self._settings

    @property
    def variables_patch(self) -> dict[str, list[dict[str, Any]]]:
        """JSON Patch operations per scope from the request's variables to what the request left: ``global``,
        ``chat``, ``message`` (the message generation reads and writes, :attr:`current`) and ``message[i]`` for any
        other chat message ``i`` whose variables changed (the chat's own templates, or the copy the extension gives
        a message when the chat loads). A message given without variables counts as an empty object."""
        if self.variables is self.given:
            return {}
        from ..ejs.st_prompt_template import json_patch

        out = {name: ops for name, old, new in (("global", self.given.global_vars, self.variables.global_vars),
                                                ("chat", self.given.chat, self.variables.chat)) if (ops := json_patch(old, new))}
        given, now = self.given.messages, self.variables.messages
        for i, new in enumerate(now):
            old = given[i] if i < len(given) else None
            if new is old or new is None:
                continue
            ops = json_patch(old if old is not None else {}, new)
            if ops:
                out["message" if i == self.current else f"message[{i}]"] = ops
        return out

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
    if not run.settings.prompt_template.get("enabled"):
        return
    if any("<%" in m.content for m in chat.messages):
        from ..ejs.st_extensions import load_chat

        load = load_chat([m.content for m in chat.messages], settings=run.settings, variables=given,
                         context=run.context(), now_ms=None, flags=chat.template_flags, limits=run.limits())
        loaded.warnings.extend(load.warnings)
        run.reads.extend(load.reads)
        run.variables = load.variables
        messages = tuple(m._replace(content=text) for m, text in zip(chat.messages, load.contents, strict=True))
        inputs.chat = replace(chat, messages=messages)
    elif any(m.variables is not None for m in chat.messages):
        # no template, but the extension still gives every shown message a copy of the variables before it
        steps = load_steps([m.content for m in chat.messages], run.settings)
        run.variables = replace(given, messages=copied_forward(given.messages, steps, initialized=[
            f[1] for f in chat.template_flags]))
    _enter_generation(run, req, len(chat.messages), loaded.preset)


def _enter_generation(run: TemplateRun, req: Any, stored: int, preset: Any) -> None:
    """The message whose variables generation reads and writes (``run.current``), given an object as the extension
    gives it when generation starts: the chat's last message as generation sees it, the one before it when the last
    is generated in place (``continue``, ``swipe``); a message the user sends first is a new one, with a copy of the
    variables before it."""
    gen = req.generation
    typed = gen.input
    sends = (bool(typed) and gen.type != "quiet") or (typed == "" and gen.type == "normal" and str(
        (preset or {}).get("send_if_empty") or "").strip() != "")
    messages = run.variables.messages
    if sends:
        messages = copied_forward((*messages, None), [len(messages)]) if messages else ({},)
        run.current = len(messages) - 1
    else:
        last = stored - 1
        if gen.type == "regenerate" and messages and run.chat and not run.chat[-1]["is_user"]:
            last -= 1
        run.current = last - 1 if gen.type in ("continue", "swipe") else last
    if 0 <= run.current < len(messages) and messages[run.current] is None:
        messages = (*messages[:run.current], {}, *messages[run.current + 1:])
    if messages is not run.variables.messages:
        run.variables = replace(run.variables, messages=messages)


def chat_macro_variables(run: TemplateRun | None, context: Any) -> Any:
    """The macro context a chat message's macros are expanded with: the chat and global variables as the chat's
    earlier expanded messages left them (the request's, after the chat's own templates, at first)."""
    if run is None:
        return context
    held = run.chat_macros
    if held is None:
        held = run.chat_macros = ChatMacroVariables(dict(run.variables.chat), dict(run.variables.global_vars),
                                                    dict(run.variables.chat), dict(run.variables.global_vars))
    return replace(context, local_variables=held.local, global_variables=held.global_vars)


def keep_chat_macro_writes(run: TemplateRun | None, variables: Mapping[str, Any]) -> None:
    """What one chat message's macros left (the expansion's ``{"local", "global"}``)."""
    if run is not None and run.chat_macros is not None:
        run.chat_macros.local = dict(variables.get("local") or {})
        run.chat_macros.global_vars = dict(variables.get("global") or {})


def take_macro_writes(loaded: Any, variables: Mapping[str, Any] | None) -> None:
    """SillyTavern's own variable macros (``{{setvar}}``, ``{{incvar}}``, ``{{setglobalvar}}``...) ran while the
    prompt was built, before the extensions: the chat and global variables they left are what Tavern Helper and the
    templates read, and the patch reports them. ``variables`` is the assembler's ``{"local", "global"}``."""
    run: TemplateRun | None = getattr(loaded, "templates", None)
    if run is None or not variables:
        return
    local, glob = variables.get("local"), variables.get("global")
    chat = dict(local) if isinstance(local, Mapping) else run.variables.chat
    global_vars = dict(glob) if isinstance(glob, Mapping) else run.variables.global_vars
    if run.chat_macros is not None:  # SillyTavern expands the history's macros after the prompts'
        chat, global_vars = run.chat_macros.applied(chat, global_vars)
    if chat != run.variables.chat or global_vars != run.variables.global_vars:
        run.variables = replace(run.variables, chat=chat, global_vars=global_vars)


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
    from ..assets.frozen import as_plain
    from ..ejs.st_extensions import initial_variables, inject_entries

    picked = [i for i, has_marks in enumerate(marked) if has_marks]
    for i in picked:
        entries = list((books[i].get("entries") or {}).values())
        name = str(books[i].get("name") or "")
        run.inject.extend(inject_entries(entries, world=name, settings=run.settings, expand=run.expand,
                                         seed=loaded.req.options.seed))
        initial, diags = initial_variables(entries, settings=run.settings, expand=run.expand)
        loaded.warnings.extend(diags)
        run.initial.update(initial)
        run.generate.extend(_generate_entries(books[i], loaded, run))
    prepared = _prepared_world([books[i] for i in picked], loaded, run)
    out = list(books)
    for i, kept in zip(picked, prepared, strict=True):
        entries = list((books[i].get("entries") or {}).values())
        if len(kept) != len(entries) or any(a is not b for a, b in zip(kept, entries, strict=False)):
            # a cached book's entries are frozen views: the rebuilt book holds plain copies, which the scan reads
            out[i] = {**books[i], "entries": {str(e.get("uid", k)): as_plain(e) for k, e in enumerate(kept)}}
    return out


#: the order in which the extension walks the loaded books' entries (``WORLDINFO_ENTRIES_LOADED``)
_SOURCE_ORDER = {"character": 0, "global": 1, "persona": 2, "chat": 3}


def _prepared_world(books: list[dict[str, Any]], loaded: Any, run: TemplateRun) -> list[list[Mapping[str, Any]]]:
    """The marked books as the scan gets them, with the pre-scan templates in one VM: ``[GENERATE:BEFORE]``, then
    ``@@if`` conditions and ``@@preprocessing`` entries (their writes carry to the templates after the scan)."""
    from ..ejs.st_extensions import prepare_world

    leading = any(e.comment.startswith("[GENERATE:BEFORE]") or "@@generate_before" in e.decorators
                  for e in run.generate)
    spec = _generate_spec(loaded, run, "before") if leading else None
    order = sorted(range(len(books)), key=lambda i: _SOURCE_ORDER.get(str(books[i].get("source")), 1))
    lists = [list((b.get("entries") or {}).values()) for b in books]
    # what getwi reads is built only when a template before the scan may call it
    reads_world = any(any(m in str(e.get("content") or "") for m in ("<%", "getwi", "getWorldInfo"))
                      for entries in lists for e in entries)
    prepared = prepare_world(lists, settings=run.settings, variables=run.variables, context=run.context(),
                             generate=spec, getwi_books=_getwi_books(run) if reads_world else None,
                             default_book=run.default_book, expand=run.expand, order=order,
                             now_ms=_now_ms(loaded.req.options.now), limits=run.limits())
    loaded.warnings.extend(prepared.warnings)
    if prepared.variables is not None:
        run.variables = prepared.variables
    run.generate_before = prepared.generate_before
    return _with_activated(books, prepared.books, prepared.activated)


def _with_activated(books: list[dict[str, Any]], kept: list[list[Mapping[str, Any]]],
                    activated: list[tuple[str, int, bool]]) -> list[list[Mapping[str, Any]]]:
    """The books for the scan with the entries ``activewi`` named before it (a ``[GENERATE:BEFORE]`` entry's call)
    added as the extension adds them: in place of the entry when the scan has it, else after the book's entries."""
    if not activated:
        return kept
    from ..ejs.st_extensions import activated_entry

    out = [list(entries) for entries in kept]
    for world, uid, forced in activated:
        index = next((i for i, b in enumerate(books) if str(b.get("name") or "") == world), None)
        if index is None:
            continue
        raw = next((e for e in (books[index].get("entries") or {}).values() if e.get("uid") == uid), None)
        if raw is None:
            continue
        entry = activated_entry(raw, forced)
        at = next((k for k, e in enumerate(out[index]) if e.get("uid") == uid), None)
        if at is None:
            out[index].append(entry)
        else:
            out[index][at] = entry
    return out


def _generate_entries(book: Mapping[str, Any], loaded: Any, run: TemplateRun) -> list[GenerateEntry]:
    """A book's ``[GENERATE:*]`` entries. The extension takes only entries whose ``vectorized`` is false: an entry
    of a given world file without the field (the book's model fills it in) is not taken, as SillyTavern loads the
    file as it is; a card's embedded book gets the field when SillyTavern imports it."""
    from ..ejs.st_extensions import generate_entries

    name = str(book.get("name") or "")
    model = next((m for m, _s, _w in loaded.inputs.books if (getattr(m, "name", None) or "book") == name), None)
    given: Mapping[str, Any] = getattr(model, "entries", None) or {}
    entries = [{**entry, "vectorized": None} if key in given and "vectorized" not in getattr(
        given[key], "model_fields_set", {"vectorized"}) else entry for key, entry in (book.get("entries") or {}).items()]
    return generate_entries(entries, world=name, settings=run.settings, expand=run.expand)


def _generate_spec(loaded: Any, run: TemplateRun, phase: str) -> GenerateSpec:
    from ..ejs.st_prompt_template import GenerateSpec

    wi = loaded.req.world_info
    return GenerateSpec(run.generate, phase=phase, case_sensitive=bool(wi.world_info_case_sensitive),
                        match_whole_words=bool(wi.world_info_match_whole_words),
                        use_group_scoring=bool(wi.world_info_use_group_scoring), seed=loaded.req.options.seed,
                        before=tuple(run.generate_before))


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


def apply_templates(final: list[dict[str, Any]], front: Any, spans: Sequence[Sequence[Any]] | None = None
                    ) -> list[dict[str, Any]]:
    """Part 3, on the messages about to be sent: Tavern Helper's macros, then the templates, then ``@INJECT``.
    Raises ``TemplateError`` when a template budget trips; with ``spans`` (per message, ``(start, end, info)`` as
    the provenance has them) the error also names the part of the prompt the template came from."""
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
    generating = bool(run.generate) or bool(run.generate_before)
    if run.settings.templates_on and (injecting or generating or any(t is not None and "<%" in t for t in texts)):
        return _evaluated(final, texts, run, loaded, spans)
    return [{**m, "content": t} if t is not None and t != m["content"] else m
            for m, t in zip(final, texts, strict=True)]


def _evaluated(final: list[dict[str, Any]], texts: list[str | None], run: TemplateRun, loaded: Any,
               spans: Sequence[Sequence[Any]] | None = None) -> list[dict[str, Any]]:
    """The templates of every final message (and the ``@INJECT`` entries) in one VM."""
    from ..ejs.st_extensions import run_extensions
    from ..ejs.st_prompt_template import TemplateBudgetError

    items = [{**m, "content": t} for m, t in zip(final, texts, strict=True) if t is not None]
    positions = [i for i, t in enumerate(texts) if t is not None]
    if _reads_presets(run, items):
        # the preset's prompts by name, SillyTavern's macros expanded (what ``getpreset`` answers)
        run.preset_prompts = {str(p.get("name")): run.expand(str(p.get("content") or ""))
                              for p in loaded.preset.get("prompts") or [] if isinstance(p, Mapping) and p.get("name")}
    settings = replace(run.settings, tavern_helper=False)  # its pass ran above
    generating = bool(run.generate or run.generate_before)
    evaluation = partial(run_extensions, items, settings=settings, variables=run.variables, books=_getwi_books(run),
                         default_book=run.default_book, context=run.context(), initial=run.initial,
                         inject_entries=run.inject, now_ms=_now_ms(loaded.req.options.now), limits=run.limits(),
                         message_index=run.current if run.current >= 0 else None,
                         generate=_generate_spec(loaded, run, "messages") if generating else None)
    try:
        result = evaluation()
    except TemplateBudgetError as exc:
        if spans is None or exc.text is None or exc.text >= len(positions):
            raise
        at = positions[exc.text]
        raise _from_source(exc, str(items[exc.text]["content"]), str(final[at].get("content") or ""),
                           spans[at]) from None
    loaded.warnings.extend(result.warnings)
    run.reads.extend(result.reads)
    run.evaluated = result.evaluated
    run.pieces = result.pieces
    if result.variables_after is not None:
        run.variables = result.variables_after
    # the marked evaluation for the provenance (not with the generate loader, whose pieces name their entries)
    # (its time is not the request's: it runs only when the provenance is read, with the whole budget again)
    run.marked = partial(evaluation, marks=True, limits=replace(run.limits(), meter=None)) \
        if result.injected is None and not generating else None
    if result.injected is not None:
        others = [m for m in final if not isinstance(m.get("content"), str)]
        return [{"role": role, "content": content} for role, content in result.injected] + others
    contents = iter(result.contents)
    return [{**m, "content": next(contents)} if isinstance(m.get("content"), str) else m for m in final]


def _from_source(exc: Any, text: str, sent: str, spans: Sequence[Any]) -> Any:
    """A budget a message's template tripped, also named by the part of the prompt the template came from (a
    world-info entry, a preset prompt, a card field: the span holding the error's position, or the only span with
    ``<%`` when the engine gave no position) and placed in that part's own text. ``exc`` unchanged when the spans
    do not tell (positions count only when the templates saw the text the spans describe)."""
    from ..spans import line_col

    offset = None
    if exc.line is not None and text == sent:
        lines = sent.split("\n")
        if exc.line <= len(lines):
            offset = sum(len(x) + 1 for x in lines[: exc.line - 1]) + (exc.column or 1) - 1
    if offset is not None:
        hit = next(((a, b, info) for a, b, info in spans if a <= offset < b), None)
    else:
        holders = [(a, b, info) for a, b, info in spans if "<%" in sent[a:b]]
        hit = holders[0] if len({_source_name(info) for _a, _b, info in holders}) == 1 else None
    if hit is None:
        return exc
    start, end, info = hit
    where = ""
    if offset is not None:
        line, column = line_col(sent[start:end], offset - start)
        where = f" at {line}:{column}"
    error = type(exc)(f"{exc.message}, from {_source_name(info)}{where}", code=exc.code, template=exc.template,
                      line=exc.line, column=exc.column)
    error.text = exc.text
    return error


def _source_name(info: Mapping[str, Any]) -> str:
    """How a provenance span names where its text came from."""
    if info.get("kind") == "world_info":
        return f"world info {info.get('book')}/{info.get('comment') or info.get('uid')}"
    parts = [str(info[k]) for k in ("source_id", "resource_id", "field") if info.get(k)]
    return " ".join(dict.fromkeys(parts)) or str(info.get("block_id") or info.get("kind") or "the prompt")


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
