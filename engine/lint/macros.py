"""Static macro checks of one prompt text, on the engine's own parse and catalogue.

The text is parsed by :func:`tavernbox.macros.parser.document_items` (the parser ``render`` uses)
and scoped pairs are found by the evaluator's own pairing rule (``RenderState._pairs``), so what
lint calls unclosed is what a render would leave as written. Nothing is evaluated: every branch
of every ``{{if}}`` is checked, and no handler runs.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import Diagnostic, TemplateError
from ..macros import MAX_CPU_SECONDS, MAX_INPUT_CHARS
from ..macros.budget import cpu_budget
from ..macros.evaluator import RenderState, arity_code, arity_message
from ..macros.parser import MacroNode, Plain, document_items
from ..macros.registry import MacroDef, MacroRegistry, check_type
from ..macros.tavern_helper import MACRO_NAMES as TAVERN_HELPER_MACROS
from ..spans import Span
from .model import Facts, Finding, Prompt

__all__ = ["lint_macros"]

#: the pre-processor forms SillyTavern keeps for old cards (rewritten before parsing)
_LEGACY = re.compile(r"\{\{time_UTC[+-]\d+\}\}|<(?:USER|BOT|CHAR|GROUP|CHARIFNOTGROUP)>", re.IGNORECASE)
#: levels deeper than this are not descended into (the parser caps brace nesting at 64 and the
#: evaluator scoped nesting at 96 already; this only bounds the walk's own recursion)
_MAX_WALK_DEPTH = 200

#: variable macros: lower-cased name -> (scope, reads, sets)
_VARIABLE_MACROS: dict[str, tuple[str, bool, bool]] = {}
for _scope, _word, _exists, _flush in (("local", "var", "varexists", "flushvar"),
                                       ("global", "globalvar", "globalvarexists", "flushglobalvar")):
    _VARIABLE_MACROS.update({
        f"get{_word}": (_scope, True, False), f"has{_word}": (_scope, True, False), _exists: (_scope, True, False),
        f"set{_word}": (_scope, False, True), f"add{_word}": (_scope, True, True), f"inc{_word}": (_scope, True, True),
        f"dec{_word}": (_scope, True, True), f"delete{_word}": (_scope, False, True), _flush: (_scope, False, True),
    })
#: shorthand operators (``{{.x op v}}``) that write, and those that only read
_SHORTHAND_WRITES = {"=", "++", "--", "+=", "-=", "||=", "??="}
_SHORTHAND_PURE_WRITES = {"="}


@dataclass
class _Pairing:
    """Just enough of a ``RenderState`` for the evaluator's pairing rule to run on."""

    registry: MacroRegistry
    diagnostics: list[Diagnostic] = field(default_factory=list)
    _body_cache: dict[tuple[str, int], bool] = field(default_factory=dict)

    def diag(self, code: str, message: str, start: int, end: int, **data: Any) -> None:
        self.diagnostics.append(Diagnostic(code, message, Span(start, max(start, end)), data=data))

    @property
    def inputs(self) -> _Pairing:
        """The pairing rule reads the registry as a render's inputs (``state.inputs.registry``)."""
        return self

    _can_take_body = RenderState._can_take_body
    _pairs = RenderState._pairs


