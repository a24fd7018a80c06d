"""The macro parser's nodes: :class:`Plain` spans, :class:`ArgNode` arguments, :class:`MacroNode` macros
and the :class:`VarNode` of the variable shorthand, with absolute offsets into the parsed text.

Built by the parsers (:mod:`.lalr`, :mod:`.recovery`, :mod:`.regions`), read by the evaluator.
"""

from __future__ import annotations

from dataclasses import dataclass
from operator import itemgetter


__all__ = ["ArgNode", "MacroNode", "Plain", "VarNode"]

# ---- nodes ---------------------------------------------------------------------------------
#
# Plain spans, arguments and macros are tuple subclasses read through C-level field getters:
# building one is a single ``tuple.__new__`` (a frozen slotted dataclass costs one guarded
# descriptor call per field), and a field read costs what a slot read costs. They stay immutable
# and hashable; a macro keeps no offsets it can derive (``inner_start``/``inner_end``), and a
# literal argument's span *is* its one plain item (a node less per macro). What a node costs is
# measured by ``benchmarks/bench_macros.py`` (the parser paths).

try:  # the getter namedtuple uses (CPython); a property over itemgetter elsewhere
    from collections import _tuplegetter  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover
    def _tuplegetter(index: int, doc: str) -> property:  # type: ignore[misc]
        return property(itemgetter(index), doc=doc)

_tnew = tuple.__new__


class Plain(tuple):
    """Text to copy verbatim: plain text, or a fragment that did not form a macro."""

    __slots__ = ()
    start: int = _tuplegetter(0, "offset of the first character")  # type: ignore[assignment]
    end: int = _tuplegetter(1, "offset after the last character")  # type: ignore[assignment]

    def __new__(cls, start: int, end: int) -> Plain:
        return _tnew(cls, (start, end))

    def __getnewargs__(self) -> tuple[int, int]:
        return (self[0], self[1])

    def __repr__(self) -> str:
        return f"Plain(start={self[0]!r}, end={self[1]!r})"


class ArgNode(tuple):
    """One argument: the span of its source (first to last token; ``None`` when empty).

    ``items`` are the argument's own document items when re-parsing its text would give
    exactly them (no recovery inside, no ``{`` glued before a nested ``{{``); the evaluator
    then skips the re-parse SillyTavern performs. ``None`` means "re-parse the span".
    Equality and hashing read the span only (the items are a cache of its parse).
    """

    __slots__ = ()
    span: tuple[int, int] | None = _tuplegetter(0, "(first, last) offsets, or None")  # type: ignore[assignment]
    items: tuple | None = _tuplegetter(1, "the span's items when known")  # type: ignore[assignment]

    def __new__(cls, span: tuple[int, int] | None, items: tuple | None = None) -> ArgNode:
        return _tnew(cls, (span, items))

    def __getnewargs__(self) -> tuple:
        return (self[0], self[1])

    def __eq__(self, other: object) -> bool:
        if type(other) is not ArgNode:
            return NotImplemented
        return self[0] == other[0]  # type: ignore[index]

    def __ne__(self, other: object) -> bool:
        if type(other) is not ArgNode:
            return NotImplemented
        return self[0] != other[0]  # type: ignore[index]

    def __hash__(self) -> int:
        return hash(self[0])

    def __repr__(self) -> str:
        return f"ArgNode(span={self[0]!r})"


@dataclass(frozen=True, slots=True)
class VarNode:
    """``{{.name op value}}``: scope, name, operator and the value's span and macros."""

    scope: str
    name: str
    op: str | None
    value_span: tuple[int, int] | None
    value_macros: tuple[MacroNode, ...]


class MacroNode(tuple):
    """A macro as parsed. ``complete`` is false when it never got its own ``}}``.

    ``parts`` keeps the consumed tokens and nested macros in order, so an incomplete macro can
    be shown as text around its complete nested macros. ``key`` (the case-insensitive lookup
    key of the name) and ``closing`` (a ``{{/name}}`` closer) derive from ``name``/``flags``;
    they are stored because pairing reads them for every macro.
    """

    __slots__ = ()
    start: int = _tuplegetter(0, "offset of the opening {{")  # type: ignore[assignment]
    end: int = _tuplegetter(1, "offset after the closing }} (or the last token)")  # type: ignore[assignment]
    complete: bool = _tuplegetter(2, "whether the macro got its own }}")  # type: ignore[assignment]
    flags: str = _tuplegetter(3, "the flag characters")  # type: ignore[assignment]
    name: str = _tuplegetter(4, "the name as written")  # type: ignore[assignment]
    args: tuple[ArgNode, ...] = _tuplegetter(5, "the arguments")  # type: ignore[assignment]
    var: VarNode | None = _tuplegetter(6, "the variable shorthand, if it is one")  # type: ignore[assignment]
    parts: tuple = _tuplegetter(7, "an incomplete macro's tokens and nested macros")  # type: ignore[assignment]
    key: str = _tuplegetter(8, "the lower-cased name")  # type: ignore[assignment]
    closing: bool = _tuplegetter(9, "whether this is a {{/name}} closer")  # type: ignore[assignment]

    def __new__(
        cls,
        start: int,
        end: int,
        complete: bool,
        flags: str,
        name: str,
        args: tuple[ArgNode, ...],
        var: VarNode | None,
        parts: tuple = (),
    ) -> MacroNode:
        return _tnew(cls, (start, end, complete, flags, name, args, var, parts, name.lower(), "/" in flags))

    def __getnewargs__(self) -> tuple:
        return tuple(self[:8])

    @property
    def inner_start(self) -> int:
        """Offset after the opening ``{{``."""
        return self[0] + 2  # type: ignore[no-any-return]

    @property
    def inner_end(self) -> int:
        """Offset of the closing ``}}`` (the end, for an incomplete macro)."""
        return self[1] - 2 if self[2] else self[1]  # type: ignore[no-any-return]

    def __repr__(self) -> str:
        return (
            f"MacroNode(start={self[0]!r}, end={self[1]!r}, complete={self[2]!r}, flags={self[3]!r}, "
            f"name={self[4]!r}, args={self[5]!r}, var={self[6]!r}, parts={self[7]!r})"
        )


def _macro_node(start: int, end: int, flags: str, name: str, args: tuple, var: VarNode | None) -> MacroNode:
    """A complete :class:`MacroNode` whose name strings are shared with every node of that name."""
    names = _NAMES.get(name)
    if names is None:
        names = (name, name.lower())
        if len(_NAMES) < 4096:
            _NAMES[name] = names
    return _tnew(MacroNode, (start, end, True, flags, names[0], args, var, (), names[1], "/" in flags))


#: name -> (the name, its lookup key), shared by every node of that name: a text repeating one
#: macro 200,000 times holds two strings, not 400,000 (bounded: a hostile text of distinct
#: names only stops sharing)
_NAMES: dict[str, tuple[str, str]] = {}


def _plain(start: int, end: int) -> Plain:
    """A :class:`Plain` without the call through ``Plain.__new__``."""
    return _tnew(Plain, (start, end))


