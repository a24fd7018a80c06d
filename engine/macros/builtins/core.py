"""Core macros: names, whitespace, ``trim``, comments, ``reverse``, ``if``/``else``, env values."""

from __future__ import annotations

import re
from operator import attrgetter
from collections.abc import Callable, Sequence
from typing import Any

from ...errors import TemplateError
from ..evaluator import ELSE_MARKER, MacroCall, RenderState, dedent_trim, overlaps, post_process
from ..parser import MacroNode, document_parse
from ..plan import level_runner
from ..registry import MacroRegistry, args_only, context_handler
from ..variables import JS_WHITESPACE, is_falsy_text, js_string

__all__ = ["MAX_REPEAT", "register"]

#: ``{{newline::N}}`` / ``{{space::N}}`` beyond this stay as written (``MACRO_REPEAT_LIMIT``).
MAX_REPEAT = 10_000

_FALSY = ("false", "off", "0")  # ``is_falsy_text``'s words
_VAR_REF = re.compile(r"([.$])([a-zA-Z](?:[a-zA-Z0-9_-]*[a-zA-Z0-9_])?)")


def _repeat(call: MacroCall, unit: str) -> str:
    count_text = call.arg(0, "1")
    digits = count_text.lstrip("-").lstrip("0") or "0"
    if len(digits) > 6 or int(digits) > MAX_REPEAT:
        if count_text.startswith("-"):
            raise ValueError(f"Invalid count value: {count_text}")
        raise TemplateError(
            f"{{{{{call.name}}}}} asks for {count_text[:20]} repetitions; the limit is {MAX_REPEAT}",
            code="MACRO_REPEAT_LIMIT",
        )
    count = int(count_text)
    if count < 0:
        raise ValueError(f"Invalid count value: {count}")  # JavaScript's repeat() RangeError
    return unit * count


def _group(call: MacroCall) -> str:
    ctx = call.ctx
    return ", ".join(ctx.group) if ctx.group else ctx.char


def _group_not_muted(call: MacroCall) -> str:
    ctx = call.ctx
    if not ctx.group:
        return ctx.char
    return ", ".join(n for n in ctx.group if n not in ctx.muted)


def _not_char(call: MacroCall) -> str:
    """Everyone but the speaker: the user in a one-character chat; in a group, the members neither
    muted nor speaking (SillyTavern 1.18's ``getGroupValue`` leaves the user and the muted out there)."""
    ctx = call.ctx
    if not ctx.group:
        return ctx.user
    muted = set(ctx.muted)
    return ", ".join(n for n in ctx.group if n != ctx.char and n not in muted)


def _trim(call: MacroCall) -> str:
    if call.scoped or call.args:
        return call.args[-1] if call.scoped else call.args[0]
    return "{{trim}}"


def _reverse(call: MacroCall) -> str:
    return call.args[0][::-1]


def _original(call: MacroCall) -> str:
    state = call.state
    if state.inputs.ctx.original is None:
        raise LookupError("no original text was supplied")
    if state.original_used:
        return ""
    state.original_used = True
    return state.inputs.ctx.original


def _banned(call: MacroCall) -> str:
    word = call.args[0]
    # ST strips a leading and a trailing quote independently (/^"|"$/g)
    if word.startswith('"'):
        word = word[1:]
    if word.endswith('"'):
        word = word[:-1]
    banned = call.state.inputs.ctx.extras.get("_banned_words")
    if isinstance(banned, list):
        banned.append(word)
    return ""


def _outlet(call: MacroCall) -> str:
    return str(call.ctx.outlets.get(call.args[0], ""))


def _has_extension(call: MacroCall) -> bool:
    return call.args[0] in call.ctx.extensions


def _limit(key: str) -> Any:
    def handler(call: MacroCall) -> str:
        value = call.ctx.limits.get(key)
        return "" if value is None else js_string(value)

    return handler


