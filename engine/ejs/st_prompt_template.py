"""ST-Prompt-Template's evaluation at generation: the ``<% %>`` of every final message, in one fresh VM.

ST-Prompt-Template (``zonde306/ST-Prompt-Template``) evaluates, when SillyTavern has built a chat-completion
request, the templates of every final message in order (after SillyTavern's macros and Tavern Helper's), with one
context for the whole generation: ``define``d names and variable writes carry from template to template, ``getwi``
evaluates the world-info entry it reads, and a message whose template fails is sent as it was. Here that is one
render of the project's sandbox (``st_prompt_template_runtime.js`` is the program; the templates, compiled by
tavernbox's EJS compiler, and the data travel as its input), so the request pays for one VM and nothing crosses
requests.

Budgets are ours, not the extension's: the request's CPU time (``PromptTemplateLimits.time_ms``, 2 s by default),
each template's CPU time within it (``template_time_ms``, 1 s: the runtime marks the template it runs, the sandbox
charges it; see the sandbox worker's ``TemplateClock``), the VM's memory, each template's output and ``getwi``'s
nesting. Tripping one fails the request with its code
(``TEMPLATE_TIME_LIMIT``, ``TEMPLATE_MEMORY_LIMIT``, ``TEMPLATE_OUTPUT_LIMIT``, ``TEMPLATE_STACK_LIMIT``) naming
the template and, when the VM reported one, the line:column. An ordinary error (a throw, a syntax error) is the
extension's behaviour instead: that message stays as it was, and a warning names the template and line:column.
Browser-only calls (``execute``, quick replies) fail their template with ``TEMPLATE_UNSUPPORTED``.

Writes never reach the caller's objects: they come back as ``variables_patch``, JSON Patch operations per scope
(``global``, ``chat``, ``message``: the message scope's variables). :func:`evaluate_chat_templates` is the chat's own
templates when the chat is shown, each message in its own message scope.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from typing import Any, NamedTuple

from ..errors import Diagnostic, Span, TemplateError
from ..macros.st_variables import StVariables
from ..sandbox import Limits, Usage, run_program
from ..shortcuts import DEFAULT, Shortcuts
from .st_template_marks import Origin, unmark

__all__ = ["GenerateEntry", "GenerateSpec", "GeneratedPiece", "InjectEntry", "PromptTemplateContext",
           "PromptTemplateLimits", "PromptTemplateResult", "TemplateBudgetError", "TemplateMeter", "TemplateText",
           "WorldEntry",
           "evaluate_chat_templates", "evaluate_prompt_templates", "json_patch", "split_decorators"]

_FRAME = re.compile(r"<input>:(\d+):(\d+)")
#: the decorators ST-Prompt-Template knows (a first line ``@@name args``); ``@@@`` escapes one
KNOWN_DECORATORS = ("@@activate", "@@dont_activate", "@@message_formatting", "@@generate_before",
                    "@@generate_after", "@@render_before", "@@render_after", "@@dont_preload", "@@initial_variables",
                    "@@always_enabled", "@@only_preload", "@@iframe", "@@preprocessing", "@@if", "@@private")


def split_decorators(content: str) -> tuple[list[str], str]:
    """An entry's leading decorator lines and the content after them, as the extension reads them: known
    decorators are kept, an unknown ``@@`` line is skipped, ``@@@x`` is content (``@@x`` after an unknown one)."""
    if not content.startswith("@@"):
        return [], content
    lines = content.split("\n")
    decorators: list[str] = []
    start = len(lines)
    fallback = False
    for i, line in enumerate(lines):
        if not line.startswith("@@"):
            start = i
            break
        if line.startswith("@@@") and not fallback:
            start = i
            break
        base = (line[1:] if line.startswith("@@@") else line).split(" ", 1)[0]
        if base in KNOWN_DECORATORS:
            decorators.append(line[1:] if line.startswith("@@@") else line)
            fallback = False
        else:
            fallback = True
    return decorators, "\n".join(lines[start:])


class TemplateBudgetError(TemplateError):
    """A budget a template tripped, failing the request; ``template`` is how the request names it (its label,
    ``message 3 (system)``, ``world info Book/entry``), ``line``/``column`` are in that template's text."""

    def __init__(self, message: str, *, code: str, template: str | None = None, line: int | None = None,
                 column: int | None = None) -> None:
        super().__init__(message, code=code, line=line, column=column)
        self.template = template
        #: the index among the evaluated texts of the one whose template tripped it (None: a world-info entry's)
        self.text: int | None = None


@dataclass
class TemplateMeter:
    """The CPU time a request's template VMs have used so far: the chat's load, the run before the world-info scan
    and the generation's evaluation are separate VMs sharing the request's one ``time_ms``."""

    spent_ms: float = 0.0


