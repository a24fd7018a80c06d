"""Which template token produced each range of an EJS render's output (the playground's EJS view).

Why a second, marked render: the output is built inside the sandbox, where only the program
knows which tag is appending. The marked variant of the program (``compile_template(...,
marks=True)``) appends a short marker before every text piece, output tag and code tag, so the
marked output says, for each character, the last token that started appending before it. The
markers are Unicode noncharacters (U+FDD0..U+FDEF), never produced by ordinary text.

Provenance is never invented: the markers are stripped and the remaining text must equal the
text of the ordinary render of the same template, variables and clock. When it does not (the
template draws random numbers, reads the reserved characters, or the marked program passes a
limit the plain one did not) the spans are withheld and the reason is given instead. The text,
error and usage answered are always the ordinary render's.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from ..errors import TemplateError
from ..spans import line_col
from .compiler import MARK_END, MARK_START, compile_template
from .parser import parse_template
from .render import DIALECT_PROMPT_TEMPLATE, TemplateResult, _input_json, _template_api, clock_ms, render_template

__all__ = ["TemplateProvenance", "OutputSpan", "render_with_provenance"]

_MARK = re.compile(MARK_START + "([\ufde0-\ufdef]+)" + MARK_END)
#: Kinds as the answer names them: a text piece, ``<%=`` (escaped), ``<%-`` (raw), ``<%`` (printed by code)
_KIND = {"text": "text", "escaped": "escaped", "raw": "output", "eval": "code"}


@dataclass(frozen=True, slots=True)
class OutputSpan:
    """Output ``[start, end)`` (characters) came from the template token at ``[source_start, source_end)``."""

    start: int
    end: int
    kind: str
    source_start: int
    source_end: int
    line: int
    column: int

    def to_dict(self) -> dict[str, Any]:
        return {"start": self.start, "end": self.end, "kind": self.kind, "source_start": self.source_start,
                "source_end": self.source_end, "line": self.line, "column": self.column}


@dataclass(frozen=True, slots=True)
class TemplateProvenance:
    """The spans of one render, or why there are none (``spans is None``)."""

    spans: tuple[OutputSpan, ...] | None
    reason: str | None = None

    def to_dict(self) -> dict[str, Any]:
        if self.spans is None:
            return {"spans": None, "reason": self.reason}
        return {"spans": [s.to_dict() for s in self.spans]}


def _spans(marked: str, marks: tuple[tuple[str, int, int], ...], source: str) -> tuple[str, list[OutputSpan]]:
    """Strip the markers from ``marked``; the plain text and its spans (adjacent runs of one mark merged)."""
    text_parts: list[str] = []
    spans: list[OutputSpan] = []
    at = 0
    current = -1
    pos = 0
    for match in _MARK.finditer(marked):
        chunk = marked[pos:match.start()]
        if chunk:
            text_parts.append(chunk)
            if current >= 0:
                _add(spans, at, at + len(chunk), current, marks, source)
            at += len(chunk)
        index = int("".join("%x" % (ord(c) - 0xFDE0) for c in match.group(1)), 16)
        current = index if index < len(marks) else -1
        pos = match.end()
    chunk = marked[pos:]
    if chunk:
        text_parts.append(chunk)
        if current >= 0:
            _add(spans, at, at + len(chunk), current, marks, source)
    return "".join(text_parts), spans


def _add(spans: list[OutputSpan], start: int, end: int, index: int, marks: tuple[tuple[str, int, int], ...],
         source: str) -> None:
    kind, src_start, src_end = marks[index]
    last = spans[-1] if spans else None
    if last is not None and last.end == start and last.source_start == src_start and last.source_end == src_end:
        spans[-1] = OutputSpan(last.start, end, last.kind, src_start, src_end, last.line, last.column)
        return
    line, column = line_col(source, src_start)
    spans.append(OutputSpan(start, end, _KIND[kind], src_start, src_end, line, column))


def render_with_provenance(source: str, variables: Any = None, *, dialect: str = DIALECT_PROMPT_TEMPLATE,
                           now: datetime | str | None = None) -> tuple[TemplateResult, TemplateProvenance]:
    """Render ``source`` as :func:`render_template` does, plus the output's provenance.

    Raises what :func:`render_template` raises (the ordinary render runs first). The marked render
    runs under the same limits; its failure only withholds the spans.
    """
    from .. import sandbox

    if now is None:
        now = datetime.now(timezone.utc)  # one clock for both renders
    result = render_template(source, variables, dialect=dialect, now=now)
    if "<%" not in source and "%>" not in source:
        whole = (OutputSpan(0, len(result.text), "text", 0, len(source), 1, 1),) if result.text else ()
        return result, TemplateProvenance(whole)
    limits = sandbox.DEFAULT_LIMITS
    compiled = compile_template(parse_template(source), marks=True)
    try:
        marked = sandbox.run_program(compiled.program, _input_json(variables, limits), limits=limits,
                                     template_api=_template_api(dialect), now_ms=clock_ms(now))
    except TemplateError as exc:
        return result, TemplateProvenance(None, f"the marked render failed where the render did not ({exc.code})")
    text, spans = _spans(marked.text, compiled.marks, source)
    if text != result.text:
        return result, TemplateProvenance(None, "the output differs between two renders of the same input (random "
                                                "numbers, or the reserved characters U+FDD0..U+FDEF in the output)")
    return result, TemplateProvenance(tuple(spans))