def _split_else(
    call: MacroCall, lo: int, hi: int, items: Sequence[Any] | None
) -> tuple[tuple[int, int, Sequence[Any] | None], tuple[int, int, Sequence[Any] | None] | None]:
    """Split raw content at its first top-level ``{{else}}`` (nested scoped ``if``s skipped).

    Returns each branch's span and, when the content's parse is known, the branch's items.
    """
    if items is not None:
        return _split_memo(call.state, lo, hi, items)
    state = call.state
    cache = state.parse_cache
    seen = cache.get((lo, hi)) if cache is not None else None
    if seen is not None and not seen[2]:
        parsed, clean, untrusted = seen[0], False, seen[3]
    else:
        parsed, diags, clean, untrusted = document_parse(state.source, lo, hi, shortcuts=state.inputs.shortcuts)
        if not clean and cache is not None:
            # an unclean content without an ``{{else}}`` is evaluated as one level, and that
            # level re-parses exactly this span: the evaluator's memo hands it this parse (a
            # clean parse is not shared: its slices would change which levels get plans)
            cache[(lo, hi)] = (tuple(parsed), tuple(diags), clean, untrusted)
    then, other = _split_known(lo, hi, parsed)
    if clean:
        return then, other
    # an unclean parse finds the separator; a branch that recovery touched is re-parsed when
    # evaluated, any other keeps its slice (it is what a parse of the branch alone finds)
    return _unless_recovered(then, untrusted), _unless_recovered(other, untrusted) if other is not None else None


def _unless_recovered(
    branch: tuple[int, int, Sequence[Any] | None], untrusted: Sequence[tuple[int, int]]
) -> tuple[int, int, Sequence[Any] | None]:
    """``branch`` with its items dropped when one of the ``untrusted`` ranges touches it."""
    return (branch[0], branch[1], None) if overlaps(untrusted, branch[0], branch[1]) else branch


def _split_memo(
    state: RenderState, lo: int, hi: int, items: Sequence[Any]
) -> tuple[tuple[int, int, Sequence[Any] | None], tuple[int, int, Sequence[Any] | None] | None]:
    """:func:`_split_known`, memoised in the template's memo.

    The same content splits the same way every render; keeping the branch slices also keeps
    their identity, so a compiled template's branches get plans (see ``..plan``).
    """
    splits = state.level(items).splits
    found = splits.get((lo, hi))
    if found is None:
        found = splits[(lo, hi)] = _split_known(lo, hi, items)
    return found  # type: ignore[no-any-return]


def _split_known(
    lo: int, hi: int, items: Sequence[Any]
) -> tuple[tuple[int, int, Sequence[Any] | None], tuple[int, int, Sequence[Any] | None] | None]:
    """:func:`_split_else` of content whose parse is known."""
    depth = 0
    for idx, item in enumerate(items):
        if type(item) is not MacroNode or item.var is not None:
            continue
        key = item.key
        if key == "if":
            if item.closing:
                depth -= 1
            elif len(item.args) == 1:
                depth += 1
        elif item.name == "else" and not item.closing and not item.args and depth <= 0:
            return (lo, item.start, items[:idx]), (item.end, hi, items[idx + 1 :])
    return (lo, hi, items), None


def _condition_text(state: RenderState, cond: str, ref: re.Match[str] | None, offset: int, node: Any, depth: int) -> str:
    """The text an ``{{if}}`` condition is judged on: a ``.var``/``$var`` reference reads the
    variable; a bare macro name with no required arguments runs that macro, as SillyTavern does
    ("{{name}}" through the whole engine, post-processors included); anything else is itself.
    Shared by the evaluator's ``{{if}}`` and the planned one, so both judge alike."""
    if ref:
        store = state.local if ref.group(1) == "." else state.glob
        return js_string(store.get(ref.group(2)))
    definition = state._defs.get(cond.lower()) if cond else None  # ``registry.get``
    if definition is not None and definition.min_args == 0 and not definition.delay_args:
        sub = MacroCall(cond, [], "", False, offset, node, state, depth, [])
        try:
            return post_process(js_string(definition.handler(sub)))
        except TemplateError:
            raise
        except Exception:  # the macro stays as written, which is truthy
            return "{{" + cond + "}}"
    return cond