@dataclass(frozen=True)
class PromptTemplateLimits:
    """The request's budgets (the whole evaluation) and each template's. With a ``meter``, ``time_ms`` is shared by
    every evaluation given the same meter (one request's VMs); without one, each evaluation has all of it."""

    time_ms: float = 2000.0
    #: each template's CPU time within ``time_ms`` (a ``getwi`` entry's own time is its own, not its reader's)
    template_time_ms: float = 1000.0
    memory_bytes: int = 64 * 1024 * 1024
    template_output_chars: int = 4 * 1024 * 1024
    getwi_depth: int = 32
    reads: int = 2000
    meter: TemplateMeter | None = field(default=None, compare=False)

    def remaining_ms(self) -> float:
        """What is left of ``time_ms`` for the next evaluation."""
        return self.time_ms - (self.meter.spent_ms if self.meter is not None else 0.0)


@dataclass(frozen=True)
class TemplateText:
    """One text to evaluate: a final message's content (``label``: how warnings name it, e.g. ``message 3
    (system)``)."""

    text: str
    label: str


@dataclass(frozen=True)
class WorldEntry:
    """A world-info entry ``getwi`` may read: its content with decorators removed and SillyTavern's macros
    expanded (what the extension evaluates), and where it comes from."""

    world: str
    uid: int
    comment: str
    content: str


@dataclass(frozen=True)
class InjectEntry:
    """An ``@INJECT`` world-info entry (its comment holds the instruction: ``pos=``, ``target=``/``index=``/``at=``
    or ``regex=``, and ``role=``), its content with SillyTavern's macros expanded, and its order."""

    world: str
    uid: int
    comment: str
    content: str
    order: int = 100


@dataclass(frozen=True)
class GenerateEntry:
    """A ``[GENERATE:*]`` / ``@@generate_*`` world-info entry the extension's generate loader may take: its content
    (decorators removed, SillyTavern's macros expanded), its decorator lines (with their arguments), and what its
    activation reads (keys with macros expanded, logic, probability, inclusion group, sorting place)."""

    world: str
    uid: int
    comment: str
    content: str
    decorators: tuple[str, ...] = ()
    keys: tuple[str, ...] = ()
    keysecondary: tuple[str, ...] = ()
    selective: bool = True
    selective_logic: int = 0
    constant: bool = False
    disable: bool = True
    probability: float = 100
    use_probability: bool = True
    group: str = ""
    group_override: bool = False
    group_weight: float = 100
    use_group_scoring: bool | None = None
    case_sensitive: bool | None = None
    match_whole_words: bool | None = None
    order: float = 100
    position: int = 0
    depth: int = 4
    #: the ``@@if`` decorator's condition (JavaScript), if any
    condition: str | None = None


class GeneratedPiece(NamedTuple):
    """A part of a text the generate loader built: an entry's output (``label`` names it, ``entry`` holds its
    ``world``, ``uid`` and ``comment``) or the text's own (``label`` and ``entry`` ``None``)."""

    label: str | None
    text: str
    entry: Mapping[str, Any] | None = None


@dataclass(frozen=True)
class GenerateSpec:
    """The generate loader's part of one VM run. ``phase`` ``"before"``: ``[GENERATE:BEFORE]`` is evaluated before
    the run's texts (the pre-scan run); ``"messages"``: the texts are the final messages, each with its
    ``[GENERATE:n:BEFORE]``/``[GENERATE:n:AFTER]``, then ``[GENERATE:AFTER]``, ``before`` (the pre-scan output)
    leading the first message."""

    entries: Sequence[GenerateEntry]
    phase: str = "messages"
    case_sensitive: bool = False
    match_whole_words: bool = True
    use_group_scoring: bool = False
    seed: int = 0
    #: the ``[GENERATE:BEFORE]`` pieces from the pre-scan run
    before: Sequence[GeneratedPiece] = ()


@dataclass(frozen=True)
class PromptTemplateContext:
    """What the extension's template context holds besides variables and world info."""

    user_name: str = "User"
    char_name: str = ""
    chat: tuple[Mapping[str, Any], ...] = ()
    char_book: str = ""
    user_book: str = ""
    chat_book: str = ""
    generate_type: str = "normal"
    character_text: str = ""
    preset_prompts: Mapping[str, str] = field(default_factory=dict)


@dataclass
class PromptTemplateResult:
    """The texts as evaluated (a failed template's text unchanged), warnings, the patch and the reads."""

    texts: list[str]
    warnings: list[Diagnostic]
    variables_patch: dict[str, list[dict[str, Any]]]
    reads: list[dict[str, Any]]
    evaluated: list[bool]
    usage: Usage | None = None
    #: the variables as the templates left them (the same objects' values when nothing ran)
    variables_after: StVariables | None = None
    #: with ``@INJECT`` entries: every message after the injections, ``(role, content)``
    messages: list[tuple[str, str]] | None = None
    #: with the generate loader, phase "before": the ``[GENERATE:BEFORE]`` output
    generate_before: list[GeneratedPiece] = field(default_factory=list)
    #: with the generate loader, phase "messages": per text, its pieces, or ``None`` when the loader left it alone
    #: (a failed template, nothing added)
    pieces: list[list[GeneratedPiece] | None] | None = None
    #: the entries ``activewi`` named: ``(world, uid, forced)`` each (they act on a scan still to come)
    activated: list[tuple[str, int, bool]] = field(default_factory=list)
    #: the marked evaluation only (``marks=True``): per text, ``(start, end, description)`` of each range its
    #: templates produced (``None``: not evaluated)
    spans: list[list[tuple[int, int, dict[str, Any]]] | None] | None = None


