"""MVU reply updates (dsh-assembler 11.2; facts 53 and 54 of section 15)."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from conftest import SHARED
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

import tavernbox
from tavernbox import CODES, TemplateError
from tavernbox.bridge import MvuUpdate, apply_mvu_reply
from tavernbox.bridge import mvu_commands as mc

CORPUS = SHARED / "corpora" / "mvu"


def run(state: dict[str, Any], reply: str) -> MvuUpdate:
    """Apply ``reply`` and check the caller's state was left as it was."""
    before = copy.deepcopy(state)
    result = apply_mvu_reply(state, reply)
    assert state == before
    return result


def codes(result: MvuUpdate) -> list[str]:
    return [d.code for d in result.diagnostics]


def fatal(state: dict[str, Any], reply: str, code: str) -> TemplateError:
    before = copy.deepcopy(state)
    with pytest.raises(TemplateError) as info:
        apply_mvu_reply(state, reply)
    assert info.value.code == code, info.value
    assert state == before
    return info.value


# --- the two upstream facts ------------------------------------------------------------------


def test_fact53_set_on_value_with_description_replaces_the_value_and_shows_old_new_reason() -> None:
    state = {"理": {"好感度": [66, "desc"]}}
    reply = "正文。\n<UpdateVariable>\n_.set('理.好感度', 66, 74);//reason\n</UpdateVariable>"
    result = run(state, reply)
    assert result.stat_data == {"理": {"好感度": [74, "desc"]}}
    assert result.display_data == {"理": {"好感度": "66->74 (reason)"}}
    assert result.delta_data == {"理": {"好感度": "66->74 (reason)"}}
    assert result.commands == 1 and result.diagnostics == ()


def test_fact54_json_patch_delta_and_append() -> None:
    result = run({"hp": 100}, '<JSONPatch>[{"op":"delta","path":"/hp","value":-5}]</JSONPatch>')
    assert result.stat_data == {"hp": 95}
    result = run({"hp": 100, "list": [0]}, '<JSONPatch>[{"op":"add","path":"/list/-","value":1}]</JSONPatch>')
    assert result.stat_data == {"hp": 100, "list": [0, 1]}
    assert result.delta_data == {"list": "[0]->[0,1]"}


# --- every command form ----------------------------------------------------------------------


def test_set_two_and_three_arguments_and_missing_path() -> None:
    result = run({"a": {"b": "x"}, "n": 1}, "_.set('a.b', 'y');\n_.set('n', 1, 2);//up\n_.set('nope', 3);")
    assert result.stat_data == {"a": {"b": "y"}, "n": 2}
    assert result.display_data == {"a": {"b": "x->y"}, "n": "1->2 (up)"}
    assert codes(result) == ["MVU_PATH_MISSING"]
    assert result.diagnostics[0].path == "nope" and result.commands == 2


def test_set_coerces_numeric_strings_when_the_old_value_is_a_number() -> None:
    result = run({"n": 1, "p": [2, "d"], "s": "1"}, "_.set('n', '5');_.set('p', \"7.5\");_.set('s', '9');_.set('n', null);")
    assert result.stat_data == {"n": None, "p": [7.5, "d"], "s": "9"}


def test_set_with_strict_set_replaces_the_whole_pair() -> None:
    result = run({"$meta": {"strictSet": True}, "p": [1, "d"]}, "_.set('p', 2);")
    assert result.stat_data["p"] == 2


def test_add_rounds_to_twelve_significant_digits_and_needs_exactly_two_arguments() -> None:
    result = run({"x": 0.1, "p": [1, "d"], "s": "t"}, "_.add('x', 0.2);_.add('p', '-3');_.add('x');_.add('s', 1);")
    assert result.stat_data == {"x": 0.3, "p": [-2, "d"], "s": "t"}
    assert codes(result) == ["MVU_COMMAND_INVALID", "MVU_SCHEMA"]
    assert result.display_data["p"] == "1->-2"


def test_insert_and_assign_forms() -> None:
    state = {"list": [1], "obj": {"a": {"x": 1}}, "s": 1}
    reply = (
        "_.insert('list', 2);"
        "_.insert('list', 0, 0);"
        "_.assign('obj', {a: {y: 2}, b: 3});"
        "_.assign('obj', 'c', [1, 2]);"
        "_.insert('fresh', 'k', 'v');"
        "_.assign('s', 1);"
        "_.insert('list', 9, 1);"
    )
    result = run(state, reply)
    assert result.stat_data == {
        "list": [0, 1, 2],
        "obj": {"a": {"x": 1, "y": 2}, "b": 3, "c": [1, 2]},
        "s": 1,
        "fresh": {"k": "v"},
    }
    assert codes(result) == ["MVU_SCHEMA", "MVU_SCHEMA"]
    assert result.delta_data["fresh"] == "undefined->{\"k\":\"v\"}"


