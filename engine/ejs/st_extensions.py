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
from dataclasses import dataclass, field, replace
from typing import Any

from ..errors import Diagnostic
from ..macros.st_extension_settings import PROMPT_TEMPLATE_SETTINGS, ExtensionSettings, load_steps, parse_extensions
from ..macros.st_variables import StVariables, copied_forward
from ..macros.tavern_helper import MacroUse, expand_variable_macros
from .st_prompt_template import (
    GenerateEntry,
    GeneratedPiece,
    GenerateSpec,
    InjectEntry,
    PromptTemplateContext,
    PromptTemplateLimits,
    TemplateMeter,
    TemplateText,
    WorldEntry,
    evaluate_prompt_templates,
    split_decorators,
)

__all__ = ["ChatLoad", "ExtensionSettings", "ExtensionsResult", "PROMPT_TEMPLATE_SETTINGS", "PreparedWorld",
           "activated_entry", "copied_forward", "filter_templates", "generate_entries", "initial_variables",
           "inject_entries", "load_chat", "load_steps", "parse_extensions", "prepare_world", "prepare_world_entries",
           "request_limits", "run_extensions", "world_entries"]

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
    #: with ``[GENERATE:*]`` entries: per message, its pieces, ``None`` for a message they left alone
    pieces: list[list[GeneratedPiece] | None] | None = None
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
    message_index: int | None = None,
    generate: GenerateSpec | None = None,
    marks: bool = False,
) -> ExtensionsResult:
    """Tavern Helper's pass, then ST-Prompt-Template's evaluation, over the final ``messages`` (``role`` and
    ``content`` each), with the generate loader's ``[GENERATE:*]`` entries when ``generate`` gives them. Raises
    ``TemplateError`` when a budget trips. ``marks``: the marked evaluation (:mod:`.st_template_marks`), for the
    ranges each template produced (``spans``)."""
    limits = limits or request_limits(settings)
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
                                       message_index=message_index, generate=generate, marks=marks)
    return ExtensionsResult(result.texts, result.warnings, result.variables_patch, reads + result.reads,
                            result.evaluated, result.messages, result.variables_after, result.pieces, result.spans)


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


#: a chat without templates has its message variables copied forward in Python (False: in the VM, the plain path
#: it must equal)
COPY_WITHOUT_VM = True


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
    flags: Sequence[tuple[bool, bool]] = (),
) -> ChatLoad:
    """What ST-Prompt-Template does to the stored chat before a generation: when the chat is shown it evaluates each
    shown message's templates (:func:`load_steps`) with that message's own variables as the message scope, in order
    (writing their variables; with ``raw_message_evaluation_enabled`` the message keeps the result), and with
    ``filter_message_enabled`` hides what is left of ``<% %>`` from the prompt. ``flags`` are an export's
    ``(is_ejs_processed, variables_initialized)`` per message (``StChat.template_flags``): a message shown before
    is not evaluated again (the extension evaluates it without writing), one initialised before takes no copy."""
    shown, initialized = [f[0] for f in flags], [f[1] for f in flags]
    limits = limits or request_limits(settings)
    out = list(contents)
    pt = settings.prompt_template
    if not pt.get("enabled"):
        return ChatLoad(out, variables, [], [])
    warnings: list[Diagnostic] = []
    reads: list[dict[str, Any]] = []
    steps = load_steps(out, settings)
    if steps and (not COPY_WITHOUT_VM or any("<%" in out[i] for i in steps)):
        from .st_prompt_template import evaluate_chat_templates

        texts = [TemplateText(c, f"chat message {i}") for i, c in enumerate(out)]
        result = evaluate_chat_templates(texts, steps=steps, variables=variables, books=books,
                                         default_book=default_book, context=context, limits=limits, now_ms=now_ms,
                                         shown=shown, initialized=initialized)
        warnings, reads = result.warnings, result.reads
        variables = result.variables_after or variables
        if pt.get("raw_message_evaluation_enabled"):
            out = result.texts
    elif steps:
        variables = replace(variables, messages=copied_forward(variables.messages, steps, initialized=initialized))
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
    """One book's entries as SillyTavern's world info gets them with ST-Prompt-Template on (:func:`prepare_world`
    for one book, without the generate loader)."""
    prepared = prepare_world([entries], settings=settings, variables=variables, context=context, limits=limits,
                             now_ms=now_ms)
    return prepared.books[0], prepared.warnings


