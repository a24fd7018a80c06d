"""Prompt-studio components (seed 001): system sections, gaps, merging, overrides, {{user_input}}.

Each test is named after the rule of the seed it pins.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from tavernbox import TemplateError
from tavernbox.strategies.components import assemble_components, native_section


def sup(cid: str, role: str = "system", template: str | None = None, **fields: Any) -> dict[str, Any]:
    return {"id": cid, "kind": "supplement", "role": role, "template": cid.upper() if template is None else template,
            **fields}


def msgs(*specs: str) -> list[dict[str, Any]]:
    out = []
    for spec in specs:
        mid, role, *rest = spec.split(":")
        m: dict[str, Any] = {"id": mid, "role": role, "content": rest[0] if rest else mid.upper()}
        if role == "assistant" and mid.startswith("call"):
            m["tool_calls"] = [{"id": mid, "name": "search", "arguments": "{}"}]
        if role == "tool":
            m["tool_call_id"] = "call"
        out.append(m)
    return out


def contents(r: Any) -> list[tuple[str, str]]:
    return [(m["role"], m["content"]) for m in r.messages]


CHAT = msgs("u1:user", "a1:assistant", "u2:user")
TOOLS = msgs("u1:user", "call:assistant:", "t:tool:RESULT", "a1:assistant:ANSWER")
NATIVES = [native_section("identity", "IDENTITY", -100), native_section("persona", "PERSONA", 0),
           native_section("tools", "TOOLS", 150)]


# -- system sections ------------------------------------------------------------------------------------


def test_system_components_merge_with_natives_into_one_system_string_by_global_order() -> None:
    r = assemble_components([*NATIVES, sup("rules", order=120), sup("early", order=-50), sup("first", order=-200)], CHAT)
    assert r.system == "FIRST\n\nIDENTITY\n\nEARLY\n\nPERSONA\n\nRULES\n\nTOOLS"
    assert [m["role"] for m in r.messages] == ["system", "user", "assistant", "user"]
    assert r.contributors[0] == ["first", "identity", "early", "persona", "rules", "tools"]


def test_equal_order_keeps_declaration_with_natives_declared_first() -> None:
    r = assemble_components([sup("b", order=0), native_section("n", "NATIVE", 0), sup("a", order=0)], CHAT)
    assert r.system == "NATIVE\n\nB\n\nA"


def test_system_supplements_are_plain_text_without_a_wrapper() -> None:
    r = assemble_components([sup("x", template="plain <b>text</b>")], CHAT)
    assert r.system == "plain <b>text</b>" and "supplement" not in r.system


def test_disabled_and_empty_components_contribute_nothing() -> None:
    r = assemble_components([*NATIVES, sup("off", enabled=False), sup("empty", template="")], CHAT)
    assert r.system == "IDENTITY\n\nPERSONA\n\nTOOLS"


def test_no_system_text_means_no_system_message() -> None:
    r = assemble_components([sup("t", "user", position="tail")], msgs("u1:user", "a1:assistant"))
    assert [m["role"] for m in r.messages] == ["user", "assistant", "user"]


# -- gaps ------------------------------------------------------------------------------------------------


def test_after_system_goes_before_the_first_conversation_message() -> None:
    r = assemble_components([*NATIVES, sup("hello", "assistant", position="after_system")], CHAT)
    assert contents(r)[1:3] == [("assistant", "HELLO"), ("user", "U1")]


def test_anchored_goes_right_after_the_last_user_message_before_the_tool_flow() -> None:
    r = assemble_components([sup("note", "assistant", position="anchored")], TOOLS)
    assert [m["id"] for m in r.messages][:2] == ["u1", r.messages[1]["id"]] and contents(r)[1] == ("assistant", "NOTE")
    assert [m["role"] for m in r.messages] == ["user", "assistant", "assistant", "tool", "assistant"]
    assert r.messages[2]["id"] == "call"  # the tool call still directly precedes its result


def test_tail_goes_after_tool_results_and_replies() -> None:
    r = assemble_components([sup("late", "user", position="tail")], TOOLS)
    assert contents(r)[-1] == ("user", "LATE") and contents(r)[-2] == ("assistant", "ANSWER")


def test_anchored_is_skipped_without_a_user_message() -> None:
    r = assemble_components([sup("note", "assistant", position="anchored")], msgs("a0:assistant"))
    assert contents(r) == [("assistant", "A0")]


def test_anchored_and_tail_coincide_in_a_plain_chat_with_anchored_first() -> None:
    r = assemble_components([sup("t", "assistant", position="tail"), sup("a", "assistant", position="anchored")], CHAT)
    assert contents(r)[-1] == ("assistant", "A\n\nT")


def test_order_sorts_only_within_one_gap_then_declaration() -> None:
    comps = [sup("x", "assistant", position="tail", order=5), sup("y", "assistant", position="tail", order=1),
             sup("z", "assistant", position="tail", order=1), sup("w", "assistant", position="after_system", order=99)]
    r = assemble_components(comps, CHAT)
    assert contents(r)[0] == ("assistant", "W") and contents(r)[-1] == ("assistant", "Y\n\nZ\n\nX")


# -- merging ---------------------------------------------------------------------------------------------


def test_a_group_matching_the_left_neighbour_is_appended_into_it() -> None:
    r = assemble_components([sup("remember", "user", position="anchored")], CHAT)
    assert contents(r)[-1] == ("user", "U2\n\nREMEMBER")
    assert r.messages[-1]["id"] == "u2" and r.contributors[-1] == ["u2", "remember"]


def test_a_group_matching_the_right_neighbour_is_prepended_into_it() -> None:
    r = assemble_components([sup("intro", "user", position="after_system")], CHAT)
    assert contents(r)[0] == ("user", "INTRO\n\nU1") and r.contributors[0] == ["intro", "u1"]


def test_adjacent_same_role_supplements_merge_and_different_roles_make_new_messages() -> None:
    comps = [sup("a", "assistant", position="tail", order=1), sup("b", "assistant", position="tail", order=2),
             sup("c", "user", position="tail", order=3), sup("d", "assistant", position="tail", order=4)]
    r = assemble_components(comps, msgs("u1:user", "a1:assistant"))
    assert contents(r) == [("user", "U1"), ("assistant", "A1\n\nA\n\nB"), ("user", "C"), ("assistant", "D")]


def test_no_merge_into_tool_call_messages_or_non_text_content() -> None:
    parts = [{"id": "u1", "role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]
    r = assemble_components([sup("n", "user", position="anchored")], parts)
    assert len(r.messages) == 2 and r.messages[1]["content"] == "N"
    r = assemble_components([sup("n", "assistant", position="tail")], msgs("u1:user", "call:assistant:"))
    assert [m["content"] for m in r.messages] == ["U1", "", "N"]


def test_the_callers_messages_are_never_mutated() -> None:
    original = copy.deepcopy(CHAT)
    assemble_components([sup("x", "user", position="anchored"), sup("y", "user", position="after_system")], CHAT)
    assert CHAT == original


def test_new_message_ids_are_deterministic() -> None:
    a = assemble_components([*NATIVES, sup("t", "assistant", position="tail")], CHAT)
    b = assemble_components([*NATIVES, sup("t", "assistant", position="tail")], CHAT)
    assert [m["id"] for m in a.messages] == [m["id"] for m in b.messages]


# -- overrides -------------------------------------------------------------------------------------------


def test_an_enabled_system_override_replaces_the_native_at_the_markers_order() -> None:
    r = assemble_components([*NATIVES, sup("mine", template="MY PERSONA", origin="persona", order=999)], CHAT)
    assert r.system == "IDENTITY\n\nMY PERSONA\n\nTOOLS"
    assert [s["id"] for s in r.sections] == ["identity", "mine", "tools"] and r.sections[1]["origin"] == "persona"


def test_a_user_override_removes_the_native_and_goes_to_its_gap() -> None:
    r = assemble_components([*NATIVES, sup("p", "user", template="PERSONA AS USER", origin="persona",
                                           position="after_system")], CHAT)
    assert r.system == "IDENTITY\n\nTOOLS" and contents(r)[1] == ("user", "PERSONA AS USER\n\nU1")


def test_a_disabled_override_only_removes_the_native() -> None:
    r = assemble_components([*NATIVES, sup("off", template="X", origin="tools", enabled=False)], CHAT)
    assert r.system == "IDENTITY\n\nPERSONA"


def test_an_override_of_an_absent_native_creates_nothing() -> None:
    r = assemble_components([*NATIVES, sup("ghost", template="GHOST", origin="not-here"),
                             sup("ghost2", "user", template="G2", origin="gone", position="tail")], CHAT)
    assert "GHOST" not in r.system and all("G2" not in m["content"] for m in r.messages)


def test_one_override_per_origin() -> None:
    with pytest.raises(TemplateError) as err:
        assemble_components([*NATIVES, sup("a", origin="persona"), sup("b", origin="persona")], CHAT)
    assert err.value.code == "COMPONENT_INVALID" and err.value.path == "$.components[4].origin"


def test_an_origin_naming_a_supplement_is_refused() -> None:
    with pytest.raises(TemplateError) as err:
        assemble_components([sup("a"), sup("b", origin="a")], CHAT)
    assert err.value.code == "COMPONENT_INVALID" and err.value.path == "$.components[1].origin"


# -- {{user_input}} --------------------------------------------------------------------------------------


def test_user_input_is_the_last_real_user_input_at_each_assembly() -> None:
    comps = [sup("echo", template="Answer: {{user_input}}"), sup("t", "assistant", template="({{ user_input }})",
                                                                 position="tail")]
    first = assemble_components(comps, msgs("u1:user:first question"))
    assert first.system == "Answer: first question" and first.messages[-1]["content"] == "(first question)"
    later = assemble_components(comps, msgs("u1:user:first question", "a1:assistant", "u2:user:second"))
    assert later.system == "Answer: second"  # read at each assembly, not frozen when saved


def test_user_input_is_taken_before_supplements_are_merged_into_it() -> None:
    comps = [sup("r", "user", template="[{{user_input}}]", position="anchored")]
    r = assemble_components(comps, msgs("u1:user:Q"))
    assert r.messages[-1]["content"] == "Q\n\n[Q]"


def test_caller_variables_are_available_and_native_text_is_never_expanded() -> None:
    r = assemble_components([native_section("n", "literal {{model}}"), sup("m", template="model={{model}}")], CHAT,
                            variables={"model": "gpt-x"})
    assert r.system == "literal {{model}}\n\nmodel=gpt-x"


@pytest.mark.parametrize(
    ("template", "messages", "fragment"),
    [("{{nope}}", CHAT, "unknown template variable"), ("x {{user_input}}", msgs("a:assistant"), "no value")],
)
def test_unknown_or_valueless_variables_are_errors_with_a_position(template: str, messages: list, fragment: str) -> None:
    with pytest.raises(TemplateError) as err:
        assemble_components([sup("bad", template=template)], messages)
    assert err.value.code == "COMPONENT_TEMPLATE_VARIABLE" and fragment in err.value.message
    assert err.value.path == "$.components[0].template" and err.value.span is not None


def test_a_disabled_component_with_a_bad_variable_is_not_evaluated() -> None:
    r = assemble_components([sup("off", template="{{nope}}", enabled=False)], CHAT)
    assert r.system == ""


def test_system_messages_in_the_conversation_are_refused() -> None:
    with pytest.raises(TemplateError) as err:
        assemble_components([], msgs("s:system", "u:user"))
    assert err.value.code == "COMPONENT_INVALID" and err.value.path == "$.messages[0]"
