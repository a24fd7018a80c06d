"""One request's regex scripts applied to its texts, as SillyTavern applies them at prompt time.

SillyTavern runs its scripts in one list (global, then the preset's, then the card's; a preset's or a
card's only once the user allowed them) over each text it is about to send, by the text's kind and,
for chat messages and depth-placed world info, its depth (``getRegexedString`` with ``isPrompt``):
only ``promptOnly`` scripts, each whose ``placement`` holds the kind and whose depth bounds admit
the text, one after another on the previous one's output. :class:`RegexRun` is that for one request:
it keeps the time budget (CPU seconds of this thread, shared by every text of the request), the
warnings (a pattern JavaScript cannot compile: SillyTavern skips the script) and the provenance
(which script changed which text).
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import Diagnostic, TemplateError
from .jsreplace import JsReplaceError, Pieces, js_find_problem, js_replace
from .prefilter import may_match
from .script import Placement, RegexScript, Substitution

__all__ = ["DEFAULT_TIME_LIMIT", "RegexEdit", "RegexRun", "Substituter"]

#: CPU seconds one request's scripts may use together
DEFAULT_TIME_LIMIT = 5.0

#: SillyTavern's macro substitution (``substituteParams``) for the request's context
Substituter = Callable[[str], str]

#: characters without which a text has no macro, legacy marker (``<USER>``) or escaped brace
_MACRO_CHARS = ("{", "}", "<", "\\")


@functools.lru_cache(maxsize=4096)
def _compile_problem(pattern: str) -> str | None:
    return js_find_problem(pattern)


def _may_hold_macro(text: str) -> bool:
    return any(c in text for c in _MACRO_CHARS)


@dataclass(frozen=True, slots=True)
class RegexEdit:
    """A script changed a text: which script (name, set, asset, index), the text's kind, label and depth."""

    script: RegexScript
    placement: Placement
    target: str
    depth: int | None

    def to_dict(self) -> dict[str, Any]:
        origin = self.script.origin
        out: dict[str, Any] = {"script": self.script.name, "set": origin.kind, "asset": origin.asset,
                               "index": origin.index, "placement": self.placement.name.lower(), "target": self.target}
        if self.depth is not None:
            out["depth"] = self.depth
        return out


