"""Depth insertion, tool transactions at every depth, and native layout validation."""

from __future__ import annotations

from typing import Any

import pytest
from _assembler_support import assemble, registry, rule, texts

from tavernbox import TemplateError
from tavernbox.assembler.tools import advance_past_transactions, check_topology

NATIVES = [rule("native-system"), rule("history"), rule("input")]

TX_CHAT: list[dict[str, Any]] = [
    {"id": "s", "role": "system", "content": "S"},
    {"id": "u1", "role": "user", "content": "U1"},
    {"id": "tc", "role": "assistant", "content": None,
     "tool_calls": [{"id": "c1", "name": "f", "arguments": "{}"}, {"id": "c2", "name": "g", "arguments": "{}"}]},
    {"id": "tr1", "role": "tool", "content": "R1", "tool_call_id": "c1"},
    {"id": "tr2", "role": "tool", "content": "R2", "tool_call_id": "c2"},
    {"id": "a2", "role": "assistant", "content": "A2"},
    {"id": "u2", "role": "user", "content": "U2"},
]

# depth -> (ids just before and after X, moved past a transaction?)
EXPECTED = {
    0: (["u2"], [], False),
    1: (["a2"], ["u2"], False),
    2: (["tr2"], ["a2"], False),
    3: (["tr2"], ["a2"], True),  # requested before tr2: inside the transaction
    4: (["tr2"], ["a2"], True),  # requested before tr1
    5: (["u1"], ["tc"], False),
    6: (["s"], ["u1"], False),
    7: (["s"], ["u1"], False),  # beyond the conversation: before its first message
    50: (["s"], ["u1"], False),
}


@pytest.mark.parametrize("depth", sorted(EXPECTED))
def test_tool_transactions_stay_whole_at_every_depth(depth: int) -> None:
    r = assemble([*NATIVES, rule("custom", "x", text="X", role="system", depth=depth)], TX_CHAT, ["u2"])
    ids = [m["id"] for m in r.logical_messages]
    i = texts(r).index("X")
    before, after, moved = EXPECTED[depth]
    assert ids[i - 1 : i] == before and ids[i + 1 : i + 2] == after
    node = next(n for n in r.nodes if n["source_id"] == "custom")
    assert node["adjusted_for_tools"] is moved and node["depth"] == depth
    check_topology(r.messages)


def test_equal_depth_items_go_in_ascending_order_and_groups_in_first_appearance() -> None:
    reg = registry()
    reg.register({"id": "example.d", "plugin_id": "example", "name": "d", "resolve": lambda c, r: {"blocks": [
        {"type": "text", "id": "b", "text": "B", "depth": 1, "order": 50, "role": "user"},
        {"type": "text", "id": "a", "text": "A", "depth": 1, "order": 5, "role": "user"},
        {"type": "text", "id": "z", "text": "Z", "depth": 0, "role": "user"},
        {"type": "text", "id": "c", "text": "C", "depth": 1, "order": 50, "role": "user"},
    ]}})
    r = assemble([*NATIVES, rule("example.d", "d")], reg=reg, placement="st")
    assert texts(r) == ["S", "U1", "A1", "A", "B", "C", "U2", "Z"]


def test_depth_splits_a_multi_message_node_and_records_both_halves() -> None:
    r = assemble([*NATIVES, rule("custom", "x", text="X", role="user", depth=1)],
                 [*TX_CHAT[:2], {"id": "a1", "role": "assistant", "content": "A1"}, TX_CHAT[-1]], [])
    history = [n for n in r.nodes if n["source_id"] == "history"]
    assert [n["id"] for n in history] == ["history:history", "history:history:split:2"]
    assert [n["input_message_ids"] for n in history] == [["u1", "a1"], ["u2"]]


def test_insertion_into_an_unfinished_transaction_fails() -> None:
    open_chat = TX_CHAT[:4]  # c2 never answered
    with pytest.raises(TemplateError) as err:
        assemble([*NATIVES, rule("custom", "x", text="X", depth=1)], open_chat, [])
    assert err.value.code == "ASSEMBLY_TOOL_TOPOLOGY" and "unfinished" in err.value.message


def test_an_incomplete_native_transaction_fails() -> None:
    with pytest.raises(TemplateError) as err:
        assemble(NATIVES, TX_CHAT[:4], [])
    assert err.value.code == "ASSEMBLY_TOOL_TOPOLOGY" and "incomplete" in err.value.message


