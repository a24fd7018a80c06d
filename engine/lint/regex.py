"""Regex-script checks: scripts that never compile, never match the texts they target, or are slow.

Scripts are read from a preset (``$.extensions.regex_scripts``), a card (``$.data.extensions.regex_scripts``)
or a SillyTavern regex export (one script object or a list). Each enabled script is compiled as
SillyTavern reads its ``findRegex`` (JavaScript's engine, :mod:`tavernbox.regexscripts`); its target
texts are the linted texts of its placements: the messages of linted chats (SillyTavern's ``.jsonl``
export: user input, AI output, reasoning) and the world-info entry contents of linted books and cards.
A script none of whose placements has a linted text is not reported as matching nothing. A search that
takes more than :data:`SLOW_SECONDS` of CPU on one of
them, or on a probe made for catastrophic backtracking (each letter of the pattern repeated 2,000
times, then a character no pattern expects), is reported as slow and stopped there.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import TemplateError
from ..regexscripts import Placement, RegexScript, js_find_problem, js_matches, read_scripts
from .codes import LINT_CODES
from .model import Finding

__all__ = ["RegexTargets", "ScriptFile", "is_regex_export", "lint_regex_scripts", "scripts_of"]

#: CPU seconds one search may take before the script is reported as slow
SLOW_SECONDS = 0.05
_PROBE_REPEAT = 2000
_PROBE_LETTERS = 6


@dataclass
class ScriptFile:
    """The scripts of one linted file, with where they sit in it."""

    file: str
    path: str
    raw: Any


@dataclass
class RegexTargets:
    """The linted texts per placement (what the scripts of the linted set would run on)."""

    texts: dict[int, list[str]] = field(default_factory=dict)

    def add(self, placement: Placement, text: str) -> None:
        if text:
            self.texts.setdefault(int(placement), []).append(text)


def is_regex_export(raw: Any) -> bool:
    """Whether a JSON value is SillyTavern's regex export: a script object or a list of them."""
    if isinstance(raw, Mapping):
        return "findRegex" in raw and "scriptName" in raw
    return isinstance(raw, list) and bool(raw) and all(isinstance(x, Mapping) and "findRegex" in x for x in raw)


def scripts_of(file: str, raw: Any, kind: str) -> ScriptFile | None:
    """The scripts a preset, card or export holds (``None`` when it has none)."""
    if kind == "export":
        return ScriptFile(file, "$", raw)
    base = raw.get("data") if kind == "card" and isinstance(raw.get("data"), Mapping) else raw
    ext = base.get("extensions") if isinstance(base, Mapping) else None
    found = ext.get("regex_scripts") if isinstance(ext, Mapping) else None
    if not found:
        return None
    path = "$.data.extensions.regex_scripts" if base is not raw else "$.extensions.regex_scripts"
    return ScriptFile(file, path, found)


def _finding(code: str, file: str, message: str, path: str, suggestion: str | None = None) -> Finding:
    return Finding(code, LINT_CODES[code].severity, file, message, path, suggestion=suggestion)


def _probes(pattern: str) -> list[str]:
    letters = list(dict.fromkeys(c for c in pattern if c.isalnum()))[:_PROBE_LETTERS] or ["a"]
    return [c * _PROBE_REPEAT + "\u0000" for c in letters]


def _check(script: RegexScript, path: str, file: str, targets: RegexTargets) -> list[Finding]:
    problem = js_find_problem(script.find_regex)
    if problem is not None:
        return [_finding("REGEX_PATTERN_INVALID", file, f"script {script.name!r}: findRegex {script.find_regex!r} "
                         f"does not compile in JavaScript ({problem}); SillyTavern skips it", f"{path}.findRegex")]
    texts = [t for p in dict.fromkeys(script.placement) for t in targets.texts.get(p, ())]
    matched = False
    for text in [*texts, *_probes(script.find_regex)]:
        try:
            found = js_matches(script.find_regex, text, SLOW_SECONDS)
        except TimeoutError:
            return [_finding("REGEX_SLOW", file, f"script {script.name!r}: one search took more than "
                             f"{SLOW_SECONDS * 1000:g} ms of CPU on a {len(text):,}-character text; it may backtrack "
                             "catastrophically", f"{path}.findRegex",
                             "avoid nested quantifiers over the same characters, e.g. (a+)+")]
        except Exception:  # out of memory or stack: as slow as it gets
            return [_finding("REGEX_SLOW", file, f"script {script.name!r}: a search ran out of memory or stack",
                             f"{path}.findRegex")]
        matched = matched or (found and text in texts)
    if texts and not matched:
        return [_finding("REGEX_NO_MATCH", file, f"script {script.name!r} matches none of the {len(texts)} linted "
                         "text(s) it targets", f"{path}.findRegex")]
    return []


def lint_regex_scripts(sources: Sequence[ScriptFile], targets: RegexTargets) -> list[Finding]:
    """Findings for every script of ``sources`` (a bad script object is one ``REGEX_SCRIPT_INVALID``)."""
    out: list[Finding] = []
    for source in sources:
        try:
            scripts = read_scripts(source.raw, "global", source.file, source.path)
        except TemplateError as exc:
            out.append(_finding("REGEX_SCRIPT_INVALID", source.file, exc.message, exc.path or source.path))
            continue
        for script in scripts:
            if not script.disabled and script.find_regex:
                out.extend(_check(script, script.origin.path, source.file, targets))
    return out
