"""Variable macros (``setvar``... and the global twins).

The ``{{.x op v}}`` shorthand is syntax, not a macro: :mod:`..evaluator` evaluates it.
"""

from __future__ import annotations

from typing import Any

from ..evaluator import MacroCall
from ..registry import MacroRegistry
from ..variables import VariableStore

__all__ = ["register"]


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
