"""Static EJS checks of one prompt text: what ``render`` would refuse, without rendering it.

* Tags are parsed and compiled by the engine's own EJS compiler (``compile_source``), and the
  generated program is then *compiled* (never called) by QuickJS, the engine the sandbox runs,
  so JavaScript syntax errors are the ones a render would hit, at the template's line:column.
  Evaluating the program only creates its function; a template that closes that function early
  could run top-level code, so the context has a small time and memory budget and no host API.
* Calls in code tags are matched against the sandbox's own lists of refused writes/commands
  and unavailable reads (read from ``harness.js``, the single place they are defined).
* ``getwi``/``getpreset`` calls with literal arguments are checked against the linted books and
  presets; title tags and ``@@`` decorators go through ``inspect_template_metadata``.
"""

from __future__ import annotations

import re
from functools import lru_cache
from importlib import resources

from ..bridge.metadata import inspect_template_metadata
from ..ejs import compile_source, parse_template
from ..ejs.nodes import Tag
from ..errors import TemplateError
from .model import Facts, Finding, Prompt

__all__ = ["harness_call_lists", "lint_ejs"]

#: the sandbox budget for compiling one program (it never needs more: compiling is linear)
_COMPILE_TIME_LIMIT = 1.0
_COMPILE_MEMORY_LIMIT = 64 * 1024 * 1024
_POSITION = re.compile(r"at <input>:(\d+):(\d+)")
_STRING = r"""(?:'(?:[^'\\\n]|\\.)*'|"(?:[^"\\\n]|\\.)*"|`(?:[^`\\$]|\\.)*`)"""
_ARG = rf"(?:{_STRING}|null|undefined|-?\d+(?:\.\d+)?)"
_LITERAL_ARGS = re.compile(rf"\s*({_ARG})\s*(?:,\s*({_ARG})\s*)?[,)]")
_GETWI = ("getwi", "getWorldInfo")
_GETPRESET = ("getpreset", "getPresetPrompt", "getprp")
_SETTERS = ("setvar", "setLocalVar", "setGlobalVar", "incvar", "incLocalVar", "incGlobalVar", "decvar",
            "decLocalVar", "decGlobalVar", "insvar", "insLocalVar", "insGlobalVar")


@lru_cache(maxsize=1)
def harness_call_lists() -> tuple[tuple[str, ...], tuple[str, ...]]:
    """``(WRITES, UNAVAILABLE)``: the names the sandbox harness installs as refusing stubs."""
    source = resources.files("tavernbox.sandbox").joinpath("harness.js").read_text(encoding="utf-8")
    lists = []
    for name in ("WRITES", "UNAVAILABLE"):
        m = re.search(rf"const {name} = \[(.*?)\];", source, re.DOTALL)
        if m is None:  # pragma: no cover - the harness always defines both
            raise RuntimeError(f"harness.js defines no {name} list")
        lists.append(tuple(re.findall(r"'([A-Za-z_$][\w$]*)'", m.group(1))))
    return lists[0], lists[1]


@lru_cache(maxsize=1)
def _call_pattern() -> re.Pattern[str]:
    writes, unavailable = harness_call_lists()
    names = sorted({*writes, *unavailable, *_GETWI, *_GETPRESET, *_SETTERS}, key=len, reverse=True)
    return re.compile(rf"(?<![\w$.])({'|'.join(map(re.escape, names))})\s*\(")


def _literal(token: str | None) -> str | None:
    """A JS string literal's value (simple escapes only), ``""`` for null/undefined, else None."""
    if token is None:
        return None
    if token in ("null", "undefined"):
        return ""
    if token[0] in "'\"`":
        body = token[1:-1]
        if "\\" in body:
            body = re.sub(r"\\(.)", r"\1", body)
        return body
    return None


def _js_syntax(prompt: Prompt, source: str) -> Finding | None:
    """Compile the template's program in QuickJS; a SyntaxError becomes ``TEMPLATE_SYNTAX``."""
    try:
        compiled = compile_source(source)
    except TemplateError as exc:
        start = exc.span.start if exc.span is not None else 0
        if exc.code == "TEMPLATE_TOO_LARGE":
            return prompt.finding("TEMPLATE_TOO_LARGE", exc.message, start, suggestion="split the template")
        return prompt.finding("TEMPLATE_SYNTAX", exc.message, start, suggestion="check the tag's delimiters")
    import quickjs

    ctx = quickjs.Context()
    ctx.set_memory_limit(_COMPILE_MEMORY_LIMIT)
    ctx.set_time_limit(_COMPILE_TIME_LIMIT)
    try:
        ctx.eval(compiled.program)
    except Exception as exc:  # noqa: BLE001 - QuickJS raises its own exception types
        text = str(exc)
        if not text.startswith("SyntaxError"):
            return None  # not a compile error (the program broke out of its function and ran)
        message = text.splitlines()[0]
        m = _POSITION.search(text)
        offset = compiled.offset(int(m.group(1)), int(m.group(2))) if m else None
        return prompt.finding("TEMPLATE_SYNTAX", f"JavaScript: {message}", offset if offset is not None else 0,
                              suggestion="fix the JavaScript in this tag")
    finally:
        del ctx
    return None


