"""The parsed form of an EJS template: frozen nodes that keep their offsets.

A template is a flat sequence (EJS has no nesting of its own: JavaScript braces that span tags
are the template's business, not ours). Offsets are character offsets into the *original*
source, so a diagnostic can point at what the user wrote even though the slurp pre-pass
(``<%_`` / ``_%>``) deleted some spaces before tokenising.

Every node can give back its tokens (:meth:`tokens`) in the order ejs's code generator meets
them; the compiler runs ejs's mode machine over that stream, which is what keeps the odd shapes
(``<%=%>%>``, a literal marker inside a tag) byte-identical.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = [
    "CLOSERS",
    "OPENERS",
    "LiteralMarker",
    "Node",
    "StrayClose",
    "Tag",
    "Text",
    "TokenEvent",
]

Opener = Literal["<%", "<%_", "<%=", "<%-", "<%#"]
Closer = Literal["%>", "-%>", "_%>"]

#: Opening tags and the mode each one selects (``<%_`` is a scriptlet with a slurp pre-pass).
OPENERS: dict[str, str] = {"<%": "eval", "<%_": "eval", "<%=": "escaped", "<%-": "raw", "<%#": "comment"}
#: Closing tags; ``-%>`` and ``_%>`` arm the one-newline trim.
CLOSERS: frozenset[str] = frozenset({"%>", "-%>", "_%>"})

#: ``(value, offset, is_tag)``: one token as ejs's generator sees it; ``offset`` is into the
#: original source. ``is_tag`` tells a tag token from text or code that happens to read ``%>``.
TokenEvent = tuple[str, int, bool]


@dataclass(frozen=True, slots=True)
class Text:
    """Template text between tags (after the slurp pre-pass)."""

    text: str
    start: int

    def tokens(self) -> tuple[TokenEvent, ...]:
        return ((self.text, self.start, False),)

    def __str__(self) -> str:
        return self.text


@dataclass(frozen=True, slots=True)
class Tag:
    """An opening tag, what stands between it and its closer, and the closer.

    Normally ``code`` holds the JavaScript (carried verbatim) and ``inner`` is empty. ejs only
    demands that the token two places after an opener be a closer, so the middle can also be a
    tag token; then ``code`` is ``None`` and ``inner`` lists those tags: ``("%>",)`` for
    ``<%=%>%>``, ``("<%%",)`` for ``<%<%%%>``, ``("<%=", "%>")`` for ``<%<%=%>%>``.
    """

    opener: Opener
    code: str | None
    close: Closer
    start: int
    code_start: int
    inner: tuple[str, ...] = ()
    close_start: int = 0

    @property
    def mode(self) -> str:
        """``eval``, ``escaped``, ``raw`` or ``comment``."""
        return OPENERS[self.opener]

    def tokens(self) -> tuple[TokenEvent, ...]:
        middle: tuple[TokenEvent, ...]
        if self.code is not None:
            middle = ((self.code, self.code_start, False),)
        else:
            # the inner tags stand side by side from ``code_start`` (``str(tag)`` joins them)
            events = []
            at = self.code_start
            for tok in self.inner:
                events.append((tok, at, True))
                at += len(tok)
            middle = tuple(events)
        return ((self.opener, self.start, True), *middle, (self.close, self.close_start, True))

    def __str__(self) -> str:
        middle = self.code if self.code is not None else "".join(self.inner)
        return f"{self.opener}{middle}{self.close}"


@dataclass(frozen=True, slots=True)
class LiteralMarker:
    """``<%%`` (outputs ``<%``) or ``%%>`` (outputs ``%>``); both enter literal mode."""

    marker: Literal["<%%", "%%>"]
    start: int

    @property
    def output(self) -> str:
        return "<%" if self.marker == "<%%" else "%>"

    def tokens(self) -> tuple[TokenEvent, ...]:
        return ((self.marker, self.start, True),)

    def __str__(self) -> str:
        return self.marker


@dataclass(frozen=True, slots=True)
class StrayClose:
    """A closing tag met in text: dropped (printed after a literal marker), arms the trim."""

    close: Closer
    start: int

    def tokens(self) -> tuple[TokenEvent, ...]:
        return ((self.close, self.start, True),)

    def __str__(self) -> str:
        return self.close


Node = Text | Tag | LiteralMarker | StrayClose