class _Walker:
    def __init__(self, prompt: Prompt, facts: Facts, registry: MacroRegistry, out: list[Finding]) -> None:
        self.prompt = prompt
        self.text = prompt.text
        self.facts = facts
        self.registry = registry
        self.out = out
        self.pairing = _Pairing(registry)

    def add(self, code: str, message: str, start: int, suggestion: str | None = None) -> None:
        self.out.append(self.prompt.finding(code, message, start, suggestion=suggestion))

    # ---- one level of items -------------------------------------------------------------------
    def level(self, items: Sequence[Any], depth: int, in_if: bool) -> None:
        if depth > _MAX_WALK_DEPTH or not any(type(i) is MacroNode for i in items):
            return
        before = len(self.pairing.diagnostics)
        pairs, keep_raw, too_deep = self.pairing._pairs(list(items), depth)
        for d in self.pairing.diagnostics[before:]:
            self.add(d.code, d.message, d.span.start if d.span else 0)
        idx, n = 0, len(items)
        while idx < n:
            item = items[idx]
            if type(item) is Plain:
                idx += 1
                continue
            if idx in keep_raw:
                if item.closing:
                    self.add("MACRO_UNCLOSED_SCOPE", f"{{{{/{item.name}}}}} has no opener; it is left as written",
                             item.start, f"remove it, or add {{{{{item.name}}}}} before it")
                else:
                    self.add("MACRO_ARITY", f"{{{{{item.name}}}}} cannot take scoped content; its tags are left as "
                             "written", item.start, "use the macro inline, without a closing tag")
                self.arguments(item, depth)
                idx += 1
                continue
            if idx in too_deep:
                self.add("MACRO_NESTING_LIMIT", "scoped macros nested deeper than the limit; left as written",
                         item.start, "flatten the nesting")
                idx = too_deep[idx] + 1
                continue
            scoped = pairs.get(idx)
            self.macro(item, scoped is not None, depth, in_if)
            if scoped is not None:
                self.level(items[idx + 1 : scoped[3]], depth + 1, item.key == "if")
                idx = scoped[3] + 1
            else:
                idx += 1

    def sublevel(self, lo: int, hi: int, depth: int) -> None:
        if lo >= hi or "{{" not in self.text[lo:hi]:
            return
        items, diagnostics, _ = document_items(self.text, lo, hi)
        for d in diagnostics:
            self.add(d.code, d.message, d.span.start if d.span else lo)
        self.level(items, depth + 1, False)

    def arguments(self, m: MacroNode, depth: int) -> None:
        for arg in m.args:
            if arg.span is not None:
                self.sublevel(arg.span[0], arg.span[1], depth)

    # ---- one macro ----------------------------------------------------------------------------
    def macro(self, m: MacroNode, scoped: bool, depth: int, in_if: bool) -> None:
        text = self.text
        if m.var is not None:
            var = m.var
            scope = "local" if var.scope == "." else "global"
            if var.op is None or var.op not in _SHORTHAND_PURE_WRITES:
                self.facts.read(scope, var.name, self.prompt, m.start)
            if var.op in _SHORTHAND_WRITES:
                self.facts.set(scope, var.name, self.prompt, m.start)
            if var.value_span is not None:
                self.sublevel(var.value_span[0], var.value_span[1], depth)
            return
        if not m.name:
            return
        definition = self.registry.get(m.key)
        if definition is None:
            self.unknown(m)
        else:
            self.check_call(m, definition, scoped, in_if)
        name_at = text.find(m.name, m.inner_start, m.inner_end)
        after = name_at + len(m.name)
        if name_at >= 0 and text.startswith(":", after) and not text.startswith("::", after):
            self.add("MACRO_LEGACY_SYNTAX", f"{{{{{m.name}:...}}}} uses the legacy single-colon argument form",
                     m.start, f"write the arguments with '::', e.g. {{{{{m.name}::...}}}}")
        self.arguments(m, depth)

    def unknown(self, m: MacroNode) -> None:
        if m.key in TAVERN_HELPER_MACROS:
            return  # Tavern Helper's variable macros: expanded in the request (its pass over the final messages)
        names = self.registry.names()
        close = difflib.get_close_matches(m.key, names, n=1, cutoff=0.6)
        suggestion = None
        if close:
            known = self.registry.get(close[0])
            suggestion = f"did you mean {{{{{known.name if known and close[0] == known.name.lower() else close[0]}}}}}?"
        self.add("MACRO_UNKNOWN", f"unknown macro {{{{{m.name}}}}}; it is left as written unless an extension "
                 "registers it", m.start, suggestion)

    def check_call(self, m: MacroNode, definition: MacroDef, scoped: bool, in_if: bool) -> None:
        text = self.text
        count = len(m.args) + (1 if scoped else 0)
        if not definition.accepts(count):
            if not scoped and m.args and definition.can_take_body(len(m.args)):
                self.add("MACRO_UNCLOSED_SCOPE", f"{{{{{m.name}}}}} has no {{{{/{m.name}}}}}; it is left as written",
                         m.start, f"close it with {{{{/{m.name}}}}}")
            else:
                self.add(arity_code(definition, count), arity_message(definition, count), m.start,
                         "check the macro's arguments")
        elif definition.strict and definition.arg_types:
            for i, arg in enumerate(m.args):
                if arg.span is None or i >= len(definition.arg_types):
                    continue
                value = text[arg.span[0] : arg.span[1]]
                if "{{" in value:
                    continue  # known only when rendered
                if not check_type(value, definition.arg_types[i]):
                    self.add("MACRO_ARGUMENT_TYPE", f"argument {i + 1} of {{{{{m.name}}}}} must be "
                             f"{definition.arg_types[i]}, got {value[:40]!r}; left as written", arg.span[0])
                    break
        if m.key == "else" and not in_if:
            self.add("MACRO_ELSE_OUTSIDE_IF", "{{else}} outside an {{if}} body; it is removed from the output",
                     m.start, "move it inside {{if ...}}...{{/if}}, or remove it")
        variable = _VARIABLE_MACROS.get(m.key)
        if variable is not None and m.args and m.args[0].span is not None:
            a, b = m.args[0].span
            name = text[a:b].strip()
            if name and "{{" not in name:
                scope, reads, sets = variable
                if reads:
                    self.facts.read(scope, name, self.prompt, m.start)
                if sets:
                    self.facts.set(scope, name, self.prompt, m.start)