@dataclass(frozen=True)
class _Unit:
    """A compiled template placed in the VM: its key, label, first program line and compiled form."""

    key: str
    label: str
    line: int
    compiled: Any

    @property
    def last_line(self) -> int:
        return self.line + self.compiled.program.count("\n")


@cache
def _runtime() -> str:
    return resources.files(__package__).joinpath("st_prompt_template_runtime.js").read_text(encoding="utf-8")


@cache
def _first_line() -> int:
    """The first program line a template gets: past the runtime's own lines."""
    return _runtime().count("\n") + 10


def _compile(text: str, marks: bool = False) -> Any:
    """The compiled template (``marks``: its marked variant, :mod:`.st_template_marks`), or the syntax error (the
    template then fails, as in the extension)."""
    from .render import compile_source

    try:
        if marks:
            from .compiler import compile_template
            from .parser import parse_template

            return compile_template(parse_template(text), marks=True)
        return compile_source(text)
    except TemplateError as exc:
        return exc


class _Layout:
    """Gives every compiled template lines of its own, so an error position names one template."""

    def __init__(self, marks: bool = False) -> None:
        self.next_line = _first_line()
        self.units: list[_Unit] = []
        #: the marked evaluation: templates compiled with marks, and every origin a marker can name
        self.marks = marks
        self.origins: list[Origin] = []

    def origin(self, label: str, info: Mapping[str, Any], compiled: Any) -> int:
        """A new origin's index (``compiled``: the template, ``None`` for a plain entry or a failed compile)."""
        self.origins.append(Origin(label, info, compiled if not isinstance(compiled, TemplateError) else None))
        return len(self.origins) - 1

    def place(self, key: str, label: str, compiled: Any) -> _Unit:
        unit = _Unit(key, label, self.next_line, compiled)
        self.next_line = unit.last_line + 2
        self.units.append(unit)
        return unit

    def innermost(self, unit: _Unit, stack: str | None) -> tuple[int, int] | None:
        """The template position of ``stack``'s innermost frame inside ``unit`` that maps to one (not to the
        template's first character: a frame that recorded nothing since the template's body began says no more
        than the template's name)."""
        for a, b in _FRAME.findall(stack or ""):
            line = int(a)
            if unit.line <= line <= unit.last_line:
                pos = unit.compiled.position(line - unit.line + 1, int(b))
                if pos is not None:
                    return pos if pos != (1, 1) else None
        return None

    def locate(self, stack: str | None, js_line: int | None = None, js_column: int | None = None
               ) -> tuple[_Unit, tuple[int, int] | None] | None:
        frames = [(int(a), int(b)) for a, b in _FRAME.findall(stack or "")]
        if js_line:
            frames.insert(0, (js_line, js_column or 1))
        for line, column in frames:
            for unit in self.units:
                if unit.line <= line <= unit.last_line:
                    return unit, unit.compiled.position(line - unit.line + 1, column)
        return None


_BOOKS_CACHE: OrderedDict[bytes, tuple[str, list[_Unit], int]] = OrderedDict()
_BOOKS_CACHE_SIZE = 8
_BOOKS_LOCK = threading.Lock()
#: the books' JSON kept between requests (False: built every request, the plain path it must equal)
USE_BOOKS_CACHE = True


def _books_json(books: Mapping[str, Sequence[WorldEntry]], layout: _Layout) -> str:
    """The books' part of the VM's input as JSON text, their templates compiled and placed first in the layout.

    A shortcut beside the plain path it equals (:func:`_entries_input` then ``json.dumps``): the same books give
    the same text and lines every request, so it is kept by the books' content digest (a card's book is sent with
    every message of a chat) and only the layout is replayed."""
    if not USE_BOOKS_CACHE or layout.marks:
        return json.dumps(_entries_input(books, layout), ensure_ascii=True, separators=(",", ":"))
    digest = hashlib.blake2b(digest_size=20)
    for name, entries in books.items():
        digest.update(b"\0B" + name.encode("utf-8", "surrogatepass"))
        for e in entries:
            digest.update(f"\0E{e.world}\0{e.uid}\0".encode("utf-8", "surrogatepass"))
            digest.update(e.comment.encode("utf-8", "surrogatepass") + b"\0" +
                          e.content.encode("utf-8", "surrogatepass"))
    key = digest.digest()
    with _BOOKS_LOCK:  # the service assembles in threads
        hit = _BOOKS_CACHE.get(key)
        if hit is not None:
            _BOOKS_CACHE.move_to_end(key)
    if hit is not None and layout.next_line == _first_line():
        text, units, next_line = hit
        layout.units.extend(units)
        layout.next_line = next_line
        return text
    start = len(layout.units)
    text = json.dumps(_entries_input(books, layout), ensure_ascii=True, separators=(",", ":"))
    with _BOOKS_LOCK:
        _BOOKS_CACHE[key] = (text, layout.units[start:], layout.next_line)
        while len(_BOOKS_CACHE) > _BOOKS_CACHE_SIZE:
            _BOOKS_CACHE.popitem(last=False)
    return text


