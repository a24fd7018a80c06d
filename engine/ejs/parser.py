"""EJS source text -> frozen nodes (:mod:`tavernbox.ejs.nodes`).

Two stages, as in ejs 7.0.2:

1. the slurp pre-pass deletes the spaces and tabs directly before every ``<%_`` and directly after
   every ``_%>`` (ejs does it with two regular-expression replaces over the whole text, code
   included; we do it with ``str.find`` so that a long run of spaces costs linear time);
2. ``grammars/ejs.lark`` tokenises and checks the tag structure (LALR, contextual lexer). The
   Lark transformer runs inside the parser, so no parse tree is built and none leaves this module.

Each kept character is contiguous with its neighbours in the original source (the pre-pass only
deletes next to a slurp tag, and tags never sit inside a token), so a token's original offset is
enough to locate every character of it.
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass, replace
from functools import lru_cache
from importlib.resources import files
from typing import Any

from lark import Lark, Token, Transformer
from lark.exceptions import UnexpectedInput

from ..errors import TemplateError
from ..spans import Span
from .nodes import CLOSERS, OPENERS, LiteralMarker, Node, StrayClose, Tag, Text

__all__ = ["MAX_TAGS", "ParsedTemplate", "parse_template"]

#: Most tag openings (``<%`` occurrences) one template may hold. Lark's LALR parser costs tens of
#: microseconds per token in the caller's process, outside the sandbox's time budget; a
#: 128 KiB template of nothing but tiny tags would take seconds. Real templates hold hundreds.
MAX_TAGS = 4096

_SLURP_OPEN = "<%_"
_SLURP_CLOSE = "_%>"
_BLANK = " \t"


@dataclass(frozen=True, slots=True)
class ParsedTemplate:
    """The nodes of one template plus what is needed to point back into its source."""

    source: str
    nodes: tuple[Node, ...]

    def __str__(self) -> str:
        """The template after the slurp pre-pass (``source`` itself when it has no slurp tags)."""
        return "".join(str(node) for node in self.nodes)


def _slurp(source: str) -> tuple[str, list[int], list[int]]:
    """Apply ejs's slurp pre-pass; return the new text and a map of kept segments.

    The map is two parallel lists: ``new_starts[i]`` is where kept segment ``i`` starts in the
    new text, ``old_starts[i]`` where it starts in ``source``.
    """
    if _SLURP_OPEN not in source and _SLURP_CLOSE not in source:
        return source, [0], [0]
    deleted: list[tuple[int, int]] = []
    pos = source.find(_SLURP_OPEN)
    while pos != -1:
        start = pos
        while start > 0 and source[start - 1] in _BLANK:
            start -= 1
        if start < pos:
            deleted.append((start, pos))
        pos = source.find(_SLURP_OPEN, pos + len(_SLURP_OPEN))
    pos = source.find(_SLURP_CLOSE)
    while pos != -1:
        begin = end = pos + len(_SLURP_CLOSE)
        while end < len(source) and source[end] in _BLANK:
            end += 1
        if end > begin:
            deleted.append((begin, end))
        pos = source.find(_SLURP_CLOSE, begin)
    if not deleted:
        return source, [0], [0]
    deleted.sort()
    pieces: list[str] = []
    new_starts: list[int] = []
    old_starts: list[int] = []
    cursor = 0
    length = 0
    for start, end in deleted:
        if end <= cursor:
            continue
        start = max(start, cursor)
        if start > cursor:
            new_starts.append(length)
            old_starts.append(cursor)
            pieces.append(source[cursor:start])
            length += start - cursor
        cursor = end
    new_starts.append(length)
    old_starts.append(cursor)
    pieces.append(source[cursor:])
    return "".join(pieces), new_starts, old_starts


def _split_tag(value: str) -> tuple[str, str, str]:
    """A TAG token -> (opener, code, closer). The code never ends in "-" or "_" right before
    "%>" (that would have been the closer), so the closer's first character decides."""
    opener = value[:3] if value[2] in "=-_#" else value[:2]
    close = value[-3:] if value[-3] in "-_" else value[-2:]
    return opener, value[len(opener):len(value) - len(close)], close


