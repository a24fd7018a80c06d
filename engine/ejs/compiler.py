"""EJS nodes -> one JavaScript program plus a map from its lines back to the template.

The program is the script ``(async function (__tb, locals, escapeFn, include, rethrow) { ... })``.
The sandbox harness calls it with one argument, ``__tb`` (frozen: ``append``, ``escape``,
``locals``), awaits it and returns what ``__tb.append`` collected.

The body reproduces the *observable* shape of the function ejs 7.0.2 generates with
``{async: true, outputFunctionName: "print"}`` and ST-Prompt-Template's variadic ``print``,
because templates can see that shape:

* ``locals`` is a parameter holding a fresh null-prototype shallow copy of the data (ejs >= 6),
  so ``var variables = 1`` writes through ``with`` exactly as in ejs and never reaches the caller
  (in the ST-Prompt-Template dialect the copy's prototype is the template API, ``__tb.api``, so
  ``getvar`` and the rest resolve through ``with`` without being copied into every render);
* ``__output``, ``__append`` and ``print`` are ``var``s outside ``with (locals || {})``; ``print``
  is variadic from the start (ST's fork), so a template's own ``let print`` shadows it. The two
  output functions are methods named ``append``, a frame name the sandbox harness skips when it
  locates an error, so a failing conversion is reported at the template's tag;
* ``console`` exists and prints nothing into the output (the sandbox has no console; templates
  written for ST log with it, and in ejs its output never reaches the rendered text);
* output stops when the body's promise settles (``__finished``): ejs returns its buffer then, so
  text appended later by un-awaited async callbacks is lost there and must be lost here;
* code tags, text escaping, the ``//``-comment newline, the trailing-``;`` strip and the
  one-newline trim follow ejs's generator token by token (``_Generator`` is its mode machine).

Each template token becomes whole lines of the program; a code token's own line breaks are kept
verbatim. ``LineMap`` remembers, per generated line, which template offset its first mapped
column corresponds to, so a QuickJS error position (line, UTF-8 byte column) becomes a template
line and column.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from ..spans import line_col
from .nodes import CLOSERS, OPENERS
from .parser import ParsedTemplate

__all__ = ["MARK_END", "MARK_START", "CompiledTemplate", "LineMap", "compile_template", "mark_label",
           "strip_trailing_semicolon"]

#: Provenance marks (``compile_template(..., marks=True)``): ``MARK_START``, the mark's index in
#: hex digits U+FDE0..U+FDEF, ``MARK_END``. Unicode noncharacters, reserved for process-internal
#: use, as the assembler's own markers are (:mod:`tavernbox.assembler.render`).
MARK_START, MARK_END = "\ufdd0", "\ufdd1"


def mark_label(index: int) -> str:
    """The text of mark ``index`` in a marked program's output."""
    return MARK_START + "".join(chr(0xFDE0 + int(d, 16)) for d in f"{index:x}") + MARK_END

#: Line terminators as QuickJS counts them for error positions (CRLF is one line break).
_JS_LINE_BREAK = re.compile("\r\n|[\r\n\u2028\u2029]")
#: JavaScript's ``\s`` (ejs strips ``;`` followed only by these at the end of an output tag).
_JS_SPACE = "\t\n\v\f\r \u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a" \
            "\u2028\u2029\u202f\u205f\u3000\ufeff"

#: Characters a text literal must not hold raw: line terminators (QuickJS would count a U+2028
#: as a new line and shift the line map) and surrogates (not transportable as raw code units).
_LITERAL_UNSAFE = re.compile("[\u2028\u2029\ud800-\udfff]")


def _js_string(text: str) -> str:
    """A double-quoted JavaScript literal for ``text``: JSON escaping, other non-ASCII kept raw.

    Raw non-ASCII keeps the program close to the template's size (an ASCII-escaped emoji costs
    12 characters), which matters because the sandbox bounds the program's length.
    """
    literal = json.dumps(text, ensure_ascii=False)
    return _LITERAL_UNSAFE.sub(lambda m: "\\u%04x" % ord(m.group()), literal)