def _entries_input(books: Mapping[str, Sequence[WorldEntry]], layout: _Layout) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for name, entries in books.items():
        rows = []
        for e in entries:
            label = f"world info {e.world}/{e.comment or e.uid}"
            row: dict[str, Any] = {"uid": e.uid, "comment": e.comment, "content": e.content, "source": None,
                                   "line": 0, "unit": -1, "key": f"w:{e.world}:{e.uid}", "label": label,
                                   "info": {"world": e.world, "uid": e.uid, "comment": e.comment}}
            # a template that does not compile is evaluated only if a template reads it: that one fails with its error
            _place_entry(row, e.content, layout)
            rows.append(row)
        out[name] = rows
    return out


def _context_input(ctx: PromptTemplateContext) -> dict[str, Any]:
    chat = [dict(m) for m in ctx.chat]
    users = [i for i, m in enumerate(chat) if m.get("is_user")]
    chars = [i for i, m in enumerate(chat) if not m.get("is_user") and not m.get("is_system")]
    return {"userName": ctx.user_name, "assistantName": ctx.char_name, "charName": ctx.char_name,
            "charLoreBook": ctx.char_book or None, "userLoreBook": ctx.user_book or None,
            "chatLoreBook": ctx.chat_book or None, "runType": "generate", "generateType": ctx.generate_type,
            "lastUserMessageId": users[-1] if users else -1,
            "lastUserMessage": chat[users[-1]]["mes"] if users else "",
            "lastCharMessageId": chars[-1] if chars else -1,
            "lastCharMessage": chat[chars[-1]]["mes"] if chars else "",
            "lastMessageId": len(chat) - 1}


def evaluate_prompt_templates(
    texts: Sequence[TemplateText],
    *,
    variables: StVariables | None = None,
    books: Mapping[str, Sequence[WorldEntry]] | None = None,
    default_book: str = "",
    context: PromptTemplateContext | None = None,
    limits: PromptTemplateLimits | None = None,
    now_ms: int | None = None,
    initial_variables: Mapping[str, Any] | None = None,
    inject: Sequence[InjectEntry] = (),
    roles: Sequence[str] = (),
    message_index: int | None = None,
    shortcuts: Shortcuts = DEFAULT,
    generate: GenerateSpec | None = None,
    marks: bool = False,
) -> PromptTemplateResult:
    """Evaluate the ``<% %>`` of ``texts`` in order, in one VM (texts without ``<%`` are not touched and cost no
    VM when none has one). ``initial_variables`` are the extension's ``[InitialVariables]`` (read between the
    global and the chat variables, never written); ``generate`` adds the generate loader's special entries (see
    :class:`GenerateSpec`). ``message_index`` is the chat message whose variables are the message scope (the
    generation's: the chat's last message); without it, the latest message that has variables.
    ``shortcuts.pt_bytecode``: templates the sandbox worker compiled in an earlier request are loaded from its
    bytecode (off: the VM compiles each). Raises ``TemplateError`` when a budget trips.

    ``marks``: the marked evaluation (:mod:`.st_template_marks`): the same, with ``spans`` saying which template
    produced each range of each evaluated text; only those spans are meant to be used from it."""
    variables = variables or StVariables()
    context = context or PromptTemplateContext()
    limits = limits or PromptTemplateLimits()
    out_texts = [t.text for t in texts]
    generating = generate is not None and bool(generate.entries or (generate.phase == "messages" and generate.before))
    if not inject and not generating and not any("<%" in t.text for t in texts):
        return PromptTemplateResult(out_texts, [], {}, [], [False] * len(texts))
    layout = _Layout(marks)
    books_json = _books_json(books or {}, layout)
    templates, order, warnings = _place_templates(texts, layout)
    if not templates and not inject and not generating:
        return PromptTemplateResult(out_texts, warnings, {}, [], [False] * len(texts))
    latest = _message_scope(variables, message_index)
    payload = {
        "books": None,
        "limits": {"template_output": limits.template_output_chars, "getwi_depth": limits.getwi_depth,
                   "reads": limits.reads},
        "vars": {"global": dict(variables.global_vars), "chat": dict(variables.chat),
                 "message": latest if isinstance(latest, dict) else {}, "initial": dict(initial_variables or {})},
        "context": _context_input(context), "chat": [dict(m) for m in context.chat],
        "default_book": default_book,
        "character_text": context.character_text, "preset_prompts": dict(context.preset_prompts),
        "templates": templates, "inject": _inject_input(inject, layout),
    }
    if inject or generating:  # every message's text and role, for placing the injected ones
        payload.update(texts=out_texts, roles=list(roles) or ["system"] * len(texts))
    if generating and generate is not None:
        payload["generate"] = _generate_input(generate, layout)
        payload["failed"] = [i for i, t in enumerate(texts) if "<%" in t.text and i not in order]
    if marks:
        payload["marks"] = True
    reply = _run_naming(payload, books_json, limits, layout, now_ms, shortcuts.pt_bytecode, texts)
    result = _collected(reply, texts, order, warnings, variables, layout, message_index)
    return _unmarked(result, layout) if marks else result