class RegexRun:
    """Applies ``scripts`` (in SillyTavern's order) to one request's texts.

    ``substitute`` expands macros as SillyTavern's ``substituteParams`` does for this request;
    ``substitute_escaped`` does the same with every macro's value escaped for a pattern (needed only
    by scripts with ``substituteRegex`` 2). ``time_limit`` is the CPU seconds all texts together may
    take; past it :meth:`apply` raises ``REGEX_TIME_LIMIT`` naming the script and its asset.
    """

    def __init__(self, scripts: Iterable[RegexScript], substitute: Substituter,
                 substitute_escaped: Substituter | None = None, *, time_limit: float = DEFAULT_TIME_LIMIT,
                 prefilter: bool = True, diagnostics: list[Diagnostic] | None = None) -> None:
        if not time_limit > 0:
            raise ValueError("the regex time limit must be a positive number of seconds")
        self._by_placement: dict[int, list[RegexScript]] = {}
        self._stored_by_placement: dict[int, list[RegexScript]] = {}
        for script in scripts:
            if script.disabled or not script.find_regex:
                continue
            if script.prompt_only:
                index = self._by_placement
            elif not script.markdown_only:
                index = self._stored_by_placement
            else:
                continue
            for placement in dict.fromkeys(script.placement):
                index.setdefault(placement, []).append(script)
        self._substitute = substitute
        self._substitute_escaped = substitute_escaped or substitute
        self.time_limit = time_limit
        #: skip JavaScript for a text that lacks a word every match needs (:mod:`.prefilter`); the plain
        #: path asks JavaScript about every text
        self.prefilter = prefilter
        self._deadline: float | None = None
        self._warned: set[int] = set()
        self.edits: list[RegexEdit] = []
        #: the run's warnings (a pattern that does not compile), added to ``diagnostics`` when given
        self.diagnostics: list[Diagnostic] = diagnostics if diagnostics is not None else []

    def has_scripts(self, placement: Placement) -> bool:
        """Whether any script can touch a text of ``placement`` (else :meth:`apply` returns texts unchanged)."""
        return placement in self._by_placement

    def apply(self, text: str, placement: Placement, depth: int | None = None, target: str = "") -> str:
        """``text`` after every script SillyTavern runs on a prompt text of ``placement`` at ``depth``."""
        scripts = self._by_placement.get(placement)
        if not scripts or not text:
            return text
        for script in scripts:
            if not text:  # SillyTavern stops at an empty text
                break
            if not script.runs_in_prompt(placement, depth):
                continue
            out = self._run(script, text)
            if out != text:
                self.edits.append(RegexEdit(script, placement, target, depth))
                text = out
        return text

    def has_stored_scripts(self, placement: Placement) -> bool:
        """Whether any script runs on a newly stored text of ``placement`` (:meth:`apply_stored`)."""
        return placement in self._stored_by_placement

    def apply_stored(self, text: str, placement: Placement, target: str = "") -> str:
        """``text`` as SillyTavern stores a new message: the scripts with neither ``promptOnly`` nor
        ``markdownOnly`` run on it, depth bounds not checked (``sendMessageAsUser``)."""
        for script in self._stored_by_placement.get(placement, ()):
            if not text:
                break
            out = self._run(script, text)
            if out != text:
                self.edits.append(RegexEdit(script, placement, target, None))
                text = out
        return text

    def _remaining(self, script: RegexScript) -> float:
        now = time.thread_time()
        if self._deadline is None:
            self._deadline = now + self.time_limit
        left = self._deadline - now
        if left <= 0:
            raise self._over_time(script)
        return left

    def _over_time(self, script: RegexScript) -> TemplateError:
        return TemplateError(f"{script.label()} used up the regex scripts' time budget ({self.time_limit:g} s of CPU "
                             f"for the request); its pattern {script.find_regex!r} may backtrack catastrophically",
                             code="REGEX_TIME_LIMIT", path=script.origin.path or None)

    def _pattern(self, script: RegexScript) -> str:
        text = script.find_regex
        if script.substitution is Substitution.RAW and _may_hold_macro(text):
            return self._substitute(text)
        if script.substitution is Substitution.ESCAPED and _may_hold_macro(text):
            return self._substitute_escaped(text)
        return text

    def _run(self, script: RegexScript, text: str) -> str:
        pattern = self._pattern(script)
        if self.prefilter:
            if _compile_problem(pattern) is not None:
                self._warn_uncompiled(script, pattern)
                return text
            if not may_match(pattern, text):
                return text
        trims = [self._substitute(t) if _may_hold_macro(t) else t for t in script.trim_strings]
        try:
            out = js_replace(pattern, text, script.replace_string, trims, self._remaining(script))
        except TimeoutError:
            raise self._over_time(script) from None
        except JsReplaceError as exc:
            raise TemplateError(f"{script.label()} failed in JavaScript: {exc}", code="REGEX_SCRIPT_FAILED",
                                path=script.origin.path or None) from None
        if out is None:
            self._warn_uncompiled(script, pattern)
            return text
        if isinstance(out, Pieces):
            return "".join(p if i % 2 == 0 or not p else self._substitute(p) for i, p in enumerate(out))
        return out

    def _warn_uncompiled(self, script: RegexScript, pattern: str) -> None:
        if id(script) in self._warned:
            return
        self._warned.add(id(script))
        problem = js_find_problem(pattern) or "no pattern"
        path = f"{script.origin.path}.findRegex" if script.origin.path else None
        self.diagnostics.append(Diagnostic(
            "REGEX_PATTERN_INVALID", f"{script.label()}: findRegex {pattern!r} does not compile in JavaScript "
            f"({problem}); SillyTavern skips the script", path=path, severity="warning"))

    def provenance(self) -> list[dict[str, Any]]:
        return [edit.to_dict() for edit in self.edits]


def scripts_in_order(*sets: Sequence[RegexScript]) -> list[RegexScript]:
    """The sets concatenated in the order given (SillyTavern's: global, preset, card)."""
    return [script for scripts in sets for script in scripts]
