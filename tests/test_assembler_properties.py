"""Properties over random chats and depth rules: natives intact, transactions whole, replay exact."""

from __future__ import annotations

from typing import Any

from _assembler_support import assemble, rule
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tavernbox.assembler import replay
from tavernbox.assembler.limits import dumps
from tavernbox.assembler.tools import check_topology

segment = st.one_of(
    st.just("user"), st.just("assistant"), st.just("system"), st.integers(min_value=1, max_value=3)  # n tool calls
)


@st.composite
def chats(draw: st.DrawFn) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    for i, seg in enumerate(draw(st.lists(segment, min_size=1, max_size=14))):
        if isinstance(seg, int):
            calls = [{"id": f"c{i}.{k}", "name": "f", "arguments": "{}"} for k in range(seg)]
            messages.append({"id": f"m{i}", "role": "assistant", "content": None, "tool_calls": calls})
            messages.extend({"id": f"m{i}.{k}", "role": "tool", "content": f"R{i}.{k}", "tool_call_id": c["id"]}
                            for k, c in enumerate(calls))
        else:
            messages.append({"id": f"m{i}", "role": seg, "content": f"{seg.upper()}{i}"})
    return messages


extra_rules = st.lists(
    st.tuples(st.one_of(st.none(), st.integers(min_value=0, max_value=9)), st.sampled_from(["user", "system", "assistant"])),
    max_size=4,
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(chats(), extra_rules)
def test_random_layouts_keep_natives_and_transactions_and_replay_exactly(
    messages: list[dict[str, Any]], extras: list[tuple[int | None, str]]
) -> None:
    last = messages[-1]
    input_ids = [last["id"]] if last["role"] == "user" else []
    rules = [rule("native-system"), rule("history"), rule("input")]
    rules += [rule("custom", f"x{n}", text=f"EXTRA{n}", role=role, depth=depth) for n, (depth, role) in enumerate(extras)]
    result = assemble(rules, messages, input_ids)
    logical = result.logical_messages
    native_ids = [m["id"] for m in messages]
    placed = [m["id"] for m in logical if m["id"] in set(native_ids)]
    assert placed == native_ids  # every native message once, in its original order
    for n in range(len(extras)):
        assert [m["content"] for m in logical].count(f"EXTRA{n}") == 1
    check_topology(result.messages)
    assert dumps(replay(result.record).messages) == dumps(result.messages)
    if logical[0]["role"] == "system":
        assert result.messages[0]["role"] == "system"