@dataclass
class PreparedWorld:
    """The books as SillyTavern's world info gets them, and what the templates run before the scan left."""

    books: list[list[Mapping[str, Any]]]
    warnings: list[Diagnostic]
    #: the variables as those templates left them (``None``: none ran)
    variables: StVariables | None = None
    #: the ``[GENERATE:BEFORE]`` / ``@@generate_before`` output, entry by entry
    generate_before: list[GeneratedPiece] = field(default_factory=list)
    #: the entries ``activewi`` named before the scan: ``(world, uid, forced)`` each (see :func:`activated_entry`)
    activated: list[tuple[str, int, bool]] = field(default_factory=list)


@dataclass
class _PreJob:
    """One template the pre-scan run evaluates for an entry: its ``@@if`` condition (``if``), its preprocessed
    content (``content``), or one of its preprocessed keys (``key``: list ``field``, position ``index``)."""

    book: int
    kept: int
    kind: str
    text_index: int
    fallback: str = ""
    field: str = ""
    index: int = 0


@dataclass
class _Kept:
    """An entry kept for the scan, with its decorator lines and its content without them."""

    entry: Mapping[str, Any]
    decorators: list[str]
    clean: str


def prepare_world(
    books: Sequence[Sequence[Mapping[str, Any]]],
    *,
    settings: ExtensionSettings,
    variables: StVariables,
    context: PromptTemplateContext | None = None,
    limits: PromptTemplateLimits | None = None,
    now_ms: int | None = None,
    generate: GenerateSpec | None = None,
    getwi_books: Mapping[str, Sequence[WorldEntry]] | None = None,
    default_book: str = "",
    expand: Callable[[str], str] = lambda text: text,
    order: Sequence[int] | None = None,
) -> PreparedWorld:
    """The books' entries as SillyTavern's world info gets them with ST-Prompt-Template on
    (``WORLDINFO_ENTRIES_LOADED``), with what runs before the scan in one VM: ``generate`` (phase ``"before"``)
    evaluates the ``[GENERATE:BEFORE]`` entries first (the extension does it when generation starts); then, book
    by book in ``order`` (default: as given) and each book's entries last to first, as the extension walks them:

    * special entries taken out (``[GENERATE:*]``, ``[RENDER:*]``, ``@INJECT``, ``[InitialVariables]``,
      ``@@generate_*``, ``@@render_*``, ``@@initial_variables``, ``@@only_preload``);
    * an enabled entry whose ``@@if`` condition is false taken out;
    * an enabled ``@@preprocessing`` (or ``[Preprocessing]`` titled) entry evaluated now, so the scan sees its
      output: its content (decorators removed, SillyTavern's macros expanded by ``expand``; kept without its
      decorators when the template fails) and, as the extension does, each of its keys and optional filters
      replaced by its content evaluated again (without the macros; the key kept when that fails);
    * an enabled ``@@private`` entry (not preprocessed) wrapped in a function of its own.

    The entries are new objects; the given ones are not changed."""
    limits = limits or request_limits(settings)
    if not settings.prompt_template.get("enabled"):
        return PreparedWorld([list(b) for b in books], [])
    walks = [_kept_entries(entries) for entries in books]
    texts: list[TemplateText] = []
    jobs: list[_PreJob] = []
    for bi in (order if order is not None else range(len(books))):
        for ki in reversed(range(len(walks[bi]))):
            k = walks[bi][ki]
            if not _disabled(k.entry):
                _pre_jobs(bi, ki, k, texts, jobs, expand)
    kept_books = [[k.entry for k in walk] for walk in walks]
    if not jobs and (generate is None or not generate.entries):
        return PreparedWorld(kept_books, [])
    result = evaluate_prompt_templates(texts, variables=variables, books=getwi_books, default_book=default_book,
                                       context=context, limits=limits, now_ms=now_ms, generate=generate)
    return PreparedWorld(_applied(kept_books, jobs, texts, result), result.warnings, result.variables_after,
                         result.generate_before, result.activated)


