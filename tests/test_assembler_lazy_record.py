"""The record is built when first read, and describes the assembly as it was, whatever happens after."""

from __future__ import annotations

import json
from typing import Any

import pytest
from _assembler_support import BASIC, assemble, chat, rule

import tavernbox.assembler.assemble as assemble_module
from tavernbox.assembler import replay
from tavernbox.assembler.blocks import validate_output
from tavernbox.assembler.identity import messages_hash

RULES = [rule("native-system"), rule("custom", "m", text="MAIN {{description}}", role="system"), rule("history"),
         rule("input"), rule("custom", "t", text="TAIL", role="user", depth=1)]
CARD = {"character": {"data": {"name": "C", "description": "CHAR"}}}


def test_the_record_is_not_built_until_read(monkeypatch: pytest.MonkeyPatch) -> None:
    built: list[Any] = []
    real = assemble_module.build_record
    monkeypatch.setattr(assemble_module, "build_record", lambda *a, **k: built.append(1) or real(*a, **k))
    r = assemble(RULES, chat(*BASIC), assets=CARD)
    assert built == [] and r.messages
    first = r.record
    assert built == [1] and r.record is first  # built once, the same dict after
    assert first["messages_hash"] == messages_hash(r.messages)


def test_the_record_describes_the_messages_as_assembled() -> None:
    r = assemble(RULES, chat(*BASIC), assets=CARD)
    before = messages_hash(r.messages)
    r.messages[0]["content"] = "CHANGED BY THE CALLER"
    r.messages.append({"role": "user", "content": "added"})
    record = r.record
    assert record["messages_hash"] == before
    again = replay(json.loads(json.dumps(record)))
    assert messages_hash(again.messages) == before


def test_a_record_read_equals_one_built_at_once() -> None:
    lazy = assemble(RULES, chat(*BASIC), assets=CARD)
    eager = assemble(RULES, chat(*BASIC), assets=CARD)
    eager_record = eager.record  # read straight away
    assert json.dumps(lazy.record, sort_keys=True) == json.dumps(eager_record, sort_keys=True)


def test_a_set_record_replaces_the_built_one() -> None:
    r = assemble(RULES, chat(*BASIC), assets=CARD)
    r.record = {"format": "mine"}
    assert r.record == {"format": "mine"}


def test_a_source_outputs_json_form_is_a_fresh_copy_each_read() -> None:
    output = {"blocks": [{"type": "text", "id": "b", "text": "x"}], "macros": {"m": "b"}}
    first = validate_output(output, "example.src", ())
    second = validate_output(output, "example.src", ())  # from the validated-output cache
    assert first.raw == second.raw == output
    assert first.raw is not first.raw
    first.raw["blocks"].clear()
    assert second.raw == output


@pytest.mark.parametrize("a, b", [
    (1, 1.0), (1, True), (0.0, -0.0), ("1", 1), (None, "null"), ({"a": 1}, {"a": "1"}), ([1, 2], [2, 1]),
    ({"a": 1, "b": 2}, {"b": 2, "a": 1}), ([[]], [{}]),
])
def test_outputs_with_different_json_have_different_shapes(a: Any, b: Any) -> None:
    from tavernbox.assembler.blocks import _json_text, _shape

    assert _json_text(a) != _json_text(b)
    assert _shape(a) != _shape(b)


def test_outputs_with_the_same_json_may_share_a_shape() -> None:
    from types import MappingProxyType

    from tavernbox.assembler.blocks import _json_text, _shape

    same = [({"a": [1, "x"]}, MappingProxyType({"a": (1, "x")})), ([1.5, None], (1.5, None))]
    for a, b in same:
        assert _json_text(a) == _json_text(b) and _shape(a) == _shape(b)


def test_a_rebuilt_output_is_recognised_without_serialising_it(monkeypatch: pytest.MonkeyPatch) -> None:
    import tavernbox.assembler.blocks as blocks

    def build() -> dict[str, Any]:
        return {"blocks": [{"type": "text", "id": "b", "text": "x" * 1000, "order": 1.0}], "macros": {"m": "b"}}

    first = validate_output(build(), "example.shape", ())
    written: list[Any] = []
    real = blocks._json_text
    monkeypatch.setattr(blocks, "_json_text", lambda o: written.append(o) or real(o))
    again = validate_output(build(), "example.shape", ())
    assert written == [] and again.blocks == first.blocks and again.raw == first.raw
    changed = build()
    changed["blocks"][0]["order"] = 1  # 1 and 1.0 differ in JSON: validated as a new output
    assert validate_output(changed, "example.shape", ()).raw["blocks"][0]["order"] == 1
    assert len(written) == 1
    with pytest.raises(Exception) as bad:
        validate_output({"blocks": [{"type": "text", "id": "b", "text": "x", "order": float("nan")}]},
                        "example.shape", ())
    assert getattr(bad.value, "code", None) == "ASSEMBLY_SOURCE_OUTPUT_INVALID"
