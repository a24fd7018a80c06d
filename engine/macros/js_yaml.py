"""JSON values written as YAML exactly as the JavaScript ``yaml`` package (2.x) writes them.

Tavern Helper's ``{{format_message_variable::path}}`` prints a variable with ``YAML.stringify(value,
{blockQuote: 'literal'})``, and MVU cards put that text in the prompt, so every byte matters: which strings stay
plain and which are quoted (and with which quote), where long plain lines fold at 80 columns, block scalars and
their chomping indicator, JavaScript's object key order (integer-like keys first) and number formatting.

Lengths and folding columns are counted in UTF-16 code units, as JavaScript counts them: the writer works on the
text with every astral character spelt as its surrogate pair and joins the pairs again at the end.
``tests/test_js_yaml.py`` compares the output with the real package over generated values.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, replace
from typing import Any

from .variables import js_string

__all__ = ["js_ordered", "yaml_stringify"]

LINE_WIDTH = 80
MIN_CONTENT_WIDTH = 20
INDENT_STEP = "  "
DOUBLE_QUOTED_MIN_MULTILINE = 40

_FOLD_FLOW, _FOLD_BLOCK, _FOLD_QUOTED = "flow", "block", "quoted"
_INDEX_KEY = re.compile(r"0|[1-9][0-9]*")
_DOCUMENT_MARKER = re.compile(r"^(%|---|\.\.\.)", re.M)
_NOT_PLAIN = re.compile(r"^[\n\t ,\[\]{}#&*!|>'\"%@`]|^[?-]\Z|^[?-][ \t]|[\n:][ \t]|[ \t]\n|[\n\t ]#|[\n\t :]\Z")
_FORCE_DOUBLE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff]")
#: the core schema's implicit types: a plain string that reads as one of them is quoted
_CORE_TESTS = tuple(re.compile(p) for p in (
    r"^(?:~|[Nn]ull|NULL)?\Z", r"^(?:[Tt]rue|TRUE|[Ff]alse|FALSE)\Z", r"^0o[0-7]+\Z", r"^[-+]?[0-9]+\Z",
    r"^0x[0-9a-fA-F]+\Z", r"^(?:[-+]?\.(?:inf|Inf|INF)|\.nan|\.NaN|\.NAN)\Z",
    r"^[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)[eE][-+]?[0-9]+\Z", r"^[-+]?(?:\.[0-9]+|[0-9]+\.[0-9]*)\Z"))
_BLOCK_END_NEWLINES = re.compile(r"(^|(?<!\n))\n+(?!\n|\Z)")


def _is_index_key(key: str) -> bool:
    return _INDEX_KEY.fullmatch(key) is not None and int(key) < 2**32 - 1


def js_ordered(value: Any) -> Any:
    """``value`` with every object's keys in JavaScript's order: array-index keys ascending, then the rest as
    inserted (what ``JSON.parse`` and every later read of the object give)."""
    if isinstance(value, dict):
        keys = [str(k) for k in value]
        index = sorted((k for k in keys if _is_index_key(k)), key=int)
        rest = [k for k in keys if not _is_index_key(k)]
        by_str = {str(k): v for k, v in value.items()}
        return {k: js_ordered(by_str[k]) for k in index + rest}
    if isinstance(value, list):
        return [js_ordered(v) for v in value]
    return value


def _utf16(text: str) -> str:
    """Astral characters as surrogate pairs, so ``len`` and indexes count UTF-16 units."""
    if text.isascii() or all(ord(c) < 0x10000 for c in text):
        return text
    return "".join(c if ord(c) < 0x10000 else _pair(ord(c) - 0x10000) for c in text)


def _pair(offset: int) -> str:
    return chr(0xD800 + (offset >> 10)) + chr(0xDC00 + (offset & 0x3FF))


def _joined(text: str) -> str:
    """Surrogate pairs joined again (lone surrogates stay as they are)."""
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")


@dataclass
class _Ctx:
    """The writer's context for one node (the package's stringify context, block style only)."""

    indent: str = ""
    implicit_key: bool = False
    indent_at_start: int | None = None
    force_block_indent: bool = False


def yaml_stringify(value: Any, *, block_quote: str = "literal") -> str:
    """``YAML.stringify(value, {blockQuote})`` for a JSON value: the document text, ending with a newline."""
    if block_quote not in ("literal", "folded", "auto"):
        raise ValueError("block_quote is literal, folded or auto")
    writer = _Writer(block_quote)
    return _joined(writer.node(js_ordered(value), _Ctx())) + "\n"


class _Writer:
    def __init__(self, block_quote: str) -> None:
        self.block_quote = block_quote

    # -- nodes ---------------------------------------------------------------------------------------------

    def node(self, value: Any, ctx: _Ctx) -> str:
        if isinstance(value, dict):
            return self.mapping(value, ctx)
        if isinstance(value, list):
            return self.sequence(value, ctx)
        if value is None:
            return "null"
        if isinstance(value, bool):
            return "true" if value else "false"
        if isinstance(value, (int, float)):
            return _number(value)
        return self.string(str(value), ctx)

    def mapping(self, value: dict[str, Any], ctx: _Ctx) -> str:
        if not value:
            return "{}"
        item_ctx = replace(ctx, indent=ctx.indent)
        lines = [self.pair(k, v, item_ctx) for k, v in value.items()]
        return f"\n{ctx.indent}".join(lines)

    def sequence(self, value: list[Any], ctx: _Ctx) -> str:
        if not value:
            return "[]"
        item_ctx = replace(ctx, indent=ctx.indent + "  ")
        lines = ["- " + self.node(v, item_ctx) for v in value]
        return f"\n{ctx.indent}".join(lines)

    def pair(self, key: str, value: Any, ctx: _Ctx) -> str:
        pctx = replace(ctx, implicit_key=True, indent=ctx.indent + INDENT_STEP)
        key_text = self.string(key, pctx)
        if len(key_text) > 1024:
            # an explicit key (`? key`), as the package writes keys past 1024 characters
            head = f"? {key_text}\n{ctx.indent}:"
            body = self.node(value, replace(pctx, implicit_key=False))
            return head + ("" if body == "" or body[0] == "\n" else " ") + body
        head = key_text + ":"
        vctx = replace(pctx, implicit_key=False)
        if not isinstance(value, (dict, list)):
            vctx.indent_at_start = len(head) + 1
        body = self.node(value, vctx)
        if isinstance(value, (dict, list)):
            sep = f"\n{vctx.indent}" if value else " "
        else:
            sep = "" if body == "" or body[0] == "\n" else " "
        return head + sep + body

    # -- strings -------------------------------------------------------------------------------------------

    def string(self, value: str, ctx: _Ctx) -> str:
        if _FORCE_DOUBLE.search(value):
            return self.double_quoted(value, ctx)
        return self.plain(value, ctx)

    def plain(self, value: str, ctx: _Ctx) -> str:
        if ctx.implicit_key and "\n" in value:
            return self.quoted(value, ctx)
        if _NOT_PLAIN.search(value):
            if ctx.implicit_key or "\n" not in value:
                return self.quoted(value, ctx)
            return self.block(value, ctx)
        if not ctx.implicit_key and "\n" in value:
            return self.block(value, ctx)
        if _DOCUMENT_MARKER.search(value):
            if ctx.indent == "":
                ctx.force_block_indent = True
                return self.block(value, ctx)
            if ctx.implicit_key and ctx.indent == INDENT_STEP:
                return self.quoted(value, ctx)
        text = re.sub(r"\n+", lambda m: m.group(0) + "\n" + ctx.indent, value)
        if any(t.search(text) for t in _CORE_TESTS):
            return self.quoted(value, ctx)
        if ctx.implicit_key:
            return _utf16(text)
        return _fold(_utf16(text), ctx.indent, _FOLD_FLOW, ctx.indent_at_start)

    def quoted(self, value: str, ctx: _Ctx) -> str:
        has_double, has_single = '"' in value, "'" in value
        if has_double and not has_single:
            return self.single_quoted(value, ctx)
        return self.double_quoted(value, ctx)

    def single_quoted(self, value: str, ctx: _Ctx) -> str:
        if (ctx.implicit_key and "\n" in value) or re.search(r"[ \t]\n|\n[ \t]", value):
            return self.double_quoted(value, ctx)
        indent = ctx.indent or ("  " if _DOCUMENT_MARKER.search(value) else "")
        text = "'" + re.sub(r"\n+", lambda m: m.group(0) + "\n" + indent, value.replace("'", "''")) + "'"
        if ctx.implicit_key:
            return _utf16(text)
        return _fold(_utf16(text), indent, _FOLD_FLOW, ctx.indent_at_start)

    def double_quoted(self, value: str, ctx: _Ctx) -> str:
        src = _utf16(_json_string(value))
        indent = ctx.indent or ("  " if _DOCUMENT_MARKER.search(value) else "")
        out: list[str] = []
        start = 0
        i = 0
        n = len(src)
        while i < n:
            ch = src[i]
            if ch == " " and src[i + 1:i + 3] == "\\n":
                out.append(src[start:i] + "\\ ")
                i += 1
                start = i
                ch = "\\"
            if ch == "\\":
                nxt = src[i + 1] if i + 1 < n else ""
                if nxt == "u":
                    out.append(src[start:i])
                    code = src[i + 2:i + 6]
                    out.append(_SHORT_ESCAPES.get(code) or ("\\x" + code[2:] if code[:2] == "00" else src[i:i + 6]))
                    i += 5
                    start = i + 1
                elif nxt == "n":
                    if ctx.implicit_key or src[i + 2:i + 3] == '"' or n < DOUBLE_QUOTED_MIN_MULTILINE:
                        i += 1
                    else:
                        out.append(src[start:i] + "\n\n")
                        while src[i + 2:i + 4] == "\\n" and src[i + 4:i + 5] != '"':
                            out.append("\n")
                            i += 2
                        out.append(indent)
                        if src[i + 2:i + 3] == " ":
                            out.append("\\")
                        i += 1
                        start = i + 1
                else:
                    i += 1
            i += 1
        text = "".join(out) + src[start:] if start else src
        if ctx.implicit_key:
            return text
        return _fold(text, indent, _FOLD_QUOTED, ctx.indent_at_start)

    def block(self, value: str, ctx: _Ctx) -> str:
        if re.search(r"\n[\t ]+\Z", value):
            return self.quoted(value, ctx)
        indent = ctx.indent or ("  " if ctx.force_block_indent or _DOCUMENT_MARKER.search(value) else "")
        v = _utf16(value)
        if self.block_quote == "literal":
            literal = True
        elif self.block_quote == "folded":
            literal = False
        else:
            literal = not _over_limit(v, LINE_WIDTH, len(indent))
        if not v:
            return "|\n" if literal else ">\n"
        end_start = len(v)
        while end_start > 0 and v[end_start - 1] in "\n\t ":
            end_start -= 1
        end = v[end_start:]
        nl = end.find("\n")
        if nl == -1:
            chomp = "-"
        elif v == end or nl != len(end) - 1:
            chomp = "+"
        else:
            chomp = ""
        if end:
            v = v[: -len(end)]
            if end.endswith("\n"):
                end = end[:-1]
            end = _BLOCK_END_NEWLINES.sub(lambda m: m.group(0) + indent, end)
        starts_with_space = False
        start_nl = -1
        start_end = 0
        while start_end < len(v):
            c = v[start_end]
            if c == " ":
                starts_with_space = True
            elif c == "\n":
                start_nl = start_end
            else:
                break
            start_end += 1
        start = v[: start_nl + 1 if start_nl < start_end else start_end]
        if start:
            v = v[len(start):]
            start = re.sub(r"\n+", lambda m: m.group(0) + indent, start)
        header = ("2" if indent else "1") if starts_with_space else ""
        header += chomp
        if not literal:
            folded = re.sub(r"\n+", lambda m: "\n" + m.group(0), v)
            folded = re.sub(r"(?:^|\n)([\t ].*)(?:([\n\t ]*)\n(?![\n\t ]))?",
                            lambda m: m.group(1) + (m.group(2) or ""), folded)
            folded = re.sub(r"\n+", lambda m: m.group(0) + indent, folded)
            overflow: list[bool] = []
            body = _fold(f"{start}{folded}{end}", indent, _FOLD_BLOCK, len(indent),
                         on_overflow=None if self.block_quote == "folded" else overflow)
            if not overflow:
                return f">{header}\n{indent}{body}"
        v = re.sub(r"\n+", lambda m: m.group(0) + indent, v)
        return f"|{header}\n{indent}{start}{v}{end}"


_SHORT_ESCAPES = {"0000": "\\0", "0007": "\\a", "000b": "\\v", "001b": "\\e", "0085": "\\N", "00a0": "\\_",
                  "2028": "\\L", "2029": "\\P"}


def _json_string(value: str) -> str:
    """``JSON.stringify`` of a string: lone surrogates escaped, everything else as Python's encoder (which agrees
    with JavaScript's for the rest)."""
    text = json.dumps(value, ensure_ascii=False)
    if _LONE.search(text):
        text = _LONE.sub(lambda m: f"\\u{ord(m.group(0)):04x}", text)
    return text