def _macros_masked(text: str) -> str:
    """``text`` with every top-level macro (and legacy ``<USER>`` marker) replaced by ``x`` characters.

    SillyTavern substitutes macros before ST-Prompt-Template runs a prompt's template, so
    ``EvStat.<user>.hp`` or ``let hp = {{getvar::hp}};`` is valid code by the time it is compiled.
    Their values are unknown here; an identifier of the same length stands in (line breaks kept,
    so every position still points into the prompt).
    """
    if "{{" not in text and "<" not in text:
        return text
    from ..macros.parser import MacroNode, document_items
    from .macros import _LEGACY

    spans = [(m.start(), m.end()) for m in _LEGACY.finditer(text)]
    if "{{" in text:
        items, _, _ = document_items(text)
        spans.extend((i.start, i.end) for i in items if type(i) is MacroNode)
    if not spans:
        return text
    chars = list(text)
    for start, end in spans:
        for k in range(start, end):
            if chars[k] not in "\r\n":
                chars[k] = "x"
    return "".join(chars)


def lint_ejs(prompt: Prompt, facts: Facts) -> list[Finding]:
    """The EJS findings of one prompt; ``setvar``-style writes with literal names go into ``facts``."""
    text = prompt.text
    out: list[Finding] = []
    if prompt.title is not None and ("[" in prompt.title or "@" in prompt.title or text.startswith("@@")):
        meta = inspect_template_metadata(prompt.title, text if prompt.decorators else "")
        for d in meta.diagnostics:
            out.append(prompt.finding("TEMPLATE_LIFECYCLE_UNSUPPORTED", d.message, d.span.start if d.span else None,
                                      suggestion="use [GENERATE:BEFORE] / [GENERATE:AFTER] or no tag"))
    if "<%" not in text:
        return out
    from .. import Limits  # the package's export: the sandbox itself is for ejs, the bridge and the CLI

    limit = Limits().template_chars
    if len(text) > limit:
        out.append(prompt.finding("TEMPLATE_TOO_LARGE", f"the template has {len(text):,} characters, more than the "
                                  f"default limit of {limit:,}; the render refuses it", 0,
                                  suggestion="split it, or raise Limits.template_chars for it"))
        return out
    syntax = _js_syntax(prompt, _macros_masked(text))
    if syntax is not None:
        out.append(syntax)
    try:
        parsed = parse_template(text)
    except TemplateError:
        return out  # already reported as TEMPLATE_SYNTAX
    writes, unavailable = harness_call_lists()
    writes_set, unavailable_set = set(writes), set(unavailable)
    pattern = _call_pattern()
    for node in parsed.nodes:
        if type(node) is not Tag or node.code is None or node.mode == "comment":
            continue
        code = node.code
        for m in pattern.finditer(code):
            name = m.group(1)
            at = node.code_start + m.start(1)
            args = _LITERAL_ARGS.match(code, m.end())
            first = _literal(args.group(1)) if args else None
            second = _literal(args.group(2)) if args else None
            if name in writes_set:
                out.append(prompt.finding("TEMPLATE_WRITE_REFUSED", f"{name}() is refused here: templates are "
                                          "read-only (the render fails with TEMPLATE_UNSUPPORTED)", at,
                                          suggestion="set variables with MVU update commands or macros instead"))
            elif name in unavailable_set:
                out.append(prompt.finding("TEMPLATE_READ_UNAVAILABLE", f"{name}() is not available to templates "
                                          "here; the render fails when it is reached", at,
                                          suggestion="read variables, activated entries, preset prompts or the "
                                          "character description instead"))
            if name in _SETTERS and first:
                facts.set("local", first, prompt, at)
            elif name in _GETWI and args is not None:
                _check_getwi(prompt, facts, out, at, name, args.group(2) is not None, first, second)
            elif name in _GETPRESET and first and facts.has_preset and first not in facts.preset_prompts:
                out.append(prompt.finding("TEMPLATE_PRESET_PROMPT_UNKNOWN", f"{name}({first!r}): no linted preset "
                                          "has a prompt with this identifier or name; it reads \"\"", at))
    return out


def _check_getwi(prompt: Prompt, facts: Facts, out: list[Finding], at: int, name: str, two: bool,
                 first: str | None, second: str | None) -> None:
    if not facts.books:
        return
    book, title = (first, second) if two else ("", first)
    if title is None or not title:
        return
    if book and book not in facts.books:
        out.append(prompt.finding("TEMPLATE_WORLD_INFO_UNKNOWN", f"{name}: no linted world book is named {book!r}",
                                  at, suggestion=f"known books: {', '.join(sorted(facts.books)[:5])}"))
        return
    books = [facts.books[book]] if book else list(facts.books.values())
    # ST-Prompt-Template matches a title against entry comments with String.prototype.match, so a
    # plain title also finds a comment that contains it
    if not any(title in comment for titles in books for comment in titles):
        out.append(prompt.finding("TEMPLATE_WORLD_INFO_UNKNOWN", f"{name}: no entry titled {title!r} in "
                                  f"{'book ' + repr(book) if book else 'any linted world book'}; it reads \"\"", at))
