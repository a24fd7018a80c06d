"""Fixed requests whose whole result (messages, nodes, provenance, record) is pinned by hash.

The assembler's speed work (compiled-template caches, one macro context per request, lazy
freezing, parsed-preset caches) must not change a single output byte. These hashes were taken
before that work; a change here means the output changed. If a deliberate behaviour change (in
the assembler or the macro engine) moves them, re-pin with the new value and say why in the
commit.

The requests exercise what the caches could get wrong: the same text rendered in several blocks,
``{{setvar}}``/``{{getvar}}`` carrying request-local variables from block to block, ``{{random}}``
draws, source macros, literal macros, world info at depths, tool transactions, and a real
321-prompt SillyTavern preset (Lucid Loom) with a card.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tavernbox.assembler import Assembler, AssemblyRequest, SourceRegistry, parse_preset, replay
from tavernbox.assembler.identity import content_hash
from tavernbox.assembler.limits import dumps
from tavernbox.assembler.render import TAVERN
from tavernbox.assembler.sources import builtin_registry

CORPORA = Path(__file__).resolve().parents[1].parent / "shared" / "corpora"
LOOM = CORPORA / "presets" / "prolix-lucid-loom-v3.2.json"
SERAPHINA = CORPORA / "cards" / "prolix-seraphina-lyravell.v3.json"


def _prompts(context: Any, rule: Any) -> dict[str, Any]:
    blocks: list[dict[str, Any]] = []
    for i in range(60):
        text = f"Prompt {i}: {{{{char}}}} keeps to the style guide."
        if i % 6 == 0:
            text = "Shared text for {{user}}."  # one text rendered by several blocks
        if i % 9 == 0:
            text += f" {{{{setvar::count::{i}}}}}{{{{addvar::seen::1}}}}"
        if i % 9 == 4:
            text += " Count is {{getvar::count}}, seen {{getvar::seen}}. {{random::red::green::blue}} {{roll:d20}}"
        if i == 7:
            text += " About: {{description}} / {{persona}}"
        block: dict[str, Any] = {"type": "text", "id": f"p{i}", "text": text, "role": "system"}
        if i % 11 == 0:
            block["depth"], block["order"], block["role"] = i % 5, i, "user"
        blocks.append(block)
    return {"blocks": blocks}


def _registry() -> SourceRegistry:
    reg = builtin_registry()
    reg.register({"id": "pin.prompts", "plugin_id": "pin", "name": "60 prompts", "resolve": _prompts,
                  "renderer": TAVERN, "dependencies": ("character", "persona")})
    return reg


def _chat(n: int) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"id": "sys", "role": "system", "content": "You are a narrator."}]
    for i in range(n):
        if i % 10 == 5:
            messages.append({"id": f"m{i}", "role": "assistant", "content": None,
                             "tool_calls": [{"id": f"c{i}", "name": "roll", "arguments": "{}"}]})
        elif i % 10 == 6:
            messages.append({"id": f"m{i}", "role": "tool", "content": "4", "tool_call_id": f"c{i - 1}"})
        else:
            messages.append({"id": f"m{i}", "role": "user" if i % 2 == 0 else "assistant",
                             "content": f"Message {i} about the dragon {{{{char}}}}."})
    if messages[-1]["role"] != "user":
        messages.append({"id": "last", "role": "user", "content": "What now?"})
    return messages


def _synthetic() -> Any:
    messages = _chat(40)
    book = [{"id": i, "content": f"Lore {i}: {{{{char}}}} and the inn. {{{{format_message_variable::stat_data}}}}"
             if i == 3 else f"Lore {i}: {{{{char}}}} and the inn.", "comment": f"e{i}",
             "position": "at_depth" if i % 4 == 0 else ("before" if i % 2 else "after"), "depth": i % 3, "order": i,
             "role": "user" if i % 4 == 0 else "system"} for i in range(12)]
    rules = [{"id": "native", "kind": "native-system"}, {"id": "prompts", "kind": "pin.prompts", "lifetime": "request"},
             {"id": "persona", "kind": "persona"}, {"id": "character", "kind": "character"},
             {"id": "wb", "kind": "worldbook"}, {"id": "history", "kind": "history"}, {"id": "input", "kind": "input"},
             {"id": "phi", "kind": "phi", "text": "Stay in character, {{char}}."}]
    preset = parse_preset({"format": "dsh-tavern-request-assembly", "version": 1, "name": "pin", "placement": "st",
                           "rules": rules})
    assets = {"character": {"data": {"name": "Seraphina", "description": "A guardian of the glade, {{user}}'s friend.",
                                     "personality": "Kind.", "scenario": "A forest.",
                                     "post_history_instructions": "Be brief."}},
              "persona": {"name": "Ann", "description": "A traveller."}, "world_info": book,
              "mvu": {"name": "state", "stat_data": {"hp": [10, "health"], "$meta": 1, "bag": {"coins": 3}}}}
    return Assembler(_registry()).assemble(AssemblyRequest(
        preset, tuple(messages), (messages[-1]["id"],), assets, system_prompt_update="in-history", seed=7))


def _loom() -> Any:
    from tavernbox.assets import load_asset
    from tavernbox.strategies import builtin_strategy, st_registry

    st = load_asset(LOOM, kind="preset").model.model_dump(mode="json", exclude_none=True)
    card = load_asset(SERAPHINA, kind="card").model.model_dump(mode="json")
    card = {k: v for k, v in card.get("data", card).items() if k != "character_book"}
    messages = _chat(30)
    return Assembler(st_registry()).assemble({
        "preset": builtin_strategy("builtin-st"), "messages": messages, "input_ids": [messages[-1]["id"]],
        "assets": {"st_preset": st, "character": card, "persona": {"name": "Ann", "description": "A traveller."}},
        "system_prompt_update": "in-history", "seed": 3})


def _digest(result: Any) -> tuple[str, str]:
    return content_hash(dumps(result.to_dict())), content_hash(dumps(result.record))


# re-pinned when the ``st`` placement took SillyTavern's rules: prompt text is sent untrimmed and
# in-chat depths count every chat message, depth 0 ending the history (not the request)
SYNTHETIC_PIN = ("sha256:369ba845147c3369686f8fdf3ec87066bfd422ddc932c33da480ccd5236793eb",
                 "sha256:c06278bbdbaf3f75ddd1be25dd134872d40af42a30eeeee3bbe450cc02b4f26c")
# re-pinned when a render's diagnostics named their block (data: block_id, resource_id, field, text); the
# result without those keys still hashes to the previous pin, sha256:e5ad5c0a...
LOOM_PIN = ("sha256:a8aca7f25b563a120705657b44f6f16d335a124705265fa2b8349f1419e8892b",
            "sha256:ea34d21d26275846134f885d24154e0591d7123dfcf0064c62dbacb9d384888d")


def test_synthetic_request_is_byte_identical_to_the_pinned_result() -> None:
    first = _synthetic()
    assert _digest(first) == SYNTHETIC_PIN
    assert _digest(_synthetic()) == SYNTHETIC_PIN  # caches warm: still the same bytes
    again = replay(json.loads(json.dumps(first.record)))
    assert dumps(again.messages) == dumps(first.messages)


@pytest.mark.needs_shared("corpora/presets/prolix-lucid-loom-v3.2.json", "corpora/cards/prolix-seraphina-lyravell.v3.json")
def test_lucid_loom_request_is_byte_identical_to_the_pinned_result() -> None:
    assert _digest(_loom()) == LOOM_PIN
    assert _digest(_loom()) == LOOM_PIN