_PROLOGUE = (
    "(async function (__tb, locals, escapeFn, include, rethrow) {\n"
    "var __line = 1, __lines = \"\", __filename = undefined, __finished = false;\n"
    "locals = Object.assign(Object.create(__tb.api === undefined ? null : __tb.api), __tb.locals); escapeFn = __tb.escape;\n"
    "{\n"
    "  var __output = \"\";\n"
    "  var __append = ({ append(s) { if (!__finished) __tb.append(s) } }).append;\n"
    "  var print = ({ append() { for (var i = 0; i < arguments.length; i++) __append(arguments[i]); } }).append;\n"
    "  var console = Object.freeze({ log() {}, info() {}, warn() {}, error() {}, debug() {}, trace() {}, dir() {},"
    " table() {} });\n"
    "  try {\n"
    "  with (locals || {}) {\n"
)
# ``__tb.finish()`` tells the harness the body is over: the template API refuses lookups from then on
# (a dangling callback cannot make the host resolve anything, sandbox-security H12).
_EPILOGUE = "  }\n  } finally { __finished = true; __tb.finish() }\n}\n})\n"
_PROLOGUE_LINES = _PROLOGUE.count("\n")


def strip_trailing_semicolon(code: str) -> str:
    """ejs's ``stripSemi``: drop the last ``;`` when only JavaScript whitespace follows it."""
    body = code.rstrip(_JS_SPACE)
    if body.endswith(";"):
        return body[:-1] + code[len(body):]
    return code


@dataclass(frozen=True, slots=True)
class LineMap:
    """Generated line -> ``(first mapped column, template offset at that column)``.

    ``columns[i]`` is the 0-based character column on generated line ``i + 1`` where template
    code starts, ``offsets[i]`` the template offset of that character. Lines that hold no
    template code have column ``-1``: text output points at its text, the prologue (offset
    ``-1``) at nothing, the epilogue at the end of the last code (an unclosed ``{`` is reported
    by QuickJS at the closing lines we add).
    """

    columns: tuple[int, ...]
    offsets: tuple[int, ...]

    def template_offset(self, program: str, js_line: int, js_column: int) -> int | None:
        """The template offset of a QuickJS position (1-based line, 1-based UTF-8 byte column)."""
        if not 1 <= js_line <= len(self.columns):
            return None
        index = js_line - 1
        if self.columns[index] < 0:
            return self.offsets[index] if self.offsets[index] >= 0 else None
        lines = _JS_LINE_BREAK.split(program)
        text = lines[index] if index < len(lines) else ""
        char_col = len(text.encode("utf-8", "surrogatepass")[: max(js_column - 1, 0)]
                       .decode("utf-8", "ignore"))
        base = self.columns[index]
        # A token is contiguous in the source (the slurp pre-pass only deletes next to a slurp
        # tag), so columns past the mapped start advance through the template one for one.
        return self.offsets[index] + max(char_col - base, 0)


@dataclass(frozen=True, slots=True)
class CompiledTemplate:
    """A template compiled to a program, with what is needed to report errors in its terms."""

    source: str
    program: str
    line_map: LineMap
    #: with ``marks=True``: per mark index, ``(kind, template start, template end)``; kind is
    #: ``text``, ``escaped`` (``<%=``), ``raw`` (``<%-``) or ``eval`` (``<%``: what it prints)
    marks: tuple[tuple[str, int, int], ...] = ()

    def position(self, js_line: int | None, js_column: int | None) -> tuple[int, int] | None:
        """Template ``(line, column)`` for a position in ``program``, or ``None`` when unknown."""
        offset = self.offset(js_line, js_column)
        return None if offset is None else line_col(self.source, offset)

    def offset(self, js_line: int | None, js_column: int | None) -> int | None:
        """Template offset for a position in ``program``, or ``None`` when unknown."""
        if js_line is None:
            return None
        offset = self.line_map.template_offset(self.program, js_line, js_column or 1)
        return None if offset is None else min(offset, len(self.source))


