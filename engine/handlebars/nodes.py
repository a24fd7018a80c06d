"""The Handlebars syntax tree: Handlebars 4.7's AST shapes, with offsets into the source.

``Content`` is the one mutable node: the whitespace pass (:mod:`.whitespace`) trims its ``value``
(``original`` stays as written) exactly once, right after the parse; nothing changes it later.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "Block", "Comment", "Content", "Literal", "Mustache", "Partial", "Path", "Program", "Statement", "Strip", "SubExpr", "Value",
]


@dataclass(frozen=True, slots=True)
class Strip:
    """Whitespace control: ``~`` on the opening side (``{{~``) and on the closing side (``~}}``)."""

    open: bool = False
    close: bool = False


NO_STRIP = Strip()
_WORD = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_") - {""}


@dataclass(frozen=True, slots=True)
class Path:
    """``foo.bar``, ``../foo``, ``this``, ``@index``: ``parts`` without ``this``/``.``/``..``.

    ``scoped`` is Handlebars' ``scopedId`` (the original starts with ``.`` or holds the word
    ``this``); ``simple`` its ``simpleId`` (one part, not scoped, no ``../``). Both are worked out
    once, here, rather than at every render.
    """

    data: bool
    depth: int
    parts: tuple[str, ...]
    original: str
    start: int
    scoped: bool = field(init=False)
    simple: bool = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "scoped", _scoped(self.original))
        object.__setattr__(self, "simple", len(self.parts) == 1 and not self.scoped and not self.depth)


def _scoped(original: str) -> bool:
    if original.startswith("."):
        return True
    at = original.find("this")
    while at != -1:
        if original[at + 4: at + 5] not in _WORD:
            return True
        at = original.find("this", at + 1)
    return False


@dataclass(frozen=True, slots=True)
class Literal:
    """A string, number, boolean, ``undefined`` or ``null`` literal; ``value`` is its JSON value."""

    kind: str  # "string" | "number" | "boolean" | "undefined" | "null"
    value: Any
    start: int


@dataclass(frozen=True, slots=True)
class SubExpr:
    """``(helper param... key=value...)``"""

    path: Path | Literal
    params: tuple[Value, ...]
    hash: tuple[tuple[str, Value], ...]
    start: int


Value = Path | Literal | SubExpr


@dataclass(slots=True)
class Content:
    """Template text; ``value`` is what is output after whitespace control."""

    original: str
    value: str
    start: int
    left_stripped: bool = False
    right_stripped: bool = False


@dataclass(frozen=True, slots=True)
class Comment:
    strip: Strip
    start: int


@dataclass(frozen=True, slots=True)
class Mustache:
    """``{{path params hash}}`` (``{{{ }}}`` and ``{{& }}`` are the same without escaping, which
    story strings never do)."""

    path: Path | Literal
    params: tuple[Value, ...]
    hash: tuple[tuple[str, Value], ...]
    strip: Strip
    start: int


@dataclass(frozen=True, slots=True)
class Partial:
    """``{{> name}}``: read, standalone like a comment, and failing when it runs (story strings
    have no partials)."""

    name: str
    strip: Strip
    start: int


@dataclass(slots=True)
class Program:
    """A statement list: a template, a block's body or its ``{{else}}`` part."""

    body: list[Statement]
    block_params: tuple[str, ...] = ()
    chained: bool = False


@dataclass(slots=True)
class Block:
    """``{{#path ...}}program{{else}}inverse{{/path}}`` (``{{^path}}`` swaps the two)."""

    path: Path | Literal
    params: tuple[Value, ...]
    hash: tuple[tuple[str, Value], ...]
    program: Program | None
    inverse: Program | None
    open_strip: Strip
    inverse_strip: Strip | None
    close_strip: Strip | None
    start: int


Statement = Content | Comment | Mustache | Block | Partial
