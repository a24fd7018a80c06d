"""The MVU variables source: ``variable_resource_id: "mvu:<id>"``, read lazily.

The state is only read when a template touches ``variables`` or calls ``getvar`` (the bridge asks
for the ``variables`` lookup then, never before), so a template that does not read variables
makes no MVU read at all (``reads`` counts them). Templates see the whole variables object
(``stat_data`` with its ``[value, "description"]`` pairs and ``$meta``), so
``getvar('stat_data.hp[0]')`` works as in real cards.

``expand_mvu_macros`` renders ``{{format_message_variable::stat_data}}`` (YAML, ``$`` keys removed,
dsh-assembler 11.3) and ``{{get_message_variable::path}}`` (strings raw, other values as JSON) in
one pass: the inserted data is literal and is never scanned for macros again.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..errors import TemplateError
from .leases import Resolution, Revocable
from .revision import revision_of

__all__ = ["MvuSource", "expand_mvu_macros", "format_stat_data", "lookup_path"]

_MACRO = re.compile(r"\{\{\s*(format_message_variable|get_message_variable)::([^{}]*?)\s*\}\}", re.I)
_PATH_TOKEN = re.compile(r"""\[(\d+)\]|\[(?:'([^']*)'|"([^"]*)")\]|([^.\[\]]+)""")


class MvuSource:
    """One MVU variables resource; ``update`` replaces its state (old leases become stale)."""

    adapter_id = "tavern.mvu"

    def __init__(self, variables: Any, *, resource_id: str = "mvu:default") -> None:
        if not resource_id.startswith("mvu:"):
            raise TemplateError(f"an MVU resource id starts with 'mvu:', got {resource_id!r}", code="INPUT_INVALID")
        self.id = resource_id
        self.reads = 0
        self.lease = Revocable()
        self._set(variables)

    @classmethod
    def load(cls, path: str | Path, *, resource_id: str | None = None) -> MvuSource:
        """Read MVU variables (JSON, JSON5 or YAML: an initvar tree or an object with ``stat_data``)."""
        from ..assets import load_asset

        asset = load_asset(path, kind="mvu")
        return cls(asset.model, resource_id=resource_id or f"mvu:{Path(path).stem}")

    def _set(self, variables: Any) -> None:
        if hasattr(variables, "model_dump"):
            variables = variables.model_dump(mode="json")
        if not isinstance(variables, Mapping):
            raise TemplateError("MVU variables must be an object", code="INPUT_INVALID")
        data = dict(variables)
        if "stat_data" not in data:
            data = {"stat_data": data}
        try:
            self._data = json.loads(json.dumps(data, ensure_ascii=False, allow_nan=False))
        except RecursionError:
            raise TemplateError("MVU variables are nested too deeply", code="TEMPLATE_INPUT_LIMIT") from None
        except (TypeError, ValueError) as exc:
            raise TemplateError(f"MVU variables are not JSON data: {exc}", code="INPUT_INVALID") from None
        self._revision = revision_of(self._data)

    def update(self, variables: Any) -> None:
        """Replace the state (a new message's variables): leases on the old state are stale."""
        self._set(variables)

    @property
    def revision(self) -> str:
        return self._revision

    @property
    def data(self) -> dict[str, Any]:
        """The variables object (a copy-free view: treat as read-only)."""
        return self._data

    def resolve_variables(self) -> Resolution:
        """The variables for one template, with a lease tied to this revision."""
        self.reads += 1
        granted = self._revision

        def check() -> str:
            state = self.lease.check_current()
            if state != "current":
                return state
            return "current" if self._revision == granted else "content_changed"

        return Resolution(self.id, self.adapter_id, self._data, granted, None, check)


def lookup_path(root: Any, path: str) -> tuple[bool, Any]:
    """``(found, value)`` of a lodash-style path (``a.b[0]['c']``); the exact key wins first."""
    if isinstance(root, Mapping) and path in root:
        return True, root[path]
    cur = root
    pos = 0
    for m in _PATH_TOKEN.finditer(path):
        if path[pos:m.start()].strip("."):
            return False, None
        pos = m.end()
        index, single, double, name = m.groups()
        key: Any = single if single is not None else double if double is not None else name
        if index is not None:
            key = int(index)
        if isinstance(cur, list) and isinstance(key, (int, str)) and str(key).isdigit():
            i = int(key)
            if i >= len(cur):
                return False, None
            cur = cur[i]
        elif isinstance(cur, Mapping) and str(key) in cur:
            cur = cur[str(key)]
        else:
            return False, None
    return True, cur


def format_stat_data(stat_data: Any) -> str:
    """MVU ``stat_data`` as the prompt sees it: YAML, every ``$`` key removed (recursively).

    Arrays are kept, so a ``[value, "description"]`` pair prints as a two-item sequence;
    multi-line strings use literal block style; trailing whitespace is trimmed.
    """
    import yaml

    def strip(value: Any) -> Any:
        if isinstance(value, Mapping):
            return {str(k): strip(v) for k, v in value.items() if not str(k).startswith("$")}
        if isinstance(value, (list, tuple)):
            return [strip(v) for v in value]
        return value

    class _Dumper(yaml.SafeDumper):
        pass

    def text(dumper: yaml.SafeDumper, data: str) -> Any:
        return dumper.represent_scalar("tag:yaml.org,2002:str", data, style="|" if "\n" in data else None)

    _Dumper.add_representer(str, text)
    return yaml.dump(strip(stat_data), Dumper=_Dumper, allow_unicode=True, sort_keys=False,
                     default_flow_style=False, width=1 << 16).rstrip()


def expand_mvu_macros(text: str, source: MvuSource | None) -> tuple[str, Resolution | None]:
    """Replace the two MVU macros in ``text``; the state is read only if one is present.

    Returns the text and the resolution read (``None`` when no macro or no source). Without a
    source the macros are left as written.
    """
    if source is None or _MACRO.search(text) is None:
        return text, None
    resolution = source.resolve_variables()
    data = resolution.content

    def sub(m: re.Match[str]) -> str:
        name, path = m.group(1).lower(), m.group(2).strip()
        found, value = lookup_path(data, path)
        if not found:
            return ""
        if name == "format_message_variable":
            return format_stat_data(value) if isinstance(value, (Mapping, list)) else (
                value if isinstance(value, str) else json.dumps(value, ensure_ascii=False))
        return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)

    return _MACRO.sub(sub, text), resolution
