"""Tavern Helper's variable macros and SillyTavern's variable scopes (``macros/tavern_helper.py``,
``macros/st_variables.py``), checked against the recordings of ``golden/st_oracle/ext_scenarios.py``."""

from __future__ import annotations

from typing import Any

import pytest
from st_ext_support import ext_cases, ext_request, ext_variables

from tavernbox import assemble_request
from tavernbox.macros.st_variables import StVariables, message_variables
from tavernbox.macros.tavern_helper import MACRO_NAMES, MacroUse, expand_variable_macros, lodash_get

STAT = {"stat_data": {"hp": 80, "bag": ["rope", "lamp"], "mood": {"now": "calm", "$meta": "x"}}}


def _case(cid: str) -> dict[str, Any]:
    case = ext_cases().get(cid)
    if case is None:
        pytest.fail(f"tests/golden/st_oracle/ext_requests.jsonl has no case {cid}")
    return case


def test_the_recording_with_only_tavern_helper_equals_sillytavern_then_the_macro_pass() -> None:
    # SillyTavern's own request (tavernbox without the extensions: their macros and <% %> left as written), then
    # Tavern Helper's pass over every final message: what SillyTavern sent with Tavern Helper on
    case = _case("ext-order-pt-off")
    variables = ext_variables(case)
    got = assemble_request(ext_request(case)).messages
    expected = case["messages"]
    assert [m["role"] for m in got] == [m["role"] for m in expected]
    for i, (g, e) in enumerate(zip(got, expected, strict=True)):
        assert expand_variable_macros(g["content"], variables) == e["content"], f"message {i}"


def test_with_tavern_helper_off_the_macros_stay_as_written() -> None:
    case = _case("ext-order-th-off")
    description = case["messages"][2]["content"]
    assert "{{get_global_variable::gv}}" in description and "{{format_message_variable::stat_data}}" in description


def test_the_message_scope_is_the_latest_message_with_variables() -> None:
    v = StVariables.build(messages=[{"a": 1}, STAT, None, "not an object"])
    assert expand_variable_macros("{{get_message_variable::stat_data.hp}}", v) == "80"
    assert expand_variable_macros("{{get_message_variable::a}}", StVariables.build(messages=[{"a": 1}, None])) == "1"
    assert expand_variable_macros("[{{get_message_variable::a}}]", StVariables()) == "[null]"


def test_dollar_keys_are_removed_at_every_depth_and_absent_paths_are_null() -> None:
    v = StVariables.build(messages=[STAT])
    assert expand_variable_macros("{{get_message_variable::stat_data.mood}}", v) == '{"now":"calm"}'
    assert expand_variable_macros("{{get_message_variable::stat_data.nope}}", v) == "null"
    assert expand_variable_macros("{{GET_message_VARIABLE::stat_data.hp}}", v) == "80"
    # the scope name is matched in any case but reads nothing unless lower-case (Tavern Helper's switch)
    assert expand_variable_macros("{{get_MESSAGE_variable::stat_data.hp}}", v) == "null"


def test_format_indents_under_the_text_before_it_and_nests_several_on_a_line() -> None:
    v = StVariables.build(chat={"a": {"x": 1, "y": [1, 2]}, "s": "two\nlines"}, global_vars={"g": "one"})
    assert expand_variable_macros("- key: {{format_chat_variable::a}}", v) == \
        "- key: x: 1\n       y:\n         - 1\n         - 2"
    assert expand_variable_macros("{{format_global_variable::g}} {{format_chat_variable::s}}", v) == "one two\n    lines"
    # an astral character before the macro counts two columns, as JavaScript's length does
    assert expand_variable_macros("🙂{{format_chat_variable::s}}", v) == "🙂two\n  lines"


def test_get_runs_before_format_and_values_are_not_expanded_again() -> None:
    v = StVariables.build(chat={"m": "{{format_chat_variable::n}}", "n": {"k": 1}, "raw": "{{user}}"})
    assert expand_variable_macros("{{get_chat_variable::m}}", v) == "k: 1"
    assert expand_variable_macros("{{get_chat_variable::raw}}", v) == "{{user}}"


def test_lodash_paths() -> None:
    root = {"a": {"b": [10, {"c": "d"}]}, "x.y": 5, "q": {"w.e": 7}, "s": "héllo"}
    assert lodash_get(root, "a.b[1].c") == "d"
    assert lodash_get(root, "a.b.0") == 10
    assert lodash_get(root, "x.y") == 5
    assert lodash_get(root, 'q["w.e"]') == 7
    assert lodash_get(root, "a.b.length") == 2
    assert lodash_get(root, "s.length") == 5
    assert lodash_get(root, "a.zz.b") is None
    v = StVariables.build(chat={"<k>": 3})
    assert expand_variable_macros("{{get_chat_variable::&lt;k&gt;}}", v) == "3"


def test_character_and_preset_scopes_read_tavern_helpers_settings() -> None:
    card = {"data": {"extensions": {"tavern_helper": {"variables": {"c": 1}}}}}
    preset = {"extensions": {"tavern_helper": [["scripts", []], ["variables", {"p": 2}]]}}
    v = StVariables.build(card=card, preset=preset)
    assert expand_variable_macros("{{get_character_variable::c}}/{{get_preset_variable::p}}", v) == "1/2"


def test_uses_name_what_was_read() -> None:
    uses: list[MacroUse] = []
    expand_variable_macros("{{get_chat_variable::a}} {{format_global_variable::b}}", StVariables(), uses)
    assert [(u.name, u.scope, u.path) for u in uses] == [("get_chat_variable", "chat", "a"),
                                                          ("format_global_variable", "global", "b")]
    assert "format_message_variable" in MACRO_NAMES


def test_message_variables_read_the_current_swipe() -> None:
    assert message_variables({"variables": [{"a": 1}, {"b": 2}], "swipe_id": 1}) == {"b": 2}
    assert message_variables({"variables": [{"a": 1}]}) == {"a": 1}
    assert message_variables({"variables": {"a": 1}}) == {"a": 1}
    assert message_variables({"variables": [{"a": 1}], "swipe_id": 4}) is None
    assert message_variables({"mes": "x"}) is None


def test_registered_names_are_left_as_written_without_a_warning() -> None:
    from tavernbox import expand_macros
    from tavernbox.macros.registry import MacroRegistry
    from tavernbox.macros.tavern_helper import register_as_written

    registry = MacroRegistry.default()
    text = "A {{format_message_variable::stat_data}} B {{get_chat_variable::{{char}}.hp}} {{user}}"
    plain = expand_macros(text, {"user": "Ash", "char": "Mira"})
    assert any(d.code == "MACRO_UNKNOWN" for d in plain.diagnostics)
    register_as_written(registry)
    known = expand_macros(text, {"user": "Ash", "char": "Mira"}, registry=registry)
    assert not [d for d in known.diagnostics if d.code == "MACRO_UNKNOWN"]
    assert known.text == plain.text == "A {{format_message_variable::stat_data}} B {{get_chat_variable::Mira.hp}} Ash"


def test_lint_does_not_call_tavern_helpers_macros_unknown(tmp_path: Any) -> None:
    from tavernbox.lint import lint_files

    path = tmp_path / "prompt.txt"
    path.write_text("{{format_message_variable::stat_data}} {{nosuchmacro}}", encoding="utf-8")
    assert [f.code for f in lint_files([str(path)]).findings].count("MACRO_UNKNOWN") == 1
