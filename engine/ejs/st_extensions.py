"""SillyTavern's two template extensions over the final messages: Tavern Helper's macros, then ST-Prompt-Template.

What SillyTavern 1.18 sends when both are installed (recorded: ``tests/golden/st_oracle/ext_scenarios.py``): its
own macros have run while the prompt was built; Tavern Helper then rewrites its variable macros in every final
message (``GENERATE_AFTER_DATA``); ST-Prompt-Template then evaluates the ``<% %>`` of every final message in order
(``CHAT_COMPLETION_SETTINGS_READY``). :func:`run_extensions` is that step, for the stage that holds the final
messages; the request's settings are read by :func:`parse_extensions`.

The request's ``extensions`` object::

    {"prompt_template": {"enabled": true, <ST-Prompt-Template's own setting names>},
     "tavern_helper": {"enabled": true}}

Both are on by default (they change nothing in texts without ``<%`` or their macros). The extension's setting
names are the ones it stores under ``extension_settings.EjsTemplate``; the ones that matter at generation are
read (``generate_enabled``: evaluate the final messages), the others are accepted and kept.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import Diagnostic
from ..macros.st_extension_settings import PROMPT_TEMPLATE_SETTINGS, ExtensionSettings, parse_extensions
from ..macros.st_variables import StVariables
from ..macros.tavern_helper import MacroUse, expand_variable_macros
from .st_prompt_template import (
    InjectEntry,
    PromptTemplateContext,
    PromptTemplateLimits,
    TemplateText,
    WorldEntry,
    evaluate_prompt_templates,
    split_decorators,
)

__all__ = ["ChatLoad", "ExtensionSettings", "ExtensionsResult", "PROMPT_TEMPLATE_SETTINGS", "filter_templates",
           "initial_variables", "inject_entries", "load_chat", "parse_extensions", "prepare_world_entries", "run_extensions", "world_entries"]

#: the regex script ST-Prompt-Template installs to hide the chat's ``<% %>`` from generation
#: (``filter_message_enabled``; prompt only, user and assistant messages)
_FILTER = re.compile(r"<%(?!%)([\s\S]*?)(?<!%)%>")

def world_entries(name: str, entries: Mapping[str, Any] | Sequence[Any], expand: Callable[[str], str]
                  ) -> list[WorldEntry]:
    """A world book's entries (SillyTavern's world-file ``entries``) as ``getwi`` reads them: decorators removed,
    SillyTavern's macros expanded by ``expand``."""
    rows = []
    for raw in (entries.values() if isinstance(entries, Mapping) else entries):
        if not isinstance(raw, Mapping):
            continue
        _, content = split_decorators(str(raw.get("content") or ""))
        uid = raw.get("uid", 0)
        rows.append(WorldEntry(name, int(uid) if isinstance(uid, (int, float, str)) and str(uid).lstrip("-").isdigit()
                               else 0, str(raw.get("comment") or ""), expand(content) if "{{" in content else content))
    return rows


@dataclass
class ExtensionsResult:
    """The final messages after the extensions, what they warned, wrote and read."""

    contents: list[str]
    warnings: list[Diagnostic]
    variables_patch: dict[str, list[dict[str, Any]]]
    reads: list[dict[str, Any]]
    #: per message: whether its templates were evaluated (False: none, or it failed and was sent as it was)
    evaluated: list[bool]
    #: with ``@INJECT`` entries (``inject_loader_enabled``): every message after the injections, ``(role, content)``
    injected: list[tuple[str, str]] | None = None
    #: the variables as the templates left them (``None``: no template ran)
    variables_after: StVariables | None = None
    #: the marked evaluation (``marks=True``) only: per message, the ranges its templates produced
    spans: list[list[tuple[int, int, dict[str, Any]]] | None] | None = None


