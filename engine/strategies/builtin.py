"""The built-in strategies, the strategy library and the per-session selection.

Three built-ins (research ``dsh-assembler.md`` section 1.4), all over the default rule list
native-system, preset, persona, character, worldbook, history, input, phi:

* ``builtin-native-slots`` (the RP default): native backend, ``native-slots`` placement. The
  preset's history/input slots set the boundaries: content before history becomes system, after it
  user (``NATIVE_ROLE_ADJUSTED``); without slots, roles first (``NATIVE_SLOTS_ABSENT``).
* ``builtin-native-roles``: native backend, ``native-roles``. Authored roles kept; system before
  history, user after the input.
* ``builtin-st``: core backend, ``st`` placement. SillyTavern slots, authored roles, message depth.

Built-ins are immutable: saving under a built-in id fails, :meth:`StrategyLibrary.copy` makes an
editable copy. *Applying* a strategy to a session stores an independent snapshot of its rules, so a
later edit of the library strategy does not change the session until it is applied again;
selecting ``None`` disables assembly for the session. A preview assembles with a strategy without
touching any selection.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from ..assembler.rules import Preset, parse_preset
from ..errors import TemplateError

__all__ = [
    "BUILTIN_IDS",
    "DEFAULT_RULE_KINDS",
    "DEFAULT_STRATEGY",
    "MemorySelectionBackend",
    "Selection",
    "SelectionBackend",
    "SelectionStore",
    "StrategyLibrary",
    "builtin_strategy",
    "is_builtin",
]

FORMAT = "dsh-tavern-request-assembly"
DEFAULT_RULE_KINDS = ("native-system", "preset", "persona", "character", "worldbook", "history", "input", "phi")
DEFAULT_STRATEGY = "builtin-native-slots"
_SLOTS_LAYOUT = {
    "version": 1,
    "source": "preset-slots",
    "identity": "position",
    "fallback": "source-order",
    "overrides": [],
    "priority": ["preset", "resource", "default"],
}
_DEFINITIONS: dict[str, dict[str, Any]] = {
    "builtin-native-slots": {"name": "Preset slots first (standard)", "backend": "native", "layout": _SLOTS_LAYOUT},
    "builtin-native-roles": {"name": "Roles first (standard)", "backend": "native", "placement": "native-roles"},
    "builtin-st": {"name": "Preset slots first (advanced)", "backend": "core", "layout": _SLOTS_LAYOUT},
}
BUILTIN_IDS = tuple(_DEFINITIONS)
SESSION_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,199}")
_FORBIDDEN_SESSIONS = {"__proto__", "constructor", "prototype"}


def _definition(strategy_id: str) -> dict[str, Any]:
    spec = _DEFINITIONS[strategy_id]
    out = {"format": FORMAT, "version": 1, "id": strategy_id, "name": spec["name"], "backend": spec["backend"]}
    if "placement" in spec:
        out["placement"] = spec["placement"]
    if "layout" in spec:
        out["layout"] = dict(spec["layout"])
    out["rules"] = [{"id": k, "kind": k, "enabled": True, "role": "preserve", "lifetime": "request", "depth": None,
                     "text": "", "name": ""} for k in DEFAULT_RULE_KINDS]
    return out


def is_builtin(strategy_id: str | None) -> bool:
    """Whether ``strategy_id`` names a built-in strategy."""
    return strategy_id in _DEFINITIONS


def builtin_strategy(strategy_id: str) -> Preset:
    """A built-in strategy as a (frozen) preset; unknown ids are ``ASSEMBLY_STRATEGY_UNKNOWN``."""
    if strategy_id not in _DEFINITIONS:
        raise TemplateError(f"unknown built-in strategy {strategy_id!r} (known: {', '.join(BUILTIN_IDS)})",
                            code="ASSEMBLY_STRATEGY_UNKNOWN")
    return parse_preset(_definition(strategy_id))


def _snapshot(preset: Preset) -> Preset:
    """An independent copy (through the wire form, so nothing is shared with the original)."""
    return parse_preset(preset.to_dict())


class StrategyLibrary:
    """Built-ins plus user strategies, by id. Built-ins cannot be saved over, renamed or deleted."""

    def __init__(self) -> None:
        self._user: dict[str, Preset] = {}
        self._in_use: Any = lambda strategy_id: False

    def ids(self) -> list[str]:
        """Built-in ids first, then user strategies sorted by id."""
        return [*BUILTIN_IDS, *sorted(self._user)]

    def get(self, strategy_id: str) -> Preset:
        """The strategy with this id (``ASSEMBLY_STRATEGY_UNKNOWN`` when there is none)."""
        if is_builtin(strategy_id):
            return builtin_strategy(strategy_id)
        found = self._user.get(strategy_id)
        if found is None:
            raise TemplateError(f"no strategy {strategy_id!r}", code="ASSEMBLY_STRATEGY_UNKNOWN")
        return found

    def save(self, preset: Preset | Mapping[str, Any]) -> Preset:
        """Add or replace a user strategy (it needs an ``id``); a built-in id is ``STRATEGY_BUILTIN_IMMUTABLE``."""
        preset = preset if isinstance(preset, Preset) else parse_preset(dict(preset))
        if not preset.id:
            raise TemplateError("a saved strategy needs an id", code="ASSEMBLY_PRESET_INVALID", path="$.id")
        if is_builtin(preset.id):
            raise TemplateError(f"{preset.id!r} is a built-in strategy: copy it before editing",
                                code="STRATEGY_BUILTIN_IMMUTABLE")
        stored = _snapshot(preset)
        self._user[preset.id] = stored
        return stored

    def copy(self, strategy_id: str, new_id: str, name: str | None = None) -> Preset:
        """Copy-on-edit: an editable user copy of any strategy (built-in or not) under ``new_id``."""
        source = self.get(strategy_id).to_dict()
        source["id"] = new_id
        source["name"] = name or f"{source['name']} (copy)"
        if new_id in self._user or is_builtin(new_id):
            raise TemplateError(f"a strategy {new_id!r} already exists", code="ASSEMBLY_PRESET_INVALID", path="$.id")
        return self.save(parse_preset(source))

    def delete(self, strategy_id: str) -> None:
        """Remove a user strategy; built-ins and strategies applied to a session cannot be deleted."""
        if is_builtin(strategy_id):
            raise TemplateError(f"{strategy_id!r} is a built-in strategy and cannot be deleted",
                                code="STRATEGY_BUILTIN_IMMUTABLE")
        if strategy_id not in self._user:
            raise TemplateError(f"no strategy {strategy_id!r}", code="ASSEMBLY_STRATEGY_UNKNOWN")
        if self._in_use(strategy_id):
            raise TemplateError(f"strategy {strategy_id!r} is applied to a session", code="STRATEGY_IN_USE")
        del self._user[strategy_id]


@dataclass(frozen=True, slots=True)
class Selection:
    """A session's applied strategy: the library id it came from and the snapshot of its rules.

    ``preset`` is ``None`` when assembly is disabled for the session.
    """

    strategy_id: str | None
    preset: Preset | None


class SelectionBackend(Protocol):
    """Where selections persist (in memory here; a database later)."""

    def load(self, session_id: str) -> Selection | None:
        """The stored selection, or ``None`` when the session has none."""
        ...

    def store(self, session_id: str, selection: Selection) -> None:
        """Store the selection for the session, replacing any earlier one."""
        ...

    def sessions(self) -> list[str]:
        """Every session with a stored selection."""
        ...


class MemorySelectionBackend:
    """Selections in a dict: enough for one process (tests, the CLI)."""

    def __init__(self) -> None:
        self._data: dict[str, Selection] = {}

    def load(self, session_id: str) -> Selection | None:
        return self._data.get(session_id)

    def store(self, session_id: str, selection: Selection) -> None:
        self._data[session_id] = selection

    def sessions(self) -> list[str]:
        return sorted(self._data)


class SelectionStore:
    """Per-session strategy selection over a library: apply, select, disable, preview."""

    def __init__(self, library: StrategyLibrary | None = None, backend: SelectionBackend | None = None) -> None:
        self.library = library or StrategyLibrary()
        self.backend: SelectionBackend = backend or MemorySelectionBackend()
        self.library._in_use = self.in_use

    @staticmethod
    def _check(session_id: str) -> str:
        if not isinstance(session_id, str) or not SESSION_ID.fullmatch(session_id) or session_id in _FORBIDDEN_SESSIONS:
            raise TemplateError(f"invalid session id {session_id!r}", code="STRATEGY_SESSION_INVALID")
        return session_id

    def select(self, session_id: str, strategy_id: str | None) -> Selection:
        """Apply ``strategy_id`` to the session (an independent snapshot), or disable with ``None``."""
        self._check(session_id)
        if strategy_id is None:
            selection = Selection(None, None)
        else:
            selection = Selection(strategy_id, _snapshot(self.library.get(strategy_id)))
        self.backend.store(session_id, selection)
        return selection

    def apply_default(self, session_id: str) -> Selection:
        """Apply the RP default, ``builtin-native-slots``."""
        return self.select(session_id, DEFAULT_STRATEGY)

    def selection(self, session_id: str) -> Selection | None:
        """The session's stored selection (``None``: none stored)."""
        return self.backend.load(self._check(session_id))

    def effective(self, session_id: str, *, mode: str = "play", parent: str | None = None) -> Preset | None:
        """The rules a request of this session uses.

        An explicit selection wins (``None`` = disabled, even in play mode); else the parent
        session's; else, in ``play`` mode, the default strategy; in ``native`` mode none.
        """
        found = self.selection(session_id)
        if found is None and parent is not None:
            found = self.selection(parent)
        if found is not None:
            return found.preset
        return builtin_strategy(DEFAULT_STRATEGY) if mode == "play" else None

    def in_use(self, strategy_id: str) -> bool:
        """Whether any session has this strategy applied."""
        return any((s := self.backend.load(sid)) is not None and s.strategy_id == strategy_id
                   for sid in self.backend.sessions())

    def preview(self, strategy_id: str, request: Mapping[str, Any], assembler: Any = None) -> Any:
        """Assemble ``request`` with a library strategy as a preview; no selection changes."""
        from ..assembler import Assembler
        from .sillytavern import st_registry

        assembler = assembler or Assembler(st_registry())
        return assembler.assemble({**request, "preset": self.library.get(strategy_id), "preview": True})