def _if(call: MacroCall) -> str:
    state = call.state
    src = state.source
    cond_span, content_span = call.spans[0], call.spans[1]
    cond_items, content_items = (call.items + [None, None])[:2]
    inverted = False
    cond = ""
    if cond_span is not None:
        lo, hi = cond_span
        raw = src[lo:hi]
        stripped = raw.lstrip(JS_WHITESPACE)
        if stripped.startswith("!"):
            inverted = True
            rest = stripped[1:]
            lo = hi - len(rest.lstrip(JS_WHITESPACE))
            cond_items = None
        cond = call.evaluate(lo, hi, cond_items)
    cond = _condition_text(state, cond, _VAR_REF.fullmatch(cond), call.offset, call.node, call.depth)
    truthy = not is_falsy_text(cond)
    if inverted:
        truthy = not truthy
    if content_span is None:
        return ""
    then_branch, else_branch = _split_else(call, *content_span, content_items)
    branch = then_branch if truthy else else_branch
    if branch is None:
        return ""
    text = call.evaluate(*branch)
    return text if "#" in call.flags else dedent_trim(text)


def _bind_if(
    state: RenderState, m: MacroNode, spans: Sequence[tuple[int, int] | None], items: Sequence[Any]
) -> Callable[[RenderState, int], str] | None:
    """:func:`_if` for one planned ``{{if}}`` (see ``..plan``), or ``None`` to call it as usual.

    What depends on the template only is decided here: whether the condition is inverted and
    where it starts, the split at ``{{else}}``, and how each of the condition and the two
    branches is evaluated (:func:`..plan.level_runner`). What a render decides (the condition's
    value, its variable or macro lookup, the branch) is done as :func:`_if` does it.

    Must equal :func:`_if` (text, variables, diagnostics, draws, or the same error):
    ``tests/test_macros_plan_if.py``.
    """
    if len(spans) != 2 or len(items) != 2:
        return None
    src = state.source
    cond_span, content_span = spans[0], spans[1]
    cond_items, content_items = items[0], items[1]
    inverted = False
    cond_lo = cond_hi = 0
    cond_known: Sequence[Any] | None = None
    if cond_span is not None:
        lo, hi = cond_span
        stripped = src[lo:hi].lstrip(JS_WHITESPACE)
        if stripped.startswith("!"):
            inverted = True
            lo = hi - len(stripped[1:].lstrip(JS_WHITESPACE))
            cond_items = None
        cond_lo, cond_hi, cond_known = lo, hi, cond_items
    if content_span is None:
        branches: tuple[Any, Any] | None = None
    else:
        if content_items is None:
            return None
        then_branch, else_branch = _split_memo(state, content_span[0], content_span[1], content_items)
        branches = (then_branch, else_branch)
    keep = "#" in m.flags
    offset = m.start
    # depth -> [condition, then, else]: each a post-processed text, a callable giving the level's
    # raw output, or None (absent); a level still waiting for its plan holds a callable that
    # looks for it (and takes its place once found) before evaluating the level
    runners: dict[int, list[Any]] = {}

    def slot(st: RenderState, found: list[Any], index: int, span: tuple[int, int, Any], d1: int) -> Any:
        runner, done = level_runner(st, span[0], span[1], d1, span[2])
        if done:
            found[index] = runner = post_process(runner) if runner.__class__ is str else runner
            return runner
        evaluate = runner

        def pending(st: RenderState) -> Any:
            again, final = level_runner(st, span[0], span[1], d1, span[2])
            if final:
                found[index] = post_process(again) if again.__class__ is str else again
                return again if again.__class__ is str else again(st)
            return evaluate(st)

        return pending

    def resolve(st: RenderState, depth: int) -> list[Any]:
        d1 = depth + 1
        found: list[Any] = [None, None, None]
        for index, span in enumerate(
            (
                (cond_lo, cond_hi, cond_known) if cond_span is not None else None,
                branches[0] if branches is not None else None,
                branches[1] if branches is not None else None,
            )
        ):
            if span is not None:
                found[index] = slot(st, found, index, span, d1)
        runners[depth] = found
        return found

    def run(st: RenderState, depth: int) -> str:
        entry = runners.get(depth)
        if entry is None:
            entry = resolve(st, depth)
        cond_run, then_run, else_run = entry
        if cond_run is None:
            cond = ""
        elif cond_run.__class__ is str:
            cond = cond_run
        else:
            saved = st.content
            st.content = st.source  # as MacroCall.evaluate: nested levels see the pre-processed text
            try:
                cond = post_process(cond_run(st))
            finally:
                st.content = saved
        ref = _VAR_REF.fullmatch(cond) if cond and cond[0] in ".$" else None  # a reference starts so
        cond = _condition_text(st, cond, ref, offset, m, depth)
        # ``is_falsy_text``, inlined
        truthy = cond != "" and cond.strip(JS_WHITESPACE).lower() not in _FALSY
        if inverted:
            truthy = not truthy
        branch = then_run if truthy else else_run
        if branch is None:
            return ""
        if branch.__class__ is str:
            text = branch
        else:
            saved = st.content
            st.content = st.source
            try:
                text = post_process(branch(st))
            finally:
                st.content = saved
        if keep:
            return text
        # ``dedent_trim``: one line is just trimmed
        return text.strip(JS_WHITESPACE) if "\n" not in text else dedent_trim(text)

    return run


