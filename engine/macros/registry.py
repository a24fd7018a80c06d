"""Macro definitions and the registry hosts extend (SillyTavern's MacroRegistry + dynamic macros).

A definition declares its arity and argument types up front, because SillyTavern decides three
things from them *before* running a handler: whether ``{{x}}...{{/x}}`` may pair (the body is
one more argument), whether a call is left as written (wrong arity or type), and whether
``{{if name}}`` may resolve ``name`` (zero-argument macros only). Names are case-insensitive.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from .variables import js_number

if TYPE_CHECKING:
    from .evaluator import MacroCall

__all__ = ["ArgType", "MacroDef", "MacroRegistry", "args_only", "check_type", "context_handler", "dynamic_definition"]

ArgType = Literal["string", "integer", "number", "boolean"]
Handler = Callable[["MacroCall"], Any]

_NAME = re.compile(r"^(?://|[a-zA-Z][a-zA-Z0-9_-]*)$")
_INTEGER = re.compile(r"-?[0-9]+")


def check_type(value: str, kind: ArgType) -> bool:
    """SillyTavern's argument validation: integer ``^-?\\d+$``, finite number, on/off boolean."""
    if kind == "string":
        return True
    if kind == "integer":
        return _INTEGER.fullmatch(value) is not None
    if kind == "number":
        num = js_number(value)
        return num is not None and num not in (float("inf"), float("-inf"))
    if kind == "boolean":
        return value.strip().lower() in ("on", "off", "true", "false", "1", "0")
    return True


@dataclass(frozen=True)
class MacroDef:
    """One macro: name, aliases, arity, argument types and the handler.

    ``max_args=None`` means a list macro (any number of arguments; it never takes a scoped
    body). ``strict=False`` runs the handler even when the arguments do not fit.
    ``delay_args`` hands the handler unevaluated argument nodes (only ``if`` uses it).
    """

    name: str
    handler: Handler
    min_args: int = 0
    max_args: int | None = 0
    arg_types: tuple[ArgType, ...] = ()
    aliases: tuple[str, ...] = ()
    strict: bool = True
    delay_args: bool = False
    description: str = ""

    @property
    def is_list(self) -> bool:
        return self.max_args is None

    def accepts(self, count: int) -> bool:
        if count < self.min_args:
            return False
        return self.max_args is None or count <= self.max_args

    def can_take_body(self, arg_count: int) -> bool:
        """Whether ``{{name args}}body{{/name}}`` may pair: the body is one more argument."""
        return not self.is_list and self.accepts(arg_count + 1)

    def type_error(self, args: list[str]) -> int | None:
        """The index of the first argument of the wrong type, or ``None``."""
        for i, value in enumerate(args):
            kind = self.arg_types[i] if i < len(self.arg_types) else "string"
            if not check_type(value, kind):
                return i
        return None


