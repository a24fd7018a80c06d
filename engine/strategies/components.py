"""Prompt-studio components (seed ``001``): ordered system sections and gap-placed supplements.

A component is ``{id, kind, role, position, order, enabled, template, origin}``. The fields are
independent dimensions:

- ``kind`` is provenance only. ``native`` components are read-only system sections the host
  discovers at runtime (never persisted, never overrides); ``supplement`` components are authored by
  the user and persisted in ``settings.yaml``.
- ``role`` decides where content goes. ``system`` components are ordered *sections* merged with the
  native sections into the one system string (they take no ``position``); ``user`` and ``assistant``
  components go into the message sequence and need a ``position``.
- ``position`` names the gap: ``after_system`` (before the first conversation message),
  ``anchored`` (right after the last real user message; skipped when there is none) or ``tail``
  (the very end, after tool results and replies). ``anchored`` and ``tail`` coincide in a plain chat
  and differ as soon as a tool flow follows the user's question.
- ``order``: for system sections, a global level shared with the natives (convention: ``-100``
  identity, ``0`` persona, ``100``-``199`` tools; other negatives also precede the persona); for
  user/assistant components, an order *within one gap* only. Ties keep declaration order, natives
  declared first.
- ``origin`` turns a supplement into an override of the native with that id: the native is
  removed; an enabled system override takes the native's place (its ``order`` and declaration
  slot), an enabled user/assistant override goes to its gap, a disabled one only removes the native;
  an origin absent from this assembly creates nothing.

Merging (:func:`assemble_components`): every system section joins the system string as plain text
(no wrapper), separated by a blank line. In a gap, adjacent same-role supplements form one message;
a first group whose role matches the message left of the gap is appended to it, a last group
matching the message right of the gap is prepended to it (after/before a blank line); otherwise new
messages are created. Gaps are applied anchored first, then after_system, then tail. Merging never
writes into a message with non-text content or with tool calls (a new message is made instead), and
the caller's messages are never mutated: supplements are request-local.

``{{user_input}}`` in a supplement template is the last real user input of *this* assembly (read
each time, not frozen when saved); callers may supply more variables (``model``, ``cwd``...). An
unknown or valueless variable is an error (``COMPONENT_TEMPLATE_VARIABLE``), never silent text.
"""

from __future__ import annotations

import math
import os
import re
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import TemplateError
from ..spans import Span

__all__ = [
    "KINDS",
    "POSITIONS",
    "RESERVED_PREFIX",
    "ROLES",
    "SETTINGS_VERSION",
    "Component",
    "ComponentAssembly",
    "assemble_components",
    "dump_settings",
    "load_settings",
    "native_section",
    "parse_component",
    "parse_settings",
    "save_settings",
]

KINDS = ("native", "supplement")
ROLES = ("system", "user", "assistant")
POSITIONS = ("after_system", "anchored", "tail")
#: ids starting with this are the host's ordered marker sections and cannot be components
RESERVED_PREFIX = "prompt-studio:marker:"
SETTINGS_VERSION = 1
#: the separator between system sections and between merged message parts
SEPARATOR = "\n\n"
_VARIABLE = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")
_FIELDS = ("id", "kind", "role", "position", "order", "enabled", "template", "origin")


@dataclass(frozen=True, slots=True)
class Component:
    """One prompt-studio component (see the module docstring for what each field means)."""

    id: str
    kind: str = "supplement"
    role: str = "system"
    position: str | None = None
    order: float = 0
    enabled: bool = True
    template: str = ""
    origin: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """The settings form (every field, in the documented order)."""
        return {
            "id": self.id,
            "kind": self.kind,
            "role": self.role,
            "position": self.position,
            "order": self.order,
            "enabled": self.enabled,
            "template": self.template,
            "origin": self.origin,
        }


def _bad(message: str, path: str) -> TemplateError:
    return TemplateError(f"{message} at {path}", code="COMPONENT_INVALID", path=path)