def activated_entry(entry: Mapping[str, Any], forced: bool) -> dict[str, Any]:
    """An entry ``activewi`` named before the scan, as the extension adds it to the scan: its decorators removed,
    enabled; forced, a constant with no cooldown, delay, group or budget limit (and, as the extension writes it,
    ``delayUntilRecursion`` takes the entry's ``vectorized`` when not forced)."""
    _, clean = split_decorators(str(entry.get("content") or ""))
    out = {**entry, "content": clean.replace("@@dont_activate", "") if forced else clean, "disable": False}
    if "enabled" in entry:
        out["enabled"] = True
    out["delayUntilRecursion"] = False if forced else entry.get("vectorized", False)
    if forced:
        out.update(constant=True, cooldown=0, delay=0, vectorized=False, group="", ignoreBudget=True)
    return out


def _kept_entries(entries: Sequence[Mapping[str, Any]]) -> list[_Kept]:
    """A book's entries less the extension's special ones; ``@@private`` ones wrapped."""
    kept = []
    for entry in entries:
        content = str(entry.get("content") or "")
        comment = str(entry.get("comment") or "")
        decorators, clean = split_decorators(content)
        names = [d.split(" ", 1)[0] for d in decorators]
        if any(c in comment for c in _SPECIAL_COMMENTS) or any(n in _SPECIAL_DECORATORS for n in names):
            continue
        if not _disabled(entry) and "@@private" in names and not _preprocessing(comment, names):
            entry = {**entry, "content": "<% (()=>{%>" + content + "<%})(); %>"}
        kept.append(_Kept(entry, decorators, clean))
    return kept


def _applied(kept_books: list[list[Mapping[str, Any]]], jobs: Sequence[_PreJob], texts: Sequence[TemplateText],
             result: Any) -> list[list[Mapping[str, Any]]]:
    """The kept entries with the pre-scan results: false conditions dropped, preprocessed ones rewritten."""
    dropped: set[tuple[int, int]] = set()
    changed: dict[tuple[int, int], dict[str, Any]] = {}
    for job in jobs:
        text = result.texts[job.text_index]
        ok = result.evaluated[job.text_index] or "<%" not in texts[job.text_index].text
        if job.kind == "if":
            if ok and text == "false":
                dropped.add((job.book, job.kept))
            continue
        entry = changed.setdefault((job.book, job.kept), dict(kept_books[job.book][job.kept]))
        value = text if ok else job.fallback
        if job.kind == "content":
            entry["content"] = value
        else:
            entry[job.field] = [*entry[job.field]]
            entry[job.field][job.index] = value
    return [[changed.get((bi, ki), e) for ki, e in enumerate(kept) if (bi, ki) not in dropped]
            for bi, kept in enumerate(kept_books)]


def _preprocessing(comment: str, names: Sequence[str]) -> bool:
    return "[Preprocessing]" in comment or "@@preprocessing" in names


def _pre_jobs(bi: int, ki: int, kept: _Kept, texts: list[TemplateText], jobs: list[_PreJob],
              expand: Callable[[str], str]) -> None:
    """The pre-scan templates of one enabled entry: its ``@@if`` condition, then (``@@preprocessing``) its content
    and each key."""
    entry, clean = kept.entry, kept.clean
    comment = str(entry.get("comment") or "")
    label = f"world info entry {comment or entry.get('uid', ki)}"
    names = [d.split(" ", 1)[0] for d in kept.decorators]
    for line in kept.decorators:
        if line.split(" ", 1)[0] == "@@if":
            jobs.append(_PreJob(bi, ki, "if", len(texts)))
            texts.append(TemplateText("<%- !!(" + line[4:].strip() + ") %>", f"@@if of {label}"))
            break
    if not _preprocessing(comment, names):
        return
    jobs.append(_PreJob(bi, ki, "content", len(texts), fallback=clean))
    texts.append(TemplateText(expand(clean) if "{{" in clean else clean, f"preprocessing of {label}"))
    for name in ("key", "keysecondary", "keys", "secondary_keys"):
        for i, key in enumerate(entry.get(name) or []):
            jobs.append(_PreJob(bi, ki, "key", len(texts), fallback=str(key), field=name, index=i))
            texts.append(TemplateText(clean, f"preprocessing of {label} key {key}"))