def _run_naming(payload: dict[str, Any], books_json: str, limits: PromptTemplateLimits, layout: _Layout,
                now_ms: int | None, template_cache: bool, texts: Sequence[TemplateText]) -> dict[str, Any]:
    """:func:`_run`; a budget error says which of ``texts`` was being evaluated (``text``)."""
    try:
        return _run(payload, books_json, limits, layout, now_ms, template_cache)
    except TemplateBudgetError as exc:
        exc.text = next((i for i, t in enumerate(texts) if t.label == exc.template), None)
        raise


def _message_scope(variables: StVariables, index: int | None) -> Any:
    """The message scope's object: message ``index``'s variables (an empty object when it has none), or without an
    index the latest message that has variables."""
    if index is None:
        return variables.latest_message()
    value = variables.messages[index] if 0 <= index < len(variables.messages) else None
    return value if value is not None else {}


def evaluate_chat_templates(
    texts: Sequence[TemplateText],
    *,
    steps: Sequence[int],
    variables: StVariables,
    books: Mapping[str, Sequence[WorldEntry]] | None = None,
    default_book: str = "",
    context: PromptTemplateContext | None = None,
    limits: PromptTemplateLimits | None = None,
    now_ms: int | None = None,
    initial_variables: Mapping[str, Any] | None = None,
    shown: Sequence[bool] = (),
    initialized: Sequence[bool] = (),
    shortcuts: Shortcuts = DEFAULT,
) -> PromptTemplateResult:
    """The chat's own templates as ST-Prompt-Template evaluates them when the chat is shown: ``texts`` are the chat's
    messages, ``steps`` the indices of those it evaluates, in order. A message ``shown`` before (the export's
    ``is_ejs_processed``) is evaluated without writing, so not here (its text stays); one ``initialized`` before
    (``variables_initialized``) takes no copy of the variables before it. Each evaluated message's templates run with that
    message's variables as the message scope (a message after the first first takes a copy of the nearest earlier
    message's variables, its own keys winning); all in one VM. ``variables_after.messages`` holds every message's
    variables as the load left them (``None`` for a message it did not reach and that had none); the result's
    ``variables_patch`` is empty (:class:`~tavernbox.sillytavern.templates.TemplateRun` reports per message).
    Raises ``TemplateError`` when a budget trips."""
    context = context or PromptTemplateContext()
    limits = limits or PromptTemplateLimits()
    layout = _Layout()
    books_json = _books_json(books or {}, layout)
    run = {i for i in steps if not (i < len(shown) and shown[i])}
    evaluated = [t if i in run else TemplateText("", t.label) for i, t in enumerate(texts)]
    templates, order, warnings = _place_templates(evaluated, layout)
    for t in templates:
        t["scope"] = t["index"]
    payload = {
        "books": None,
        "limits": {"template_output": limits.template_output_chars, "getwi_depth": limits.getwi_depth,
                   "reads": limits.reads},
        "vars": {"global": dict(variables.global_vars), "chat": dict(variables.chat), "message": {},
                 "initial": dict(initial_variables or {})},
        "context": _context_input(context), "chat": [dict(m) for m in context.chat],
        "default_book": default_book, "character_text": context.character_text,
        "preset_prompts": dict(context.preset_prompts), "templates": [], "inject": [],
        "load": {"messages": [m if isinstance(m, dict) else None for m in variables.messages],
                 "steps": list(steps), "templates": templates,
                 "initialized": [bool(initialized[i]) if i < len(initialized) else False
                                 for i in range(len(variables.messages))]},
    }
    reply = _run_naming(payload, books_json, limits, layout, now_ms, shortcuts.pt_bytecode, texts)
    result = _collected(reply, texts, order, warnings, variables, layout)
    after = reply["variables"]
    result.variables_patch = {}
    result.variables_after = StVariables(global_vars=after["global"], chat=after["chat"],
                                         messages=tuple(after["messages"]), character=variables.character,
                                         preset=variables.preset)
    return result