class _ToNodes(Transformer[Token, Any]):
    """Lark callbacks, run during the LALR parse: nodes with offsets into the pre-passed text."""

    @staticmethod
    def _at(token: Token) -> int:
        return token.start_pos or 0

    def start(self, parts: list[Node]) -> tuple[Node, ...]:
        return tuple(parts)

    def open(self, children: list[Token]) -> Token:
        return children[0]

    def close(self, children: list[Token]) -> Token:
        return children[0]

    def text(self, children: list[Token]) -> Text:
        return Text(str(children[0]), self._at(children[0]))

    def literal_open(self, children: list[Token]) -> LiteralMarker:
        return LiteralMarker("<%%", self._at(children[0]))

    def literal_close(self, children: list[Token]) -> LiteralMarker:
        return LiteralMarker("%%>", self._at(children[0]))

    def stray_close(self, children: list[Token]) -> StrayClose:
        return StrayClose(str(children[0]), self._at(children[0]))  # type: ignore[arg-type]

    def code_tag(self, children: list[Token]) -> Tag:
        value = str(children[0])
        start = self._at(children[0])
        opener, code, close = _split_tag(value)
        return Tag(opener, code, close, start, start + len(opener), (),  # type: ignore[arg-type]
                   start + len(value) - len(close))

    def _odd(self, children: list[Token]) -> Tag:
        opener, *inner, close = children
        return Tag(str(opener), None, str(close), self._at(opener), self._at(inner[0]),  # type: ignore[arg-type]
                   tuple(str(t) for t in inner), self._at(close))

    empty_tag = literal_body_tag = double_open_tag = _odd


def _rebase(nodes: tuple[Node, ...], new_starts: list[int], old_starts: list[int]) -> tuple[Node, ...]:
    """Move node offsets from the pre-passed text back to the original source."""
    if len(new_starts) == 1 and new_starts[0] == old_starts[0]:
        return nodes

    def at(pos: int) -> int:
        i = bisect_right(new_starts, pos) - 1
        return old_starts[i] + (pos - new_starts[i])

    out: list[Node] = []
    for node in nodes:
        if isinstance(node, Tag):
            out.append(replace(node, start=at(node.start), code_start=at(node.code_start),
                               close_start=at(node.close_start)))
        else:
            out.append(replace(node, start=at(node.start)))
    return tuple(out)


_MODIFIERS = "=-_#"


def _scan_common(text: str) -> tuple[Node, ...] | None:
    """Nodes of ``text`` when it holds only text runs and well-formed opener-code-closer tags.

    Why: Lark's parser costs ~20 us per token in the caller's process, which made parsing most of
    a cold render's host time (~2.4 ms for a 3 KB prompt). Real templates are almost always this
    common shape, which ``str.find`` can cut exactly as the grammar's TEXT and TAG terminals do.
    Anything else (a closer in text, a literal marker, an empty or odd tag, an unclosed one)
    returns None and the grammar decides, so the grammar stays the definition of the language;
    tests/test_ejs_fastscan.py checks that both paths give the same nodes.
    """
    nodes: list[Node] = []
    pos = 0
    end = len(text)
    while pos < end:
        start = text.find("<%", pos)
        stop = end if start == -1 else start
        if text.find("%>", pos, stop) != -1:
            return None  # a stray closer (or "%%>") in the text run
        if stop > pos:
            nodes.append(Text(text[pos:stop], pos))
        if start == -1:
            break
        modifier = text[start + 2 : start + 3]
        if modifier == "%":
            return None  # "<%%"
        opener = text[start : start + 3] if modifier != "" and modifier in _MODIFIERS else "<%"
        code_start = start + len(opener)
        close_at = text.find("%>", code_start)
        if close_at == -1:
            return None
        next_open = text.find("<%", code_start, close_at + 1)
        if next_open != -1:
            return None  # a tag starts inside: an odd shape or an unclosed tag
        before = text[close_at - 1] if close_at > code_start else ""
        if before == "%":
            return None  # "%%>" ends the code
        close_start = close_at - 1 if before != "" and before in "-_" else close_at
        if close_start == code_start:
            return None  # empty code: "<%=%>", "<%-%>"...
        close = text[close_start : close_at + 2]
        nodes.append(Tag(opener, text[code_start:close_start], close, start, code_start, (),  # type: ignore[arg-type]
                         close_start))
        pos = close_at + 2
    return tuple(nodes)


