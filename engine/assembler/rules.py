"""Assembly presets in the wire format ``dsh-tavern-request-assembly`` version 1.

A preset is data only: an ordered list of rules, each naming a source (``kind``) and how its
content is placed. It is validated here once, at the boundary, so the assembler downstream can
trust every field; an invalid preset fails with ``ASSEMBLY_PRESET_INVALID`` and the JSON path of
the offending value (``$.rules[3].depth``), because presets come from strangers and a user must be
able to find the bad field. No executable content is accepted: unknown keys are ignored on import
and never exported.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field, replace
from typing import Any

from ..errors import TemplateError

__all__ = [
    "FORMAT",
    "MAX_RULES",
    "Preset",
    "Rule",
    "dump_preset",
    "load_preset",
    "parse_preset",
]

FORMAT = "dsh-tavern-request-assembly"
VERSION = 1
MAX_RULES = 128
MAX_NAME = 200
MAX_TEXT = 524_288
MAX_DEPTH = 10_000

RULE_ID = re.compile(r"[A-Za-z0-9_-]{1,80}")
#: source ids (rule kinds, descriptor ids, plugin ids): a letter/digit then up to 159 of ``_ . : / -``
SOURCE_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:/-]{0,159}")

ROLES = ("preserve", "system", "user", "assistant")
LIFETIMES = ("request", "snapshot")
PLACEMENTS = ("modules", "st", "native-roles", "native-slots")
#: kinds whose text is authored by the user and so must carry an explicit role (default user)
TEXT_KINDS = frozenset({"custom", "dsh.text"})


@dataclass(frozen=True, slots=True)
class Rule:
    """One row of a preset: which source, enabled or not, and how its content is placed.

    ``synthetic`` marks the implicit rule made for a dependency that the preset does not list;
    such a rule is never a root and never owns a row.
    """

    id: str
    kind: str
    enabled: bool = True
    role: str = "preserve"
    lifetime: str = "request"
    depth: int | None = None
    text: str = ""
    name: str = ""
    delivery: str | None = None
    input_mode: str = "source"
    synthetic: bool = False

    def to_dict(self) -> dict[str, Any]:
        """The wire form (keys in the upstream order; defaults of optional keys omitted)."""
        out: dict[str, Any] = {
            "id": self.id,
            "kind": self.kind,
            "enabled": self.enabled,
            "role": self.role,
            "lifetime": self.lifetime,
            "depth": self.depth,
            "text": self.text,
            "name": self.name,
        }
        if self.delivery is not None:
            out["delivery"] = self.delivery
        if self.input_mode != "source":
            out["inputMode"] = self.input_mode
        return out


@dataclass(frozen=True, slots=True)
class Preset:
    """A validated preset. ``rules`` keep the preset's list order, which is the primary order."""

    name: str
    rules: tuple[Rule, ...]
    id: str | None = None
    placement: str = "modules"
    backend: str | None = None
    layout: Any = None
    extra: dict[str, Any] = field(default_factory=dict)

    def rule(self, rule_id: str) -> Rule | None:
        """The rule with this id, if the preset lists it."""
        for r in self.rules:
            if r.id == rule_id:
                return r
        return None

    def to_dict(self) -> dict[str, Any]:
        """The wire form: ``format``, ``version``, then the preset fields."""
        out: dict[str, Any] = {"format": FORMAT, "version": VERSION}
        if self.id is not None:
            out["id"] = self.id
        out["name"] = self.name
        if self.backend is not None:
            out["backend"] = self.backend
        out["placement"] = self.placement
        if self.layout is not None:
            out["layout"] = self.layout
        out["rules"] = [r.to_dict() for r in self.rules]
        return out

    def with_rules(self, rules: list[Rule]) -> Preset:
        """A copy with other rules (used by tests and tools that edit presets)."""
        return replace(self, rules=tuple(rules))


def _bad(message: str, path: str) -> TemplateError:
    return TemplateError(f"{message} at {path}", code="ASSEMBLY_PRESET_INVALID", path=path)