_if.bind_delayed = _bind_if  # type: ignore[attr-defined]


def _context_value(field: str) -> Any:
    """A handler returning one context field (a plan reads it directly)."""
    handler = context_handler(attrgetter(field))
    handler.context_attr = field  # type: ignore[attr-defined]  # a plan reads ``ctx.<field>`` itself
    return handler


def register(registry: MacroRegistry) -> None:
    r = registry.register
    r("user", _context_value("user"), description="the persona's name")
    r("char", _context_value("char"), description="the character's name")
    r("group", _group, aliases=("charIfNotGroup",), description="group members, or the character")
    r("groupNotMuted", _group_not_muted)
    r("notChar", _not_char)
    r("newline", args_only(lambda c: _repeat(c, "\n")), max_args=1, arg_types=("integer",))
    r("space", args_only(lambda c: _repeat(c, " ")), max_args=1, arg_types=("integer",))
    r("noop", args_only(lambda c: ""))
    r("trim", args_only(_trim), max_args=1)
    r("//", args_only(lambda c: ""), aliases=("comment",), max_args=None, strict=False)
    r("reverse", args_only(_reverse), min_args=1, max_args=1)
    r("if", _if, min_args=2, max_args=2, delay_args=True)
    r("else", args_only(lambda c: ELSE_MARKER))
    r("original", _original)
    r("input", _context_value("input"))
    r("isMobile", lambda c: c.ctx.is_mobile)
    r("model", _context_value("model"))
    r("banned", _banned, min_args=1, max_args=1)
    r("outlet", _outlet, min_args=1, max_args=1)
    r("hasExtension", _has_extension, min_args=1, max_args=1)
    # the Summarize extension (shipped and enabled in SillyTavern 1.18): the chat's current summary,
    # empty until one is written (context key ``summary``)
    r("summary", lambda c: str(c.ctx.extras.get("summary") or ""), description="the chat's summary (Summarize)")
    r("maxPrompt", _limit("max_prompt"), aliases=("maxPromptTokens",))
    r("maxContext", _limit("max_context"), aliases=("maxContextTokens",))
    r("maxResponse", _limit("max_response"), aliases=("maxResponseTokens",))
    r("lastGenerationType", _context_value("last_generation_type"))