def _unmarked(result: PromptTemplateResult, layout: _Layout) -> PromptTemplateResult:
    """The marked evaluation's texts without their markers, and each evaluated text's spans."""
    spans: list[list[tuple[int, int, dict[str, Any]]] | None] = []
    for i, text in enumerate(result.texts):
        if not result.evaluated[i]:
            spans.append(None)
            continue
        plain, marked = unmark(text, layout.origins)
        result.texts[i] = plain
        spans.append([(s.start, s.end, s.info(layout.origins)) for s in marked])
    result.spans = spans
    return result


def _place_templates(texts: Sequence[TemplateText], layout: _Layout
                     ) -> tuple[list[dict[str, Any]], list[int], list[Diagnostic]]:
    """The texts with templates, compiled and placed after the books (a text that does not compile is a warning:
    the extension sends it as it was), and which text each is."""
    templates: list[dict[str, Any]] = []
    order: list[int] = []
    warnings: list[Diagnostic] = []
    for i, t in enumerate(texts):
        if "<%" not in t.text:
            continue
        compiled = _compile(t.text, layout.marks)
        if isinstance(compiled, TemplateError):
            warnings.append(_warning(t.label, compiled.message, "TEMPLATE_SYNTAX", t.text, compiled.span))
            continue
        unit = layout.place(f"m{len(templates)}", t.label, compiled)
        templates.append({"source": compiled.program, "line": unit.line, "label": t.label, "index": i,
                          "unit": len(layout.units) - 1})
        if layout.marks:
            templates[-1]["origin"] = layout.origin(t.label, {}, compiled)
        order.append(i)
    return templates, order, warnings


def _collected(reply: Mapping[str, Any], texts: Sequence[TemplateText], order: list[int], warnings: list[Diagnostic],
               variables: StVariables, layout: _Layout, message_index: int | None = None) -> PromptTemplateResult:
    """The VM's answer as the result: texts (a failed one unchanged), warnings, the patch, the reads and the
    variables as the templates left them (their message writes on message ``message_index``, or without one on the
    latest message with variables)."""
    out_texts = [t.text for t in texts]
    evaluated = [False] * len(texts)
    for i, r in zip(order, reply["results"], strict=False):
        if "text" in r:
            out_texts[i], evaluated[i] = r["text"], True
        else:
            warnings.append(_failure(r["error"], texts[i], layout))
    for error in reply.get("inject_errors") or []:
        warnings.append(_failure(error, TemplateText("", error.get("label") or "@INJECT"), layout))
    latest = _message_scope(variables, message_index)
    after = reply["variables"]
    patch = {scope: ops for scope, ops in (
        ("global", json_patch(variables.global_vars, after["global"])),
        ("chat", json_patch(variables.chat, after["chat"])),
        ("message", json_patch(latest if isinstance(latest, dict) else {}, after["message"])),
    ) if ops}
    reads = [{"kind": k, "scope" if k == "getvar" else "book": a, "key" if k == "getvar" else "title": b}
             for k, a, b in reply["reads"]]
    messages = list(variables.messages)
    if patch.get("message"):
        index = message_index if message_index is not None else max(
            (i for i, v in enumerate(messages) if isinstance(v, (dict, list))), default=len(messages) - 1)
        if 0 <= index < len(messages):
            messages[index] = after["message"]
    variables_after = StVariables(global_vars=after["global"], chat=after["chat"], messages=tuple(messages),
                                  character=variables.character, preset=variables.preset)
    injected = [(str(m["role"]), str(m["content"])) for m in reply["injected"]] if reply.get("injected") else None
    result = PromptTemplateResult(out_texts, warnings, patch, reads, evaluated, reply.get("_usage"), variables_after,
                                  injected)
    _collect_generated(reply, result, layout)
    return result


def _collect_generated(reply: Mapping[str, Any], result: PromptTemplateResult, layout: _Layout) -> None:
    """The generate loader's part of the VM's answer: its errors as warnings (the entry adds nothing, as in the
    extension), the ``[GENERATE:BEFORE]`` pieces, and the final texts with each one's pieces."""
    for error in reply.get("generate_errors") or []:
        result.warnings.append(_failure(error, TemplateText("", error.get("label") or "[GENERATE]"), layout,
                                        "the entry adds nothing"))
    result.generate_before = [GeneratedPiece(*p) for p in reply.get("generate_before") or []]
    result.activated = [(str(w), int(u), bool(f)) for w, u, f in reply.get("activated") or []
                        if isinstance(u, (int, float)) and not isinstance(u, bool)]
    generated = reply.get("generated")
    if generated:
        result.texts = [str(t) for t in generated["texts"]]
        result.pieces = [[GeneratedPiece(*x) for x in p] if p is not None else None for p in generated["pieces"]]