def generate_entries(
    entries: Sequence[Mapping[str, Any]],
    *,
    world: str,
    settings: ExtensionSettings,
    expand: Callable[[str], str] = lambda text: text,
    vectorized: Callable[[Mapping[str, Any]], Any] = lambda entry: entry.get("vectorized"),
) -> list[GenerateEntry]:
    """A book's entries the extension's generate loader may take (``generate_loader_enabled``): comment starting
    with ``[GENERATE:`` or a ``@@generate_before`` / ``@@generate_after`` decorator line; disabled (its default
    ``invert_enabled``; ``@@always_enabled`` either way); not ``@@only_preload``; ``vectorized`` false (the loader
    asks for non-vectorized entries, and an entry without the field is not one: ``vectorized`` says what the
    entry as SillyTavern loaded it holds). Content and keys get SillyTavern's macros (``expand``)."""
    pt = settings.prompt_template
    if not pt.get("enabled") or not pt.get("generate_loader_enabled"):
        return []
    out = []
    for entry in entries:
        comment = str(entry.get("comment") or "")
        decorators, content = split_decorators(str(entry.get("content") or ""))
        names = [d.split(" ", 1)[0] for d in decorators]
        if not comment.startswith("[GENERATE:") and not any(n in ("@@generate_before", "@@generate_after")
                                                                for n in names):
            continue
        if (_disabled(entry) != bool(pt.get("invert_enabled")) and "@@always_enabled" not in names) \
                or "@@only_preload" in names or vectorized(entry) is not False:
            continue
        out.append(_generate_entry(entry, world, comment, decorators, content, expand))
    return out


def _number(value: Any, default: float) -> float:
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) else default


def _generate_entry(entry: Mapping[str, Any], world: str, comment: str, decorators: list[str], content: str,
                    expand: Callable[[str], str]) -> GenerateEntry:
    def keys(name: str, alt: str) -> tuple[str, ...]:
        raw = entry.get(name, entry.get(alt)) or []
        return tuple(expand(str(k)) if "{{" in str(k) else str(k) for k in raw)

    condition = next((d[4:].strip() for d in decorators if d.split(" ", 1)[0] == "@@if"), None)
    uid = entry.get("uid", entry.get("id", 0))
    optional = {k: entry.get(k) if isinstance(entry.get(k), bool) else None
                for k in ("useGroupScoring", "caseSensitive", "matchWholeWords")}
    return GenerateEntry(
        world, int(uid) if isinstance(uid, (int, float)) else 0, comment,
        expand(content) if "{{" in content else content, tuple(decorators), keys("key", "keys"),
        keys("keysecondary", "secondary_keys"), bool(entry.get("selective", True)),
        int(_number(entry.get("selectiveLogic"), 0)), bool(entry.get("constant")), _disabled(entry),
        _number(entry.get("probability"), 100), bool(entry.get("useProbability", True)),
        str(entry.get("group") or ""), bool(entry.get("groupOverride")), _number(entry.get("groupWeight"), 100),
        optional["useGroupScoring"], optional["caseSensitive"], optional["matchWholeWords"],
        _number(entry.get("order", entry.get("insertion_order")), 100), int(_number(entry.get("position"), 0)),
        int(_number(entry.get("depth"), 4)), condition)


def request_limits(settings: ExtensionSettings, meter: TemplateMeter | None = None) -> PromptTemplateLimits:
    """The budgets the request's settings give (``time_limit``, ``template_time_limit``: CPU seconds); with
    ``meter``, ``time_limit`` is shared by every evaluation charged to it (one request's VMs)."""
    return PromptTemplateLimits(time_ms=settings.time_limit * 1000.0,
                                template_time_ms=settings.template_time_limit * 1000.0, meter=meter)



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