def test_a_layout_that_splits_a_transaction_fails() -> None:
    # the tool result is this step's input; putting input before history tears it from its call
    with pytest.raises(TemplateError) as err:
        assemble([rule("native-system"), rule("input"), rule("history")], TX_CHAT[:5], ["tr2"])
    assert err.value.code == "ASSEMBLY_TOOL_TOPOLOGY"


def test_a_text_between_call_and_result_fails_the_topology_check() -> None:
    call, result = TX_CHAT[2], TX_CHAT[3]
    with pytest.raises(TemplateError):
        check_topology([call, {"id": "x", "role": "user", "content": "X"}, result, TX_CHAT[4]])
    with pytest.raises(TemplateError):
        check_topology([result])


def test_advance_reports_the_move() -> None:
    assert advance_past_transactions(TX_CHAT, 3) == (5, True)
    assert advance_past_transactions(TX_CHAT, 2) == (2, False)
    assert advance_past_transactions(TX_CHAT, 4) == (5, True)  # c1 answered, c2 still open
    assert advance_past_transactions(TX_CHAT, 5) == (5, False)
    assert advance_past_transactions(TX_CHAT, 0) == (0, False)


def test_a_native_message_placed_twice_fails() -> None:
    reg = registry()
    reg.register({"id": "example.dup", "plugin_id": "example", "name": "dup",
                  "resolve": lambda c, r: {"blocks": [{"type": "native", "id": "n", "message_ids": ["u1"]}]}})
    with pytest.raises(TemplateError) as err:
        assemble([*NATIVES, rule("example.dup", "d")], reg=reg)
    assert err.value.code == "ASSEMBLY_NATIVE_MISSING"


def test_an_unknown_native_message_fails() -> None:
    reg = registry()
    reg.register({"id": "example.ghost", "plugin_id": "example", "name": "ghost",
                  "resolve": lambda c, r: {"blocks": [{"type": "native", "id": "n", "message_ids": ["nope"]}]}})
    with pytest.raises(TemplateError) as err:
        assemble([*NATIVES, rule("example.ghost", "g")], reg=reg)
    assert err.value.code == "ASSEMBLY_NATIVE_UNKNOWN"


def test_reference_cycles_fail() -> None:
    reg = registry()
    reg.register({"id": "example.loop", "plugin_id": "example", "name": "loop", "resolve": lambda c, r: {"blocks": [
        {"type": "reference", "id": "a", "source_id": "example.loop", "block_ids": ["b"]},
        {"type": "reference", "id": "b", "source_id": "example.loop", "block_ids": ["a"]},
    ]}})
    with pytest.raises(TemplateError) as err:
        assemble([*NATIVES, rule("example.loop", "l")], reg=reg, placement="st")
    assert err.value.code == "ASSEMBLY_REFERENCE_CYCLE"


def test_a_slot_used_twice_is_reported() -> None:
    r = assemble([rule("native-system"), rule("custom", "c", text="A{{history}}B{{history}}C{{input}}")])
    assert texts(r) == ["S", "A", "U1", "A1", "B", "C", "U2"]
    assert "ASSEMBLY_DUPLICATE_SLOT" in [d.code for d in r.diagnostics]


def test_claims_suppress_the_claimed_block_elsewhere() -> None:
    reg = registry()
    reg.register({"id": "example.over", "plugin_id": "example", "name": "over", "dependencies": ("character",),
                  "resolve": lambda c, r: {"blocks": [{"type": "text", "id": "o", "text": "OVERRIDE",
                                                       "claims": [{"sourceId": "character", "blockId": "description"}]}]}})
    card = {"character": {"data": {"name": "C", "description": "CHAR", "personality": "PERS"}}}
    r = assemble([rule("native-system"), rule("character"), rule("example.over", "o"), rule("history"), rule("input")],
                 assets=card, reg=reg)
    assert texts(r) == ["S", "PERS", "OVERRIDE", "U1", "A1", "U2"]


def test_target_source_id_routes_text_to_another_row() -> None:
    reg = registry()
    reg.register({"id": "example.route", "plugin_id": "example", "name": "route", "dependencies": ("phi",),
                  "resolve": lambda c, r: {"blocks": [{"type": "text", "id": "j", "text": "JB", "targetSourceId": "phi"}]}})
    r = assemble([rule("native-system"), rule("example.route", "r"), rule("history"), rule("input"), rule("phi", text="P")],
                 reg=reg)
    assert texts(r) == ["S", "U1", "A1", "U2", "JB", "P"]