def _rule(raw: Any, index: int) -> Rule:
    path = f"$.rules[{index}]"
    if not isinstance(raw, dict):
        raise _bad("a rule must be an object", path)
    rid = raw.get("id")
    if not isinstance(rid, str) or not RULE_ID.fullmatch(rid):
        raise _bad("rule id must be 1-80 ASCII letters, digits, '_' or '-'", f"{path}.id")
    kind = raw.get("kind")
    if not isinstance(kind, str) or not SOURCE_ID.fullmatch(kind):
        raise _bad("rule kind must be a source id (letter or digit, then up to 159 of [A-Za-z0-9_.:/-])", f"{path}.kind")
    enabled = raw.get("enabled", True) is not False
    text_kind = kind in TEXT_KINDS
    role = raw.get("role")
    if role is None:
        role = "user" if text_kind else "preserve"
    if role not in ROLES:
        raise _bad(f"rule role must be one of {', '.join(ROLES)}", f"{path}.role")
    if text_kind and role == "preserve":
        role = "system"  # legacy custom `preserve` kept its effective meaning, system
    lifetime = raw.get("lifetime", "request")
    if lifetime is None:
        lifetime = "request"
    if lifetime not in LIFETIMES:
        raise _bad("rule lifetime must be 'request' or 'snapshot'", f"{path}.lifetime")
    depth = raw.get("depth")
    if depth is not None and (
        isinstance(depth, bool) or not isinstance(depth, int) or not 0 <= depth <= MAX_DEPTH
    ):
        raise _bad(f"invalid insertion depth (an integer 0..{MAX_DEPTH} or null)", f"{path}.depth")
    text = raw.get("text", "")
    if text is None:
        text = ""
    if not isinstance(text, str):
        raise _bad("rule text must be a string", f"{path}.text")
    if len(text) > MAX_TEXT:
        raise _bad(f"rule text exceeds {MAX_TEXT} characters", f"{path}.text")
    name = raw.get("name", "")
    name = name[:MAX_NAME] if isinstance(name, str) else ""
    delivery = raw.get("delivery")
    if delivery is not None and delivery not in ("context", "pre-step"):
        raise _bad("rule delivery must be 'context' or 'pre-step'", f"{path}.delivery")
    mode = raw.get("inputMode", raw.get("input_mode", "source"))
    if mode is None:
        mode = "source"
    if mode not in ("source", "text"):
        raise _bad("rule inputMode must be 'source' or 'text'", f"{path}.inputMode")
    return Rule(rid, kind, enabled, role, lifetime, depth, text, name, delivery, mode)


def parse_preset(data: Any) -> Preset:
    """Validate a preset given as parsed JSON and return it normalised.

    Raises ``TemplateError(ASSEMBLY_PRESET_INVALID)`` naming the JSON path of the first bad value.
    """
    if not isinstance(data, dict):
        raise _bad("a preset must be a JSON object", "$")
    if data.get("format") != FORMAT:
        raise _bad(f"unsupported assembly preset format (expected {FORMAT!r})", "$.format")
    if data.get("version") != VERSION or isinstance(data.get("version"), bool):
        raise _bad(f"unsupported assembly preset version (expected {VERSION})", "$.version")
    name = data.get("name")
    if not isinstance(name, str) or not name.strip() or len(name.strip()) > MAX_NAME:
        raise _bad(f"preset name must be a non-empty string of at most {MAX_NAME} characters", "$.name")
    pid = data.get("id")
    if pid is not None and not isinstance(pid, str):
        raise _bad("preset id must be a string", "$.id")
    backend = data.get("backend")
    if backend is not None and backend not in ("native", "core"):
        raise _bad("preset backend must be 'native' or 'core'", "$.backend")
    placement = data.get("placement")
    placement = placement if placement in PLACEMENTS else "modules"
    layout = data.get("layout")
    if layout is not None:
        if not isinstance(layout, dict):
            raise _bad("preset layout must be an object", "$.layout")
        slots = layout.get("source") == "preset-slots"
        if backend == "native":
            placement = "native-slots" if slots else "native-roles"
        else:
            placement = "st" if slots else "modules"
    rules_raw = data.get("rules")
    if not isinstance(rules_raw, list):
        raise _bad("preset rules must be an array", "$.rules")
    if len(rules_raw) > MAX_RULES:
        raise _bad(f"a preset holds at most {MAX_RULES} rules", "$.rules")
    rules: list[Rule] = []
    seen: set[str] = set()
    for i, raw in enumerate(rules_raw):
        rule = _rule(raw, i)
        if rule.id in seen:
            raise _bad(f"rule ids must be unique ({rule.id!r} repeats)", f"$.rules[{i}].id")
        seen.add(rule.id)
        rules.append(rule)
    # a layout round-trips as data only (the position-priority layer is a later issue)
    return Preset(name.strip(), tuple(rules), pid, placement, backend, json.loads(json.dumps(layout)) if layout is not None else None)


def load_preset(text: str) -> Preset:
    """Parse preset JSON text; bad JSON is ``ASSEMBLY_PRESET_INVALID`` with line and column."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise TemplateError(
            f"preset is not valid JSON: {exc.msg}", code="ASSEMBLY_PRESET_INVALID", line=exc.lineno, column=exc.colno
        ) from None
    return parse_preset(data)


def dump_preset(preset: Preset) -> str:
    """Export a preset as JSON text (the raw preset object, two-space indented, non-ASCII kept)."""
    return json.dumps(preset.to_dict(), ensure_ascii=False, indent=2)
