"""Retention properties over random request chains (Hypothesis): the records follow a simple
reference model, copies appear once each in record order, native messages keep their order, ids
are unique, and every result replays byte for byte."""

from __future__ import annotations

import json
from typing import Any

from _assembler_support import assemble, chat, registry, rule
from hypothesis import given, settings
from hypothesis import strategies as st

from tavernbox.assembler import replay
from tavernbox.assembler.limits import dumps
from tavernbox.assembler.snapshots import empty_notice

RULES = [rule("native-system"), rule("history"), rule("input"), rule("example.memory", "m", lifetime="snapshot")]
EMPTY = object()


def memory_registry() -> Any:
    reg = registry()
    reg.register({"id": "example.memory", "plugin_id": "example", "name": "memory",
                  "resolve": lambda c, r: {"blocks": [{"type": "text", "id": "where", "role": "user",
                                                       "text": c["assets"]["memory"]}]}})
    return reg


def model(values: list[str]) -> list[Any]:
    """The records the section-9 rules predict for a chain of memory values."""
    records: list[Any] = []
    for v in values:
        if v:
            if not records or records[-1] != v:
                records.append(v)
        elif records and records[-1] is not EMPTY:
            records.append(EMPTY)
    return records


@settings(max_examples=40, deadline=None)
@given(st.lists(st.sampled_from(["", "inn", "dock", "ship"]), min_size=1, max_size=6))
def test_retention_follows_the_reference_model(values: list[str]) -> None:
    reg = memory_registry()
    snapshots: list[dict[str, Any]] = []
    native = ["s:system:S"]
    for step, value in enumerate(values):
        native = [*native, f"u{step}:user:U{step}"] if step == 0 else [*native, f"a{step}:assistant:A{step}",
                                                                       f"u{step}:user:U{step}"]
        r = assemble(RULES, chat(*native), assets={"memory": value}, reg=reg, snapshots=snapshots)
        expected = model(values[: step + 1])
        assert [s["messages"][0]["content"] for s in r.snapshots] == [
            empty_notice("where") if e is EMPTY else e for e in expected
        ]
        texts = [m["content"] for m in r.logical_messages]
        native_texts = [spec.split(":")[2] for spec in native]
        assert [t for t in texts if t in native_texts] == native_texts  # natives in order, each once
        retained = [t for t in texts if t not in native_texts]
        assert retained == [s["messages"][0]["content"] for s in r.snapshots]  # each copy once, in record order
        ids = [m["id"] for m in r.messages]
        assert len(ids) == len(set(ids))
        again = replay(json.loads(json.dumps(r.record)))
        assert dumps(again.messages) == dumps(r.messages)
        snapshots = r.snapshots