def lint_macros(prompt: Prompt, facts: Facts, registry: MacroRegistry | None = None) -> list[Finding]:
    """The macro findings of one prompt; variable reads and writes go into ``facts``."""
    text = prompt.text
    out: list[Finding] = []
    if len(text) > MAX_INPUT_CHARS:
        return [prompt.finding("MACRO_INPUT_LIMIT", f"the text has {len(text):,} characters, more than the macro "
                               f"engine's limit of {MAX_INPUT_CHARS:,}; the render refuses it", 0,
                               suggestion="split the text")]
    for m in _LEGACY.finditer(text):
        modern = "{{" + m.group(0)[1:-1].lower() + "}}" if m.group(0).startswith("<") else "{{time::UTC+N}}"
        modern = modern.replace("{{bot}}", "{{char}}")
        out.append(prompt.finding("MACRO_LEGACY_SYNTAX", f"{m.group(0)} is legacy syntax (rewritten before parsing)",
                                  m.start(), suggestion=f"write {modern}"))
    if "{{" not in text:
        return out
    # the pre-processor rewrites {{time_UTC+N}} before parsing: blank it out (same length, so
    # every offset still points into the prompt) instead of reporting {{time_UTC}} as unknown
    parsed = _LEGACY.sub(lambda m: " " * len(m.group(0)) if m.group(0).startswith("{") else m.group(0), text)
    walker = _Walker(prompt, facts, registry or MacroRegistry.default_shared(), out)
    walker.text = parsed
    try:
        # the render's own CPU budget: a prompt that costs more than that to check is one the
        # render refuses (and a hostile one would hold lint for seconds)
        with cpu_budget(MAX_CPU_SECONDS, len(parsed)):
            items, diagnostics, _ = document_items(parsed)
            for d in diagnostics:
                walker.add(d.code, d.message, d.span.start if d.span else 0)
            walker.level(items, 0, False)
    except TemplateError as exc:
        if exc.code != "MACRO_TIME_LIMIT":
            raise
        start = exc.span.start if exc.span is not None else 0
        out.append(prompt.finding("MACRO_TIME_LIMIT", f"checking the macros used more than {MAX_CPU_SECONDS:g} s of "
                                  "CPU time and stopped here; the render refuses a text this costly", start,
                                  suggestion="split the text, or remove the repeated or malformed macros"))
    return out