_LONE = re.compile("[\ud800-\udfff]")


def _number(value: int | float) -> str:
    if isinstance(value, float):
        if value != value:
            return ".nan"
        if value in (float("inf"), float("-inf")):
            return "-.inf" if value < 0 else ".inf"
    if isinstance(value, int) and abs(value) >= 2**53:
        value = float(value)
    if isinstance(value, float) and value.is_integer() and 2**53 <= abs(value) < 1e21:
        # JavaScript prints the shortest digits that read back, padded with zeros (2**60 -> 1152921504606847000)
        mantissa, _, exp = repr(abs(value)).partition("e+")
        if not exp:
            return js_string(value)
        digits = mantissa.replace(".", "").rstrip("0")
        return ("-" if value < 0 else "") + digits + "0" * (int(exp or 0) + 1 - len(digits))
    return js_string(value)


def _over_limit(text: str, width: int, indent_len: int) -> bool:
    limit = width - indent_len
    if len(text) <= limit:
        return False
    start = 0
    for i, ch in enumerate(text):
        if ch == "\n":
            if i - start > limit:
                return True
            start = i + 1
            if len(text) - start <= limit:
                return False
    return True


def _more_indented(text: str, i: int, indent: int) -> int:
    """The index of the last newline of a more-indented block starting after ``i`` (``i`` when none)."""
    end = i
    start = i + 1
    ch = text[start] if start < len(text) else ""
    while ch in (" ", "\t") and ch:
        if i < start + indent:
            i += 1
            ch = text[i] if i < len(text) else ""
        else:
            while True:
                i += 1
                ch = text[i] if i < len(text) else ""
                if not ch or ch == "\n":
                    break
            end = i
            start = i + 1
            ch = text[start] if start < len(text) else ""
    return end