def _generate_input(spec: GenerateSpec, layout: _Layout) -> dict[str, Any]:
    """The generate loader's entries for the VM, their templates (content, ``@@if`` condition) compiled and placed."""
    rows = []
    for e in spec.entries:
        label = f"world info {e.world}/{e.comment or e.uid}"
        key = f"g:{e.world}:{e.uid}"
        row: dict[str, Any] = {
            "world": e.world, "uid": e.uid, "comment": e.comment, "content": e.content, "decos": list(e.decorators),
            "keys": list(e.keys), "keysecondary": list(e.keysecondary), "selective": e.selective,
            "selectiveLogic": e.selective_logic, "constant": e.constant, "disable": e.disable,
            "probability": e.probability, "useProbability": e.use_probability, "group": e.group,
            "groupOverride": e.group_override, "groupWeight": e.group_weight, "useGroupScoring": e.use_group_scoring,
            "caseSensitive": e.case_sensitive, "matchWholeWords": e.match_whole_words, "order": e.order,
            "position": e.position, "depth": e.depth, "key": key, "label": label, "source": None, "line": 0,
            "cond": None, "unit": -1, "info": {"world": e.world, "uid": e.uid, "comment": e.comment}}
        _place_entry(row, e.content, layout)
        if e.condition is not None:
            source, line, unit = _placed("<%- !!(" + e.condition + ") %>", key + ":if", label + " (@@if)", layout)
            row["cond"] = {"source": source, "line": line, "unit": unit}
        rows.append(row)
    return {"entries": rows, "phase": spec.phase, "seed": spec.seed,
            "settings": {"case_sensitive": spec.case_sensitive, "match_whole_words": spec.match_whole_words,
                         "use_group_scoring": spec.use_group_scoring},
            "before": "".join(p.text for p in spec.before),
            "before_pieces": [list(p) for p in spec.before]}


def _placed(text: str, key: str, label: str, layout: _Layout) -> tuple[str, int, int]:
    """A template compiled and placed in the layout, as (program, first line, layout unit: what the runtime marks
    as running); one that does not compile throws its syntax error when run (unit -1: none)."""
    return _placed_compiled(_compile(text, layout.marks), key, label, layout)


def _placed_compiled(compiled: Any, key: str, label: str, layout: _Layout) -> tuple[str, int, int]:
    """:func:`_placed` of an already compiled template (or its syntax error)."""
    if isinstance(compiled, TemplateError):
        return "(function () { throw new SyntaxError(" + json.dumps(compiled.message) + "); })", 1, -1
    return compiled.program, layout.place(key, label, compiled).line, len(layout.units) - 1


def _place_entry(row: dict[str, Any], content: str, layout: _Layout) -> None:
    """An entry row's template (``source``, ``line``, ``unit``; with marks its ``origin``), when its content has one."""
    compiled = None
    if "<%" in content:
        compiled = _compile(content, layout.marks)
        row["source"], row["line"], row["unit"] = _placed_compiled(compiled, row["key"], row["label"], layout)
    if layout.marks:
        row["origin"] = layout.origin(row["label"], row["info"], compiled)


def _inject_input(inject: Sequence[InjectEntry], layout: _Layout) -> list[dict[str, Any]]:
    rows = []
    for e in inject:
        label = f"world info {e.world}/{e.comment or e.uid}"
        row: dict[str, Any] = {"comment": e.comment, "content": e.content, "order": e.order, "source": None,
                               "line": 0, "unit": -1, "key": f"i:{e.world}:{e.uid}", "label": label,
                               "info": {"world": e.world, "uid": e.uid, "comment": e.comment}}
        _place_entry(row, e.content, layout)
        rows.append(row)
    return rows


def _run(payload: dict[str, Any], books_json: str, limits: PromptTemplateLimits, layout: _Layout,
         now_ms: int | None, template_cache: bool = False) -> dict[str, Any]:
    # the books' part is spliced in as JSON text (kept between requests); inside JSON strings every quote is
    # escaped, so the key's one raw occurrence is the one replaced
    text = json.dumps(payload, ensure_ascii=True, separators=(",", ":")).replace('"books":null', '"books":' +
                                                                                  books_json, 1)
    budget = limits.remaining_ms()
    if budget <= 0:
        raise TemplateBudgetError(f"the request's templates used up their time budget of {limits.time_ms:g} ms "
                                  "before this evaluation", code="TEMPLATE_TIME_LIMIT")
    sandbox_limits = Limits(time_ms=budget, memory_bytes=limits.memory_bytes, input_bytes=64 * 1024 * 1024,
                            output_bytes=256 * 1024 * 1024, job_steps=1_000_000, stack_bytes=1024 * 1024,
                            template_chars=1024 * 1024, template_time_ms=min(limits.template_time_ms, budget))
    try:
        result = run_program(_runtime(), text, limits=sandbox_limits, now_ms=now_ms, template_cache=template_cache)
    except TemplateError as exc:
        raise _budget_error(exc, layout) from None
    if limits.meter is not None and result.usage is not None:
        limits.meter.spent_ms += result.usage.time_ms
    reply: dict[str, Any] = json.loads(result.text)
    reply["_usage"] = result.usage
    tripped = reply.get("tripped")
    if tripped:
        raise _tripped_error(tripped, layout)
    return reply