def test_remove_unset_delete_forms() -> None:
    state = {"a": 1, "b": {"k": 1, "j": 2}, "l": ["x", {"y": 1}, "z", "w"]}
    reply = "_.remove('a');_.unset('b', 'k');_.delete('l', {y: 1});_.remove('l', 0);_.remove('l[1]');_.remove('a');"
    result = run(state, reply)
    assert result.stat_data == {"b": {"j": 2}, "l": ["z"]}
    assert codes(result) == ["MVU_PATH_MISSING"]
    assert result.delta_data == {"a": "1->undefined", "b": {"k": "1->undefined"}, "l": '["x",{"y":1},"z","w"]->["z"]'}


def test_json_patch_operations_pointer_escapes_and_fences() -> None:
    state = {"a/b": 1, "m~n": 2, "o": {"k": "v"}, "arr": [1, 2, 3]}
    reply = """<json_patch>
```json
[
  {"op": "replace", "path": "/a~1b", "value": 10},
  {"op": "delta", "path": "/m~0n", "value": "3"},
  {"op": "insert", "path": "/o/new", "value": {"z": 1}},
  {"op": "add", "path": "/arr/0", "value": 0},
  {"op": "remove", "path": "/arr/3"},
  {"op": "move", "from": "/o/k", "path": "/moved"},
  {"op": "move", "from": "/arr/0", "to": "/o/first"},
  {"op": "copy", "from": "/arr", "path": "/c"}
]
```
</json_patch>"""
    result = run(state, reply)
    assert result.stat_data == {"a/b": 10, "m~n": 5, "o": {"new": {"z": 1}, "first": 0}, "arr": [1, 2], "moved": "v"}
    assert codes(result) == ["MVU_COMMAND_INVALID"]
    assert result.commands == 7


def test_json_patch_operations_that_are_not_json_data_are_skipped() -> None:
    reply = ('<JSONPatch>[{"op":"add","path":"/l/-","value":[Infinity]}, 7, {"op":"replace","path":"/n"}, '
             '{"op":"delta","path":"/n","value":1}]</JSONPatch>')
    result = run({"l": [], "n": 1}, reply)
    assert result.stat_data == {"l": [], "n": 2}
    assert codes(result) == ["MVU_COMMAND_INVALID"] * 3
    assert [d.path for d in result.diagnostics] == ["/l/-", None, "/n"]


def test_commands_run_in_text_order_across_patch_blocks() -> None:
    reply = "_.set('n', 1);\n<JSONPatch>[{\"op\":\"replace\",\"path\":\"/n\",\"value\":2}]</JSONPatch>\n_.add('n', 10);"
    result = run({"n": 0}, reply)
    assert result.stat_data == {"n": 12}
    assert result.delta_data == {"n": "0->12"}


def test_paths_brackets_quotes_and_exact_keys() -> None:
    state = {"a": [{"b.c": 1}], "x.y": 2, "名": {"字": 3}}
    result = run(state, "_.set('a[0][\"b.c\"]', 5);_.set('x.y', 6);_.set(\"名['字']\", 7);_.set('a..b', 1);")
    assert result.stat_data == {"a": [{"b.c": 5}], "x.y": 6, "名": {"字": 7}}
    assert codes(result) == ["MVU_PATH_MISSING"]


@pytest.mark.parametrize(
    ("raw", "value"),
    [
        ('{"k": [1, 2]}', {"k": [1, 2]}),
        ("{k: 'v', n: .5,}", {"k": "v", "n": 0.5}),
        ("(10 + 2) * 3 / 4 - -1", 10),
        ("1 / 0", "1 / 0"),
        ("[a, yes, 16:00]", ["a", "yes", "16:00"]),
        ("`back tick`", "back tick"),
        ("地点：教室", "地点：教室"),
        ("'quoted'", "quoted"),
        ("NaN", "NaN"),
        ("process.exit()", "process.exit()"),
    ],
)
def test_values_are_read_as_data_never_run(raw: str, value: Any) -> None:
    result = run({"v": None}, f"_.set('v', {raw});")
    assert result.stat_data["v"] == value


def test_display_strips_only_outer_quotes_and_keeps_the_latest_reason() -> None:
    result = run({"s": "a"}, "_.set('s', 'b');//one\n_.set('s', 'say \"hi\"');//two")
    assert result.display_data == {"s": 'a->say \\"hi\\" (two)'}


