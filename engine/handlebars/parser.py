"""Handlebars source -> a :class:`~.nodes.Program` (parsed, checked and whitespace-controlled).

``grammars/handlebars.lark`` is parsed by Lark's LALR parser over the tokens of
:mod:`.lexer`; the transformer turns the tree into nodes and does what
Handlebars' ``prepareBlock``/``preparePath`` do: a block's closing name must equal its opening
name, ``..``/``.``/``this`` only lead a path, ``{{^x}}`` swaps a block's two programs,
``{{else if y}}`` chains a block inside the inverse. :mod:`.whitespace` then applies ``~`` and
the standalone-line rules.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from functools import lru_cache
from importlib.resources import files
from typing import Any

from lark import Lark, Token, Transformer
from lark.exceptions import UnexpectedInput, VisitError
from lark.lexer import Lexer

from ..errors import TemplateError
from ..spans import Span
from .limits import HandlebarsLimits, checkpoint
from .lexer import tokenize
from .nodes import Block, Comment, Content, Literal, Mustache, Partial, Path, Program, Strip, SubExpr
from .values import js_number_text
from .whitespace import control_whitespace

__all__ = ["parse"]

_BRACKETED = re.compile(r"\[[^\n\r\u2028\u2029]*\]")


class _Tokens(list):  # type: ignore[type-arg]
    """The tokens of one template, handed to Lark in place of the text."""


class _TokenLexer(Lexer):
    """Lark's side of :func:`.lexer.tokenize` (the lexer is modal, so it is not Lark's own)."""

    def __init__(self, lexer_conf: Any) -> None:
        pass

    def lex(self, data: Any) -> Iterator[Token]:  # type: ignore[override]
        return iter(data)


_OPENS = frozenset({"OPEN_BLOCK", "OPEN_INVERSE", "OPEN_SEXPR"})
_CLOSES = frozenset({"OPEN_ENDBLOCK", "CLOSE_SEXPR"})


def _tokens(source: str, limits: HandlebarsLimits) -> _Tokens:
    """Every token, with the nesting of blocks and sub-expressions kept under the limit (the
    tree is built and walked recursively, so a deeper template is refused before it is)."""
    out = _Tokens()
    depth = 0
    for count, token in enumerate(tokenize(source)):
        if count & 255 == 0:
            checkpoint(token.start, source)
        kind = token.type
        if kind in _OPENS:
            depth += 1
            if depth > limits.max_nesting:
                raise TemplateError(
                    f"blocks and sub-expressions nest deeper than {limits.max_nesting} levels here",
                    code="HANDLEBARS_NESTING_LIMIT", span=Span(token.start, token.end), source=source)
        elif kind in _CLOSES:
            depth -= 1
        out.append(Token(kind, token.value, start_pos=token.start, end_pos=token.end))
    return out


@lru_cache(maxsize=1)
def _parser() -> Lark:
    grammar = files("tavernbox.grammars").joinpath("handlebars.lark").read_text(encoding="utf-8")
    return Lark(grammar, parser="lalr", lexer=_TokenLexer, start="start")


class ParseFailure(TemplateError):
    """A template Handlebars refuses to compile (``HANDLEBARS_SYNTAX``)."""

    default_code = "HANDLEBARS_SYNTAX"


def _strip_flags(open_text: str, close_text: str) -> Strip:
    return Strip(open=open_text[2:3] == "~", close=close_text[-3:-2] == "~")


def _part(token: Token) -> str:
    """Handlebars' ``yy.id``: a ``[segment literal]`` without its brackets."""
    text = str(token)
    return text[1:-1] if _BRACKETED.fullmatch(text) else text


