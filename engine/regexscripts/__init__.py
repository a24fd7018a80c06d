"""SillyTavern's regex scripts: read, and applied to prompt texts as SillyTavern 1.18 applies them.

``read_scripts`` turns script objects (SillyTavern's field names) into :class:`RegexScript`;
:class:`RegexRun` applies one request's scripts to its texts by kind and depth, with a CPU budget,
warnings and provenance; the find-and-replace itself runs in QuickJS (:mod:`.jsreplace`), so the
patterns and the replacement behave as JavaScript's.
"""

from __future__ import annotations

from .jsreplace import JsReplaceError, js_find_problem, js_matches, js_replace, js_replace_uncached
from .run import DEFAULT_TIME_LIMIT, RegexEdit, RegexRun, Substituter, scripts_in_order
from .script import (
    Placement,
    RegexScript,
    ScriptOrigin,
    ScriptSetKind,
    Substitution,
    read_scripts,
    read_scripts_cached,
)
from .substitution import escape_for_pattern, macro_substituters

__all__ = ["DEFAULT_TIME_LIMIT", "JsReplaceError", "Placement", "RegexEdit", "RegexRun", "RegexScript",
           "ScriptOrigin", "ScriptSetKind", "Substituter", "Substitution", "escape_for_pattern", "js_find_problem",
           "js_matches", "js_replace", "js_replace_uncached", "macro_substituters", "read_scripts", "read_scripts_cached", "scripts_in_order"]