def run_extensions(
    messages: Sequence[Mapping[str, Any]],
    *,
    settings: ExtensionSettings,
    variables: StVariables,
    books: Mapping[str, Sequence[WorldEntry]] | None = None,
    default_book: str = "",
    context: PromptTemplateContext | None = None,
    limits: PromptTemplateLimits | None = None,
    now_ms: int | None = None,
    initial: Mapping[str, Any] | None = None,
    inject_entries: Sequence[InjectEntry] = (),
    marks: bool = False,
) -> ExtensionsResult:
    """Tavern Helper's pass, then ST-Prompt-Template's evaluation, over the final ``messages`` (``role`` and
    ``content`` each). Raises ``TemplateError`` when a template budget trips. ``marks``: the marked evaluation
    (:mod:`.st_template_marks`), for the ranges each template produced (``spans``)."""
    contents = [str(m.get("content") or "") for m in messages]
    reads: list[dict[str, Any]] = []
    if settings.tavern_helper:
        uses: list[MacroUse] = []
        contents = [expand_variable_macros(c, variables, uses) for c in contents]
        reads.extend({"kind": u.name, "scope": u.scope, "key": u.path} for u in uses)
    if not settings.templates_on:
        return ExtensionsResult(contents, [], {}, reads, [False] * len(contents))
    texts = [TemplateText(c, f"message {i} ({m.get('role')})") for i, (c, m) in enumerate(zip(contents, messages,
                                                                                              strict=True))]
    result = evaluate_prompt_templates(texts, variables=variables, books=books, default_book=default_book,
                                       context=context, limits=limits, now_ms=now_ms, initial_variables=initial,
                                       inject=inject_entries if settings.prompt_template.get("inject_loader_enabled")
                                       else (), roles=[str(m.get("role") or "system") for m in messages],
                                       marks=marks)
    return ExtensionsResult(result.texts, result.warnings, result.variables_patch, reads + result.reads,
                            result.evaluated, result.messages, result.variables_after, result.spans)


def filter_templates(text: str) -> str:
    """A chat message as generation sees it with the extension's message filter on: every ``<% %>`` removed."""
    return _FILTER.sub("", text) if "<%" in text else text


@dataclass
class ChatLoad:
    """The chat as generation sees it after the extension's work when the chat loaded, and the variables then."""

    contents: list[str]
    variables: StVariables
    warnings: list[Diagnostic]
    reads: list[dict[str, Any]]


def load_chat(
    contents: Sequence[str],
    *,
    settings: ExtensionSettings,
    variables: StVariables,
    books: Mapping[str, Sequence[WorldEntry]] | None = None,
    default_book: str = "",
    context: PromptTemplateContext | None = None,
    limits: PromptTemplateLimits | None = None,
    now_ms: int | None = None,
) -> ChatLoad:
    """What ST-Prompt-Template does to the stored chat before a generation: it evaluates every message's templates
    when the chat is shown (writing their variables; with ``raw_message_evaluation_enabled`` the message keeps the
    result), and with ``filter_message_enabled`` hides what is left of ``<% %>`` from the prompt."""
    out = list(contents)
    pt = settings.prompt_template
    if not pt.get("enabled") or not any("<%" in c for c in out):
        return ChatLoad(out, variables, [], [])
    warnings: list[Diagnostic] = []
    reads: list[dict[str, Any]] = []
    if pt.get("render_enabled") or pt.get("raw_message_evaluation_enabled"):
        texts = [TemplateText(c, f"chat message {i}") for i, c in enumerate(out)]
        result = evaluate_prompt_templates(texts, variables=variables, books=books, default_book=default_book,
                                           context=context, limits=limits, now_ms=now_ms)
        warnings, reads = result.warnings, result.reads
        variables = result.variables_after or variables
        if pt.get("raw_message_evaluation_enabled"):
            out = result.texts
    if pt.get("filter_message_enabled"):
        out = [filter_templates(c) for c in out]
    return ChatLoad(out, variables, warnings, reads)


_SPECIAL_COMMENTS = ("[GENERATE:", "[RENDER:", "@INJECT", "[InitialVariables]")
_SPECIAL_DECORATORS = ("@@generate_after", "@@generate_before", "@@render_after", "@@render_before",
                       "@@initial_variables", "@@only_preload")


def _disabled(entry: Mapping[str, Any]) -> bool:
    """A world-file entry's ``disable``, or a card-book entry's ``enabled`` turned round."""
    if "disable" in entry:
        return bool(entry.get("disable"))
    return not entry.get("enabled", True)


def prepare_world_entries(
    entries: Sequence[Mapping[str, Any]],
    *,
    settings: ExtensionSettings,
    variables: StVariables,
    context: PromptTemplateContext | None = None,
    limits: PromptTemplateLimits | None = None,
    now_ms: int | None = None,
) -> tuple[list[Mapping[str, Any]], list[Diagnostic]]:
    """A book's entries as SillyTavern's world info gets them with ST-Prompt-Template on
    (``WORLDINFO_ENTRIES_LOADED``): its special entries taken out (``[GENERATE:*]``, ``[RENDER:*]``, ``@INJECT``,
    ``[InitialVariables]``, ``@@generate_*``, ``@@render_*``, ``@@initial_variables``, ``@@only_preload``), an
    enabled entry whose ``@@if`` condition is false taken out (all conditions evaluated in one VM), an enabled
    ``@@private`` entry's content wrapped in a function of its own. The entries are new objects; the given ones
    are not changed."""
    if not settings.prompt_template.get("enabled"):
        return list(entries), []
    kept: list[Mapping[str, Any]] = []
    conditions: list[tuple[int, str]] = []
    for entry in entries:
        content = str(entry.get("content") or "")
        comment = str(entry.get("comment") or "")
        decorators, _ = split_decorators(content)
        names = [d.split(" ", 1)[0] for d in decorators]
        if any(c in comment for c in _SPECIAL_COMMENTS) or any(n in _SPECIAL_DECORATORS for n in names):
            continue
        if not _disabled(entry):
            for line in decorators:
                if line.split(" ", 1)[0] == "@@if":
                    conditions.append((len(kept), line[4:].strip()))
                    break
            if "@@private" in names:
                entry = {**entry, "content": "<% (()=>{%>" + content + "<%})(); %>"}
        kept.append(entry)
    if not conditions:
        return kept, []
    texts = [TemplateText("<%- !!(" + cond + ") %>", f"@@if of world info entry {kept[i].get('comment') or i}")
             for i, cond in conditions]
    result = evaluate_prompt_templates(texts, variables=variables, context=context, limits=limits, now_ms=now_ms)
    dropped = {i for (i, _), text in zip(conditions, result.texts, strict=True) if text == "false"}
    return [e for i, e in enumerate(kept) if i not in dropped], result.warnings


