"""Shared fixtures for the assembler tests: preset builders, native chats, a stand-in preset source.

The stand-in ``preset`` source is a small test double of the SillyTavern prompt-manager source
(a later issue): it turns ``assets["prompts"]`` into text blocks and slot references exactly the
way the upstream adapter does (markers become references with ``honor_enabled`` false for card
fields, absolute prompts get a depth and an order, ``jailbreak`` is routed to the PHI row in list
placement), so the section-15 facts exercise the real core algorithm.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tavernbox.assembler import Assembler, AssemblyResult, SourceRegistry
from tavernbox.assembler.render import TAVERN
from tavernbox.assembler.sources import builtin_registry, split_authored_text

FORMAT = "dsh-tavern-request-assembly"


def require_macro_engine() -> None:
    """Skip (naming the reason) when the macro engine of issue 2 is not in this tree."""
    import pytest

    import tavernbox.macros

    if not hasattr(tavernbox.macros, "expand_macros"):
        pytest.skip("the macro engine (issue 2, tavernbox.expand_macros) is not installed in this tree")


def preset(rules: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    """A preset dict around ``rules``."""
    return {"format": FORMAT, "version": 1, "name": "test", "rules": rules, **extra}


def rule(kind: str, rid: str | None = None, **fields: Any) -> dict[str, Any]:
    """A rule dict (id defaults to the kind with ``.``/``/`` replaced)."""
    return {"id": rid or kind.replace(".", "-").replace("/", "-"), "kind": kind, **fields}


DEFAULT_KINDS = ["native-system", "preset", "persona", "character", "worldbook", "history", "input", "phi"]
MODULE_KINDS = ["native-system", "preset", "persona", "character", "history", "input", "worldbook", "phi"]


def rules_for(kinds: list[str], **overrides: dict[str, Any]) -> list[dict[str, Any]]:
    """One rule per kind; ``overrides[kind]`` adds fields to that rule."""
    return [rule(k, **overrides.get(k.replace("-", "_"), {})) for k in kinds]


def msg(spec: str, **extra: Any) -> dict[str, Any]:
    """``"id:role:content"`` (content defaults to the id upper-cased)."""
    parts = spec.split(":", 2)
    mid, role = parts[0], parts[1]
    content = parts[2] if len(parts) > 2 else mid.upper()
    return {"id": mid, "role": role, "content": content, **extra}


def chat(*specs: str) -> list[dict[str, Any]]:
    """Native messages from ``"id:role[:content]"`` specs."""
    return [msg(s) for s in specs]


BASIC = ["s:system:S", "u1:user:U1", "a1:assistant:A1", "u2:user:U2"]


_CARD_REFS = {
    "charDescription": "description",
    "charPersonality": "personality",
    "scenario": "scenario",
    "dialogueExamples": "examples",
}
_SLOT_MARKERS = {
    "chatHistory": "{{chatHistory}}",
    "history": "{{history}}",
    "input": "{{input}}",
    "worldInfoBefore": "{{worldInfoBefore}}",
    "worldInfoAfter": "{{worldInfoAfter}}",
}


def _preset_source(context: Mapping[str, Any], rule: Mapping[str, Any]) -> dict[str, Any]:
    assets = context["assets"]
    rules = context["preset"]["rules"]
    modules = context["preset"].get("placement", "modules") == "modules"
    phi_enabled = any(r["kind"] == "phi" and r["enabled"] for r in rules)
    blocks: list[dict[str, Any]] = []
    for p in assets.get("prompts", ()):
        ident = p["identifier"]
        role = p.get("role")
        if p.get("marker"):
            if ident in _CARD_REFS:
                blocks.append({"type": "reference", "id": f"preset:{ident}", "source_id": "character",
                               "block_ids": [_CARD_REFS[ident]], "honor_enabled": False, "use_owner_rule": True})
            elif ident in _SLOT_MARKERS:
                for b in split_authored_text(_SLOT_MARKERS[ident], role):
                    blocks.append({**b, "id": f"preset:{ident}:{b['id']}"})
            continue
        for b in split_authored_text(p.get("content", ""), role):
            b = {**b, "id": f"preset:{ident}:{b['id']}"}
            if b["type"] == "text":
                b["name"] = p.get("name") or ident
                b["source"] = {"resource_id": "preset", "field": ident}
                if p.get("depth") is not None:
                    b["depth"] = p["depth"]
                    b["order"] = p.get("order", 100)
                if ident == "jailbreak" and modules and phi_enabled:
                    b["target_source_id"] = "phi"
            blocks.append(b)
    return {"blocks": blocks}


def registry() -> SourceRegistry:
    """The built-in sources plus the stand-in ``preset`` source."""
    reg = builtin_registry()
    reg.register(
        {
            "id": "preset",
            "plugin_id": "pmp-dsh-tavern",
            "name": "Preset (test double)",
            "resolve": _preset_source,
            "dependencies": ("character", "persona", "history", "input", "worldbook", "phi"),
            "lifetimes": ("request",),
            "renderer": TAVERN,
        }
    )
    return reg


def assemble(
    rules: list[dict[str, Any]],
    messages: list[dict[str, Any]] | None = None,
    input_ids: list[str] | None = None,
    *,
    assets: dict[str, Any] | None = None,
    reg: SourceRegistry | None = None,
    placement: str = "modules",
    **options: Any,
) -> AssemblyResult:
    """Assemble with the test registry; input defaults to the last user message."""
    messages = chat(*BASIC) if messages is None else messages
    if input_ids is None:
        users = [m["id"] for m in messages if m["role"] == "user"]
        input_ids = users[-1:]
    options.setdefault("system_prompt_update", "in-history")
    request = {
        "preset": preset(rules, placement=placement),
        "messages": messages,
        "input_ids": input_ids,
        "assets": assets or {},
        **options,
    }
    return Assembler(reg or registry()).assemble(request)


def texts(result: AssemblyResult) -> list[str]:
    """Contents of the logical (pre-projection) messages."""
    return [m["content"] for m in result.logical_messages]


def roles(result: AssemblyResult) -> list[str]:
    """Roles of the logical messages."""
    return [m["role"] for m in result.logical_messages]


def codes(result: AssemblyResult) -> list[str]:
    """Diagnostic codes of a result."""
    return [d.code for d in result.diagnostics]
