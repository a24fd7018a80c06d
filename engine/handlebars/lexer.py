"""Handlebars 4.7's modal lexer: template text -> the token stream ``grammars/handlebars.lark`` parses.

Handlebars tokenises in states (its Jison lexer): plain text up to the next ``{{`` (a ``\\{{``
escapes one mustache, which then reads as text, and ``\\\\{{`` is a backslash before a real one);
inside a mustache, the first of an ordered list of rules that matches; a ``{{!-- --}}`` comment
up to its first ``--}}``. The rules below keep that order and their regular expressions, with
JavaScript's ``\\s`` spelled out (Python's differs). A NUL character in text, or text no rule
reads inside a mustache, is a syntax error at its offset, as in Handlebars.

Partial blocks (``{{#> }}``), decorators (``{{* }}``, ``{{#* }}``) and raw blocks (``{{{{ }}}}``)
are refused with ``HANDLEBARS_UNSUPPORTED``. A partial (``{{> name}}``) is read: story strings
have no partials to call, so it fails when it runs, as in SillyTavern, and only then.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

from ..errors import TemplateError
from ..spans import Span

__all__ = ["JS_SPACE", "HbsToken", "tokenize"]

#: JavaScript's ``\s`` (WhiteSpace and LineTerminator), as a character-class body.
JS_SPACE = "\\t\\n\\v\\f\\r \\u00a0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000\\ufeff"
_S = f"[{JS_SPACE}]"
_NS = f"[^{JS_SPACE}]"

# What may follow an identifier, a number or a keyword literal.
_ID_END = f"(?=[=~}}{JS_SPACE}/.)|])"
_LIT_END = f"(?=[~}}{JS_SPACE})])"

#: The mustache state's rules, in Handlebars' order: (compiled pattern, token type or an action).
_MU_RULES: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"\("), "OPEN_SEXPR"),
    (re.compile(r"\)"), "CLOSE_SEXPR"),
    (re.compile(r"\{\{\{\{"), "!raw"),
    (re.compile(r"\}\}\}\}"), "CLOSE_RAW_BLOCK"),
    (re.compile(r"\{\{(~)?>"), "OPEN_PARTIAL"),
    (re.compile(r"\{\{(~)?#>"), "!partial"),
    (re.compile(r"\{\{(~)?#\*"), "!decorator"),
    (re.compile(r"\{\{(~)?#"), "OPEN_BLOCK"),
    (re.compile(r"\{\{(~)?/"), "OPEN_ENDBLOCK"),
    (re.compile(rf"\{{\{{(~)?\^{_S}*(~)?\}}\}}"), "INVERSE"),
    (re.compile(rf"\{{\{{(~)?{_S}*else{_S}*(~)?\}}\}}"), "INVERSE"),
    (re.compile(r"\{\{(~)?\^"), "OPEN_INVERSE"),
    (re.compile(rf"\{{\{{(~)?{_S}*else(?![0-9A-Za-z_])"), "OPEN_INVERSE_CHAIN"),
    (re.compile(r"\{\{(~)?\{"), "OPEN_UNESCAPED"),
    (re.compile(r"\{\{(~)?&"), "OPEN"),
    (re.compile(r"\{\{(~)?!--"), "!long_comment"),
    (re.compile(r"\{\{(~)?![\s\S]*?\}\}"), "COMMENT"),
    (re.compile(r"\{\{(~)?\*"), "!decorator"),
    (re.compile(r"\{\{(~)?"), "OPEN"),
    (re.compile(r"="), "EQUALS"),
    (re.compile(r"\.\."), "ID"),
    (re.compile(rf"\.{_ID_END}"), "ID"),
    (re.compile(r"[/.]"), "SEP"),
    (re.compile(rf"{_S}+"), "!skip"),
    (re.compile(r"\}(~)?\}\}"), "CLOSE_UNESCAPED"),
    (re.compile(r"(~)?\}\}"), "CLOSE"),
    (re.compile(r'"(?:\\"|[^"])*"'), "STRING"),
    (re.compile(r"'(?:\\'|[^'])*'"), "STRING"),
    (re.compile(r"@"), "DATA"),
    (re.compile(f"true{_LIT_END}"), "BOOLEAN"),
    (re.compile(f"false{_LIT_END}"), "BOOLEAN"),
    (re.compile(f"undefined{_LIT_END}"), "UNDEFINED"),
    (re.compile(f"null{_LIT_END}"), "NULL"),
    (re.compile(rf"-?[0-9]+(?:\.[0-9]+)?{_LIT_END}"), "NUMBER"),
    (re.compile(f"as{_S}+\\|"), "OPEN_BLOCK_PARAMS"),
    (re.compile(r"\|"), "CLOSE_BLOCK_PARAMS"),
    (re.compile(f"[^{JS_SPACE}!\"#%-,./;->@\\[-\\^`{{-~]+{_ID_END}"), "ID"),
    (re.compile(r"\[(?:\\\]|[^\]])*\]"), "ID_LITERAL"),
]

_CLOSERS = frozenset({"CLOSE", "CLOSE_UNESCAPED", "INVERSE", "COMMENT"})
_TEXT_UNTIL_MUSTACHE = re.compile(r"[^\x00]*?(?=\{\{)")
_TEXT_REST = re.compile(r"[^\x00]+")
# After an escaped "\{{": at least two characters, up to the next "{{", "\{{", "\\{{" or the end.
_ESCAPED_TEXT = re.compile(r"[^\x00]{2,}?(?=\{\{|\\\{\{|\\\\\{\{|\Z)")
_LONG_COMMENT = re.compile(r"[\s\S]*?--(~)?\}\}")
_LITERAL_ESCAPE = re.compile(r"\\([\\\]])")


@dataclass(frozen=True, slots=True)
class HbsToken:
    """One token: its type (the grammar's terminal), its value and where its text lies."""

    type: str
    value: str
    start: int
    end: int


def _syntax(source: str, at: int, message: str, code: str = "HANDLEBARS_SYNTAX") -> TemplateError:
    return TemplateError(message, code=code, span=Span(at, at), source=source)


def tokenize(source: str) -> Iterator[HbsToken]:
    """The tokens of ``source``, in order (no end-of-input token)."""
    pos = 0
    length = len(source)
    escaped = False
    while pos < length:
        if escaped:
            match = _ESCAPED_TEXT.match(source, pos)
            if match is None:  # fewer than two characters left: Handlebars' lexer has no rule
                raise _syntax(source, pos, "Handlebars cannot read the text after an escaped '\\{{'")
            escaped = False
            yield HbsToken("CONTENT", match.group(), pos, match.end())
            pos = match.end()
            continue
        match = _TEXT_UNTIL_MUSTACHE.match(source, pos)
        if match is None:
            rest = _TEXT_REST.match(source, pos)
            if rest is None:
                raise _syntax(source, pos, "a NUL character in the template text")
            yield HbsToken("CONTENT", rest.group(), pos, rest.end())
            pos = rest.end()
            continue
        text, end = match.group(), match.end()
        if text.endswith("\\\\"):
            text = text[:-1]
        elif text.endswith("\\"):
            text = text[:-1]
            escaped = True
        if text:
            yield HbsToken("CONTENT", text, pos, end)
        pos = end
        if not escaped:
            pos = yield from _mustache(source, pos)


def _mustache(source: str, pos: int) -> Iterator[HbsToken]:
    """The tokens of one mustache starting at ``pos`` (its ``{{``); returns where text resumes."""
    length = len(source)
    while True:
        if pos >= length:
            raise _syntax(source, pos, "the mustache is not closed before the end of the template")
        for pattern, kind in _MU_RULES:
            match = pattern.match(source, pos)
            if match is None:
                continue
            end = match.end()
            if kind == "!skip":
                break
            if kind == "!long_comment":
                comment = _LONG_COMMENT.match(source, pos)
                if comment is None:
                    raise _syntax(source, pos, "the {{!-- comment is never closed with --}}")
                yield HbsToken("COMMENT", comment.group(), pos, comment.end())
                return comment.end()
            if kind.startswith("!"):
                raise _unsupported(source, pos, kind)
            value = match.group()
            if kind == "STRING":
                quote = value[0]
                value = value[1:-1].replace("\\" + quote, quote)
            elif kind == "ID_LITERAL":
                value = _LITERAL_ESCAPE.sub(r"\1", value)
                kind = "ID"
            yield HbsToken(kind, value, pos, end)
            if kind in _CLOSERS:
                return end
            break
        else:
            raise _syntax(source, pos, f"Handlebars reads no token at {source[pos]!r}")
        pos = end


def _unsupported(source: str, pos: int, kind: str) -> TemplateError:
    what = {"!raw": "raw blocks ({{{{ }}}})", "!partial": "partial blocks ({{#> }})", "!decorator": "decorators ({{* }})"}
    return _syntax(source, pos, f"Handlebars {what[kind]} are not supported in story strings",
                   code="HANDLEBARS_UNSUPPORTED")
