"""Retained snapshots (lifetime ``snapshot``): research/dsh-assembler.md section 9, facts 27-32 and 41.

Each test is named after the rule it pins. Requests are chained the way a host chains them: the
``snapshots`` of one result are handed to the next request.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from _assembler_support import BASIC, MODULE_KINDS, assemble, chat, codes, registry, rule, rules_for, texts

from tavernbox import TemplateError
from tavernbox.assembler import Assembler, replay
from tavernbox.assembler.limits import dumps
from tavernbox.assembler.snapshots import EMPTY_HASH, empty_notice

LORE_ENTRY = {"id": "l", "content": "LORE", "position": "after"}


def lore(*entries: dict[str, Any]) -> dict[str, Any]:
    return {"world_info": list(entries)}


def snap_rules(**worldbook: Any) -> list[dict[str, Any]]:
    return rules_for(MODULE_KINDS, worldbook={"lifetime": "snapshot", **worldbook})


def memory_registry(_unused: list[str] | None = None) -> Any:
    """The registry plus ``example.memory``, a source whose text is read from assets["memory"]."""
    reg = registry()
    reg.register({"id": "example.memory", "plugin_id": "example", "name": "memory",
                  "resolve": lambda c, r: {"blocks": [{"type": "text", "id": "where", "name": "where", "role": "system",
                                                       "text": c["assets"].get("memory", "")}]}})
    return reg


# -- facts 27-32 --------------------------------------------------------------------------------------


def test_fact27_a_changed_entry_appends_a_copy_and_a_vanished_one_gets_an_empty_notice() -> None:
    r1 = assemble(snap_rules(), assets=lore(LORE_ENTRY))
    assert len(r1.snapshots) == 1 and texts(r1) == ["S", "U1", "A1", "U2", "LORE"]
    more = chat(*BASIC, "a2:assistant:A2", "u3:user:U3")
    r2 = assemble(snap_rules(), more, assets=lore(LORE_ENTRY), snapshots=r1.snapshots)
    assert len(r2.snapshots) == 1
    assert texts(r2) == ["S", "U1", "A1", "U2", "LORE", "A2", "U3"]  # LORE stays before a2
    r3 = assemble(snap_rules(), more, assets=lore({**LORE_ENTRY, "content": "NEW"}), snapshots=r2.snapshots)
    assert len(r3.snapshots) == 2 and texts(r3) == ["S", "U1", "A1", "U2", "LORE", "A2", "U3", "NEW"]
    r4 = assemble(snap_rules(), more, assets=lore(), snapshots=r3.snapshots)
    assert any("context is empty" in t for t in texts(r4))
    assert texts(r4)[-1] == empty_notice("entry l") and r4.snapshots[-1]["hash"] == EMPTY_HASH


def test_fact28_snapshots_keep_their_anchors_when_history_grows() -> None:
    rules = [rule("native-system"), rule("custom", "a", text="ALPHA", lifetime="snapshot"), rule("history"),
             rule("input"), rule("custom", "b", text="BETA", lifetime="snapshot")]
    r1 = assemble(rules, chat("s:system:S", "u:user:U"))
    assert texts(r1) == ["S", "ALPHA", "U", "BETA"]
    assert [(s["rule_id"], s["after_id"]) for s in r1.snapshots] == [("a", "s"), ("b", "u")]
    r2 = assemble(rules, chat("s:system:S", "u:user:U", "a:assistant:A", "u2:user:U2"), snapshots=r1.snapshots)
    assert texts(r2) == ["S", "ALPHA", "U", "BETA", "A", "U2"]


def test_fact29_depth_zero_snapshots_accumulate_at_their_request_ends() -> None:
    rules = [*rules_for(MODULE_KINDS), rule("custom", "f", text="FIRST", lifetime="snapshot", depth=0)]
    r1 = assemble(rules)
    rules2 = [*rules[:-1], rule("custom", "f", text="SECOND", lifetime="snapshot", depth=0)]
    r2 = assemble(rules2, chat(*BASIC, "a2:assistant:A2", "u3:user:U3"), snapshots=r1.snapshots)
    assert len(r2.snapshots) == 2
    assert texts(r2) == ["S", "U1", "A1", "U2", "FIRST", "A2", "U3", "SECOND"]


def test_fact30_depth_entries_keep_anchors_and_a_dropped_entry_gets_an_empty_notice() -> None:
    rules = [rule("native-system"), rule("worldbook", lifetime="snapshot"), rule("history"), rule("input")]
    entries = lore({"id": "l1", "content": "DEPTH1", "position": "at_depth", "depth": 1},
                   {"id": "l2", "content": "DEPTH0", "position": "at_depth", "depth": 0})
    # entry depths apply where the rule's row does not own them (ST placement; in list placement
    # the listed worldbook rule's own depth, null, would win)
    r1 = assemble(rules, chat("s:system:S", "u:user:U"), assets=entries, placement="st")
    assert texts(r1) == ["S", "DEPTH1", "U", "DEPTH0"]
    r2 = assemble(rules, chat("s:system:S", "u:user:U", "a:assistant:A", "u2:user:U2"), placement="st",
                  assets=lore({"id": "l2", "content": "NEW", "position": "at_depth", "depth": 0}), snapshots=r1.snapshots)
    assert texts(r2)[:5] == ["S", "DEPTH1", "U", "DEPTH0", "A"]
    assert "NEW" in texts(r2)
    assert any(t == empty_notice("entry l1") for t in texts(r2))


def test_fact31_a_retained_depth_snapshot_keeps_its_depth_on_later_nodes() -> None:
    rules = [*rules_for(MODULE_KINDS), rule("custom", "d", text="DEEP", lifetime="snapshot", depth=1)]
    r1 = assemble(rules)
    r2 = assemble(rules, chat(*BASIC, "a2:assistant:A2", "u3:user:U3"), snapshots=r1.snapshots)
    (node,) = [n for n in r2.nodes if n["rule_id"] == "d"]
    assert node["depth"] == 1 and node["lock_reason"] == "retained-snapshot" and node["id"].startswith("d:")
    assert ":retained:" in node["id"] and node["stability"] == "snapshot"


def test_fact32_records_of_an_unregistered_source_are_dropped() -> None:
    reg = memory_registry([])
    rules = [*rules_for(MODULE_KINDS), rule("example.memory", "m", lifetime="snapshot")]
    r1 = assemble(rules, assets={"memory": "MEM"}, reg=reg)
    assert len(r1.snapshots) == 1
    r2 = assemble(rules, assets={"memory": "MEM"}, snapshots=r1.snapshots)  # the source is gone
    assert r2.snapshots == [] and "MEM" not in texts(r2) and "ASSEMBLY_SOURCE_UNAVAILABLE" in codes(r2)
    assert len(r1.snapshots) == 1  # the old result still holds its record


def test_fact23_an_implicit_snapshot_only_dependency_produces_one_retained_snapshot() -> None:
    reg = registry()
    reg.register({"id": "example.notes", "plugin_id": "example", "name": "notes", "roles": ["system"],
                  "lifetimes": ["snapshot"], "resolve": lambda c, r: {"blocks": [{"type": "text", "id": "n",
                                                                                  "text": "NOTES"}]}})
    reg.register({"id": "example.host", "plugin_id": "example", "name": "host", "dependencies": ["example.notes"],
                  "resolve": lambda c, r: {"blocks": [{"type": "reference", "id": "ref", "source_id": "example.notes"}]}})
    r = assemble([*rules_for(MODULE_KINDS), rule("example.host", "h")], reg=reg)
    assert len(r.snapshots) == 1 and r.snapshots[0]["rule_id"] == "reference-example.notes" and "NOTES" in texts(r)
    with pytest.raises(TemplateError) as err:
        assemble([*rules_for(MODULE_KINDS), rule("example.host", "h"),
                  rule("example.notes", "n", enabled=False, role="user")], reg=reg)
    assert err.value.code == "ASSEMBLY_RULE_UNSUPPORTED"


def test_fact41_projection_of_retained_lore_keeps_the_cache_prefix() -> None:
    rules = [rule("native-system"), rule("history"), rule("input"), rule("worldbook", lifetime="snapshot")]
    r1 = assemble(rules, chat("base:system:BASE", "one:user:ONE"), assets=lore({**LORE_ENTRY, "content": "LORE_OLD"}))
    native2 = chat("base:system:BASE", "one:user:ONE", "ans:assistant:ANSWER", "two:user:TWO")
    r2 = assemble(rules, native2, assets=lore({**LORE_ENTRY, "content": "LORE_NEW"}), snapshots=r1.snapshots)
    expected = ["BASE", "ONE", "BASE\n\nLORE_OLD", "ANSWER", "TWO", "BASE\n\nLORE_OLD\n\nLORE_NEW"]
    assert [m["content"] for m in r2.messages] == expected
    again = assemble(rules, native2, assets=lore({**LORE_ENTRY, "content": "LORE_NEW"}), snapshots=r1.snapshots)
    assert dumps(again.messages) == dumps(r2.messages)
    r3 = assemble(rules, native2, assets=lore(), snapshots=r2.snapshots)
    assert r3.messages[-1]["content"].startswith("BASE\n\nLORE_OLD\n\nLORE_NEW\n\nCurrent context is empty")


# -- the seed's retention table ---------------------------------------------------------------------

#: seed 002 "Retention": one memory entry moves from inn to dock. Request -> (memory text, native
#: chat, messages under "rebuild each request", messages under "retain snapshots").
INN_DOCK = [
    ("Location: inn", ["s:system:S", "u1:user:U1"],
     ["S", "U1", "Location: inn"], ["S", "U1", "Location: inn"]),
    ("Location: dock", ["s:system:S", "u1:user:U1", "a1:assistant:A1", "u2:user:U2"],
     ["S", "U1", "A1", "U2", "Location: dock"], ["S", "U1", "Location: inn", "A1", "U2", "Location: dock"]),
    ("Location: dock", ["s:system:S", "u1:user:U1", "a1:assistant:A1", "u2:user:U2", "a2:assistant:A2", "u3:user:U3"],
     ["S", "U1", "A1", "U2", "A2", "U3", "Location: dock"],
     ["S", "U1", "Location: inn", "A1", "U2", "Location: dock", "A2", "U3"]),
]


@pytest.mark.parametrize("lifetime", ["request", "snapshot"])
def test_seed_inn_dock_table_over_three_requests(lifetime: str) -> None:
    reg = memory_registry([])
    rules = [rule("native-system"), rule("history"), rule("input"), rule("example.memory", "m", lifetime=lifetime)]
    snapshots: list[dict[str, Any]] = []
    copies = []
    for memory, native, rebuilt, retained in INN_DOCK:
        r = assemble(rules, chat(*native), assets={"memory": memory}, reg=reg, snapshots=snapshots)
        assert texts(r) == (retained if lifetime == "snapshot" else rebuilt)
        snapshots = r.snapshots
        copies.append(len(r.snapshots))
    assert copies == ([1, 2, 2] if lifetime == "snapshot" else [0, 0, 0])  # no third copy


# -- the rules of section 9 -------------------------------------------------------------------------


def chain(rules: list[dict[str, Any]], steps: list[tuple[list[str], str]], reg: Any = None) -> list[Any]:
    out, snaps = [], []
    for native, memory in steps:
        r = assemble(rules, chat(*native), assets={"memory": memory}, reg=reg or memory_registry([]), snapshots=snaps)
        out.append(r)
        snaps = r.snapshots
    return out


ONE = ["s:system:S", "u1:user:U1"]
TWO = [*ONE, "a1:assistant:A1", "u2:user:U2"]
THREE = [*TWO, "a2:assistant:A2", "u3:user:U3"]
MEM_RULES = [rule("native-system"), rule("history"), rule("input"), rule("example.memory", "m", lifetime="snapshot")]


def test_unchanged_content_creates_no_new_copy_and_keeps_message_ids() -> None:
    r1, r2 = chain(MEM_RULES, [(ONE, "M"), (TWO, "M")])
    assert r1.snapshots == r2.snapshots
    assert r1.logical_messages[-1]["id"] == r2.logical_messages[2]["id"]


def test_content_that_returns_to_an_earlier_value_is_a_new_copy_with_a_distinct_id() -> None:
    *_, r3 = chain(MEM_RULES, [(ONE, "A"), (TWO, "B"), (THREE, "A")])
    assert [s["messages"][0]["content"] for s in r3.snapshots] == ["A", "B", "A"]
    ids = [m["id"] for m in r3.messages]
    assert len(ids) == len(set(ids))


def test_empty_notice_is_written_once_and_new_content_after_it_is_a_new_copy() -> None:
    r = chain(MEM_RULES, [(ONE, "M"), (TWO, ""), (THREE, "")])
    assert [s["hash"] == EMPTY_HASH for s in r[2].snapshots] == [False, True]
    assert texts(r[1]) == ["S", "U1", "M", "A1", "U2", empty_notice("where")]
    assert texts(r[2]) == texts(r[1])[:6] + ["A2", "U3"]  # the notice keeps its anchor, no second one
    four = [*THREE, "a3:assistant:A3", "u4:user:U4"]
    r4 = assemble(MEM_RULES, chat(*four), assets={"memory": "BACK"}, reg=memory_registry([]), snapshots=r[2].snapshots)
    assert [s["hash"] == EMPTY_HASH for s in r4.snapshots] == [False, True, False]
    assert texts(r4)[-1] == "BACK" and texts(r4).count(empty_notice("where")) == 1


@pytest.mark.parametrize("change", [{"enabled": False}, {"lifetime": "request"}])
def test_disabling_or_switching_to_request_stops_every_old_copy(change: dict[str, Any]) -> None:
    reg = memory_registry([])
    r1, r2 = chain(MEM_RULES, [(ONE, "OLD"), (TWO, "NEW")], reg)
    rules = [*MEM_RULES[:3], {**MEM_RULES[3], **change}]
    r3 = assemble(rules, chat(*THREE), assets={"memory": "NEW"}, reg=reg, snapshots=r2.snapshots)
    assert r3.snapshots == []
    assert "OLD" not in texts(r3)
    assert texts(r3).count("NEW") == (0 if change.get("enabled") is False else 1)
    assert len(r2.snapshots) == 2  # the old result keeps its records
    back = assemble(MEM_RULES, chat(*THREE), assets={"memory": "NEW"}, reg=reg, snapshots=r3.snapshots)
    assert "OLD" not in texts(back)  # re-enabling does not revive dropped copies


def test_a_lost_anchor_falls_back_to_the_native_anchor() -> None:
    reg = memory_registry([])
    rules_mid = [rule("native-system"), rule("custom", "p", text="PREFACE"), rule("example.memory", "m",
                 lifetime="snapshot"), rule("history"), rule("input")]
    r1 = assemble(rules_mid, chat(*ONE), assets={"memory": "M"}, reg=reg)
    assert texts(r1) == ["S", "PREFACE", "M", "U1"] and r1.snapshots[0]["native_after_id"] == "s"
    edited = [rule("native-system"), rule("custom", "p", text="EDITED PREFACE"), *rules_mid[2:]]
    r2 = assemble(edited, chat(*TWO), assets={"memory": "M"}, reg=reg, snapshots=r1.snapshots)
    assert "SNAPSHOT_ANCHORED_TO_NATIVE_HISTORY" in codes(r2)
    assert texts(r2) == ["S", "M", "EDITED PREFACE", "U1", "A1", "U2"]


def test_compacted_history_omits_a_snapshot_whose_anchors_are_gone() -> None:
    r1, _ = chain(MEM_RULES, [(ONE, "M"), (ONE, "M")])
    compacted = ["s:system:S", "u9:user:SUMMARY"]  # u1 was compacted away
    r2 = assemble(MEM_RULES, chat(*compacted), assets={"memory": "M"}, reg=memory_registry([]), snapshots=r1.snapshots)
    assert "SNAPSHOT_ANCHOR_NO_LONGER_ACTIVE" in codes(r2)
    assert texts(r2) == ["S", "SUMMARY"]  # the unchanged content is not placed again either


def test_an_anchor_at_the_start_of_the_request_stays_at_the_start() -> None:
    rules = [rule("example.memory", "m", lifetime="snapshot"), rule("native-system"), rule("history"), rule("input")]
    r1, r2 = chain(rules, [(ONE, "M"), (TWO, "M2")])
    assert r1.snapshots[0]["after_id"] is None
    assert texts(r2) == ["M", "M2", "S", "U1", "A1", "U2"]  # same anchor: record order


def test_retained_copies_carry_provenance_and_count_as_extra_bytes() -> None:
    _, r2 = chain(MEM_RULES, [(ONE, "INN"), (TWO, "DOCK")])
    by_text = {}
    for p, m in zip(r2.provenance, r2.messages, strict=True):
        for sp in p["spans"]:
            by_text[m["content"][sp["start"]:sp["end"]]] = sp
    assert by_text["INN"]["rule_id"] == by_text["DOCK"]["rule_id"] == "m"
    assert by_text["INN"]["source_id"] == "example.memory"
    assert r2.logical_extra_bytes > len("INN") + len("DOCK")


def test_retention_is_deterministic_and_replays_byte_for_byte() -> None:
    a = chain(MEM_RULES, [(ONE, "INN"), (TWO, "DOCK"), (THREE, "")])
    b = chain(MEM_RULES, [(ONE, "INN"), (TWO, "DOCK"), (THREE, "")])
    assert dumps([r.snapshots for r in a]) == dumps([r.snapshots for r in b])
    assert dumps(a[2].messages) == dumps(b[2].messages)
    again = replay(json.loads(json.dumps(a[2].record)))
    assert dumps(again.messages) == dumps(a[2].messages) and again.snapshots == a[2].snapshots


def test_a_preview_computes_snapshots_like_a_real_request() -> None:
    r1 = chain(MEM_RULES, [(ONE, "INN")])[0]
    reg = memory_registry([])
    p = Assembler(reg).assemble({"preset": {"format": "dsh-tavern-request-assembly", "version": 1, "name": "p",
                                            "rules": MEM_RULES}, "messages": chat(*TWO), "input_ids": ["u2"],
                                 "assets": {"memory": "DOCK"}, "snapshots": r1.snapshots, "preview": True})
    assert [m["content"] for m in p.logical_messages] == ["S", "U1", "INN", "A1", "DOCK"]


@pytest.mark.parametrize(
    ("mutate", "path"),
    [
        (lambda s: "nope", "$.snapshots"),
        (lambda s: [{**s[0], "messages": []}], "$.snapshots[0].messages"),
        (lambda s: [{**s[0], "id": 3}], "$.snapshots[0].id"),
        (lambda s: [{**s[0], "depth": -1}], "$.snapshots[0].depth"),
        (lambda s: [{**s[0], "messages": [{**s[0]["messages"][0], "role": "tool"}]}], "$.snapshots[0].messages[0].role"),
        (lambda s: [{**s[0], "spans": [[[0, 999, {}]]]}], "$.snapshots[0].spans[0][0]"),
        (lambda s: [{**s[0], "after_id": 7}], "$.snapshots[0].after_id"),
    ],
)
def test_malformed_records_fail_with_their_json_path(mutate: Any, path: str) -> None:
    (r1,) = chain(MEM_RULES, [(ONE, "M")])
    with pytest.raises(TemplateError) as err:
        assemble(MEM_RULES, chat(*TWO), assets={"memory": "M"}, reg=memory_registry([]), snapshots=mutate(r1.snapshots))
    assert err.value.code == "SNAPSHOT_RECORD_INVALID" and err.value.path == path
