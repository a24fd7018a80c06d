"""The lint catalogue: every code ``tavernbox lint`` reports, its default severity and meaning.

``docs/LINT.md`` is the same table for readers (a test keeps them equal). A code that names the
same condition the engine reports while rendering (``MACRO_UNKNOWN``, ``TEMPLATE_SYNTAX``,
``WI_REGEX_INVALID``...) reuses the engine's name, so a finding found by lint and the diagnostic
the render would give read the same. Severity: ``error`` means the asset will not do what it was
written to do when rendered (the render fails, text is left as written, a key never compiles);
``warning`` something that is very likely a mistake; ``info`` something worth knowing.
"""

from __future__ import annotations

from typing import NamedTuple

from ..errors import Severity

__all__ = ["LINT_CODES", "LintCode"]


class LintCode(NamedTuple):
    """One catalogue row: the asset family it concerns, its severity and what it means."""

    family: str
    severity: Severity
    meaning: str


LINT_CODES: dict[str, LintCode] = {
    # files
    "FILE_UNREADABLE": LintCode(
        "file", "error",
        "the file cannot be read as any lintable asset (not UTF-8, bad JSON/YAML, unknown kind)",
    ),
    "TEMPLATE_RESOURCE_INVALID": LintCode(
        "file", "error",
        "a prompt-template resource (JSON with a prompt-template: id) is malformed",
    ),
    # macros, in every prompt text
    "MACRO_UNKNOWN": LintCode(
        "macros", "warning",
        "a macro name that is not in the catalogue; it is left as written (the nearest known name is "
        "suggested). Tavern Helper's variable macros (`{{get_message_variable::path}}`, "
        "`{{format_message_variable::path}}`, ...) are not reported: the request expands them",
    ),
    "MACRO_ARITY": LintCode(
        "macros", "error",
        "a macro called with the wrong number of arguments, or given a body it cannot take; left as "
        "written",
    ),
    "MACRO_ARGUMENT_TYPE": LintCode(
        "macros", "error",
        "a literal argument of the wrong type (an integer, number or boolean was expected); left as "
        "written",
    ),
    "MACRO_UNCLOSED_SCOPE": LintCode(
        "macros", "error",
        "a scoped macro without its closer ({{if x}} without {{/if}}), or a closer without an opener",
    ),
    "MACRO_ELSE_OUTSIDE_IF": LintCode(
        "macros", "warning",
        "{{else}} outside the body of an {{if}}; it is removed from the output",
    ),
    "MACRO_NESTING_LIMIT": LintCode(
        "macros", "error",
        "macros or scoped macros nested deeper than the engine's limit; left as written",
    ),
    "MACRO_INPUT_LIMIT": LintCode(
        "macros", "error",
        "a prompt longer than the macro engine's input limit (2 MiB); the render refuses it, and lint "
        "checks no macro in it",
    ),
    "MACRO_TIME_LIMIT": LintCode(
        "macros", "error",
        "a prompt that takes more than the render's CPU budget (1 s) to check; the render refuses it, and lint "
        "stops checking it there",
    ),
    "MACRO_LEGACY_SYNTAX": LintCode(
        "macros", "info",
        "legacy-only syntax (<USER>, <BOT>, {{time_UTC+2}}, single-colon arguments such as {{roll:1d6}})",
    ),
    "VARIABLE_NEVER_SET": LintCode(
        "macros", "warning",
        "a variable is read but no file of the linted set sets it (macros, templates, MVU files)",
    ),
    "VARIABLE_NEVER_READ": LintCode(
        "macros", "info",
        "a variable is set but no file of the linted set reads it",
    ),
    # EJS (ST-Prompt-Template) templates
    "TEMPLATE_SYNTAX": LintCode(
        "ejs", "error",
        "the template's tags or its JavaScript do not compile (the error render would hit)",
    ),
    "TEMPLATE_TOO_LARGE": LintCode(
        "ejs", "error",
        "a template longer than the default template limit (128 KiB) or with more than 4,096 tags; the "
        "render refuses it",
    ),
    "TEMPLATE_WRITE_REFUSED": LintCode(
        "ejs", "error",
        "a write or command (setvar, execute, activewi...) that this engine refuses: templates are read-"
        "only",
    ),
    "TEMPLATE_READ_UNAVAILABLE": LintCode(
        "ejs", "warning",
        "a read this engine does not give templates (getChatMessages, getqr...); it fails when reached",
    ),
    "TEMPLATE_WORLD_INFO_UNKNOWN": LintCode(
        "ejs", "warning",
        "getwi() names an entry title (or book) that no linted world book has",
    ),
    "TEMPLATE_PRESET_PROMPT_UNKNOWN": LintCode(
        "ejs", "warning",
        "getpreset() names a prompt that no linted preset has",
    ),
    "TEMPLATE_LIFECYCLE_UNSUPPORTED": LintCode(
        "ejs", "error",
        "a title tag or @@decorator asks for a lifecycle this engine does not run; the template cannot be"
        " enabled",
    ),
    # world info
    "WI_REGEX_INVALID": LintCode(
        "worldinfo", "error",
        "a /regex/ key does not compile",
    ),
    "WI_REGEX_REFUSED": LintCode(
        "worldinfo", "warning",
        "a /regex/ key uses a construct the regex policy refuses; it never matches",
    ),
    # regex scripts (presets, cards, regex exports)
    "REGEX_SCRIPT_INVALID": LintCode(
        "regex", "error",
        "a regex script has a field of the wrong type (placement, replaceString, trimStrings, depths...)",
    ),
    "REGEX_PATTERN_INVALID": LintCode(
        "regex", "error",
        "an enabled regex script's findRegex does not compile in JavaScript; SillyTavern skips the script",
    ),
    "REGEX_NO_MATCH": LintCode(
        "regex", "info",
        "an enabled regex script matches none of the linted texts it targets (chat messages of a linted .jsonl chat, "
        "world-info entries)",
    ),
    "REGEX_SLOW": LintCode(
        "regex", "warning",
        "a regex script's search took more than 50 ms of CPU on a linted text or a backtracking probe",
    ),
    "WI_KEY_EMPTY": LintCode(
        "worldinfo", "warning",
        "a key that is empty (it never matches) or only whitespace (trimmed to empty, it matches every "
        "text)",
    ),
    "WI_ENTRY_UNREACHABLE": LintCode(
        "worldinfo", "warning",
        "an enabled entry that is not constant, has no usable primary key and nothing else to activate it",
    ),
    "WI_LOGIC_UNSATISFIABLE": LintCode(
        "worldinfo", "warning",
        "a secondary-key logic no text can satisfy (NOT ANY/NOT ALL over keys the primary key itself "
        "contains)",
    ),
    "WI_RECURSION_ONLY": LintCode(
        "worldinfo", "warning",
        "an entry that can only fire by recursion (delay until recursion) where recursion is off",
    ),
    "WI_RECURSION_CYCLE": LintCode(
        "worldinfo", "info",
        "entries that activate each other by recursion (A's content holds B's key and back)",
    ),
    "WI_DUPLICATE_UID": LintCode(
        "worldinfo", "error",
        "two entries of one book share a uid; SillyTavern keeps only one of them",
    ),
    "WI_GROUP_DUPLICATE_KEY": LintCode(
        "worldinfo", "info",
        "entries of one inclusion group share a primary key; only one of them fires at a time",
    ),
    "WI_BUDGET_OVERFLOW": LintCode(
        "worldinfo", "warning",
        "the constant entries alone pass the book's token budget at its own settings; some are always cut",
    ),
    "WI_DEPTH_UNREACHABLE": LintCode(
        "worldinfo", "warning",
        "an at-depth entry whose depth is beyond 10,000 (any chat); SillyTavern never inserts it",
    ),
    # presets
    "PRESET_PROMPT_UNUSED": LintCode(
        "presets", "info",
        "a prompt that no prompt_order enables; it is never sent",
    ),
    "PRESET_ORDER_UNKNOWN_PROMPT": LintCode(
        "presets", "warning",
        "a prompt_order entry names a prompt the preset does not have (nor SillyTavern's defaults); it is"
        " dropped",
    ),
    "PRESET_DUPLICATE_IDENTIFIER": LintCode(
        "presets", "warning",
        "two prompts share an identifier; SillyTavern uses the first one only",
    ),
    "PRESET_INJECTION_DEPTH": LintCode(
        "presets", "warning",
        "an in-chat prompt's injection_depth is outside 0..10000; SillyTavern never injects it",
    ),
    "PRESET_MARKER_MISSING": LintCode(
        "presets", "warning",
        "the order SillyTavern uses (character 100001) does not enable the chatHistory marker; no chat is"
        " sent",
    ),
    "PRESET_OVERRIDE_REPLACED": LintCode(
        "presets", "info",
        "a linted card's system prompt or post-history instructions replace this enabled main or "
        "jailbreak prompt",
    ),
}
