"""Source positions.

Positions are kept as character offsets everywhere; line and column are derived only when a
diagnostic is shown, because computing them eagerly for every node costs more than the parse.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Span", "line_col", "caret_snippet", "utf16_offset"]


@dataclass(frozen=True, slots=True)
class Span:
    """A half-open range ``[start, end)`` of character offsets into one source text."""

    start: int
    end: int

    def __post_init__(self) -> None:
        if self.start < 0 or self.end < self.start:
            raise ValueError(f"invalid span {self.start}..{self.end}")

    def slice(self, source: str) -> str:
        """The text this span covers."""
        return source[self.start : self.end]


def line_col(source: str, offset: int) -> tuple[int, int]:
    """1-based ``(line, column)`` of ``offset`` in ``source``; columns count characters."""
    offset = max(0, min(offset, len(source)))
    line = source.count("\n", 0, offset) + 1
    line_start = source.rfind("\n", 0, offset) + 1
    return line, offset - line_start + 1


def caret_snippet(source: str, span: Span, *, max_width: int = 120) -> str:
    """The source line holding ``span.start`` with a caret line under the span.

    Long lines are windowed around the span so a 2 MiB single-line card does not flood a terminal.
    """
    line_no, col = line_col(source, span.start)
    line_start = source.rfind("\n", 0, span.start) + 1
    line_end = source.find("\n", span.start)
    if line_end == -1:
        line_end = len(source)
    text = source[line_start:line_end]
    width = max(1, min(span.end, line_end) - span.start)
    lo = 0
    if len(text) > max_width:
        lo = max(0, min(col - 1 - max_width // 3, len(text) - max_width))
        text = text[lo : lo + max_width]
    gutter = f"{line_no} | "
    caret = " " * (len(gutter) + col - 1 - lo) + "^" * min(width, max(1, len(text) - (col - 1 - lo)))
    return f"{gutter}{text}\n{caret}"


def utf16_offset(text: str, offset: int) -> int:
    """The UTF-16 code-unit offset matching character ``offset`` (JavaScript string indices)."""
    prefix = text[:offset]
    return len(prefix) + sum(1 for ch in prefix if ord(ch) > 0xFFFF)