def test_meta_extensible_and_required() -> None:
    state = {
        "o": {"$meta": {"extensible": False, "required": ["k"]}, "k": 1, "j": 2},
        "l": [{"$arrayMeta": True, "$meta": {"extensible": False}}, 1],
    }
    reply = "_.insert('o', 'new', 1);_.assign('o', {k: 5});_.remove('o', 'k');_.remove('o.j');_.insert('l', 2);_.remove('l', 1);"
    result = run(state, reply)
    assert codes(result) == ["MVU_SCHEMA", "MVU_SCHEMA", "MVU_SCHEMA", "MVU_SCHEMA"]
    assert result.stat_data["o"] == {"$meta": {"extensible": False, "required": ["k"]}, "k": 5}
    assert result.stat_data["l"] == state["l"]


# --- fatal errors and the caller's state -----------------------------------------------------


@pytest.mark.parametrize(
    "reply",
    ["_.set('a', 1)", "_.set('a', (1);", "_.set('a', 'open);", "<JSONPatch>[{]</JSONPatch>", "<JSONPatch>[]", "_.set('a', 1] );"],
)
def test_unreadable_commands_are_fatal_with_line_and_column(reply: str) -> None:
    error = fatal({"a": 0}, "line one\n  " + reply, "MVU_COMMAND_SYNTAX")
    assert error.line == 2 and error.column is not None and error.column >= 3


def test_input_is_never_mutated_even_when_a_later_command_is_fatal() -> None:
    state = {"a": {"b": [1, 2]}}
    fatal(state, "_.insert('a.b', 3);_.set('a.b', 1) oops", "MVU_COMMAND_SYNTAX")
    result = run(state, "_.insert('a.b', 3);_.remove('a.b', 0);")
    assert result.stat_data == {"a": {"b": [2, 3]}}
    result.stat_data["a"]["b"].append(9)
    assert state == {"a": {"b": [1, 2]}}


def test_invalid_input_state_is_rejected() -> None:
    with pytest.raises(TemplateError) as info:
        apply_mvu_reply({"x": float("nan")}, "")
    assert info.value.code == "INPUT_INVALID"
    with pytest.raises(TemplateError) as info:
        apply_mvu_reply([], "")  # type: ignore[arg-type]
    assert info.value.code == "INPUT_INVALID"


# --- limits: each trips just over and passes just under ----------------------------------------


def test_reply_limit() -> None:
    head = "_.set('a', 1);"
    run({"a": 0}, head + " " * (mc.MAX_REPLY_BYTES - len(head)))
    fatal({"a": 0}, head + " " * (mc.MAX_REPLY_BYTES - len(head) + 1), "MVU_REPLY_LIMIT")


def test_command_limit() -> None:
    assert run({"n": 0}, "_.add('n', 1);" * mc.MAX_COMMANDS).stat_data == {"n": 1000}
    fatal({"n": 0}, "_.add('n', 1);" * (mc.MAX_COMMANDS + 1), "MVU_COMMAND_LIMIT")
    patch = json.dumps([{"op": "delta", "path": "/n", "value": 1}] * mc.MAX_COMMANDS)
    assert run({"n": 0}, f"<JSONPatch>{patch}</JSONPatch>").commands == mc.MAX_COMMANDS
    fatal({"n": 0}, f"_.add('n', 1);<JSONPatch>{patch}</JSONPatch>", "MVU_COMMAND_LIMIT")


def test_path_limits() -> None:
    key = "k" * (mc.MAX_PATH_CHARS - 2)
    assert codes(run({}, f"_.set('{key}', 1);")) == ["MVU_PATH_MISSING"]
    fatal({}, f"_.set('{key}xxx', 1);", "MVU_PATH_LIMIT")
    deep = ".".join(["a"] * mc.MAX_PATH_PARTS)
    assert codes(run({}, f"_.set('{deep}', 1);")) == ["MVU_PATH_MISSING"]
    fatal({}, f"_.set('{deep}.a', 1);", "MVU_PATH_LIMIT")
    pointer = "/a" * (mc.MAX_PATH_PARTS + 1)
    fatal({}, f'<JSONPatch>[{{"op":"remove","path":"{pointer}"}}]</JSONPatch>', "MVU_PATH_LIMIT")


def _nested(depth: int) -> dict[str, Any]:
    """A state whose depth (root = 1) is exactly ``depth``."""
    node: dict[str, Any] = {}
    for _ in range(depth - 1):
        node = {"a": node}
    return node


