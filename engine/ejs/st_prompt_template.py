"""ST-Prompt-Template's evaluation at generation: the ``<% %>`` of every final message, in one fresh VM.

ST-Prompt-Template (``zonde306/ST-Prompt-Template``) evaluates, when SillyTavern has built a chat-completion
request, the templates of every final message in order (after SillyTavern's macros and Tavern Helper's), with one
context for the whole generation: ``define``d names and variable writes carry from template to template, ``getwi``
evaluates the world-info entry it reads, and a message whose template fails is sent as it was. Here that is one
render of the project's sandbox (``st_prompt_template_runtime.js`` is the program; the templates, compiled by
tavernbox's EJS compiler, and the data travel as its input), so the request pays for one VM and nothing crosses
requests.

Budgets are ours, not the extension's: the request's CPU time (``PromptTemplateLimits.time_ms``, 2 s by default),
the VM's memory, each template's output and ``getwi``'s nesting. Tripping one fails the request with its code
(``TEMPLATE_TIME_LIMIT``, ``TEMPLATE_MEMORY_LIMIT``, ``TEMPLATE_OUTPUT_LIMIT``, ``TEMPLATE_STACK_LIMIT``) naming
the template and, when the VM reported one, the line:column. An ordinary error (a throw, a syntax error) is the
extension's behaviour instead: that message stays as it was, and a warning names the template and line:column.
Browser-only calls (``execute``, quick replies) fail their template with ``TEMPLATE_UNSUPPORTED``.

Writes never reach the caller's objects: they come back as ``variables_patch``, JSON Patch operations per scope
(``global``, ``chat``, ``message``: the latest message's variables).
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
from typing import Any

from ..errors import Diagnostic, Span, TemplateError
from ..macros.st_variables import StVariables
from ..sandbox import Limits, Usage, run_program
from .st_template_marks import Origin, unmark

__all__ = ["InjectEntry", "PromptTemplateContext", "PromptTemplateLimits", "PromptTemplateResult", "TemplateText", "WorldEntry",
           "evaluate_prompt_templates", "json_patch", "split_decorators"]

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


@dataclass(frozen=True)
class PromptTemplateLimits:
    """The request's budgets (the whole evaluation) and each template's."""

    time_ms: float = 2000.0
    memory_bytes: int = 64 * 1024 * 1024
    template_output_chars: int = 4 * 1024 * 1024
    getwi_depth: int = 32
    reads: int = 2000


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
                                   "line": 0, "key": f"w:{e.world}:{e.uid}", "label": label,
                                   "info": {"world": e.world, "uid": e.uid, "comment": e.comment}}
            compiled = None
            if "<%" in e.content:
                compiled = _compile(e.content, layout.marks)
                if isinstance(compiled, TemplateError):
                    # evaluated only if a template reads it: a template that does fails with this error
                    row["source"] = "(function () { throw new SyntaxError(" + json.dumps(compiled.message) + "); })"
                    row["line"] = 1
                else:
                    unit = layout.place(row["key"], label, compiled)
                    row["source"], row["line"] = compiled.program, unit.line
            if layout.marks:
                row["origin"] = layout.origin(label, row["info"], compiled)
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
    marks: bool = False,
) -> PromptTemplateResult:
    """Evaluate the ``<% %>`` of ``texts`` in order, in one VM (texts without ``<%`` are not touched and cost no
    VM when none has one). ``initial_variables`` are the extension's ``[InitialVariables]`` (read between the
    global and the chat variables, never written). Raises ``TemplateError`` when a budget trips.

    ``marks``: the marked evaluation (:mod:`.st_template_marks`): the same, with ``spans`` saying which template
    produced each range of each evaluated text; only those spans are meant to be used from it."""
    variables = variables or StVariables()
    context = context or PromptTemplateContext()
    limits = limits or PromptTemplateLimits()
    out_texts = [t.text for t in texts]
    if not inject and not any("<%" in t.text for t in texts):
        return PromptTemplateResult(out_texts, [], {}, [], [False] * len(texts))
    layout = _Layout(marks)
    books_json = _books_json(books or {}, layout)
    templates, order, warnings = _place_templates(texts, layout)
    if not templates and not inject:
        return PromptTemplateResult(out_texts, warnings, {}, [], [False] * len(texts))
    latest = variables.latest_message()
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
    if inject:  # every message's text and role, for placing the injected ones
        payload.update(texts=out_texts, roles=list(roles) or ["system"] * len(texts))
    if marks:
        payload["marks"] = True
    reply = _run(payload, books_json, limits, layout, now_ms)
    result = _collected(reply, texts, order, warnings, variables, layout)
    return _unmarked(result, layout) if marks else result


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
        templates.append({"source": compiled.program, "line": unit.line, "label": t.label, "index": i})
        if layout.marks:
            templates[-1]["origin"] = layout.origin(t.label, {}, compiled)
        order.append(i)
    return templates, order, warnings


def _collected(reply: Mapping[str, Any], texts: Sequence[TemplateText], order: list[int], warnings: list[Diagnostic],
               variables: StVariables, layout: _Layout) -> PromptTemplateResult:
    """The VM's answer as the result: texts (a failed one unchanged), warnings, the patch, the reads and the
    variables as the templates left them (their message writes on the latest message with variables)."""
    out_texts = [t.text for t in texts]
    evaluated = [False] * len(texts)
    for i, r in zip(order, reply["results"], strict=False):
        if "text" in r:
            out_texts[i], evaluated[i] = r["text"], True
        else:
            warnings.append(_failure(r["error"], texts[i], layout))
    for error in reply.get("inject_errors") or []:
        warnings.append(_failure(error, TemplateText("", error.get("label") or "@INJECT"), layout))
    latest = variables.latest_message()
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
        index = max((i for i, v in enumerate(messages) if isinstance(v, (dict, list))), default=len(messages) - 1)
        if index >= 0:
            messages[index] = after["message"]
    variables_after = StVariables(global_vars=after["global"], chat=after["chat"], messages=tuple(messages),
                                  character=variables.character, preset=variables.preset)
    injected = [(str(m["role"]), str(m["content"])) for m in reply["injected"]] if reply.get("injected") else None
    return PromptTemplateResult(out_texts, warnings, patch, reads, evaluated, reply.get("_usage"), variables_after,
                                injected)


def _inject_input(inject: Sequence[InjectEntry], layout: _Layout) -> list[dict[str, Any]]:
    rows = []
    for e in inject:
        label = f"world info {e.world}/{e.comment or e.uid}"
        row: dict[str, Any] = {"comment": e.comment, "content": e.content, "order": e.order, "source": None,
                               "line": 0, "key": f"i:{e.world}:{e.uid}", "label": label,
                               "info": {"world": e.world, "uid": e.uid, "comment": e.comment}}
        compiled = None
        if "<%" in e.content:
            compiled = _compile(e.content, layout.marks)
            if isinstance(compiled, TemplateError):
                row["source"], row["line"] = ("(function () { throw new SyntaxError(" + json.dumps(compiled.message)
                                              + "); })"), 1
            else:
                row["source"], row["line"] = compiled.program, layout.place(row["key"], label, compiled).line
        if layout.marks:
            row["origin"] = layout.origin(label, row["info"], compiled)
        rows.append(row)
    return rows


def _run(payload: dict[str, Any], books_json: str, limits: PromptTemplateLimits, layout: _Layout,
         now_ms: int | None) -> dict[str, Any]:
    # the books' part is spliced in as JSON text (kept between requests); inside JSON strings every quote is
    # escaped, so the key's one raw occurrence is the one replaced
    text = json.dumps(payload, ensure_ascii=True, separators=(",", ":")).replace('"books":null', '"books":' +
                                                                                  books_json, 1)
    sandbox_limits = Limits(time_ms=limits.time_ms, memory_bytes=limits.memory_bytes, input_bytes=64 * 1024 * 1024,
                            output_bytes=256 * 1024 * 1024, job_steps=1_000_000, stack_bytes=1024 * 1024,
                            template_chars=1024 * 1024)
    try:
        result = run_program(_runtime(), text, limits=sandbox_limits, now_ms=now_ms)
    except TemplateError as exc:
        raise _budget_error(exc, layout) from None
    reply: dict[str, Any] = json.loads(result.text)
    reply["_usage"] = result.usage
    tripped = reply.get("tripped")
    if tripped:
        raise TemplateError(f"{tripped['message']} ({tripped.get('label') or 'a template'})", code=tripped["code"])
    return reply


def _budget_error(exc: TemplateError, layout: _Layout) -> TemplateError:
    """A budget the sandbox enforced, as the request's error naming the template that tripped it."""
    where = layout.locate(getattr(exc, "js_stack", None), getattr(exc, "js_line", None),
                          getattr(exc, "js_column", None))
    if where is None:
        return TemplateError(f"{exc.message} while evaluating the request's templates", code=exc.code)
    unit, pos = where
    if getattr(exc, "js_stack", None):
        # an interrupt's innermost frame is where the template last called out (or began), not
        # where it was running: it names the template, its line:column would mislead
        pos = None
    at = f" at {pos[0]}:{pos[1]}" if pos else ""
    return TemplateError(f"{exc.message} in {unit.label}{at}", code=exc.code,
                         line=pos[0] if pos else None, column=pos[1] if pos else None)


def _warning(label: str, message: str, code: str, source: str, span: Span | None,
             position: tuple[int, int] | None = None) -> Diagnostic:
    if position is None and span is not None:
        from ..spans import line_col

        position = line_col(source, span.start)
    at = f" at {position[0]}:{position[1]}" if position else ""
    data: dict[str, Any] = {"template": label}
    if position:
        data["line"], data["column"] = position
    return Diagnostic(code, f"{label}{at}: {message}; sent as it was", severity="warning", data=data)


def _failure(error: Mapping[str, Any], text: TemplateText, layout: _Layout) -> Diagnostic:
    where = layout.locate(error.get("stack"))
    label, position = error.get("label") or text.label, None
    if where is not None:
        label, position = where[0].label, where[1]
    code = error.get("code") or ("TEMPLATE_SYNTAX" if error.get("name") == "SyntaxError" else
                                 "TEMPLATE_EXECUTION_FAILED")
    message = f"{error.get('name') or 'Error'}: {error.get('message')}"
    return _warning(label, message, code, text.text, None, position)


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
