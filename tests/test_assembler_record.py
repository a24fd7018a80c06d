"""Records, byte-identical replay, determinism across runs, preview, and the public API."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from _assembler_support import BASIC, assemble, chat, preset, registry, rule, texts

import tavernbox
from tavernbox import TemplateError
from tavernbox.assembler import Assembler, replay
from tavernbox.assembler.limits import dumps

RULES = [rule("native-system"), rule("custom", "m", text="MAIN {{description}}", role="system"), rule("history"),
         rule("input"), rule("custom", "t", text="TAIL", role="user", depth=1)]
CARD = {"character": {"data": {"name": "C", "description": "CHAR"}}}


def test_replay_reproduces_messages_byte_for_byte_without_calling_sources() -> None:
    calls = []
    reg = registry()
    reg.register({"id": "example.count", "plugin_id": "example", "name": "count",
                  "resolve": lambda c, r: calls.append(1) or {"blocks": [{"type": "text", "id": "b", "text": "N"}]}})
    r = assemble([*RULES, rule("example.count", "n")], assets=CARD, reg=reg)
    record = json.loads(json.dumps(r.record))  # as stored on disk
    assert calls == [1]
    again = replay(record)
    assert calls == [1]
    assert dumps(again.messages) == dumps(r.messages)
    assert again.provenance == r.provenance and again.nodes == r.nodes
    assert [d.code for d in again.diagnostics] == [d.code for d in r.diagnostics]


def test_replay_refuses_a_tampered_record() -> None:
    r = assemble(RULES, assets=CARD)
    record = copy.deepcopy(r.record)
    record["renders"][0]["text"] = "FORGED"
    with pytest.raises(TemplateError) as err:
        replay(record)
    assert err.value.code == "ASSEMBLY_REPLAY_INVALID"
    with pytest.raises(TemplateError) as err:
        replay({"format": "nope"})
    assert err.value.code == "ASSEMBLY_REPLAY_INVALID"
    broken = copy.deepcopy(r.record)
    del broken["entries"][0]["descriptor"]
    with pytest.raises(TemplateError) as err:
        replay(broken)
    assert err.value.code == "ASSEMBLY_REPLAY_INVALID"


def test_same_inputs_give_a_byte_identical_result() -> None:
    a = assemble(RULES, assets=CARD).to_dict()
    b = assemble(RULES, assets=CARD).to_dict()
    assert dumps(a) == dumps(b)


def test_ids_are_content_derived_and_stable_across_requests() -> None:
    first = assemble(RULES, assets=CARD)
    longer = assemble(RULES, chat(*BASIC, "a2:assistant:A2", "u3:user:U3"), ["u3"], assets=CARD)
    tail = lambda r: next(m for m in r.logical_messages if m["content"] == "TAIL")  # noqa: E731
    assert tail(first)["id"] == tail(longer)["id"]
    changed = assemble([*RULES[:4], rule("custom", "t", text="TAIL2", role="user", depth=1)], assets=CARD)
    assert all(m["id"] != tail(first)["id"] for m in changed.logical_messages)


def test_determinism_across_processes() -> None:
    script = (
        "import sys, json; sys.path.insert(0, 'tests');"
        "from _assembler_support import assemble, rule;"
        "from tavernbox.assembler.limits import dumps;"
        "r = assemble([rule('native-system'), rule('custom','m',text='M',role='system'), rule('history'), rule('input'),"
        " rule('custom','t',text='T',depth=1)]);"
        "print(dumps(r.to_dict()))"
    )
    root = Path(__file__).resolve().parents[1]
    outs = {
        subprocess.run([sys.executable, "-c", script], cwd=root, capture_output=True, text=True, check=True,
                       env={**os.environ, "PYTHONHASHSEED": seed}).stdout
        for seed in ("1", "2")
    }
    assert len(outs) == 1


def test_preview_leaves_out_unsent_input_and_marks_capability_unverified() -> None:
    seen: dict[str, Any] = {}
    reg = registry()

    def spy(c: Any, r: Any) -> dict[str, Any]:
        seen.update(turn=c["turn"], step=c["step"], preview=c["preview"], ids=[m["id"] for m in c["native_messages"]])
        return {"blocks": [{"type": "text", "id": "b", "text": "LATE", "role": "system", "depth": 0}]}

    reg.register({"id": "example.spy", "plugin_id": "example", "name": "spy", "resolve": spy})
    rules = [rule("native-system"), rule("history"), rule("input"), rule("example.spy", "s")]
    request = {"preset": preset(rules, placement="st"), "messages": chat(*BASIC), "input_ids": ["u2"], "turn": 3,
               "step": 1, "preview": True}
    r = Assembler(reg).assemble(request)
    assert seen == {"turn": None, "step": None, "preview": True, "ids": ["s", "u1", "a1"]}
    assert texts(r) == ["S", "U1", "A1", "LATE"]
    assert r.system_projection["capability"] == "unverified"
    assert "SYSTEM_UPDATE_CAPABILITY_UNVERIFIED" in [d.code for d in r.diagnostics]
    with pytest.raises(TemplateError) as err:  # the same request, sent for real, needs the capability
        Assembler(reg).assemble({**request, "preview": False})
    assert err.value.code == "ASSEMBLY_SYSTEM_UPDATES_UNSUPPORTED"


def test_snapshot_lifetime_records_its_prior_snapshots_and_replays_byte_for_byte() -> None:
    rules = [*RULES[:4], rule("custom", "s", text="MEM", lifetime="snapshot")]
    first = assemble(rules, chat("s:system:S", "u1:user:U1"))
    second = assemble(rules, chat(*BASIC), snapshots=first.snapshots)
    assert texts(second) == ["S", "MAIN", "U1", "MEM", "A1", "U2"]  # the copy stays after u1
    assert second.record["request"]["snapshots"] == json.loads(json.dumps(first.snapshots))
    again = replay(json.loads(json.dumps(second.record)))
    assert dumps(again.messages) == dumps(second.messages) and again.snapshots == second.snapshots


def test_native_delivery_placements_are_refused() -> None:
    with pytest.raises(TemplateError) as err:
        assemble(RULES, placement="native-slots")
    assert err.value.code == "ASSEMBLY_PLACEMENT_UNSUPPORTED"


@pytest.mark.parametrize(
    ("messages", "input_ids", "path"),
    [
        ([{"id": "a", "role": "user", "content": "x"}, {"id": "a", "role": "user", "content": "y"}], [], "$.messages[1].id"),
        ([{"id": "a", "role": "narrator", "content": "x"}], [], "$.messages[0].role"),
        ([{"id": "a", "role": "tool", "content": "x"}], [], "$.messages[0].tool_call_id"),
        ([{"id": "a", "role": "user", "content": "x"}], ["b"], "$.input_ids[0]"),
        ([{"id": "a", "role": "user", "content": [{"type": "text", "text": "x"}, 3]}], [], "$.messages[0].content[1]"),
        ([{"id": "a", "role": "user", "content": [{"type": "text", "text": float("nan")}]}], [], "$.messages[0].content"),
    ],
)
def test_malformed_requests_name_the_path(messages: list, input_ids: list, path: str) -> None:
    with pytest.raises(TemplateError) as err:
        assemble(RULES, messages, input_ids)
    assert err.value.code == "ASSEMBLY_REQUEST_INVALID" and err.value.path == path


@pytest.mark.parametrize(
    ("option", "path"),
    [({"preview": "yes"}, "$.preview"), ({"turn": "3"}, "$.turn"), ({"seed": 1.5}, "$.seed"),
     ({"session_id": 7}, "$.session_id"), ({"system_prompt_update": "always"}, "$.system_prompt_update")],
)
def test_malformed_options_name_the_path(option: dict, path: str) -> None:
    with pytest.raises(TemplateError) as err:
        assemble(RULES, **option)
    assert err.value.code == "ASSEMBLY_REQUEST_INVALID" and err.value.path == path


def test_public_names_are_reexported() -> None:
    assert tavernbox.Assembler is Assembler and tavernbox.replay is replay


def test_result_fields() -> None:
    r = assemble(RULES, assets=CARD)
    d = r.to_dict()
    assert set(d) >= {"messages", "nodes", "diagnostics", "system_projection", "logical_extra_bytes", "extra_bytes",
                      "provenance", "record", "sources", "draws"}
    node = next(n for n in r.nodes if n["rule_id"] == "m")
    assert set(node) >= {"rule_id", "source_id", "block_id", "role", "hash", "input_message_ids",
                         "request_message_ids", "start", "count"}
    assert node["request_message_ids"] == [r.messages[0]["id"]] and node["start"] == 0
    assert {s["id"] for s in r.sources} == {"native-system", "history", "input", "custom", "character", "persona", "worldbook"}