class _Builder(Transformer[Token, Any]):
    """The grammar's callbacks: nodes as Handlebars' parser helpers build them."""

    def __init__(self, source: str) -> None:
        super().__init__()
        self.source = source

    def _fail(self, at: int, message: str) -> ParseFailure:
        return ParseFailure(message, span=Span(at, at), source=self.source)

    # --- statements -------------------------------------------------------------------------
    def start(self, items: list[Program]) -> Program:
        return items[0]

    def program(self, items: list[Any]) -> Program:
        return Program(body=list(items))

    def content(self, items: list[Token]) -> Content:
        text = str(items[0])
        return Content(original=text, value=text, start=items[0].start_pos or 0)

    def comment(self, items: list[Token]) -> Comment:
        text = str(items[0])
        return Comment(strip=_strip_flags(text, text), start=items[0].start_pos or 0)

    def mustache(self, items: list[Any]) -> Mustache:
        opener, closer = items[0], items[-1]
        path, params, hash_ = self._call_parts(items[1:-1])
        return Mustache(path, params, hash_, _strip_flags(str(opener), str(closer)), opener.start_pos or 0)

    def partial(self, items: list[Any]) -> Partial:
        opener, closer = items[0], items[-1]
        name, params, _hash = self._call_parts(items[1:-1])
        if len(params) > 1:
            raise ParseFailure(f"Unsupported number of partial arguments: {len(params)}",
                               span=Span(opener.start_pos or 0, opener.start_pos or 0), source=self.source)
        text = name.original if isinstance(name, Path) else literal_original(name) if isinstance(name, Literal) else "(dynamic)"
        return Partial(text, _strip_flags(str(opener), str(closer)), opener.start_pos or 0)

    def sexpr(self, items: list[Any]) -> SubExpr:
        path, params, hash_ = self._call_parts(items[1:-1])
        return SubExpr(path, params, hash_, items[0].start_pos or 0)

    def _call_parts(self, items: list[Any]) -> tuple[Any, tuple[Any, ...], tuple[tuple[str, Any], ...]]:
        hash_: tuple[tuple[str, Any], ...] = ()
        if items and isinstance(items[-1], _Hash):
            hash_ = items[-1].pairs
            items = items[:-1]
        return items[0], tuple(items[1:]), hash_

    def hash(self, items: list[tuple[str, Any]]) -> _Hash:
        return _Hash(tuple(items))

    def hash_pair(self, items: list[Any]) -> tuple[str, Any]:
        return _part(items[0]), items[2]

    def block_params(self, items: list[Token]) -> _BlockParams:
        return _BlockParams(tuple(_part(t) for t in items[1:-1]))

    # --- blocks -----------------------------------------------------------------------------
    def _open(self, items: list[Any]) -> _Open:
        opener, closer = items[0], items[-1]
        inner = items[1:-1]
        params: tuple[str, ...] = ()
        if inner and isinstance(inner[-1], _BlockParams):
            params = inner[-1].names
            inner = inner[:-1]
        path, args, hash_ = self._call_parts(inner)
        return _Open(path, args, hash_, params, _strip_flags(str(opener), str(closer)), opener.start_pos or 0)

    open_block = open_inverse = open_inverse_chain = _open

    def close_block(self, items: list[Any]) -> _Close:
        return _Close(items[1], _strip_flags(str(items[0]), str(items[-1])))

    def inverse_and_program(self, items: list[Any]) -> _Inverse:
        token = items[0]
        return _Inverse(_strip_flags(str(token), str(token)), items[1], chain=False)

    def chained_inverse(self, items: list[Any]) -> _Inverse:
        """``{{else if x}}...``: a block of its own, closed (for whitespace control) by the next
        ``{{else}}`` of the chain, or by the outer block's closing tag (set by its parent)."""
        opened: _Open = items[0]
        nested: _Inverse | None = items[2] if len(items) > 2 else None
        strip = nested.strip if nested is not None else None
        block = self._prepare(opened, items[1], nested, None, strip, inverted=False)
        return _Inverse(opened.strip, Program(body=[block], chained=True), chain=True)

    def block(self, items: list[Any]) -> Block:
        inverse = items[2] if len(items) == 4 else None
        close: _Close = items[-1]
        return self._prepare(items[0], items[1], inverse, close.path, close.strip, inverted=False)

    def inverted_block(self, items: list[Any]) -> Block:
        inverse = items[2] if len(items) == 4 else None
        close: _Close = items[-1]
        return self._prepare(items[0], items[1], inverse, close.path, close.strip, inverted=True)

    def _prepare(self, opened: _Open, program: Program, inverse: _Inverse | None, close_path: Any,
                 close_strip: Strip | None, *, inverted: bool) -> Block:
        """Handlebars' ``prepareBlock``."""
        if close_path is not None and not _same_name(opened.path, close_path):
            raise self._fail(opened.path.start, f"{_original(opened.path)} doesn't match {_original(close_path)}")
        program.block_params = opened.block_params
        inverse_program: Program | None = None
        inverse_strip: Strip | None = None
        if inverse is not None:
            if inverse.chain and close_strip is not None:
                inverse.program.body[0].close_strip = close_strip  # type: ignore[union-attr]
            inverse_strip = inverse.strip
            inverse_program = inverse.program
        main: Program | None = program
        if inverted:
            main, inverse_program = inverse_program, program
        return Block(opened.path, opened.params, opened.hash, main, inverse_program, opened.strip, inverse_strip,
                     close_strip, opened.start)

    # --- values -----------------------------------------------------------------------------
    def path(self, items: list[Any]) -> Path:
        return self._prepare_path(False, items[0], items[0][0][1])

    def data_name(self, items: list[Any]) -> Path:
        return self._prepare_path(True, items[1], items[0].start_pos or 0)

    def path_segments(self, items: list[Token]) -> list[tuple[str, int, str, str]]:
        """``[(separator, offset, part, as written), ...]``"""
        out = []
        separator = ""
        for token in items:
            if token.type == "SEP":
                separator = str(token)
                continue
            out.append((separator, token.start_pos or 0, _part(token), str(token)))
        return out

    def _prepare_path(self, data: bool, segments: list[tuple[str, int, str, str]], start: int) -> Path:
        """Handlebars' ``preparePath``: ``..``, ``.`` and ``this`` only before any named part."""
        original = "@" if data else ""
        parts: list[str] = []
        depth = 0
        for separator, _offset, part, written in segments:
            original += separator + part
            literal = written != part
            if not literal and part in ("..", ".", "this"):
                if parts:
                    raise self._fail(start, f"Invalid path: {original}")
                if part == "..":
                    depth += 1
            else:
                parts.append(part)
        return Path(data, depth, tuple(parts), original, start)

    def string(self, items: list[Token]) -> Literal:
        return Literal("string", str(items[0]), items[0].start_pos or 0)

    def number(self, items: list[Token]) -> Literal:
        text = str(items[0])
        value: float | int = float(text) if "." in text else int(text)
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        return Literal("number", value, items[0].start_pos or 0)

    def boolean(self, items: list[Token]) -> Literal:
        return Literal("boolean", str(items[0]) == "true", items[0].start_pos or 0)

    def undefined(self, items: list[Token]) -> Literal:
        return Literal("undefined", None, items[0].start_pos or 0)

    def null(self, items: list[Token]) -> Literal:
        return Literal("null", None, items[0].start_pos or 0)