def _fold(text: str, indent: str, mode: str, indent_at_start: int | None,
          on_overflow: list[bool] | None = None) -> str:
    """The package's line folding: keep lines within the width, breaking only at a single space between
    non-spaces (quoted scalars may break anywhere with an escaped line break)."""
    min_content = MIN_CONTENT_WIDTH
    end_step = max(1 + min_content, 1 + LINE_WIDTH - len(indent))
    if len(text) <= end_step:
        return text
    folds: list[int] = []
    escaped: set[int] = set()
    end = LINE_WIDTH - len(indent)
    if indent_at_start is not None:
        if indent_at_start > LINE_WIDTH - max(2, min_content):
            folds.append(0)
        else:
            end = LINE_WIDTH - indent_at_start
    split: int | None = None
    prev: str | None = None
    overflow = False
    i = -1
    esc_start = esc_end = -1
    n = len(text)
    if mode == _FOLD_BLOCK:
        i = _more_indented(text, i, len(indent))
        if i != -1:
            end = i + end_step
    while True:
        i += 1
        if i >= n:
            break
        ch = text[i]
        if mode == _FOLD_QUOTED and ch == "\\":
            esc_start = i
            nxt = text[i + 1] if i + 1 < n else ""
            i += {"x": 3, "u": 5, "U": 9}.get(nxt, 1)
            esc_end = i
        if ch == "\n":
            if mode == _FOLD_BLOCK:
                i = _more_indented(text, i, len(indent))
            end = i + len(indent) + end_step
            split = None
        else:
            if ch == " " and prev and prev not in " \n\t":
                nxt = text[i + 1] if i + 1 < n else ""
                if nxt and nxt not in " \n\t":
                    split = i
            if i >= end:
                if split:
                    folds.append(split)
                    end = split + end_step
                    split = None
                elif mode == _FOLD_QUOTED:
                    while prev in (" ", "\t"):
                        prev = ch
                        i += 1
                        ch = text[i] if i < n else ""
                        overflow = True
                    j = i - 2 if i > esc_end + 1 else esc_start - 1
                    if j in escaped:
                        return text
                    folds.append(j)
                    escaped.add(j)
                    end = j + end_step
                    split = None
                else:
                    overflow = True
        prev = ch
    if overflow and on_overflow is not None:
        on_overflow.append(True)
    if not folds:
        return text
    res = text[: folds[0]]
    for k, fold in enumerate(folds):
        stop = folds[k + 1] if k + 1 < len(folds) and folds[k + 1] else n
        if fold == 0:
            res = f"\n{indent}{text[0:stop]}"
        else:
            if mode == _FOLD_QUOTED and fold in escaped:
                res += f"{text[fold]}\\"
            res += f"\n{indent}{text[fold + 1:stop]}"
    return res