class _Generator:
    """ejs's code generator as a mode machine over the token stream of the nodes."""

    def __init__(self, marks: bool = False) -> None:
        self.chunks: list[str] = [_PROLOGUE]
        # provenance marks (see compile_template): one per output token, and the tag being read
        self.marking = marks
        self.marks: list[tuple[str, int, int]] = []
        self.tag_start = -1
        self.tag_mark = -1
        self.columns: list[int] = [-1] * _PROLOGUE_LINES
        self.offsets: list[int] = [-1] * _PROLOGUE_LINES
        self.mode: str | None = None
        self.truncate = False
        self.last_code_end = -1
        # Output met since the last code token: ejs appends each piece separately, but nothing
        # can run between them, so one append of the concatenation renders the same text.
        self.pending: list[str] = []
        self.pending_offset = -1

    def _mark(self, kind: str, start: int, end: int) -> str:
        """A new mark's append statement (``""`` when not marking)."""
        if not self.marking:
            return ""
        self.marks.append((kind, start, end))
        return "; __append(" + _js_string(mark_label(len(self.marks) - 1)) + ") "

    def _append(self, text: str, offset: int) -> None:
        """Queue literal output (merged with its neighbours until the next code token)."""
        if self.marking:  # each piece is its own mark: no merging
            self._line("    " + self._mark("text", offset, offset + len(text)) + "; __append(" + _js_string(text) + ")",
                       offset)
            return
        if not self.pending:
            self.pending_offset = offset
        self.pending.append(text)

    def flush(self) -> None:
        """Emit the queued literal output as one append."""
        if self.pending:
            self._line("    ; __append(" + _js_string("".join(self.pending)) + ")", self.pending_offset)
            self.pending.clear()

    def _line(self, text: str, offset: int) -> None:
        """One generated line holding no template code."""
        self.chunks.append(text)
        self.chunks.append("\n")
        self.columns.append(-1)
        self.offsets.append(offset)

    def _code(self, prefix: str, code: str, suffix: str, offset: int) -> None:
        """Generated line(s) ``prefix + code + suffix``; ``code``'s own lines map to the template."""
        self.flush()
        self.chunks.append(prefix)
        self.chunks.append(code)
        self.chunks.append(suffix)
        self.chunks.append("\n")
        self.columns.append(len(prefix))
        self.offsets.append(offset)
        self.last_code_end = offset + len(code.rstrip())
        for match in _JS_LINE_BREAK.finditer(code):
            self.columns.append(0)
            self.offsets.append(offset + match.end())
        for _ in _JS_LINE_BREAK.finditer(suffix):
            self.columns.append(0)
            self.offsets.append(offset + len(code))

    def _output(self, text: str, offset: int) -> None:
        """ejs's ``_addOutput``: the armed trim eats one leading line break, then append."""
        if self.truncate:
            for brk in ("\r\n", "\r", "\n"):
                if text.startswith(brk):
                    text = text[len(brk):]
                    offset += len(brk)
                    break
            self.truncate = False
        if text:
            self._append(text, offset)

    def token(self, value: str, offset: int, is_tag: bool) -> None:
        if is_tag and value in OPENERS:
            self.mode = OPENERS[value]
            self.tag_start, self.tag_mark = offset, -1
        elif is_tag and value == "<%%":
            self.mode = "literal"
            self._append("<%", offset)
        elif is_tag and value == "%%>":
            self.mode = "literal"
            self._append("%>", offset)
        elif is_tag and value in CLOSERS:
            if self.mode == "literal":
                self._output(value, offset)
            if self.tag_mark >= 0:  # the mark covers the whole tag, closer included
                kind, start, _ = self.marks[self.tag_mark]
                self.marks[self.tag_mark] = (kind, start, offset + len(value))
                self.tag_mark = -1
            self.mode = None
            self.truncate = value[0] in "-_"
        elif self.mode in ("eval", "escaped", "raw"):
            # A trailing line comment would swallow the closing parenthesis: ejs adds a newline.
            if value.rfind("//") > value.rfind("\n"):
                value += "\n"
            mark = self._mark(self.mode, self.tag_start, offset + len(value))
            if mark:
                self.tag_mark = len(self.marks) - 1
            if self.mode == "eval":
                self._code("    " + mark + "; ", value, "", offset)
            else:
                escaped = self.mode == "escaped"
                self._code("    " + mark + ("; __append(escapeFn(" if escaped else "; __append("),
                           strip_trailing_semicolon(value), "))" if escaped else ")", offset)
        elif self.mode == "comment":
            pass
        else:  # text, in plain or literal mode
            self._output(value, offset)


def compile_template(parsed: ParsedTemplate, *, marks: bool = False) -> CompiledTemplate:
    """Compile parsed nodes into the program the sandbox runs, with its line map.

    ``marks=True`` compiles the provenance variant (:mod:`.provenance`): before each text piece,
    output tag and code tag the program appends :func:`mark_label` of a new mark, so everything
    appended after it (up to the next mark) came from that token. A code tag's mark goes before
    its code, so output printed inside a loop body still follows the mark of the token that
    printed it. Marked programs are never cached or used for the text itself.
    """
    gen = _Generator(marks)
    for node in parsed.nodes:
        for value, offset, is_tag in node.tokens():
            gen.token(value, offset, is_tag)
    gen.flush()
    gen.chunks.append(_EPILOGUE)
    program = "".join(gen.chunks)
    extra = _EPILOGUE.count("\n") + 1
    # A syntax error found in the epilogue is an unclosed construct: point after the last code.
    columns = tuple(gen.columns) + (-1,) * extra
    offsets = tuple(gen.offsets) + (gen.last_code_end,) * extra
    return CompiledTemplate(parsed.source, program, LineMap(columns, offsets), tuple(gen.marks))