class _Hash:
    __slots__ = ("pairs",)

    def __init__(self, pairs: tuple[tuple[str, Any], ...]) -> None:
        self.pairs = pairs


class _BlockParams:
    __slots__ = ("names",)

    def __init__(self, names: tuple[str, ...]) -> None:
        self.names = names


class _Open:
    """An opening tag: ``{{#``, ``{{^`` or ``{{else``, with what it calls."""

    __slots__ = ("block_params", "hash", "params", "path", "start", "strip")

    def __init__(self, path: Any, params: tuple[Any, ...], hash_: tuple[tuple[str, Any], ...],
                 block_params: tuple[str, ...], strip: Strip, start: int) -> None:
        self.path, self.params, self.hash = path, params, hash_
        self.block_params, self.strip, self.start = block_params, strip, start


class _Close:
    __slots__ = ("path", "strip")

    def __init__(self, path: Any, strip: Strip) -> None:
        self.path, self.strip = path, strip


class _Inverse:
    """``{{else}}`` and its program, or an ``{{else if}}`` chain (a program holding one block)."""

    __slots__ = ("chain", "program", "strip")

    def __init__(self, strip: Strip, program: Program, *, chain: bool) -> None:
        self.strip, self.program, self.chain = strip, program, chain


def literal_original(literal: Literal) -> str:
    """``literal.original + ''``: the text a literal stands for when it names a helper or a path."""
    if literal.kind == "string":
        return str(literal.value)
    if literal.kind == "number":
        return js_number_text(literal.value)
    if literal.kind == "boolean":
        return "true" if literal.value else "false"
    return literal.kind  # "undefined" | "null"


def _original(node: Path | Literal) -> str:
    return node.original if isinstance(node, Path) else literal_original(node)


def _same_name(opened: Path | Literal, closed: Path | Literal) -> bool:
    """``open.path.original === close.path.original`` (a literal's original is its typed value)."""
    if isinstance(opened, Path) or isinstance(closed, Path):
        return isinstance(opened, Path) and isinstance(closed, Path) and opened.original == closed.original
    if opened.kind != closed.kind:
        # undefined and null are their own kinds; a number never equals a string
        return False
    return bool(opened.value == closed.value)


_SAYS = {"CLOSE": "'}}'", "CLOSE_UNESCAPED": "'}}}'", "OPEN_ENDBLOCK": "a closing tag '{{/...}}'",
         "ID": "a name", "CLOSE_SEXPR": "')'", "EQUALS": "'='", "CLOSE_BLOCK_PARAMS": "'|'"}


def _unexpected(exc: UnexpectedInput, source: str) -> ParseFailure:
    """A parse error at the token Handlebars would stop at, saying what it expected there."""
    token = getattr(exc, "token", None)
    at_end = token is None or token.type == "$END"
    at = len(source) if at_end else (token.start_pos or 0)
    found = "the end of the template" if at_end else f"{token.type} {str(token)!r}"
    expected = sorted(_SAYS.get(name, name) for name in getattr(exc, "expected", ()) or ())
    wanted = f"; expected {', '.join(expected[:6])}" if expected else ""
    return ParseFailure(f"Parse error: unexpected {found}{wanted}", span=Span(at, at), source=source)


def parse(source: str, limits: HandlebarsLimits) -> Program:
    """Parse and whitespace-control ``source``; ``HANDLEBARS_SYNTAX`` (or ``_UNSUPPORTED``) on
    what Handlebars would refuse."""
    tokens = _tokens(source, limits)
    try:
        tree = _parser().parse(tokens)  # type: ignore[arg-type]
    except UnexpectedInput as exc:
        raise _unexpected(exc, source) from None
    try:
        program: Program = _Builder(source).transform(tree)
    except VisitError as exc:
        raise exc.orig_exc from None
    control_whitespace(program)
    return program