def test_state_depth_limit() -> None:
    run(_nested(mc.MAX_STATE_DEPTH), "")
    fatal(_nested(mc.MAX_STATE_DEPTH + 1), "", "MVU_STATE_LIMIT")
    # a reply value deep enough to push the state over the limit
    value = "[" * 63 + "]" * 63
    assert run({"v": 0}, f"_.set('v', {value});").stat_data["v"] is not None
    fatal({"v": 0}, f"_.set('v', [{value}]);", "MVU_STATE_LIMIT")
    fatal({"v": 0}, "_.set('v', " + "[" * 5000 + "]" * 5000 + ");", "MVU_STATE_LIMIT")


def test_state_node_limit() -> None:
    full = {"l": [0] * (mc.MAX_STATE_NODES - 2)}  # root + list + items
    run(full, "")
    fatal({"l": [0] * (mc.MAX_STATE_NODES - 1)}, "", "MVU_STATE_LIMIT")
    fatal(full, "_.insert('l', 1);", "MVU_STATE_LIMIT")


def test_state_byte_limit() -> None:
    overhead = len('{"s":""}')
    at_limit = {"s": "x" * (mc.MAX_STATE_BYTES - overhead)}
    run(at_limit, "")
    fatal({"s": "x" * (mc.MAX_STATE_BYTES - overhead + 1)}, "", "MVU_STATE_LIMIT")
    fatal(at_limit, "_.assign('t', 1);", "MVU_STATE_LIMIT")  # a new key pushes the updated state over


def test_every_new_code_is_catalogued() -> None:
    for code in ["MVU_COMMAND_SYNTAX", "MVU_COMMAND_INVALID", "MVU_PATH_MISSING", "MVU_SCHEMA", "MVU_REPLY_LIMIT",
                 "MVU_COMMAND_LIMIT", "MVU_PATH_LIMIT", "MVU_STATE_LIMIT", "MVU_VALUE_LIMIT"]:
        assert code in CODES


def test_top_level_namespace_exports() -> None:
    assert tavernbox.apply_mvu_reply is apply_mvu_reply
    assert tavernbox.MvuUpdate is MvuUpdate
    assert "apply_mvu_reply" in tavernbox.__all__


# --- property: random command soups ----------------------------------------------------------

FRAGMENTS = st.sampled_from([
    "_.set(", "_.add(", "_.insert(", "_.assign(", "_.remove(", "_.unset(", "_.delete(", "'a'", "'a.b'", "'l[0]'",
    '"l"', "a", ", ", ",", ")", ";", "//why\n", "\n", "1", "-2.5", "(1+2)*3", "{", "}", "[", "]", "{k: 1}", "null",
    "'x", "`t`", "<JSONPatch>", "</JSONPatch>", "<json_patch>", "</json_patch>", '{"op":"replace","path":"/a","value":1}',
    '{"op":"delta","path":"/n","value":2}', '{"op":"add","path":"/l/-","value":[]}', '{"op":"remove","path":"/l/0"}',
    '{"op":"move","from":"/a","path":"/z"}', '"', "~1", "/", "\\", "名", '{"op":"add","path":"/l/-","value":[Infinity, NaN]}', "Infinity",
])
LEAVES = st.one_of(st.none(), st.booleans(), st.integers(-5, 5), st.floats(-10, 10), st.text("ab", max_size=3))
TREES = st.recursive(LEAVES, lambda kids: st.one_of(st.lists(kids, max_size=3),
                                                    st.dictionaries(st.sampled_from(["a", "b", "n", "l", "$meta"]), kids, max_size=3)),
                     max_leaves=10)


@settings(max_examples=300, deadline=None)
@given(state=st.dictionaries(st.sampled_from(["a", "n", "l", "s"]), TREES, max_size=4),
       soup=st.lists(FRAGMENTS, max_size=30).map("".join))
def test_command_soups_raise_only_template_errors_and_never_mutate(state: dict[str, Any], soup: str) -> None:
    before = copy.deepcopy(state)
    try:
        result = apply_mvu_reply(state, soup)
    except TemplateError as error:
        assert error.code in CODES
    else:
        json.dumps(result.stat_data, allow_nan=False)
        json.dumps(result.display_data, allow_nan=False)
        assert all(d.code in CODES for d in result.diagnostics)
    assert state == before


# --- corpus ------------------------------------------------------------------------------------


def _example_block(text: str) -> str:
    return text[text.index("example: |-"):]


