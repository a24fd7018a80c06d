"""Level plans: a parsed level flattened into literals and pre-bound macro calls.

A compiled template is rendered many times with the same parse, so most of what
:meth:`RenderState.evaluate` decides per item is the same every time: which gaps and plain
items are copied, which macros pair, which definition a name resolves to, which arguments are
literal text, whether their count and types fit. A plan makes those decisions once; running
it is a loop over literal strings and closures. Each closure does exactly what
``eval_macro`` would do for its node (same ``MacroCall``, same ``_call`` error handling and
output accounting), and anything the plan cannot bind exactly (unknown names, arity or type
mismatches, ``delay_args`` macros, nested arguments, shorthands, scoped pairs) is bound to
``eval_macro`` itself, so the result is identical by construction.

Must equal: :meth:`RenderState.evaluate` with plans switched off (``Shortcuts(plans=False)``):
text, variables, diagnostics and draws, or the same error. Proved by
``tests/test_macros_plan.py`` (conformance rows, generated texts, every output limit); the parts
inlined into the generated function by ``tests/test_macros_plan_bound.py``.

A plan is only built for a clean level, with no per-call dynamic macros, and for the registry
version it was built against (:meth:`RenderState.evaluate` checks all three).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
import keyword
from operator import attrgetter
from typing import Any, NamedTuple

from ..errors import TemplateError
from ..spans import Span
from .budget import CHECK_EVERY, check
from .evaluator import MAX_PRODUCED_CHARS, MAX_SCOPE_DEPTH, MacroCall, Pairing, RenderState
from .parser import MacroNode, Plain
from .variables import VariableStore, js_string

__all__ = ["LevelPlan", "build_plan"]

Part = Callable[[RenderState, int], str]

#: plans with at most this many parts run as one generated function (larger ones loop)
_STRAIGHT_PARTS = 400
#: runs of a plan through the loop before it is compiled into one generated function: compiling
#: costs ~0.5 ms (several hundred runs of a small level), which only a level rendered again and
#: again pays back; a template rendered twice (a fuzz check's determinism re-render, a one-off
#: CLI request) never compiles anything
_STRAIGHT_AFTER = 2
#: calls a level of constants and variables needs for its output to be kept (:meth:`LevelPlan._memoised`):
#: a shorter one (an ``{{if}}`` condition, a one-line branch) runs in about the time reading its
#: inputs and comparing them takes (``benchmarks/bench_macros.py``: the 3 KB preset x10)
_KEPT_MIN_CALLS = 8


class LevelInputs(NamedTuple):
    """What a level made of literals, constants, context reads and literal variable reads and
    writes depends on (:meth:`LevelPlan._inputs`)."""

    #: context fields it reads (``MacroContext`` attribute names)
    fields: tuple[str, ...]
    #: ``(local?, name)`` of the variables it reads before writing them itself
    reads: tuple[tuple[bool, str], ...]
    #: ``(local?, name, value)`` of its literal writes, in order
    writes: tuple[tuple[bool, str, str], ...]
    #: literals and context reads only (no constants, no variables)
    fields_only: bool


class LevelPlan:
    """One level's literals (strings) and bound calls, with what the output-size check needs.

    ``meta`` holds, per part, the plain items a literal covers as ``(length, item)`` (only
    plain items count towards the evaluator's output limit, skipped gaps do not) or the node a
    call renders; ``counted`` is the total the literals count.
    """

    __slots__ = ("counted", "memoised", "meta", "parts", "run", "runner", "warm")

    def __init__(self, parts: list[Any], meta: list[Any]) -> None:
        self.parts = tuple(parts)
        self.meta = tuple(meta)
        self.counted = sum(length for m in meta if type(m) is tuple for length, _ in m)
        inputs = self._inputs()
        #: the level's own run (the loop, then its generated function once warm); ``run`` is
        #: this, or this behind the kept output of :meth:`_memoised`
        self.runner: Callable[[RenderState, int], str]
        #: whether :attr:`runner` is final (:meth:`_warming` replaces its loop on the second
        #: run): the kept output of :meth:`_memoised` is taken from then on, so a level rendered
        #: again and again is compiled before its output is kept, as one without inputs is
        self.warm = True
        if inputs is not None and inputs.fields_only:
            # the run only matters when the fields change: the loop, which costs nothing to
            # build, rather than a generated function (compiling one took 150 ms for a 14 KB
            # prompt of prose with {{user}} and {{char}})
            self.runner = self._looped()
        else:
            # variables change from render to render more often than names do: a changed value
            # runs the level, through its generated function once it is warm
            self.runner = self._warming() if len(parts) <= _STRAIGHT_PARTS else self._looped()
        self.memoised = inputs is not None
        self.run = self._memoised(inputs) if inputs is not None else self.runner

    def _install(self, run: Callable[[RenderState, int], str]) -> None:
        """Put the compiled ``run`` where callers read the level's run."""
        self.runner = run
        self.warm = True
        if not self.memoised:
            self.run = run

    def _warming(self) -> Callable[[RenderState, int], str]:
        """The loop for the first :data:`_STRAIGHT_AFTER` runs, then :meth:`_straight` in its place
        (:meth:`_install`).

        Both give the same output (see :meth:`_straight`); the switch only moves the cost of
        generating and compiling the function to the level's third run. Callers read ``run``
        afresh each time; one that kept this function (an enclosing plan's bound call) is passed
        on to the compiled one, which is built once.
        """
        if _STRAIGHT_AFTER <= 0:
            return self._straight()
        looped = self._looped()
        runs = [0]
        straight: list[Callable[[RenderState, int], str]] = []
        self.warm = False

        def warming(state: RenderState, depth: int) -> str:
            if straight:  # a caller that kept this function (an enclosing plan's bound call)
                return straight[0](state, depth)
            runs[0] += 1
            if runs[0] >= _STRAIGHT_AFTER:
                straight.append(self._straight())
                self._install(straight[0])
            return looped(state, depth)

        return warming

    def _inputs(self) -> LevelInputs | None:
        """What the level's output depends on, when it is made of literals, constants, context
        field reads and literal variable reads and writes only (else ``None``)."""
        fields: list[str] = []
        reads: list[tuple[bool, str]] = []
        writes: list[tuple[bool, str, str]] = []
        written: set[tuple[bool, str]] = set()
        constants = False
        for part in self.parts:
            if part.__class__ is str:
                continue
            if hasattr(part, "constant_text"):
                constants = True
                continue
            attr = getattr(part, "context_attr", None)
            if attr is not None and getattr(part, "context_read", None) is not None:
                fields.append(attr)
            elif hasattr(part, "variable_name"):
                read = (part.variable_local, part.variable_name)
                if read not in written:  # a read after the level's own write reads that write
                    reads.append(read)
            elif hasattr(part, "variable_set"):
                name, value = part.variable_set
                writes.append((part.variable_local, name, value))
                written.add((part.variable_local, name))
            else:
                return None
        if not fields and not reads and not writes:
            return None  # literals and constants only: nothing to key on, nothing saved
        fields_only = not constants and not reads and not writes
        calls = len(self.parts) - sum(1 for part in self.parts if part.__class__ is str)
        if not fields_only and calls < _KEPT_MIN_CALLS:
            return None  # running a short level costs what reading its inputs costs
        return LevelInputs(tuple(dict.fromkeys(fields)), tuple(dict.fromkeys(reads)), tuple(writes), fields_only)

    def _memoised(self, inputs: LevelInputs) -> Callable[[RenderState, int], str]:
        """:attr:`runner` with its last output kept, for a level whose output is a function of its
        :class:`LevelInputs` (a preset prompt of prose, names, comments, ``{{trim}}`` and
        literal ``{{setvar}}``/``{{getvar}}``).

        When the context fields it reads are the same strings as last time and the variables it
        reads before writing them give the same text, the output is the same string: the render
        only reads those inputs, makes the level's writes again (in order) and accounts for the
        output the calls produced. This is what makes a cached 30 KB prompt cost what its few
        field reads cost instead of one step per macro (issue 14: 367 us against Jinja2's 97 us).

        The kept output is used only when nothing could differ: the same inputs, the same
        output limit, no diagnostic raised by the run that was kept, the render's produced total
        staying within its limit (then the level's own checks pass exactly as they did), and
        plain variable stores (a traced render's stores log each read, so they run the level).
        """
        fields, reads, writes, _fields_only = inputs
        getter = attrgetter(*fields) if fields else None
        single = len(fields) == 1
        uses_store = bool(reads or writes)
        # the writes again, as dict updates (sequential sets: the same values and key order;
        # names are never empty, see :func:`_bind`), one per store
        local_writes = [(name, value) for is_local, name, value in writes if is_local]
        glob_writes = [(name, value) for is_local, name, value in writes if not is_local]
        kept: list[Any] = [None]  # (values, output, produced, max_output), replaced whole

        def memoised(state: RenderState, depth: int) -> str:
            inputs = state.inputs
            local, glob = state.local, state.glob
            if uses_store and (local.__class__ is not VariableStore or glob.__class__ is not VariableStore):
                return self.runner(state, depth)
            try:
                values: tuple[Any, ...] = () if getter is None else getter(inputs.ctx)
                if single:
                    values = (values,)
                if reads:
                    values += tuple([js_string((local if is_local else glob).get(name)) for is_local, name in reads])
            except Exception:  # the run reports it
                return self.runner(state, depth)
            last = kept[0]
            if (
                last is not None
                and last[3] == inputs.max_output
                and last[0] == values
                and state.produced + last[2] <= MAX_PRODUCED_CHARS
            ):
                if local_writes:
                    local.set_all(local_writes)
                if glob_writes:
                    glob.set_all(glob_writes)
                state.produced += last[2]
                return last[1]  # type: ignore[no-any-return]
            before = state.produced
            warned = state.diagnostic_count()
            out = self.runner(state, depth)
            if self.warm and state.diagnostic_count() == warned and all(v.__class__ is str for v in values):
                kept[0] = (values, out, state.produced - before, inputs.max_output)
            return out

        return memoised

    def _looped(self) -> Callable[[RenderState, int], str]:
        """:meth:`_loop` with context-field reads done in the loop itself (plans too long to
        unroll: generating and compiling one function grows faster than the plan does)."""
        ops: list[tuple[int, Any, Any]] = []
        for part in self.parts:
            if part.__class__ is str:
                ops.append((0, part, None))
                continue
            attr = getattr(part, "context_attr", None)
            if attr is not None and getattr(part, "context_read", None) is not None:
                ops.append((1, attrgetter(attr), part))
            else:
                ops.append((2, part, None))
        steps = tuple(ops)
        run_checked = self._run_checked
        counted = self.counted

        def looped(state: RenderState, depth: int) -> str:
            out: list[str] = []
            append = out.append
            max_output = state.inputs.max_output
            slack = max_output - counted
            size = 0
            ctx = state.inputs.ctx
            ticks = CHECK_EVERY
            for kind, a, part in steps:
                if kind == 0:
                    append(a)
                    continue
                ticks -= 1
                if not ticks:
                    ticks = CHECK_EVERY
                    check(0, state.source)  # the CPU budget (see .budget; a part knows no offset)
                if kind == 1:
                    try:
                        piece = a(ctx)
                    except Exception:  # the part's own read reports it as the evaluator does
                        piece = part(state, depth)
                    else:
                        if piece.__class__ is not str:
                            piece = js_string(piece)
                        produced = state.produced + len(piece)
                        state.produced = produced
                        if produced > MAX_PRODUCED_CHARS or len(piece) > max_output:
                            _too_much(state)
                else:
                    piece = a(state, depth)
                append(piece)
                size += len(piece)
                if size > slack:
                    return run_checked(state, depth, out)
            return "".join(out)

        return looped

    def _straight(self) -> Callable[[RenderState, int], str]:
        """:meth:`_loop` unrolled into one function (no per-part dispatch or appends).

        Generated from the plan's shape only: literals and calls are passed in as the function's
        globals (``l3``, ``c4``), never spliced into its source, so no template text is ever
        compiled as code.

        The output accounting of the parts it inlines (context reads, variable reads and
        writes, constants, bound draws) is kept in locals: ``acc`` is what they produced since
        ``state.produced`` was last written (``base``), and as long as it stays within ``cap``
        neither the render's total nor this level's size can pass a limit. Past ``cap`` the
        exact checks decide (the same error, or the exact per-item walk); ``state.produced`` is
        written before every call that reads it or may raise, so nothing outside ever sees it
        stale.

        Must equal :meth:`_loop` (and so the evaluator). Proved by ``tests/test_macros_plan.py``:
        ``test_plans_equal_the_evaluator_on_macro_templates`` runs this function and
        ``test_looping_plans_equal_the_evaluator_on_macro_templates`` the loop on the same texts;
        ``test_the_output_limit_is_raised_at_the_same_item_from_plans`` the accounting.
        """
        names: dict[str, Any] = {
            "_checked": self._run_checked,
            "_too_much": _too_much,
            "js_string": js_string,
            "MAX_PRODUCED": MAX_PRODUCED_CHARS,
        }
        lines = [
            "def run(state, depth):",
            "    max_output = state.inputs.max_output",
            "    cap = slack = max_output - counted",
            "    size = acc = 0",
            "    base = state.produced",
            "    if base > MAX_PRODUCED - slack:",
            "        cap = MAX_PRODUCED - base",
        ]
        order: list[str] = []
        # the rare exits to ``_checked`` hand over the pieces so far: gathered from the function's
        # locals by position (``_done(locals(), n)``) rather than listed in each exit's source,
        # which made the generated code (and its compiling) grow with the square of the parts
        names["_done"] = _pieces_so_far(order, names)

        def gathered() -> str:
            return f"_done(locals(), {len(order)})"

        def over(p: str, indent: str) -> list[str]:
            # ``acc`` passed ``cap``: the evaluator's checks, in its order
            return [
                f"{indent}if acc > cap:",
                f"{indent}    state.produced = base + acc",
                f"{indent}    if base + acc > MAX_PRODUCED or len({p}) > max_output:",
                f"{indent}        _too_much(state)",
                f"{indent}    return _checked(state, depth, {gathered()})",
            ]

        def called(p: str, call: str, indent: str) -> list[str]:
            # a call that does its own output accounting (it reads and writes state.produced)
            return [
                f"{indent}state.produced = base + acc",
                f"{indent}{p} = {call}",
                f"{indent}size += acc + len({p})",
                f"{indent}base = state.produced",
                f"{indent}acc = 0",
                f"{indent}if size > slack:",
                f"{indent}    return _checked(state, depth, {gathered()})",
                f"{indent}cap = MAX_PRODUCED - base",
                f"{indent}if slack - size < cap:",
                f"{indent}    cap = slack - size",
            ]

        uses_local = uses_glob = uses_ctx = False
        for index, part in enumerate(self.parts):
            p = f"p{index}"
            if part.__class__ is str:
                names[f"l{index}"] = part
                order.append(f"l{index}")
                continue
            names[f"c{index}"] = part
            order.append(p)
            read = getattr(part, "context_read", None)
            if read is not None:
                # the body of ``_bind``'s ``read``, inlined (its fallback reports a failure)
                names[f"r{index}"] = read
                names[f"f{index}"] = part.fallback
                uses_ctx = True
                attr = getattr(part, "context_attr", None)
                card = getattr(part, "card_field", None)
                if attr is not None and attr.isidentifier() and not keyword.iskeyword(attr):
                    # ``attrgetter(attr)(ctx)`` as an attribute read (the name is a context
                    # field's, from the handler's definition, never from the template)
                    lines += ["    try:", f"        {p} = ctx.{attr}", "    except Exception:"]
                elif card is not None:
                    # a card field whose text the names-only substitution leaves alone is the
                    # field itself (``context_card_text``); anything else takes the full read
                    names[f"cf{index}"] = card
                    lines += [
                        "    try:",
                        f"        {p} = ctx.character.get(cf{index})",
                        f"        if {p}.__class__ is not str or '\\r' in {p} or '{{' in {p} or '<' in {p}:",
                        f"            {p} = r{index}(ctx)",
                        "    except Exception:",
                    ]
                else:
                    lines += ["    try:", f"        {p} = r{index}(ctx)", "    except Exception:"]
                lines += called(p, f"f{index}(state, depth)", "        ")
                lines += [
                    "    else:",
                    f"        if {p}.__class__ is not str:",
                    "            state.produced = base + acc",
                    f"            {p} = js_string({p})",
                    f"        acc += len({p})",
                ]
                lines += over(p, "        ")
            elif hasattr(part, "variable_name"):
                # ``_var_get``'s part inlined (a failing read goes through its fallback)
                names[f"n{index}"] = part.variable_name
                names[f"f{index}"] = part.fallback
                store = "local" if part.variable_local else "glob"
                uses_local |= part.variable_local
                uses_glob |= not part.variable_local
                lines += ["    try:", f"        {p} = js_string({store}_get(n{index}))", "    except Exception:"]
                lines += called(p, f"f{index}(state, depth)", "        ")
                lines += ["    else:", f"        acc += len({p})"]
                lines += over(p, "        ")
            elif hasattr(part, "variable_set"):
                # ``_var_set``'s part inlined: a literal name (never empty) and value, no output
                names[f"sn{index}"], names[f"sv{index}"] = part.variable_set
                store = "local" if part.variable_local else "glob"
                lines.append(f"    state.{store}.set(sn{index}, sv{index})")
                lines.append(f"    {p} = ''")
            elif hasattr(part, "constant_text"):
                # ``_constant``'s part inlined: its text and ``_emit``'s accounting
                names[f"k{index}"] = part.constant_text
                lines.append(f"    {p} = k{index}")
                if part.constant_text:
                    lines.append(f"    acc += {len(part.constant_text)}")
                    lines += over(p, "    ")
            elif hasattr(part, "bound_run"):
                # ``_bound``'s part inlined (the bound run never touches state.produced)
                names[f"b{index}"] = part.bound_run
                lines += ["    state.produced = base + acc", f"    {p} = b{index}(state)", f"    acc += len({p})"]
                lines += over(p, "    ")
            else:
                lines += called(p, f"c{index}(state, depth)", "    ")
        lines.append("    state.produced = base + acc")
        if len(order) == 1:
            lines.append(f"    return {order[0]}")  # one part's output is a str already
        else:
            lines.append(f"    return ''.join(({', '.join(order)}))")
        if uses_local:
            lines.insert(1, "    local_get = state.local.get")
        if uses_glob:
            lines.insert(1, "    glob_get = state.glob.get")
        if uses_ctx:
            lines.insert(1, "    ctx = state.inputs.ctx")
        names["counted"] = self.counted
        namespace: dict[str, Any] = {}
        exec("\n".join(lines), names, namespace)  # noqa: S102 - names only, see docstring
        return namespace["run"]  # type: ignore[no-any-return]

    def _loop(self, state: RenderState, depth: int) -> str:
        out: list[str] = []
        append = out.append
        # the evaluator checks the running size after every item; as long as the calls' output
        # plus *all* literals stays within the limit no check can fail, so only that is tracked
        slack = state.inputs.max_output - self.counted
        size = 0
        for part in self.parts:
            if part.__class__ is str:
                append(part)
            else:
                piece = part(state, depth)
                append(piece)
                size += len(piece)
                if size > slack:
                    return self._run_checked(state, depth, out)
        return "".join(out)

    def _run_checked(self, state: RenderState, depth: int, out: list[str]) -> str:
        """The rest of :meth:`run` with the evaluator's exact per-item check (huge outputs)."""
        limit = state.inputs.max_output
        parts, meta = self.parts, self.meta
        size = 0
        done = len(out)
        for index in range(len(parts)):
            if index < done:
                piece = out[index]
            else:
                part = parts[index]
                piece = part if part.__class__ is str else part(state, depth)
                out.append(piece)
            info = meta[index]
            if type(info) is tuple:
                for length, plain in info:
                    size += length
                    if size > limit:
                        _too_long(state, plain)
            else:
                size += len(piece)
                if size > limit:
                    _too_long(state, info)
        return "".join(out)


def _pieces_so_far(order: list[str], names: dict[str, Any]) -> Callable[[dict[str, Any], int], list[str]]:
    """For a generated plan function: its first ``n`` pieces, in order, from its ``locals()``
    (calls' outputs ``p3``) and its globals (literals ``l2``). ``order`` is the plan's list of
    piece names, complete by the time the function runs."""

    def done(local: dict[str, Any], n: int) -> list[str]:
        return [local[name] if name[0] == "p" else names[name] for name in order[:n]]

    return done


def _too_long(state: RenderState, item: Any) -> None:
    raise TemplateError(
        f"the expanded text would pass {state.inputs.max_output} characters",
        code="MACRO_OUTPUT_LIMIT",
        span=Span(item.start, item.end),
        source=state.source,
    )


def build_plan(
    state: RenderState,
    lo: int,
    hi: int,
    depth: int,
    items: Sequence[Any],
    pairing: Pairing,
) -> LevelPlan | None:
    """The plan of ``source[lo:hi]`` (a clean level), or ``None`` when it keeps tags raw."""
    pairs, keep_raw, too_deep = pairing
    if keep_raw or too_deep or depth > MAX_SCOPE_DEPTH:
        return None
    src = state.source
    parts: list[Any] = []
    meta: list[Any] = []
    texts: list[str] = []
    plains: list[tuple[int, Any]] = []

    def flush() -> None:
        if texts:
            parts.append("".join(texts))
            meta.append(tuple(plains))
            texts.clear()
            plains.clear()

    cursor = lo
    idx = 0
    n = len(items)
    while idx < n:
        item = items[idx]
        if item.start > cursor:
            texts.append(src[cursor : item.start])
        if type(item) is Plain:
            text = src[item.start : item.end]
            texts.append(text)
            plains.append((len(text), item))
            cursor = item.end
            idx += 1
            continue
        flush()
        scoped = pairs.get(idx)
        if scoped is not None:
            body_items = tuple(items[idx + 1 : scoped[3]])
            parts.append(_delayed(state, item, scoped, body_items) or _paired(item, scoped, body_items))
            meta.append(item)
            cursor = scoped[2]
            idx = scoped[3] + 1
        else:
            parts.append(_bind(state, item, depth))
            meta.append(item)
            cursor = item.end
            idx += 1
    if cursor < hi:
        texts.append(src[cursor:hi])
    flush()
    return LevelPlan(parts, meta)


def _generic(m: MacroNode) -> Part:
    def part(state: RenderState, depth: int) -> str:
        return state.eval_macro(m, None, depth, None)

    return part


def _paired(m: MacroNode, scoped: tuple[int, int, int, int], body_items: tuple) -> Part:
    # the body's items are sliced once, so the body level keeps its identity (and its plan)
    def part(state: RenderState, depth: int) -> str:
        return state.eval_macro(m, scoped, depth, body_items)

    return part


def _bind(state: RenderState, m: MacroNode, depth: int) -> Part:
    """A call for one inline macro: its definition, literal arguments and checks decided here."""
    if m.var is not None or not m.complete:
        return _generic(m)
    definition = state._defs.get(m.key)
    if definition is None:
        return _generic(m)
    name, flags, start, end = m.name, m.flags, m.start, m.end
    if not m.args:
        if definition.min_args:
            return _generic(m)
        constant = _constant(state, definition, m, [], [], [], depth)
        if constant is not None:
            return constant
        fast = getattr(definition.handler, "context_value", None)
        if fast is not None:
            # a handler that only reads a context field (``{{user}}``, ``{{char}}``...)
            def read(state: RenderState, depth: int) -> str:
                try:
                    value = fast(state.inputs.ctx)
                except Exception:  # reported exactly as the evaluator reports it
                    return state.eval_macro(m, None, depth, None)
                if type(value) is not str:
                    value = js_string(value)
                produced = state.produced + len(value)
                state.produced = produced
                if produced > MAX_PRODUCED_CHARS or len(value) > state.inputs.max_output:
                    raise TemplateError(  # as RenderState._call raises it
                        f"the expanded text would pass {state.inputs.max_output} characters",
                        code="MACRO_OUTPUT_LIMIT",
                    )
                return value

            read.context_read = fast  # type: ignore[attr-defined]  # inlined by LevelPlan._straight
            read.context_attr = getattr(definition.handler, "context_attr", None)  # type: ignore[attr-defined]
            read.card_field = getattr(definition.handler, "card_field", None)  # type: ignore[attr-defined]
            read.fallback = _generic(m)  # type: ignore[attr-defined]
            return read

        def zero(state: RenderState, depth: int) -> str:
            call = MacroCall(name, [], flags, False, start, m, state, depth, [], [])
            return state._call(definition, call, m, (), end)

        return zero
    if definition.delay_args:
        return _delayed(state, m, None, None) or _generic(m)
    if depth >= MAX_SCOPE_DEPTH:
        return _generic(m)
    raw = state.arguments(m, depth, evaluate=False)
    if raw is None:
        return _generic(m)
    values, spans, known, entries, _literal = raw
    if not definition.accepts(len(values)):
        return _generic(m)
    if definition.strict and definition.arg_types and definition.type_error(values) is not None:
        return _generic(m)
    handler = definition.handler
    constant = _constant(state, definition, m, values, spans, known, depth)
    if constant is not None:
        return constant
    scope = getattr(handler, "variable_get", None)
    if scope is not None and len(values) == 1:
        return _var_get(m, scope, values[0])
    scope = getattr(handler, "variable_set", None)
    if scope is not None and len(values) == 2 and values[0] != "":
        return _var_set(scope, values[0], values[1])
    binder = getattr(handler, "bind_literal", None)
    if binder is not None:
        # a handler that can be specialised for its literal arguments (``random``, ``roll``):
        # ``bind_literal(args, offset, macro text)`` gives ``run(state) -> str`` or ``None``
        bound = binder(tuple(values), start, state.source[start:end])
        if bound is not None:
            return _bound(bound)
    fixed_values, fixed_spans, fixed_known, fixed_entries = tuple(values), tuple(spans), tuple(known), tuple(entries)

    def literal(state: RenderState, depth: int) -> str:
        call = MacroCall(name, list(fixed_values), flags, False, start, m, state, depth, list(fixed_spans), list(fixed_known))
        return state._call(definition, call, m, fixed_entries, end)

    return literal



def _bound(run: Callable[[RenderState], str]) -> Part:
    def bound(state: RenderState, depth: int) -> str:
        return _emit(state, run(state))

    bound.bound_run = run  # type: ignore[attr-defined]  # inlined by LevelPlan._straight
    return bound


def _emit(state: RenderState, text: str) -> str:
    """``RenderState._call``'s output accounting for a value a plan produced itself."""
    produced = state.produced + len(text)
    state.produced = produced
    if produced > MAX_PRODUCED_CHARS or len(text) > state.inputs.max_output:
        _too_much(state)
    return text


def _too_much(state: RenderState) -> None:
    """The error ``RenderState._call`` raises when a value passes the output limits."""
    raise TemplateError(
        f"the expanded text would pass {state.inputs.max_output} characters",
        code="MACRO_OUTPUT_LIMIT",
    )


def _constant(
    state: RenderState, definition: Any, m: MacroNode, values: list[str], spans: list[Any], known: list[Any], depth: int
) -> Part | None:
    """The value of an ``args_only`` handler on literal arguments, computed once (``None``:
    not such a handler, or it fails, which the evaluator then reports each render). Must equal
    calling the handler each render
    (``tests/test_macros_plan.py::test_literal_variable_and_constant_macros_from_plans_match_the_evaluator``)."""
    if not getattr(definition.handler, "args_only", False):
        return None
    call = MacroCall(m.name, list(values), m.flags, False, m.start, m, state, depth, list(spans), list(known))
    try:
        value = definition.handler(call)
        text = value if type(value) is str else js_string(value)
    except Exception:
        return None

    def constant(state: RenderState, depth: int) -> str:
        return _emit(state, text)

    constant.constant_text = text  # type: ignore[attr-defined]  # inlined by LevelPlan._straight
    return constant


def _var_get(m: MacroNode, scope: str, name: str) -> Part:
    """A literal ``{{getvar::name}}`` read straight from the store; must equal the handler
    (``tests/test_macros_plan_bound.py::test_literal_variable_reads_are_inlined_and_match_the_evaluator``)."""
    local = scope == "local"

    def get(state: RenderState, depth: int) -> str:
        try:
            text = js_string((state.local if local else state.glob).get(name))
        except Exception:  # reported exactly as the evaluator reports it (reading changes nothing)
            return state.eval_macro(m, None, depth, None)
        return _emit(state, text)

    get.variable_name = name  # type: ignore[attr-defined]  # inlined by LevelPlan._straight
    get.variable_local = local  # type: ignore[attr-defined]
    get.fallback = _generic(m)  # type: ignore[attr-defined]
    return get


def _var_set(scope: str, name: str, value: str) -> Part:
    """A literal ``{{setvar::name::value}}`` written straight to the store; must equal the handler
    (``tests/test_macros_plan.py::test_literal_variable_and_constant_macros_from_plans_match_the_evaluator``)."""
    local = scope == "local"

    def set_(state: RenderState, depth: int) -> str:
        (state.local if local else state.glob).set(name, value)
        return ""

    set_.variable_set = (name, value)  # type: ignore[attr-defined]  # inlined by LevelPlan._straight
    set_.variable_local = local  # type: ignore[attr-defined]
    return set_


def _delayed(
    state: RenderState, m: MacroNode, scoped: tuple[int, int, int, int] | None, body_items: tuple | None
) -> Part | None:
    """A call for a ``delay_args`` macro (``if``): its arguments are raw text, so fixed.

    Mirrors ``eval_macro``'s delayed path (raw argument and body text, their spans and
    parses); ``None`` when that path would report something (unknown, arity, type).
    """
    if m.var is not None or not m.complete or (not m.args and scoped is None):
        return None
    definition = state._defs.get(m.key)
    if definition is None or not definition.delay_args:
        return None
    src = state.source
    collected = state.arguments(m, 0, delay=True)
    assert collected is not None  # raw text: nothing to evaluate
    values, spans, known, entries, _literal = collected
    if scoped is not None:
        lo, hi = scoped[0], scoped[1]
        known.append(body_items)
        if lo >= hi:
            values.append("")
            spans.append(None)
        else:
            values.append(src[lo:hi])
            spans.append((lo, hi))
            entries.append((lo, hi, src[lo:hi]))
    if not definition.accepts(len(values)):
        return None
    if definition.strict and definition.arg_types and definition.type_error(values) is not None:
        return None
    name, flags, start = m.name, m.flags, m.start
    end = scoped[2] if scoped is not None else m.end
    is_scoped = scoped is not None
    fixed_values, fixed_spans, fixed_known, fixed_entries = tuple(values), tuple(spans), tuple(known), tuple(entries)
    binder = getattr(definition.handler, "bind_delayed", None)
    if binder is not None:
        # a handler that can decide part of its work once (``if``: the condition's form, the
        # else split, which levels its branches are): ``run(state, depth)`` is the handler
        run = binder(state, m, fixed_spans, fixed_known)
        if run is not None:
            return _handler_part(run, m, fixed_entries, end)

    def delayed(state: RenderState, depth: int) -> str:
        call = MacroCall(name, list(fixed_values), flags, is_scoped, start, m, state, depth, list(fixed_spans), list(fixed_known))
        return state._call(definition, call, m, fixed_entries, end)

    return delayed


def _handler_part(run: Callable[[RenderState, int], str], m: MacroNode, entries: tuple, end: int) -> Part:
    """A part calling ``run`` (a handler bound to its literal arguments) exactly as
    ``RenderState._call`` calls a handler: the same failure reports and output accounting."""
    name, start = m.name, m.start

    def handled(state: RenderState, depth: int) -> str:
        try:
            result = run(state, depth)
        except TemplateError as exc:
            if exc.code in ("MACRO_REPEAT_LIMIT", "MACRO_ROLL_LIMIT"):
                state.diag(exc.code, exc.message, start, end)
                return state._raw(m, entries)
            raise
        except Exception as exc:  # a handler failure leaves the macro as written
            state.diag("MACRO_HANDLER_ERROR", f"{{{{{name}}}}} failed: {type(exc).__name__}: {exc}", start, end)
            return state._raw(m, entries)
        if result.__class__ is not str:
            result = js_string(result)
        produced = state.produced + len(result)  # ``_emit``, inlined
        state.produced = produced
        if produced > MAX_PRODUCED_CHARS or len(result) > state.inputs.max_output:
            _too_much(state)
        return result

    return handled


def level_runner(
    state: RenderState, lo: int, hi: int, depth: int, items: Sequence[Any] | None
) -> tuple[str | Callable[[RenderState], str], bool]:
    """How to do ``state.evaluate(lo, hi, depth, items)`` for a level inside a planned macro:
    its text (a level without macros) or a callable taking the state, and whether that answer
    is final (a level's plan appears from its second evaluation on: until then the level is
    evaluated, and the caller asks again).

    Valid only while the plan holding the caller runs: that plan was built for this registry
    and version, and it runs only when they still hold (and parses are reused, with no
    dynamic macros), which is everything ``evaluate`` checks before running a known level's plan.
    """
    if items is None or lo >= hi or depth > MAX_SCOPE_DEPTH:
        return (lambda st: st.evaluate(lo, hi, depth, items)), True
    if not any(type(item) is MacroNode for item in items):
        return state.source[lo:hi], True
    plan = state.known_plan(items, depth)
    if plan is not None:
        return partial(plan.run, depth=depth), True
    return (lambda st: st.evaluate(lo, hi, depth, items)), False