def parse_component(raw: Any, path: str = "$") -> Component:
    """Validate one component given as data; ``COMPONENT_INVALID`` names the offending JSON path."""
    if isinstance(raw, Component):
        raw = raw.to_dict()
    if not isinstance(raw, Mapping):
        raise _bad("a component must be an object", path)
    unknown = sorted(set(raw) - set(_FIELDS))
    if unknown:
        raise _bad(f"unknown component field {unknown[0]!r}", f"{path}.{unknown[0]}")
    cid = raw.get("id")
    if not isinstance(cid, str) or not cid or cid != cid.strip():
        raise _bad("component id must be a non-empty string without surrounding whitespace", f"{path}.id")
    if cid.startswith(RESERVED_PREFIX):
        raise _bad(f"component ids may not start with the reserved marker prefix {RESERVED_PREFIX!r}", f"{path}.id")
    kind = raw.get("kind", "supplement")
    if kind not in KINDS:
        raise _bad(f"component kind must be one of {', '.join(KINDS)}", f"{path}.kind")
    role = raw.get("role", "system")
    if role not in ROLES:
        raise _bad(f"component role must be one of {', '.join(ROLES)}", f"{path}.role")
    position = raw.get("position")
    if role == "system" and position is not None:
        raise _bad("a system component takes no position (its order places it among the system sections)",
                   f"{path}.position")
    if role != "system" and position not in POSITIONS:
        raise _bad(f"a {role} component needs a position: one of {', '.join(POSITIONS)}", f"{path}.position")
    order = raw.get("order", 0)
    if isinstance(order, bool) or not isinstance(order, (int, float)) or not math.isfinite(order):
        raise _bad("component order must be a finite number", f"{path}.order")
    enabled = raw.get("enabled", True)
    if not isinstance(enabled, bool):
        raise _bad("component enabled must be true or false", f"{path}.enabled")
    template = raw.get("template", "")
    if template is None:
        template = ""
    if not isinstance(template, str):
        raise _bad("component template must be a string", f"{path}.template")
    origin = raw.get("origin")
    if origin is not None and (not isinstance(origin, str) or not origin):
        raise _bad("component origin must be a native component id or null", f"{path}.origin")
    if kind == "native":
        if role != "system":
            raise _bad("a native component is a system section", f"{path}.role")
        if origin is not None:
            raise _bad("a native component cannot override another", f"{path}.origin")
    return Component(cid, kind, role, position, order, enabled, template, origin)


def native_section(cid: str, text: str, order: float = 0) -> Component:
    """A native (host-discovered, read-only) system section."""
    return parse_component({"id": cid, "kind": "native", "role": "system", "order": order, "template": text})


@dataclass(slots=True)
class ComponentAssembly:
    """The result of :func:`assemble_components`.

    ``messages`` is the request (the system message first when there is system text);
    ``contributors[i]`` lists the component ids (and native message ids) that make up message ``i``;
    ``sections`` the system sections in their final order.
    """

    system: str
    messages: list[dict[str, Any]]
    contributors: list[list[str]]
    sections: list[dict[str, Any]] = field(default_factory=list)


def _render(component: Component, variables: Mapping[str, str | None], path: str) -> str:
    """Expand ``{{name}}`` in a supplement template; unknown or valueless names are errors."""

    def value(m: re.Match[str]) -> str:
        name = m.group(1)
        if name not in variables:
            raise TemplateError(
                f"component {component.id!r}: unknown template variable {{{{{name}}}}} "
                f"(known: {', '.join(sorted(variables))})",
                code="COMPONENT_TEMPLATE_VARIABLE", span=Span(m.start(), m.end()), source=component.template, path=path,
            )
        v = variables[name]
        if v is None:
            raise TemplateError(
                f"component {component.id!r}: template variable {{{{{name}}}}} has no value in this assembly",
                code="COMPONENT_TEMPLATE_VARIABLE", span=Span(m.start(), m.end()), source=component.template, path=path,
            )
        return v

    return _VARIABLE.sub(value, component.template)


def _last_user_index(messages: Sequence[Mapping[str, Any]]) -> int | None:
    for i in range(len(messages) - 1, -1, -1):
        if messages[i].get("role") == "user":
            return i
    return None


def _text_of(message: Mapping[str, Any]) -> str | None:
    content = message.get("content")
    return content if isinstance(content, str) else None


def _mergeable(message: Mapping[str, Any] | None, role: str) -> bool:
    return (
        message is not None and message.get("role") == role and _text_of(message) is not None
        and not message.get("tool_calls")
    )


@dataclass(slots=True)
class _Msg:
    message: dict[str, Any]
    contributors: list[str]


def _groups(items: list[tuple[Component, str]]) -> list[tuple[str, list[str], list[str]]]:
    """Adjacent same-role supplements of one gap as ``(role, texts, ids)``."""
    out: list[tuple[str, list[str], list[str]]] = []
    for comp, text in items:
        if out and out[-1][0] == comp.role:
            out[-1][1].append(text)
            out[-1][2].append(comp.id)
        else:
            out.append((comp.role, [text], [comp.id]))
    return out


