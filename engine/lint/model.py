"""What the lint stages share: a finding, the report, one prompt text, and the facts of the asset set.

A *prompt* is any text the engine would expand: a preset prompt, a card field, a world-info entry,
a template file. It carries the JSON path it came from and a way back to the file's own line and
column (for SARIF regions), so each stage reports positions inside the prompt without knowing
what file format held it.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..errors import Severity
from .codes import LINT_CODES

__all__ = ["Facts", "Finding", "LintReport", "Prompt", "SEVERITY_RANK", "VariableUse"]

#: error > warning > info, for sorting and for ``--min-severity``-style filters
SEVERITY_RANK: dict[str, int] = {"error": 2, "warning": 1, "info": 0}


@dataclass(frozen=True, slots=True)
class Finding:
    """One lint finding.

    ``line``/``column`` (1-based) are inside the prompt text the finding concerns (the file itself
    for a template file); ``path`` is the JSON path of that prompt or field. ``file_line`` and
    ``file_column`` locate the same place in the file, when it can be worked out (JSON strings are
    mapped through their escapes), and are what SARIF regions use.
    """

    code: str
    severity: Severity
    file: str
    message: str
    path: str | None = None
    line: int | None = None
    column: int | None = None
    suggestion: str | None = None
    file_line: int | None = None
    file_column: int | None = None

    def to_dict(self) -> dict[str, Any]:
        """The JSON form (``--format json``): every field, ``None`` kept so the shape is fixed."""
        return {
            "code": self.code,
            "severity": self.severity,
            "file": self.file,
            "path": self.path,
            "line": self.line,
            "column": self.column,
            "message": self.message,
            "suggestion": self.suggestion,
            "file_line": self.file_line,
            "file_column": self.file_column,
        }


@dataclass
class LintReport:
    """The findings of one lint run, in file order then position, and the files looked at."""

    findings: list[Finding] = field(default_factory=list)
    files: list[str] = field(default_factory=list)

    @property
    def has_errors(self) -> bool:
        """Whether any finding is error-level (the CLI then exits 1)."""
        return any(f.severity == "error" for f in self.findings)

    def counts(self) -> dict[str, int]:
        """Findings per severity (every severity present, zero included)."""
        out = {"error": 0, "warning": 0, "info": 0}
        for f in self.findings:
            out[f.severity] += 1
        return out

    def to_dict(self) -> dict[str, Any]:
        return {"files": list(self.files), "counts": self.counts(), "findings": [f.to_dict() for f in self.findings]}


#: maps an offset inside a prompt text to (line, column) in its file, or None when unknown
FileLocator = Callable[[int], "tuple[int, int] | None"]


@dataclass
class Prompt:
    """One text the engine would expand, and where it lives.

    ``title`` is the name ST-Prompt-Template reads title tags from (a world-info entry's comment,
    a template file's stem, a resource's name); ``None`` where tags mean nothing (preset prompts,
    card fields). ``macros``/``ejs`` say which languages apply to the text.
    """

    file: str
    path: str | None
    text: str
    title: str | None = None
    locate: FileLocator | None = None
    macros: bool = True
    ejs: bool = True
    #: whether leading ``@@`` lines are template decorators (world-info entries own theirs)
    decorators: bool = True
    _lines: list[int] | None = field(default=None, repr=False, compare=False)

    def line_col(self, offset: int) -> tuple[int, int]:
        """1-based (line, column) of ``offset`` in :attr:`text`, through a line index built once
        (a prompt with thousands of findings must not rescan its text for each one)."""
        if self._lines is None:
            self._lines = [0] + [m.end() for m in re.finditer("\n", self.text)]
        offset = max(0, min(offset, len(self.text)))
        line = bisect.bisect_right(self._lines, offset)
        return line, offset - self._lines[line - 1] + 1

    def finding(self, code: str, message: str, start: int | None = None, *, suggestion: str | None = None,
                severity: Severity | None = None) -> Finding:
        """A finding at ``start`` (an offset in :attr:`text`), positioned in the prompt and the file."""
        line = column = file_line = file_column = None
        if start is not None:
            line, column = self.line_col(start)
            if self.locate is not None:
                where = self.locate(start)
                if where is not None:
                    file_line, file_column = where
        return Finding(code, severity or LINT_CODES[code].severity, self.file, message, self.path, line, column,
                       suggestion, file_line, file_column)


@dataclass(frozen=True, slots=True)
class VariableUse:
    """Where a variable was read or set: the prompt and the offset in it."""

    prompt: Prompt
    start: int


@dataclass
class Facts:
    """What the whole linted set knows, for the checks that look across files.

    World-book titles and preset prompt names answer ``getwi``/``getpreset`` checks (only when the
    set holds at least one book or preset: otherwise nothing can be said); variable reads and
    writes are collected while the prompts are linted and compared at the end.
    """

    books: dict[str, set[str]] = field(default_factory=dict)  # book name -> entry titles (comments)
    preset_prompts: set[str] = field(default_factory=set)  # identifiers and names
    has_preset: bool = False
    reads: dict[tuple[str, str], list[VariableUse]] = field(default_factory=dict)
    sets: dict[tuple[str, str], list[VariableUse]] = field(default_factory=dict)
    #: names set by data rather than by a prompt (MVU files, [InitVar] entries): never "unread"
    data_sets: set[tuple[str, str]] = field(default_factory=set)
    #: (file, card name, has system_prompt, has post_history_instructions) of each linted card
    cards: list[tuple[str, str, bool, bool]] = field(default_factory=list)

    def read(self, scope: str, name: str, prompt: Prompt, start: int) -> None:
        self.reads.setdefault((scope, variable_root(name)), []).append(VariableUse(prompt, start))

    def set(self, scope: str, name: str, prompt: Prompt, start: int) -> None:
        self.sets.setdefault((scope, variable_root(name)), []).append(VariableUse(prompt, start))


def variable_root(name: str) -> str:
    """The variable a (possibly dotted or indexed) name belongs to: ``stat_data.hp[0]`` -> ``stat_data``."""
    name = name.strip()
    for i, ch in enumerate(name):
        if ch in ".[":
            return name[:i] if i else name
    return name