@dataclass
class MacroRegistry:
    """Case-insensitive name -> definition table. ``MacroRegistry.default()`` has the built-ins."""

    _defs: dict[str, MacroDef] = field(default_factory=dict)
    #: bumped by every change, so what renders derive from the table can be memoised
    _version: int = field(default=0, compare=False)

    def register(
        self,
        name: str,
        handler: Handler,
        *,
        aliases: Iterable[str] = (),
        min_args: int = 0,
        max_args: int | None = 0,
        arg_types: Iterable[ArgType] = (),
        strict: bool = True,
        delay_args: bool = False,
        description: str = "",
    ) -> MacroDef:
        """Add (or replace) a macro; returns its definition.

        Raises ``ValueError`` for a name SillyTavern's lexer could never produce.
        """
        names = (name, *aliases)
        for n in names:
            if not _NAME.match(n):
                raise ValueError(f"invalid macro name {n!r}: must match [a-zA-Z][\\w-]*")
        if min_args < 0 or (max_args is not None and max_args < min_args):
            raise ValueError(f"invalid arity for {name!r}: {min_args}..{max_args}")
        definition = MacroDef(
            name=name,
            handler=handler,
            min_args=min_args,
            max_args=max_args,
            arg_types=tuple(arg_types),
            aliases=tuple(aliases),
            strict=strict,
            delay_args=delay_args,
            description=description,
        )
        for n in names:
            self._defs[n.lower()] = definition
        self._version += 1
        return definition

    def register_text(self, name: str, text: str | Callable[[], str], *, aliases: Iterable[str] = ()) -> MacroDef:
        """A text-reference macro: zero arguments, expands to ``text`` (or what it returns).

        The value is inserted as is; like every macro output it is not re-scanned for macros.
        """
        if callable(text):
            fn = text
            return self.register(name, lambda call: fn(), aliases=aliases)
        value = str(text)
        return self.register(name, lambda call: value, aliases=aliases)

    def add(self, definition: MacroDef) -> None:
        """Register a prepared definition under its name and aliases."""
        for n in (definition.name, *definition.aliases):
            self._defs[n.lower()] = definition
        self._version += 1

    def unregister(self, name: str) -> None:
        """Remove a name (and the aliases of its definition)."""
        definition = self._defs.pop(name.lower(), None)
        self._version += 1
        if definition is not None:
            for n in (definition.name, *definition.aliases):
                if self._defs.get(n.lower()) is definition:
                    del self._defs[n.lower()]

    def get(self, name: str) -> MacroDef | None:
        return self._defs.get(name.lower())

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name.lower() in self._defs

    def names(self) -> list[str]:
        """Every registered name and alias, lower-cased and sorted."""
        return sorted(self._defs)

    def copy(self) -> MacroRegistry:
        return MacroRegistry(dict(self._defs))

    @classmethod
    def default(cls) -> MacroRegistry:
        """A fresh registry holding SillyTavern 1.18's built-in catalogue (a copy: safe to edit)."""
        return cls.default_shared().copy()

    @classmethod
    def default_shared(cls) -> MacroRegistry:
        """The shared built-in table itself (read-only by convention; no copy per render)."""
        global _shared
        if _shared is None:
            if _catalogue is None:  # pragma: no cover - the package passes it in on import
                raise RuntimeError("tavernbox.macros passes the built-in catalogue in on import")
            _shared = _catalogue()
        return _shared


_shared: MacroRegistry | None = None
#: builds the built-in catalogue (:func:`.builtins.builtin_registry`), passed in by the package with
#: :func:`use_catalogue`: the built-ins register into this module's classes, so it cannot import them
_catalogue: Callable[[], MacroRegistry] | None = None


def use_catalogue(build: Callable[[], MacroRegistry]) -> None:
    """Make ``build()`` the source of :meth:`MacroRegistry.default` (called once, by the package)."""
    global _catalogue, _shared
    _catalogue = build
    _shared = None


def context_handler(read: Callable[[Any], Any]) -> Handler:
    """A handler whose value depends on the render's context only (``read(ctx)``).

    It behaves like any handler; the ``context_value`` attribute lets a compiled level
    (:mod:`.plan`) call ``read`` directly instead of building a ``MacroCall`` for it.
    ``read`` must have no side effects: a plan re-runs a failing one through the evaluator.
    """

    def handler(call: MacroCall) -> Any:
        return read(call.ctx)

    handler.context_value = read  # type: ignore[attr-defined]
    return handler


def args_only(handler: Handler) -> Handler:
    """Mark a handler whose value depends on its arguments (and name/flags) only.

    A compiled level (:mod:`.plan`) calls it once for a macro whose arguments are literal text
    and reuses the value; it must read nothing else (no context, state, clock or draws).
    """
    handler.args_only = True  # type: ignore[attr-defined]
    return handler


def dynamic_definition(name: str, value: str | Callable[..., Any] | MacroDef) -> MacroDef:
    """A per-call (dynamic) macro: a string or zero-argument callable, or a full definition.

    Strings and callables take no arguments, so ``{{name::x}}`` stays as written (as in ST).
    A callable receives the :class:`MacroCall` when it accepts one argument.
    """
    if isinstance(value, MacroDef):
        return value
    if callable(value):
        fn = value
        try:
            wants_call = len(inspect.signature(fn).parameters) >= 1
        except (TypeError, ValueError):
            wants_call = False

        def handler(call: MacroCall) -> Any:
            return fn(call) if wants_call else fn()

        return MacroDef(name=name, handler=handler)
    text = "" if value is None else str(value)
    return MacroDef(name=name, handler=lambda call: text)


def dynamic_table(dynamic: Mapping[str, Any] | None) -> dict[str, MacroDef]:
    """Lower-cased name -> definition for the per-call dynamic macros."""
    if not dynamic:
        return {}
    return {str(k).lower(): dynamic_definition(str(k), v) for k, v in dynamic.items()}