def _fill_gap(seq: list[_Msg], index: int, items: list[tuple[Component, str]]) -> None:
    """Place a gap's supplements at ``seq[index]`` (between ``seq[index-1]`` and ``seq[index]``)."""
    from ..assembler.identity import derived_id

    groups = _groups(items)
    if not groups:
        return
    left = seq[index - 1] if index > 0 else None
    right = seq[index] if index < len(seq) else None
    if left is not None and _mergeable(left.message, groups[0][0]):
        role, texts, ids = groups.pop(0)
        left.message["content"] = SEPARATOR.join([left.message["content"], *texts])
        left.contributors.extend(ids)
    tail_group = None
    if groups and right is not None and _mergeable(right.message, groups[-1][0]):
        tail_group = groups.pop()
    new = []
    for role, texts, ids in groups:
        content = SEPARATOR.join(texts)
        new.append(_Msg({"id": derived_id("prompt-studio", ids, role, content), "role": role, "content": content},
                        list(ids)))
    if tail_group is not None:
        assert right is not None
        role, texts, ids = tail_group
        right.message["content"] = SEPARATOR.join([*texts, right.message["content"]])
        right.contributors[:0] = ids
    seq[index:index] = new


def assemble_components(
    components: Sequence[Component | Mapping[str, Any]],
    messages: Sequence[Mapping[str, Any]],
    *,
    variables: Mapping[str, str | None] | None = None,
) -> ComponentAssembly:
    """Merge native and supplement components with the conversation ``messages``.

    ``components`` are natives and supplements in declaration order (natives are sorted before
    supplements for tie-breaking, whatever their position in the list). ``messages`` are the
    conversation (user, assistant, tool; no system message: the system text is made of sections).
    ``variables`` adds template variables; ``user_input`` is always the last user message here.
    """
    comps = [parse_component(c, f"$.components[{i}]") for i, c in enumerate(components)]
    paths = {id(c): f"$.components[{i}]" for i, c in enumerate(comps)}
    seen: set[str] = set()
    for c in comps:
        if c.id in seen:
            raise _bad(f"component ids must be unique ({c.id!r} repeats)", f"{paths[id(c)]}.id")
        seen.add(c.id)
    conversation: list[_Msg] = []
    for i, m in enumerate(messages):
        if not isinstance(m, Mapping) or m.get("role") not in ("user", "assistant", "tool"):
            raise _bad("a conversation message is an object with role user, assistant or tool (system text comes "
                       "from native sections)", f"$.messages[{i}]")
        copy = {k: v for k, v in m.items()}
        conversation.append(_Msg(copy, [str(m.get("id", i))]))
    natives = {c.id: c for c in comps if c.kind == "native"}
    overrides: dict[str, Component] = {}
    for c in comps:
        if c.kind == "supplement" and c.origin is not None:
            if c.origin in overrides:
                raise _bad(f"only one override per origin ({c.origin!r} is overridden twice)", f"{paths[id(c)]}.origin")
            if c.origin in seen and c.origin not in natives:
                raise _bad(f"origin {c.origin!r} names a supplement; only natives can be overridden",
                           f"{paths[id(c)]}.origin")
            overrides[c.origin] = c
    last_user = _last_user_index(messages)
    values: dict[str, str | None] = dict(variables or {})
    values["user_input"] = _text_of(messages[last_user]) if last_user is not None else None

    # system sections: (order, declaration slot) with natives declared first
    ordered = [c for c in comps if c.kind == "native"] + [c for c in comps if c.kind == "supplement"]
    sections: list[tuple[float, int, Component, str]] = []
    gap_items: dict[str, list[tuple[float, int, Component]]] = {p: [] for p in POSITIONS}
    for slot, c in enumerate(ordered):
        if c.kind == "native":
            override = overrides.get(c.id)
            if override is None:
                sections.append((c.order, slot, c, c.template))
            elif override.enabled and override.role == "system":
                sections.append((c.order, slot, override, _render(override, values, f"{paths[id(override)]}.template")))
            continue
        if not c.enabled or c.origin is not None and (c.origin not in natives or c.role == "system"):
            continue  # disabled; an override of an absent native; system overrides sit at the native's slot
        if c.role == "system":
            sections.append((c.order, slot, c, _render(c, values, f"{paths[id(c)]}.template")))
        else:
            assert c.position is not None
            gap_items[c.position].append((c.order, slot, c))
    sections.sort(key=lambda s: (s[0], s[1]))
    live = [(c, text) for _, _, c, text in sections if text]
    system = SEPARATOR.join(text for _, text in live)

    def rendered(position: str) -> list[tuple[Component, str]]:
        items = sorted(gap_items[position], key=lambda t: (t[0], t[1]))
        out = [(c, _render(c, values, f"{paths[id(c)]}.template")) for _, _, c in items]
        return [(c, t) for c, t in out if t]

    seq = conversation
    if last_user is not None:  # anchored first: nothing has been inserted yet, so the index holds
        _fill_gap(seq, last_user + 1, rendered("anchored"))
    _fill_gap(seq, 0, rendered("after_system"))
    _fill_gap(seq, len(seq), rendered("tail"))

    out_messages = [m.message for m in seq]
    contributors = [m.contributors for m in seq]
    if system:
        from ..assembler.identity import derived_id

        out_messages.insert(0, {"id": derived_id("prompt-studio-system", system), "role": "system", "content": system})
        contributors.insert(0, [c.id for c, _ in live])
    section_info = [
        {"id": c.id, "kind": c.kind, "order": order, "origin": c.origin, "text": text}
        for order, _, c, text in sections
        if text
    ]
    return ComponentAssembly(system, out_messages, contributors, section_info)


