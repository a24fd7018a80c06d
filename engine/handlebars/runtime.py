"""Rendering a parsed Handlebars program as Handlebars 4.7's compiled code would run it.

Handlebars compiles a template to JavaScript; this module walks the tree instead, with the
decisions the compiler makes taken in the same order:

- a mustache or block is a *helper call* when it has parameters or a hash, or names a built-in
  helper; *ambiguous* when it is one plain name (a registered helper, else the context's value,
  else ``helperMissing``); *simple* otherwise (a path such as ``foo.bar``, ``this``, ``../x``);
- a simple or ambiguous block whose value is no helper goes to ``blockHelperMissing`` (``true``
  renders the block once, an array iterates, ``false``/``null``/``undefined`` render ``{{else}}``,
  anything else renders the block with that value as its context);
- lookups read own properties only, null-safe along a path (``a && a.b`` for data paths and
  helper names, ``a != null ? a.b : a`` elsewhere);
- a block's program pushes a ``../`` level only when its context differs (JavaScript's ``!=``)
  from the enclosing one, and block parameters (``as |x i|``) are found by their nesting level.

Nothing escapes HTML: SillyTavern compiles story strings with ``noEscape``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..errors import TemplateError
from ..spans import Span
from .limits import HandlebarsLimits, checkpoint
from .nodes import Block, Comment, Content, Literal, Mustache, Partial, Path, Program, Statement, SubExpr
from .parser import literal_original
from .values import (
    NULL_CONTEXT,
    UNDEFINED,
    is_empty,
    js_add,
    is_nullish,
    js_keys,
    js_loose_equal,
    js_property_key,
    js_string,
    js_truthy,
    lookup_property,
)

__all__ = ["HelperOptions", "RenderSettings", "render_program"]

#: Handlebars' ``knownHelpers``: names the compiler treats as helpers even without parameters.
KNOWN_HELPERS = frozenset({"helperMissing", "blockHelperMissing", "each", "if", "unless", "with", "log", "lookup"})


@dataclass(frozen=True, slots=True)
class HelperOptions:
    """What a helper receives besides its parameters (Handlebars' ``options``)."""

    name: str
    hash: Mapping[str, Any]
    context: Any


#: A registered helper: ``helper(params, options) -> value`` (SillyTavern registers ``trim``).
Helper = Callable[[list[Any], HelperOptions], Any]


@dataclass(frozen=True, slots=True)
class RenderSettings:
    """The environment a template renders in.

    ``helpers``: registered helpers by name; ``missing``: Handlebars' ``helperMissing`` (called
    with the name, for a name nothing resolves; ``None``: Handlebars' own, which answers
    ``undefined`` for a bare name and fails for a call with parameters).
    """

    helpers: Mapping[str, Helper] = field(default_factory=dict)
    missing: Callable[[str], Any] | None = None
    limits: HandlebarsLimits = field(default_factory=HandlebarsLimits)


class _Fail(Exception):
    """A JavaScript exception inside the render (a helper's, or a TypeError)."""


@dataclass(frozen=True, slots=True)
class _Scope:
    """One program invocation: its context, data frame, ``../`` levels and block parameters."""

    context: Any
    data: dict[str, Any]
    depths: tuple[Any, ...]
    params: tuple[list[Any] | None, ...]
    declared: tuple[tuple[str, ...], ...]
    #: some level declares block parameters (``as |x|``): only then can a name be one
    any_declared: bool = False


class _Fn:
    """A block's program as a helper receives it (``options.fn``/``options.inverse``)."""

    __slots__ = ("program", "render", "scope")

    def __init__(self, render: _Render, program: Program | None, scope: _Scope) -> None:
        self.render, self.program, self.scope = render, program, scope

    def __call__(self, context: Any, data: dict[str, Any] | None = None, params: list[Any] | None = None) -> Any:
        if self.program is None:
            return ""  # Handlebars' noop
        outer = self.scope
        depths = outer.depths
        if not js_loose_equal(context, depths[0]) and not (context is NULL_CONTEXT and depths[0] is None):
            depths = (context, *depths)
        declared = self.program.block_params
        scope = _Scope(context, data or outer.data, depths, (params, *outer.params), (declared, *outer.declared),
                       outer.any_declared or bool(declared))
        return self.render.program(self.program, scope)


@dataclass(slots=True)
class _Call:
    """A helper call in progress: ``options`` as Handlebars builds them."""

    name: str
    this: Any
    hash: dict[str, Any]
    fn: _Fn | None
    inverse: _Fn | None
    data: dict[str, Any]


class _Render:
    def __init__(self, source: str, settings: RenderSettings) -> None:
        self.source = source
        self.settings = settings
        self.helpers: Mapping[str, Helper] = settings.helpers
        self.produced = 0
        self.steps = 0
        self.at = 0

    # --- statements -------------------------------------------------------------------------
    def program(self, program: Program, scope: _Scope) -> Any:
        """The program's value as Handlebars' compiled function returns it.

        A one-statement program returns that statement's value itself (a number stays a
        number). Otherwise the compiled code joins each run of appends with JavaScript's ``+``
        (``a + b + c``: two numbers add), starting the buffer with the first run when nothing
        comes before it; an ambiguous block's value (``{{#name}}`` where ``name`` may be a
        helper) is added to the buffer on its own and ends the run.
        """
        body = program.body
        if len(body) == 1:
            return self._simple(body[0], scope)
        buffer: Any = None
        run: list[Any] = []
        for statement in body:
            self._tick(statement)
            if isinstance(statement, Comment) or (isinstance(statement, Content) and not statement.value):
                continue
            if not (isinstance(statement, Block) and self._ambiguous_block(statement, scope)):
                run.append(self.statement(statement, scope))
                continue
            if run:
                buffer = _js_add_all(run) if buffer is None else js_add(buffer, _js_add_all(run))
                run = []
            elif buffer is None:
                buffer = ""
            value = self.statement(statement, scope)
            if not is_nullish(value):
                buffer = js_add(buffer, value)
        if buffer is None:
            return _js_add_all(run) if run else ""
        for value in run:
            buffer = js_add(buffer, value)
        return buffer

    def _simple(self, statement: Statement, scope: _Scope) -> Any:
        self._tick(statement)
        if isinstance(statement, Comment):
            return ""
        return self.statement(statement, scope)

    def _tick(self, statement: Statement) -> None:
        self.steps += 1
        if self.steps & 255 == 0:
            checkpoint(statement.start, self.source)

    def _ambiguous_block(self, block: Block, scope: _Scope) -> bool:
        path = _as_path(block.path)
        return self.classify(path, block.params, block.hash, scope, sexpr=False) == "ambiguous"

    def statement(self, node: Statement, scope: _Scope) -> Any:
        """One statement's appended value: text, or a value (``null``/``undefined`` are ``""``)."""
        if isinstance(node, Content):
            self._count(len(node.value), node.start)
            return node.value
        if isinstance(node, Comment):
            return ""
        self.at = node.start
        if isinstance(node, Block):
            # a block's text is made of statements already counted; it is not counted again
            value = self.block(node, scope)
            return "" if is_nullish(value) else value
        if isinstance(node, Partial):
            raise _Fail(f"The partial {node.name} could not be found")
        value = self.mustache(node, scope)
        if is_nullish(value):
            return ""
        if isinstance(value, str):
            self._count(len(value), node.start)
        elif isinstance(value, (list, dict)):
            self._count(len(js_string(value)), node.start)
        return value

    def _count(self, size: int, at: int) -> None:
        self.produced += size
        limit = self.settings.limits.max_output_chars
        if self.produced > limit:
            raise TemplateError(f"the story string's output passed {limit:,} characters here",
                                code="HANDLEBARS_OUTPUT_LIMIT", span=Span(at, at), source=self.source)

    def mustache(self, node: Mustache | SubExpr, scope: _Scope) -> Any:
        path = _as_path(node.path)
        kind = self.classify(path, node.params, node.hash, scope, sexpr=isinstance(node, SubExpr))
        if kind == "simple":
            return self.path(path, scope)
        if kind == "helper":
            return self.helper_call(path, node.params, node.hash, scope, None, None)
        return self.ambiguous(path, scope, None, None, block=False)

    def block(self, node: Block, scope: _Scope) -> Any:
        path = _as_path(node.path)
        fn = _Fn(self, node.program, scope) if node.program is not None or node.inverse is not None else None
        inverse = _Fn(self, node.inverse, scope) if fn is not None else None
        kind = self.classify(path, node.params, node.hash, scope, sexpr=False)
        if kind == "helper":
            return self.helper_call(path, node.params, node.hash, scope, fn, inverse)
        # blockHelperMissing is called on the context as it is (no null-context stand-in)
        call = _Call(path.original, scope.context, {}, fn, inverse, scope.data)
        if kind == "simple":
            return _block_helper_missing(self, [self.path(path, scope)], call)
        value = self.ambiguous(path, scope, fn, inverse, block=True)
        if not js_truthy(self.helpers.get(path.parts[0])):
            call.name = path.parts[0]
            value = _block_helper_missing(self, [value], call)
        return value

    # --- classification and calls -----------------------------------------------------------
    def classify(self, path: Path, params: tuple[Any, ...], hash_: tuple[Any, ...], scope: _Scope, *,
                 sexpr: bool) -> str:
        """``"helper"``, ``"ambiguous"`` or ``"simple"``, as Handlebars' ``classifySexpr``."""
        simple = path.simple
        block_param = simple and scope.any_declared and _block_param_index(scope, path.parts[0]) is not None
        helper = not block_param and (sexpr or bool(params) or bool(hash_))
        eligible = not block_param and (helper or simple)
        if eligible and not helper and path.parts[0] in KNOWN_HELPERS:
            helper = True
        if helper:
            return "helper"
        return "ambiguous" if eligible else "simple"

    def helper_call(self, path: Path, params: tuple[Any, ...], hash_: tuple[Any, ...], scope: _Scope,
                    fn: _Fn | None, inverse: _Fn | None) -> Any:
        args = [self.value(param, scope) for param in params]
        hash_values = {key: self.value(value, scope) for key, value in hash_}
        name = path.parts[0] if path.parts else ""
        if name in KNOWN_HELPERS and name not in self.helpers:
            call = _Call(name, _this(scope), hash_values, fn, inverse, scope.data)
            return _BUILTINS[name](self, args, call)
        found = self.helpers.get(name) if path.simple else None
        call = _Call(path.original, _this(scope), hash_values, fn, inverse, scope.data)
        if js_truthy(found):
            return self._registered(found, args, call)
        target = self.path(path, scope, falsy=True)
        if js_truthy(target):
            raise _Fail(f"{path.original} is not a function")
        return self.missing(args, call)

    def ambiguous(self, path: Path, scope: _Scope, fn: _Fn | None, inverse: _Fn | None, *, block: bool) -> Any:
        name = path.parts[0]
        call = _Call(name, _this(scope), {}, fn, inverse, scope.data)
        found = self.helpers.get(name)
        if js_truthy(found):
            return self._registered(found, [], call)
        value = self.path(path, scope)
        if is_nullish(value):
            return self.missing([], call)
        return value

    def _registered(self, helper: Any, args: list[Any], call: _Call) -> Any:
        if not callable(helper):
            raise _Fail(f"helper {call.name} is not a function")
        return helper(args, HelperOptions(call.name, call.hash, call.this))

    def missing(self, args: list[Any], call: _Call) -> Any:
        """``helperMissing``: the environment's, or Handlebars' own."""
        hook = self.settings.missing
        if hook is not None:
            return hook(call.name)
        if not args:
            return UNDEFINED
        raise _Fail(f'Missing helper: "{call.name}"')

    # --- values -----------------------------------------------------------------------------
    def value(self, node: Path | Literal | SubExpr, scope: _Scope) -> Any:
        if isinstance(node, Literal):
            if node.kind == "undefined":
                return UNDEFINED
            return node.value
        if isinstance(node, SubExpr):
            return self.mustache(node, scope)
        return self.path(node, scope)

    def path(self, path: Path, scope: _Scope, *, falsy: bool = False) -> Any:
        """A path's value (Handlebars' ``PathExpression``)."""
        parts = path.parts
        if scope.any_declared and not path.depth and not path.scoped and parts:
            index = _block_param_index(scope, parts[0])
            if index is not None:
                level = scope.params[index[0]] if index[0] < len(scope.params) else None
                if level is None:
                    raise _Fail(f"Cannot read properties of undefined (reading '{index[1]}')")
                value = level[index[1]] if index[1] < len(level) else UNDEFINED
                return _resolve(value, parts[1:], falsy=False)
        if not parts:
            return _context_at(scope, path.depth)
        if path.data:
            frame: Any = scope.data
            depth = path.depth
            while js_truthy(frame) and depth:
                frame = lookup_property(frame, "_parent")
                depth -= 1
            return _resolve(frame, parts, falsy=True)
        return _resolve(_context_at(scope, path.depth), parts, falsy=falsy)


def _js_add_all(values: list[Any]) -> Any:
    if all(value.__class__ is str for value in values):
        return "".join(values)
    result = values[0]
    for value in values[1:]:
        result = js_add(result, value)
    return result


def _this(scope: _Scope) -> Any:
    return NULL_CONTEXT if is_nullish(scope.context) else scope.context


def _as_path(node: Path | Literal) -> Path:
    """Handlebars' ``transformLiteralToPath``: ``{{"a b"}}`` and ``{{1}}`` name context keys."""
    if isinstance(node, Path):
        return node
    original = literal_original(node)
    return Path(False, 0, (original,), original, node.start)


def _context_at(scope: _Scope, depth: int) -> Any:
    if not depth:
        return scope.context
    return scope.depths[depth] if depth < len(scope.depths) else UNDEFINED


def _block_param_index(scope: _Scope, name: str) -> tuple[int, int] | None:
    for depth, names in enumerate(scope.declared):
        if name in names:
            return depth, names.index(name)
    return None


def _resolve(value: Any, parts: tuple[str, ...], *, falsy: bool) -> Any:
    for part in parts:
        if falsy:
            if not js_truthy(value):
                return value
        elif is_nullish(value):
            return value
        value = lookup_property(value, part)
    return value


# --- the built-in helpers ---------------------------------------------------------------------
def _needs_one(args: list[Any], message: str) -> None:
    if len(args) != 1:
        raise _Fail(message)


def _fn(call: _Call, which: str) -> _Fn:
    target = call.fn if which == "fn" else call.inverse
    if target is None:
        raise _Fail(f"{which} is not a function")
    return target


def _if(render: _Render, args: list[Any], call: _Call) -> Any:
    _needs_one(args, "#if requires exactly one argument")
    return _if_branch(args[0], call, "fn", "inverse")


def _if_branch(conditional: Any, call: _Call, yes: str, no: str) -> Any:
    include_zero = js_truthy(call.hash.get("includeZero", UNDEFINED))
    if (not include_zero and not js_truthy(conditional)) or is_empty(conditional):
        return _fn(call, no)(call.this)
    return _fn(call, yes)(call.this)


def _unless(render: _Render, args: list[Any], call: _Call) -> Any:
    _needs_one(args, "#unless requires exactly one argument")
    return _if_branch(args[0], call, "inverse", "fn")


def _with(render: _Render, args: list[Any], call: _Call) -> Any:
    _needs_one(args, "#with requires exactly one argument")
    context = args[0]
    if not is_empty(context):
        return _fn(call, "fn")(context, call.data, [context])
    return _fn(call, "inverse")(call.this)


def _each(render: _Render, args: list[Any], call: _Call) -> Any:
    if not args:
        raise _Fail("Must pass iterator to #each")
    if len(args) > 1:
        raise _Fail("#each takes one argument: the second is read as its options")
    context = args[0]
    out: list[str] = []
    count = 0
    if isinstance(context, list):
        fields: list[Any] = list(range(len(context)))
        values = context
    elif isinstance(context, dict) and context is not NULL_CONTEXT:
        fields = js_keys(context)
        values = [context[key] for key in fields]
    else:
        fields, values = [], []
    last = len(fields) - 1
    for index, (key, value) in enumerate(zip(fields, values)):
        frame = {**call.data, "key": key, "index": index, "first": index == 0, "last": index == last,
                 "_parent": call.data}
        out.append(js_string(_fn(call, "fn")(value, frame, [value, key])))
        if len(out) & 255 == 0:
            checkpoint(render.at, render.source)
        count += 1
    if count == 0:
        return _fn(call, "inverse")(call.this)
    return "".join(out)


def _lookup(render: _Render, args: list[Any], call: _Call) -> Any:
    if not args:
        raise _Fail("lookup needs an object and a field")
    obj = args[0]
    if not js_truthy(obj):
        return obj
    if len(args) != 2:
        raise _Fail("lookup needs an object and a field")
    return lookup_property(obj, js_property_key(args[1]))


def _log(render: _Render, args: list[Any], call: _Call) -> Any:
    return UNDEFINED


def _moved_to_hooks(render: _Render, args: list[Any], call: _Call) -> Any:
    """Handlebars 4.6+ keeps ``helperMissing``/``blockHelperMissing`` as hooks, not helpers:
    calling one by name reads an absent helper."""
    raise _Fail("Cannot read properties of undefined (reading 'call')")


def _block_helper_missing(render: _Render, args: list[Any], call: _Call) -> Any:
    if len(args) != 1:
        raise _Fail("blockHelperMissing takes one value")
    context = args[0]
    if context is True:
        return _fn(call, "fn")(call.this)
    if context is False or is_nullish(context):
        return _fn(call, "inverse")(call.this)
    if isinstance(context, list):
        if context:
            return _each(render, [context], call)
        return _fn(call, "inverse")(call.this)
    return _fn(call, "fn")(context, call.data, None)


_BUILTINS: dict[str, Callable[[_Render, list[Any], _Call], Any]] = {
    "if": _if,
    "unless": _unless,
    "with": _with,
    "each": _each,
    "lookup": _lookup,
    "log": _log,
    "helperMissing": _moved_to_hooks,
    "blockHelperMissing": _moved_to_hooks,
}


def render_program(program: Program, source: str, data: Any, settings: RenderSettings) -> str:
    """Render a parsed program with ``data`` as its context."""
    render = _Render(source, settings)
    scope = _Scope(data, {"root": data}, (data,), (), ())
    try:
        value = render.program(program, scope)
        return "" if is_nullish(value) else js_string(value)
    except _Fail as exc:
        raise TemplateError(f"the story string failed while rendering: {exc}", code="HANDLEBARS_RUNTIME",
                            span=Span(render.at, render.at), source=source) from None
    except RecursionError:
        raise TemplateError("the story string nests too deeply to render", code="HANDLEBARS_NESTING_LIMIT",
                            span=Span(render.at, render.at), source=source) from None