def _merge_replacing_lists(dst: dict[str, Any], src: Mapping[str, Any]) -> None:
    for key, value in src.items():
        if isinstance(value, Mapping) and isinstance(dst.get(key), dict):
            _merge_replacing_lists(dst[key], value)
        else:
            dst[key] = json.loads(json.dumps(value))


def initial_variables(entries: Sequence[Mapping[str, Any]], *, settings: ExtensionSettings,
                      expand: Callable[[str], str] = lambda text: text) -> tuple[dict[str, Any], list[Diagnostic]]:
    """The extension's initial variables: the JSON objects of the ``[InitialVariables]`` / ``@@initial_variables``
    entries of the loaded books (disabled ones, with its default "special entries need to be disabled";
    ``@@always_enabled`` either way), merged in order (an array replaces). A content that is not a JSON object is
    skipped with a warning, as the extension skips it."""
    pt = settings.prompt_template
    out: dict[str, Any] = {}
    warnings: list[Diagnostic] = []
    if not pt.get("enabled") or not pt.get("preload_worldinfo_enabled"):
        return out, warnings
    for entry in entries:
        decorators, content = split_decorators(str(entry.get("content") or ""))
        names = [d.split(" ", 1)[0] for d in decorators]
        comment = str(entry.get("comment") or "")
        if _disabled(entry) != bool(pt.get("invert_enabled")) and "@@always_enabled" not in names:
            continue
        if not comment.startswith("[InitialVariables]") and "@@initial_variables" not in names:
            continue
        try:
            data = json.loads(expand(content) if "{{" in content else content)
        except ValueError as exc:
            warnings.append(Diagnostic("TEMPLATE_EXECUTION_FAILED", f"initial variables {comment!r} are not JSON: "
                                       f"{exc}; skipped", data={"entry": comment}))
            continue
        if not isinstance(data, dict):
            warnings.append(Diagnostic("TEMPLATE_EXECUTION_FAILED", f"initial variables {comment!r} are not a JSON "
                                       "object; skipped", data={"entry": comment}))
            continue
        _merge_replacing_lists(out, data)
    return out, warnings


def inject_entries(entries: Sequence[Mapping[str, Any]], *, world: str, settings: ExtensionSettings,
                   expand: Callable[[str], str] = lambda text: text, seed: int = 0) -> list[InjectEntry]:
    """A book's ``@INJECT`` entries as the extension's inject loader takes them: comment starting with ``@INJECT``,
    disabled (its default; ``@@always_enabled`` either way), not ``@@only_preload``; an entry with a trigger
    probability below 100 is drawn with a generator seeded by ``seed`` (the extension draws with ``Math.random``)."""
    import random

    pt = settings.prompt_template
    rng = random.Random(seed)
    out = []
    for entry in entries:
        comment = str(entry.get("comment") or "")
        decorators, content = split_decorators(str(entry.get("content") or ""))
        names = [d.split(" ", 1)[0] for d in decorators]
        if not comment.startswith("@INJECT") or "@@only_preload" in names:
            continue
        if _disabled(entry) != bool(pt.get("invert_enabled")) and "@@always_enabled" not in names:
            continue
        probability = entry.get("probability", 100)
        if entry.get("useProbability", True) and isinstance(probability, (int, float)) and probability < 100 \
                and rng.randrange(1, 101) > probability:
            continue
        uid = entry.get("uid", entry.get("id", 0))
        order = entry.get("order", entry.get("insertion_order", 100))
        out.append(InjectEntry(world, int(uid) if isinstance(uid, int) else 0, comment,
                               expand(content) if "{{" in content else content,
                               int(order) if isinstance(order, (int, float)) else 100))
    return out