def _tripped_error(tripped: Mapping[str, Any], layout: _Layout) -> TemplateError:
    """A budget the runtime enforced (output, ``getwi`` depth, the engine's memory and stack errors it caught), with
    the line:column where the template tripped it when the error's stack places it in that template."""
    label = tripped.get("label") or "a template"
    where = layout.locate(tripped.get("stack"))
    pos = layout.innermost(where[0], tripped.get("stack")) if where is not None and where[0].label == label else None
    message = str(tripped["message"])
    if message.startswith(label + ":"):  # the runtime named it already
        message += f" (at {pos[0]}:{pos[1]})" if pos else ""
    else:
        message += f" ({label} at {pos[0]}:{pos[1]})" if pos else f" ({label})"
    return TemplateBudgetError(message, code=tripped["code"], template=tripped.get("label"),
                               line=pos[0] if pos else None, column=pos[1] if pos else None)


def _budget_error(exc: TemplateError, layout: _Layout) -> TemplateError:
    """A budget the sandbox enforced, as the request's error naming the template that tripped it: the one the
    runtime had marked as running (``js_template``, a layout unit), else the one the VM's positions fall in."""
    stack = getattr(exc, "js_stack", None)
    where = layout.locate(stack, getattr(exc, "js_line", None), getattr(exc, "js_column", None))
    mark = getattr(exc, "js_template", None)
    if isinstance(mark, int) and 0 <= mark < len(layout.units) and (where is None or where[0] is not layout.units[mark]):
        where = (layout.units[mark], layout.innermost(layout.units[mark], stack))
    if where is None:
        return TemplateError(f"{exc.message} while evaluating the request's templates", code=exc.code)
    unit, pos = where
    if stack:
        pos = layout.innermost(unit, stack)
    if stack and pos is not None:
        # an interrupt's frame holds the last position the engine recorded in the running function (where it
        # began, last awaited or called out), not the instruction that was running: the loop is at or after it
        return TemplateBudgetError(f"{exc.message} in {unit.label} (running at or after this position)",
                                   code=exc.code, template=unit.label, line=pos[0], column=pos[1])
    at = f" at {pos[0]}:{pos[1]}" if pos else ""
    return TemplateBudgetError(f"{exc.message} in {unit.label}{at}", code=exc.code, template=unit.label,
                               line=pos[0] if pos else None, column=pos[1] if pos else None)


def _warning(label: str, message: str, code: str, source: str, span: Span | None,
             position: tuple[int, int] | None = None, outcome: str = "sent as it was") -> Diagnostic:
    if position is None and span is not None:
        from ..spans import line_col

        position = line_col(source, span.start)
    at = f" at {position[0]}:{position[1]}" if position else ""
    data: dict[str, Any] = {"template": label}
    if position:
        data["line"], data["column"] = position
    return Diagnostic(code, f"{label}{at}: {message}; {outcome}", severity="warning", data=data)


def _failure(error: Mapping[str, Any], text: TemplateText, layout: _Layout,
             outcome: str = "sent as it was") -> Diagnostic:
    where = layout.locate(error.get("stack"))
    label, position = error.get("label") or text.label, None
    if where is not None:
        label, position = where[0].label, where[1]
    code = error.get("code") or ("TEMPLATE_SYNTAX" if error.get("name") == "SyntaxError" else
                                 "TEMPLATE_EXECUTION_FAILED")
    message = f"{error.get('name') or 'Error'}: {error.get('message')}"
    return _warning(label, message, code, text.text, None, position, outcome)


def _pointer(parts: Sequence[str]) -> str:
    return "".join("/" + p.replace("~", "~0").replace("/", "~1") for p in parts)


def json_patch(old: Any, new: Any, path: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    """RFC 6902 operations turning ``old`` into ``new`` (objects key by key, anything else replaced whole)."""
    if isinstance(old, Mapping) and isinstance(new, Mapping):
        ops: list[dict[str, Any]] = []
        for key in old:
            if key not in new:
                ops.append({"op": "remove", "path": _pointer((*path, str(key)))})
        for key, value in new.items():
            if key not in old:
                ops.append({"op": "add", "path": _pointer((*path, str(key))), "value": value})
            else:
                ops.extend(json_patch(old[key], value, (*path, str(key))))
        return ops
    if old == new and type(old) is type(new):
        return []
    return [{"op": "replace", "path": _pointer(path), "value": new}]