@lru_cache(maxsize=1)
def _grammar() -> str:
    return (files("tavernbox.grammars") / "ejs.lark").read_text(encoding="utf-8")


@lru_cache(maxsize=1)
def _parser() -> Lark:
    """The LALR parser with the node-building transformer inlined (built once per process)."""
    return Lark(_grammar(), parser="lalr", lexer="contextual", transformer=_ToNodes())


@lru_cache(maxsize=1)
def _lexer() -> Lark:
    """A plain lexer over the same grammar, used only to explain a syntax error the way ejs does."""
    return Lark(_grammar(), parser="lalr", lexer="basic")


def _unclosed_error(text: str, new_starts: list[int], old_starts: list[int], source: str) -> TemplateError:
    """ejs's check: the first opener whose token two places ahead is not a closer."""
    tokens: list[tuple[str, int]] = []
    for tok in _lexer().lex(text):
        pos = tok.start_pos or 0
        if tok.type == "TAG":  # a well-formed tag: its three tokens, for the index rule
            opener, code, close = _split_tag(str(tok))
            tokens += [(opener, pos), (code, pos + len(opener)), (close, pos + len(opener) + len(code))]
        else:
            tokens.append((str(tok), pos))
    for i, (value, pos) in enumerate(tokens):
        if value in OPENERS and (i + 2 >= len(tokens) or tokens[i + 2][0] not in CLOSERS):
            k = bisect_right(new_starts, pos) - 1
            at = old_starts[k] + (pos - new_starts[k])
            return TemplateError(
                f'Could not find matching close tag for "{value}".',
                code="TEMPLATE_SYNTAX",
                span=Span(at, at + len(value)),
                source=source,
            )
    # The grammar and the index rule describe the same language; reaching this is a bug.
    raise AssertionError("ejs grammar rejected a template the close-tag rule accepts")


def parse_template(source: str) -> ParsedTemplate:
    """Parse EJS ``source`` into nodes; an unmatched opening tag is ``TEMPLATE_SYNTAX``.

    More than ``MAX_TAGS`` tag openings is ``TEMPLATE_TOO_LARGE``, found by a count before lexing.

    The JavaScript inside tags is not examined here: a JavaScript syntax error is found when the
    compiled program is evaluated, and mapped back to the template by the compiler's line map.
    """
    tags = source.count("<%")
    if tags > MAX_TAGS:
        raise TemplateError(
            f"the template has {tags} tags, more than the limit of {MAX_TAGS}", code="TEMPLATE_TOO_LARGE"
        )
    text, new_starts, old_starts = _slurp(source)
    if "<%" not in text and "%>" not in text:
        # No tag can start anywhere: the whole template is one text run (ST's fast path too).
        return ParsedTemplate(source, (Text(text, old_starts[0]),) if text else ())
    common = _scan_common(text)
    if common is not None:
        return ParsedTemplate(source, _rebase(common, new_starts, old_starts))
    try:
        nodes = _parser().parse(text)
    except UnexpectedInput:
        raise _unclosed_error(text, new_starts, old_starts, source) from None
    return ParsedTemplate(source, _rebase(nodes, new_starts, old_starts))
