"""Which template (a message's, or a world-info entry's ``getwi`` read) produced each range of an evaluated message.

Why a second, marked evaluation: the output of ST-Prompt-Template's templates is built inside the request's VM,
where only the compiled program knows which tag is appending. As :mod:`.provenance` does for one template, the
request is evaluated again with every template compiled in its marked variant (``compile_template(...,
marks=True)``): before each text piece, output tag and code tag the program appends a marker, which the runtime
tags with the template's origin (the message, or the entry ``getwi`` read); what ``getwi`` returns is bracketed so
the caller's text after it is the caller's again. The markers are Unicode noncharacters, never ordinary text.

Provenance is never invented: with the markers stripped, a message must equal what the ordinary evaluation sent;
otherwise (a template measured or compared the text ``getwi`` returned, drew random numbers, or printed the
reserved characters) that message keeps one span naming its templates, with the reason.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..spans import line_col

__all__ = ["Origin", "MarkedSpan", "unmark"]

#: an origin's marker (origin index, then the compiler's mark index: empty for a whole entry without template),
#: or the brackets around what ``getwi`` returned
_TOKEN = re.compile("\ufdd0([\ufde0-\ufdef]+)\ufdd3([\ufde0-\ufdef]*)\ufdd1|(\ufdd6)|(\ufdd7)")
#: the compiler's kinds as the answer names them: a text piece, ``<%=`` (escaped), ``<%-`` (raw), ``<%`` (printed)
_KIND = {"text": "text", "escaped": "escaped", "raw": "output", "eval": "code"}


@dataclass(frozen=True)
class Origin:
    """A template (or a plain entry ``getwi`` may return) of the marked evaluation: how it is named, the entry's
    book, uid and comment (empty for a message's own template) and its compiled form (``None``: not a template)."""

    label: str
    info: Mapping[str, Any] = field(default_factory=dict)
    compiled: Any = None


@dataclass(frozen=True)
class MarkedSpan:
    """Output ``[start, end)`` came from ``origin``'s token (kind, template line and column; a whole entry: no
    token)."""

    start: int
    end: int
    origin: int
    kind: str
    line: int | None
    column: int | None

    def info(self, origins: Sequence[Origin]) -> dict[str, Any]:
        """The span's description as the request's provenance gives it."""
        o = origins[self.origin]
        out: dict[str, Any] = {"kind": "template_output", "template": o.label, "token": self.kind}
        if o.info:
            out.update({"book": o.info.get("world"), "uid": o.info.get("uid"), "comment": o.info.get("comment")})
        if self.line is not None:
            out.update({"line": self.line, "column": self.column})
        return out


def _hex(digits: str) -> int:
    return int("".join("%x" % (ord(c) - 0xFDE0) for c in digits), 16)


class _Reader:
    """The state of one marked text being read: the plain text so far, the spans, the current token."""

    def __init__(self, origins: Sequence[Origin]) -> None:
        self.origins = origins
        self.parts: list[str] = []
        self.at = 0
        self.spans: list[MarkedSpan] = []
        self.current: tuple[int, int | None] | None = None
        self.stack: list[tuple[int, int | None] | None] = []

    def text(self, chunk: str) -> None:
        if not chunk:
            return
        self.parts.append(chunk)
        start, self.at = self.at, self.at + len(chunk)
        if self.current is not None:
            self._add(start, self.at, *self.current)

    def _add(self, start: int, end: int, origin: int, mark: int | None) -> None:
        compiled = self.origins[origin].compiled
        kind, line, column = "entry", None, None
        if mark is not None and compiled is not None and mark < len(compiled.marks):
            kind, src_start, _src_end = compiled.marks[mark]
            kind = _KIND.get(kind, kind)
            line, column = line_col(compiled.source, src_start)
        last = self.spans[-1] if self.spans else None
        if last is not None and last.end == start and (last.origin, last.kind, last.line, last.column) == (
                origin, kind, line, column):
            self.spans[-1] = MarkedSpan(last.start, end, origin, kind, line, column)
            return
        self.spans.append(MarkedSpan(start, end, origin, kind, line, column))

    def token(self, match: re.Match[str]) -> None:
        if match.group(3):  # what getwi returned starts
            self.stack.append(self.current)
        elif match.group(4):  # and ends: the caller's token again
            self.current = self.stack.pop() if self.stack else None
        else:
            origin = _hex(match.group(1))
            if origin < len(self.origins):
                self.current = (origin, _hex(match.group(2)) if match.group(2) else None)


def unmark(marked: str, origins: Sequence[Origin]) -> tuple[str, list[MarkedSpan]]:
    """``marked`` without its markers, and the spans they describe (adjacent ranges of one token merged)."""
    reader = _Reader(origins)
    pos = 0
    for match in _TOKEN.finditer(marked):
        reader.text(marked[pos:match.start()])
        reader.token(match)
        pos = match.end()
    reader.text(marked[pos:])
    return "".join(reader.parts), reader.spans
