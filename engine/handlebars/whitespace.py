"""Whitespace control after the parse: ``~`` and the standalone-line rules of Handlebars 4.7.

Two rules trim the text next to a tag:

- ``~`` (``{{~x}}``, ``{{x~}}``) removes all whitespace (JavaScript's ``\\s``) on that side, up to
  the next tag or text;
- a *standalone* tag (a block's opening, ``{{else}}`` or closing tag, or a comment) alone on its
  line removes the indentation before it and the line break after it, so block structure can
  be written on lines of its own without leaving blank lines. Mustaches are never standalone.

Whether a tag is alone on its line is judged on the texts as written (``original``); the trimming
applies to what is output (``value``), each side of a text at most once for the standalone rule
(``~`` always applies). The first and last texts of the whole template count the template's
start and end as line breaks.
"""

from __future__ import annotations

from dataclasses import dataclass

from .nodes import NO_STRIP, Block, Comment, Content, Mustache, Partial, Program, Statement

__all__ = ["control_whitespace"]

#: JavaScript's ``\s``.
_WS = "\t\n\v\f\r \u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a" \
      "\u2028\u2029\u202f\u205f\u3000\ufeff"


@dataclass(frozen=True, slots=True)
class _TagStrip:
    """What a statement asks of its neighbours (Handlebars' ``strip`` objects)."""

    open: bool = False
    close: bool = False
    open_standalone: bool = False
    close_standalone: bool = False
    inline_standalone: bool = False


def control_whitespace(program: Program) -> None:
    """Trim ``program``'s texts in place, as Handlebars' ``WhitespaceControl`` pass does."""
    _program(program, is_root=True)


def _program(program: Program, *, is_root: bool) -> None:
    body = program.body
    for i, current in enumerate(body):
        strip = _accept(current)
        if strip is None:
            continue
        prev_ws = _is_prev_whitespace(body, i, is_root)
        next_ws = _is_next_whitespace(body, i, is_root)
        if strip.close:
            _omit_right(body, i, multiple=True)
        if strip.open:
            _omit_left(body, i, multiple=True)
        if strip.inline_standalone and prev_ws and next_ws:
            _omit_right(body, i)
            _omit_left(body, i)
        if strip.open_standalone and prev_ws:
            assert isinstance(current, Block)
            _omit_right((current.program or current.inverse).body, None)  # type: ignore[union-attr]
            _omit_left(body, i)
        if strip.close_standalone and next_ws:
            assert isinstance(current, Block)
            _omit_right(body, i)
            _omit_left((current.inverse or current.program).body, None)  # type: ignore[union-attr]


def _accept(node: Statement) -> _TagStrip | None:
    if isinstance(node, Content):
        return None
    if isinstance(node, Mustache):
        return _TagStrip(open=node.strip.open, close=node.strip.close)
    if isinstance(node, (Comment, Partial)):
        return _TagStrip(open=node.strip.open, close=node.strip.close, inline_standalone=True)
    return _block(node)


def _block(block: Block) -> _TagStrip:
    if block.program is not None:
        _program(block.program, is_root=False)
    if block.inverse is not None:
        _program(block.inverse, is_root=False)
    program = block.program or block.inverse
    assert program is not None
    inverse = block.inverse if block.program is not None else None
    first_inverse = last_inverse = inverse
    if inverse is not None and inverse.chained:
        first_inverse = inverse.body[0].program  # type: ignore[union-attr]
        while last_inverse.chained:  # type: ignore[union-attr]
            last_inverse = last_inverse.body[-1].program  # type: ignore[union-attr]
    open_strip = block.open_strip
    close_strip = block.close_strip or NO_STRIP
    strip = _TagStrip(
        open=open_strip.open,
        close=close_strip.close,
        open_standalone=_is_next_whitespace(program.body, None, False),
        close_standalone=_is_prev_whitespace((first_inverse or program).body, None, False),
    )
    if open_strip.close:
        _omit_right(program.body, None, multiple=True)
    if inverse is not None:
        inverse_strip = block.inverse_strip or NO_STRIP
        if inverse_strip.open:
            _omit_left(program.body, None, multiple=True)
        if inverse_strip.close:
            _omit_right(first_inverse.body, None, multiple=True)  # type: ignore[union-attr]
        if close_strip.open:
            _omit_left(last_inverse.body, None, multiple=True)  # type: ignore[union-attr]
        if _is_prev_whitespace(program.body, None, False) and _is_next_whitespace(
                first_inverse.body, None, False):  # type: ignore[union-attr]
            _omit_left(program.body, None)
            _omit_right(first_inverse.body, None)  # type: ignore[union-attr]
    elif close_strip.open:
        _omit_left(program.body, None, multiple=True)
    return strip


def _at(body: list[Statement], index: int) -> Statement | None:
    return body[index] if 0 <= index < len(body) else None


def _is_prev_whitespace(body: list[Statement], i: int | None, is_root: bool) -> bool:
    """The text before position ``i`` (default: the end) ends a line: its trailing whitespace
    holds a line break (or, the root's first text, it is all whitespace)."""
    if i is None:
        i = len(body)
    prev, sibling = _at(body, i - 1), _at(body, i - 2)
    if prev is None:
        return is_root
    if not isinstance(prev, Content):
        return False
    text = prev.original
    trailing = text[len(text.rstrip(_WS)):]
    if "\n" in trailing:
        return True
    return sibling is None and is_root and not text.strip(_WS)


def _is_next_whitespace(body: list[Statement], i: int | None, is_root: bool) -> bool:
    """The text after position ``i`` (default: the start) begins with a line break after only
    whitespace (or, the root's last text, it is all whitespace)."""
    if i is None:
        i = -1
    nxt, sibling = _at(body, i + 1), _at(body, i + 2)
    if nxt is None:
        return is_root
    if not isinstance(nxt, Content):
        return False
    text = nxt.original
    leading = text[: len(text) - len(text.lstrip(_WS))]
    if "\n" in leading:
        return True
    return sibling is None and is_root and not text.strip(_WS)


def _omit_right(body: list[Statement], i: int | None, *, multiple: bool = False) -> None:
    """Trim the start of the text after position ``i`` (default: the first statement)."""
    current = _at(body, 0 if i is None else i + 1)
    if not isinstance(current, Content) or (not multiple and current.right_stripped):
        return
    before = current.value
    if multiple:
        current.value = before.lstrip(_WS)
    else:
        value = before.lstrip(" \t")
        if value.startswith("\r"):
            value = value[1:]
        if value.startswith("\n"):
            value = value[1:]
        current.value = value
    current.right_stripped = current.value != before


def _omit_left(body: list[Statement], i: int | None, *, multiple: bool = False) -> bool:
    """Trim the end of the text before position ``i`` (default: the last statement)."""
    current = _at(body, len(body) - 1 if i is None else i - 1)
    if not isinstance(current, Content) or (not multiple and current.left_stripped):
        return False
    before = current.value
    current.value = before.rstrip(_WS) if multiple else before.rstrip(" \t")
    current.left_stripped = current.value != before
    return current.left_stripped
