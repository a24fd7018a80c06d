"""Native placement modes: ``native-slots`` and ``native-roles`` as pure ordering policies.

Upstream these are delivery modes of the DSH host (official system sections, user ``context``
and ``pre-step`` messages). tavernbox has no host, so they are mapped to what they mean for the
message array (research section 16, gap 1): only system and user contributions exist, system
content sits before the native conversation, user content after it.

* ``native-slots``: the preset's history/input slots are the boundaries. Placement first runs as in
  ``st``; then content before the history slot becomes system, content between history and input
  becomes user (before the input, a "pre-step"), content after the input user. With only an input
  slot, content before it keeps its role and content after it becomes user. With no slot at all the
  roles-first policy applies (``NATIVE_SLOTS_ABSENT``). Slot-owned content between history and input is a pre-step
  (``NATIVE_DELIVERY_ADJUSTED``).
* ``native-roles``: authored roles are kept; every system contribution moves to the system group
  before history, user contributions go after the input (a rule with ``delivery: pre-step`` right
  before it).

Depth is not honoured in these modes: depth 1 means "before history" (system) and depth 0 "after
the input" (user), reported as ``NATIVE_DEPTH_BOUNDARY``; other depths are placed by role
(``NATIVE_DEPTH_APPROXIMATED``). A changed role is ``NATIVE_ROLE_ADJUSTED``; a changed order
``NATIVE_PLACEMENT_ADJUSTED``. Native messages (including later native system updates, which keep
their depth) are never moved by these rules.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..errors import Diagnostic, TemplateError
from .identity import derived_id, text_hash

if TYPE_CHECKING:
    from .node import Node
    from .rules import Preset

__all__ = ["NATIVE_PLACEMENTS", "arrange_native", "check_native_preset"]

NATIVE_PLACEMENTS = ("native-roles", "native-slots")


def check_native_preset(preset: Preset) -> None:
    """Refuse a native-mode preset the modes cannot honour (before anything is resolved)."""
    if preset.placement not in NATIVE_PLACEMENTS:
        return
    if preset.backend != "native":
        raise TemplateError(
            f"placement {preset.placement!r} is a native delivery mode and needs backend 'native'",
            code="ASSEMBLY_PLACEMENT_UNSUPPORTED",
        )
    for kind in ("history", "input"):
        if not any(r.kind == kind and r.enabled for r in preset.rules):
            raise TemplateError(f"native placement needs an enabled {kind!r} rule", code="ASSEMBLY_NATIVE_UNSUPPORTED")
    for r in preset.rules:
        if not r.enabled:
            continue
        if r.lifetime == "snapshot" or r.depth is not None or r.role == "assistant":
            raise TemplateError(
                f"rule {r.id!r}: native placement allows no snapshot lifetime, no depth and no assistant role",
                code="ASSEMBLY_NATIVE_UNSUPPORTED",
                path=f"rule {r.id}",
            )


def _retarget(node: Node, role: str, diagnostics: list[Diagnostic], why: str) -> None:
    if node.role == role:
        return
    diagnostics.append(Diagnostic("NATIVE_ROLE_ADJUSTED", f"{node.key}: {node.role} -> {role} ({why})",
                                  data={"node": node.key, "from": node.role, "to": role}))
    node.role = role
    messages = []
    for m in node.messages:
        digest = text_hash(m["content"], role)
        messages.append({**m, "role": role, "id": derived_id("text", node.key, digest)})
    node.messages = messages
    node.hash = text_hash(messages[0]["content"], role) if len(messages) == 1 else node.hash


def _by_slot(node: Node) -> bool:
    return bool(node.lock_reason and node.lock_reason.startswith("reference:"))


def arrange_native(preset: Preset, rows: list[Node], deferred: list[Node]) -> tuple[list[Node], list[Node], list[Diagnostic]]:
    """Reorder ``rows`` (the ``st`` placement) for a native mode.

    Returns ``(rows, still_deferred, diagnostics)``: the native nodes that keep their depth stay
    deferred; every other deferred node has been placed by the boundary rules.
    """
    diags: list[Diagnostic] = []
    history = next((i for i, n in enumerate(rows) if n.native and n.source_id == "history"), None)
    inputs = next((i for i, n in enumerate(rows) if n.native and n.source_id == "input"), None)
    if history is not None and inputs is not None and inputs < history:
        raise TemplateError("native placement cannot put the current input before history",
                            code="ASSEMBLY_NATIVE_UNSUPPORTED")
    mode = preset.placement
    slots = any(_by_slot(rows[i]) for i in (history, inputs) if i is not None)
    if mode == "native-slots" and not slots:
        diags.append(Diagnostic("NATIVE_SLOTS_ABSENT", "the preset has no history or input slot: roles first"))
        mode = "native-roles"
    keep_deferred = [n for n in deferred if n.native]
    late_system: list[Node] = []
    late_user: list[Node] = []
    for node in deferred:
        if node.native:
            continue
        depth = node.depth or 0
        if depth in (0, 1):
            diags.append(Diagnostic("NATIVE_DEPTH_BOUNDARY", f"{node.key}: depth {depth} placed "
                                    f"{'before history' if depth else 'after the input'}",
                                    data={"node": node.key, "depth": depth}))
            system = depth == 1
        else:
            diags.append(Diagnostic("NATIVE_DEPTH_APPROXIMATED", f"{node.key}: depth {depth} placed by its role",
                                    data={"node": node.key, "depth": depth}))
            system = node.role == "system"
        _retarget(node, "system" if system else "user", diags, "native depth boundary")
        node.depth = None
        (late_system if system else late_user).append(node)
    before: list[Node] = []
    after: list[Node] = []
    natives_mid: list[Node] = []
    if mode == "native-slots":
        first = history if history is not None else inputs
        for i, node in enumerate(rows):
            if node.native:
                (before if first is None or i < first else natives_mid).append(node)
                continue
            if first is None or i < first:
                role = "system" if history is not None else ("user" if node.role == "assistant" else node.role)
                _retarget(node, role, diags, "before the history slot" if history is not None else "before the input")
                before.append(node)
            elif inputs is not None and i < inputs:
                _retarget(node, "user", diags, "between history and input (pre-step)")
                diags.append(Diagnostic("NATIVE_DELIVERY_ADJUSTED", f"{node.key}: delivered as a pre-step user message "
                                        "before the input", data={"node": node.key}))
                natives_mid.append(node)
            else:
                _retarget(node, "user", diags, "after the history slot")
                after.append(node)
        out = before + late_system + natives_mid + after + late_user
    else:
        system_group: list[Node] = []
        conversation: list[Node] = []
        pre_step: list[Node] = []
        for node in rows:
            if node.native:
                (system_group if node.source_id == "native-system" else conversation).append(node)
            elif node.role == "system":
                system_group.append(node)
            else:
                _retarget(node, "user", diags, "native roles deliver no assistant content")
                rule = preset.rule(node.rule_id)
                (pre_step if rule is not None and rule.delivery == "pre-step" else after).append(node)
        input_at = next((i for i, n in enumerate(conversation) if n.source_id == "input"), len(conversation))
        out = system_group + late_system + conversation[:input_at] + pre_step + conversation[input_at:] + after + late_user
    row_ids = {id(n) for n in rows}
    if [id(n) for n in out if id(n) in row_ids] != [id(n) for n in rows]:
        diags.append(Diagnostic("NATIVE_PLACEMENT_ADJUSTED", "content was reordered to fit the native boundaries"))
    return out, keep_deferred, diags
