"""Variable macros (``setvar``... and the global twins) and the ``{{.x op v}}`` shorthand."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..evaluator import MacroCall
from ..parser import MacroNode, VarNode
from ..registry import MacroRegistry
from ..variables import VariableStore, is_falsy_text, js_number, js_string, js_trim

if TYPE_CHECKING:
    from ..evaluator import RenderState

__all__ = ["eval_shorthand", "register"]


def _store(call: MacroCall, scope: str) -> VariableStore:
    return call.state.local if scope == "local" else call.state.glob


def _family(registry: MacroRegistry, scope: str, word: str, exists: str, flush: str, has: str | None) -> None:
    r = registry.register

    def setvar(call: MacroCall) -> str:
        _store(call, scope).set(call.args[0], call.args[1])
        return ""

    def addvar(call: MacroCall) -> str:
        _store(call, scope).add(call.args[0], call.args[1])
        return ""

    def incvar(call: MacroCall) -> Any:
        return _store(call, scope).add(call.args[0], 1)

    def decvar(call: MacroCall) -> Any:
        return _store(call, scope).add(call.args[0], -1)

    def getvar(call: MacroCall) -> Any:
        return _store(call, scope).get(call.args[0])

    def hasvar(call: MacroCall) -> bool:
        return _store(call, scope).has(call.args[0])

    def deletevar(call: MacroCall) -> str:
        _store(call, scope).delete(call.args[0])
        return ""

    # a plan binds a literal {{getvar::x}}/{{setvar::x::v}} straight to the store (see ..plan)
    getvar.variable_get = scope  # type: ignore[attr-defined]
    setvar.variable_set = scope  # type: ignore[attr-defined]
    r(f"set{word}", setvar, min_args=2, max_args=2)
    r(f"add{word}", addvar, min_args=2, max_args=2)
    r(f"inc{word}", incvar, min_args=1, max_args=1)
    r(f"dec{word}", decvar, min_args=1, max_args=1)
    r(f"get{word}", getvar, min_args=1, max_args=1)
    r(f"has{word}", hasvar, min_args=1, max_args=1, aliases=(exists,))
    r(f"delete{word}", deletevar, min_args=1, max_args=1, aliases=(flush,))


def register(registry: MacroRegistry) -> None:
    _family(registry, "local", "var", "varexists", "flushvar", None)
    _family(registry, "global", "globalvar", "globalvarexists", "flushglobalvar", None)


def _truthy(value: Any) -> bool:
    return not is_falsy_text(js_string(value))


def eval_shorthand(state: RenderState, m: MacroNode, depth: int) -> str:
    """``{{.name}}``, ``{{$name op value}}``: the value is evaluated lazily and at most once."""
    var = m.var
    assert var is not None
    store = state.local if var.scope == "." else state.glob
    name = var.name
    op = var.op
    cache: list[str] = []

    def value() -> str:
        if not cache:
            cache.append(_value_text(state, var, depth))
        return cache[0]

    if op is None:
        return js_string(store.get(name))
    if op == "++":
        return js_string(store.add(name, 1))
    if op == "--":
        return js_string(store.add(name, -1))
    if op == "=":
        store.set(name, value())
        return ""
    if op == "+=":
        store.add(name, value())
        return ""
    if op == "-=":
        num = js_number(value())
        if num is not None:
            store.add(name, -num)
        return ""
    if op == "||":
        current = store.get(name)
        return js_string(current) if _truthy(current) else value()
    if op == "||=":
        current = store.get(name)
        if _truthy(current):
            return js_string(current)
        store.set(name, value())
        return value()
    if op == "??":
        return js_string(store.get(name)) if store.has(name) else value()
    if op == "??=":
        if store.has(name):
            return js_string(store.get(name))
        store.set(name, value())
        return value()
    if op in ("==", "!="):
        same = js_string(store.get(name)) == value()
        return "true" if same == (op == "==") else "false"
    left = js_number(js_string(store.get(name)))
    right = js_number(value())
    if left is None or right is None:
        return "false"
    if op == ">":
        result = left > right
    elif op == ">=":
        result = left >= right
    elif op == "<":
        result = left < right
    else:
        result = left <= right
    return "true" if result else "false"


def _value_text(state: RenderState, var: VarNode, depth: int) -> str:
    """The value after the operator: its nested macros evaluated in place, then trimmed."""
    if var.value_span is None:
        return ""
    lo, hi = var.value_span
    src = state.source
    if not var.value_macros:
        return js_trim(src[lo:hi])
    parts: list[str] = []
    cursor = lo
    for node in sorted(var.value_macros, key=lambda n: n.start):
        if node.start > cursor:
            parts.append(src[cursor : node.start])
        if node.complete:
            parts.append(state.eval_macro(node, None, depth + 1))
        else:
            parts.append(src[node.start : node.end])
        cursor = node.end
    if cursor < hi:
        parts.append(src[cursor:hi])
    return js_trim("".join(parts))