# -- settings.yaml: supplements only -----------------------------------------------------------------


def _settings_error(message: str, *, line: int | None = None, column: int | None = None, path: str | None = None) -> TemplateError:
    return TemplateError(message, code="COMPONENT_SETTINGS_INVALID", line=line, column=column, path=path)


def parse_settings(text: str) -> list[Component]:
    """The supplements of a ``settings.yaml`` text.

    Natives are discovered at runtime and never persisted, so a ``kind: native`` entry is refused
    (``COMPONENT_INVALID``); YAML that does not parse is ``COMPONENT_SETTINGS_INVALID`` with its
    line and column.
    """
    import yaml

    try:
        data = yaml.safe_load(text)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        raise _settings_error(
            f"settings.yaml does not parse: {exc.problem}",
            line=mark.line + 1 if mark else None, column=mark.column + 1 if mark else None,
        ) from None
    except yaml.YAMLError as exc:
        raise _settings_error(f"settings.yaml does not parse: {exc}") from None
    if data is None:
        return []
    if not isinstance(data, dict):
        raise _settings_error("settings.yaml must be a mapping with a components list", path="$")
    if data.get("version", SETTINGS_VERSION) != SETTINGS_VERSION:
        raise _settings_error(f"unsupported settings version (expected {SETTINGS_VERSION})", path="$.version")
    raw = data.get("components", [])
    if not isinstance(raw, list):
        raise _settings_error("components must be a list", path="$.components")
    out = []
    seen: set[str] = set()
    for i, item in enumerate(raw):
        comp = parse_component(item, f"$.components[{i}]")
        if comp.kind == "native":
            raise _bad("native components are discovered at runtime and never persisted", f"$.components[{i}].kind")
        if comp.id in seen:
            raise _bad(f"component ids must be unique ({comp.id!r} repeats)", f"$.components[{i}].id")
        seen.add(comp.id)
        out.append(comp)
    return out


def dump_settings(components: Sequence[Component | Mapping[str, Any]]) -> str:
    """The ``settings.yaml`` text for ``components``: supplements only, natives left out."""
    import yaml

    comps = [parse_component(c, f"$.components[{i}]") for i, c in enumerate(components)]
    data = {
        "version": SETTINGS_VERSION,
        "components": [c.to_dict() for c in comps if c.kind == "supplement"],
    }
    return yaml.safe_dump(data, allow_unicode=True, sort_keys=False, default_flow_style=False)


def load_settings(path: str | os.PathLike[str]) -> list[Component]:
    """Read the supplements from ``settings.yaml`` (a missing file means none)."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        return []
    except (OSError, UnicodeDecodeError) as exc:
        raise _settings_error(f"cannot read {p}: {exc}") from None
    return parse_settings(text)


def save_settings(path: str | os.PathLike[str], components: Sequence[Component | Mapping[str, Any]]) -> None:
    """Write the supplements to ``settings.yaml`` atomically (a temporary file renamed over it), so
    a crash mid-write leaves the old settings, never half of the new ones."""
    p = Path(path)
    text = dump_settings(components)
    fd, tmp = tempfile.mkstemp(prefix=f".{p.name}.", dir=p.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, p)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