@pytest.mark.needs_shared("corpora/mvu")
def test_corpus_liuli_example_commands_run_on_a_matching_state() -> None:
    rules = (CORPUS / "mvu-example-liuli-update-rules.md").read_text("utf-8")
    example = _example_block(rules)
    state = {"悠纪": {"好感度": [33, "好感"]}, "暮莲": {"日程": {"周三": {"上午": ["空", "日程"]}}}}
    result = run(state, example)
    assert result.diagnostics == ()
    assert result.stat_data["悠纪"]["好感度"] == [35, "好感"]
    assert result.stat_data["暮莲"]["日程"]["周三"]["上午"][0] == "地点：data_center_zone.数据服务器室 行为：检查"
    assert result.delta_data["悠纪"]["好感度"] == "33->35 (愉快的一次讨论，悠纪觉得与你一起是开心的)"


@pytest.mark.needs_shared("corpora/mvu")
def test_corpus_stagedog_patch_on_its_initvar() -> None:
    state = yaml.safe_load((CORPUS / "stagedog-example-initvar.yaml").read_text("utf-8"))
    state["世界"]["当前时间"] = str(state["世界"]["当前时间"])
    reply = """<UpdateVariable><Analysis>ok</Analysis>
<JSONPatch>
[
  {"op": "replace", "path": "/世界/当前时间", "value": "2024-04-08 12:00"},
  {"op": "delta", "path": "/白娅/依存度", "value": "4"},
  {"op": "insert", "path": "/世界/近期事务/午饭", "value": "和白娅一起吃午饭"},
  {"op": "remove", "path": "/世界/近期事务/午休临近"},
  {"op": "move", "from": "/白娅/称号/行尸", "to": "/白娅/称号/旧称号"},
  {"op": "delta", "path": "/主角/物品栏/薄荷糖/数量", "value": -1}
]
</JSONPatch></UpdateVariable>"""
    result = run(state, reply)
    assert result.diagnostics == () and result.commands == 6
    assert result.stat_data["白娅"]["依存度"] == 39
    assert "午休临近" not in result.stat_data["世界"]["近期事务"]
    assert list(result.stat_data["白娅"]["称号"]) == ["逃避者", "旧称号"]
    assert result.delta_data["主角"]["物品栏"]["薄荷糖"]["数量"] == "1->0"


def test_yaml_aliases_cannot_blow_up_a_small_value() -> None:
    levels = ["&a0 [1, 1, 1, 1, 1, 1, 1, 1, 1, 1]"] + [f"&a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 9)]
    raw = "[" + ", ".join(levels) + "]"
    result = run({"v": 0}, f"_.set('v', {raw});")
    assert result.stat_data["v"] == raw  # refused as a collection, kept as text
    assert run({"v": 0}, "_.set('v', [&x [1, 2], *x]);").stat_data["v"] == [[1, 2], [1, 2]]


def test_loose_value_budget() -> None:
    """JSON5/YAML readings are slow pure Python: their total per reply is capped; strict JSON is not."""
    quarter = mc.MAX_LOOSE_VALUE_CHARS // 4
    loose = "{k: '" + "x" * (quarter - 7) + "'}"
    assert len(loose) == quarter  # four of them use the budget up exactly
    assert run({"v": 0}, f"_.set('v', {loose});" * 4).stat_data["v"] == {"k": "x" * (quarter - 7)}
    fatal({"v": 0}, f"_.set('v', {loose});" * 4 + "_.set('v', {a: 1});", "MVU_VALUE_LIMIT")
    strict = json.dumps({"k": "x" * mc.MAX_LOOSE_VALUE_CHARS})
    assert run({"v": 0}, f"_.set('v', {strict});").stat_data["v"]["k"] == "x" * mc.MAX_LOOSE_VALUE_CHARS


def test_array_lock_is_seen_after_it_is_inserted_and_released_after_it_is_replaced() -> None:
    lock = '{"$arrayMeta": true, "$meta": {"extensible": false}}'
    result = run({"l": [1]}, f"_.insert('l', 2);_.insert('l', {lock});_.insert('l', 3);_.set('l[2]', 0);_.insert('l', 4);")
    assert result.stat_data["l"] == [1, 2, 0, 4]
    assert codes(result) == ["MVU_SCHEMA"]


def test_a_closing_tag_on_the_commands_line_is_not_part_of_the_reason() -> None:
    update = apply_mvu_reply({"hp": [100, "health"]}, "<UpdateVariable>_.add('hp', -5);//hit</UpdateVariable>")
    assert update.stat_data == {"hp": [95, "health"]}
    assert update.display_data == {"hp": "100->95 (hit)"}
