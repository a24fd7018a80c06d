"""Issue 14: text Python cannot encode, and numbers JSON does not have, at every command's boundary.

The rule (``tavernbox.strict_json``): a lone surrogate is refused with ``TEXT_SURROGATE`` and the JSON
path that holds it, wherever it enters (files, options, each ``--jsonl`` row) and in every answer; a
batch goes on past a bad row. ``NaN``/``Infinity``/``1e999`` are refused as not JSON (``ASSET_JSON``
for asset files, the input's own code for CLI inputs) at their line:column. Nothing ends in
``INTERNAL_ERROR`` or a traceback.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tavernbox.assets import load_asset
from tavernbox.cli.main import main
from tavernbox.errors import CODES, TemplateError
from tavernbox.strict_json import find_surrogate, loads

LONE = "x\ud800y"
SURROGATE = re.compile("[\ud800-\udfff]")
CARD = {"spec": "chara_card_v2", "data": {"name": "Mira", "first_mes": "Hi"}}
BOOK = {"entries": {"0": {"uid": 0, "key": ["a"], "content": "A"}}}
CHAT = [{"id": "m1", "role": "user", "content": "hi a"}]
PRESET = {"prompts": [{"identifier": "main", "name": "Main", "system_prompt": True, "role": "system", "content": "M"}],
          "prompt_order": [{"character_id": 100001, "order": [{"identifier": "main", "enabled": True}]}]}


def put(tmp_path: Path, name: str, value: Any) -> str:
    """Write ``value`` as ASCII JSON, so a lone surrogate is the ``\\ud800`` escape a real file would hold."""
    path = tmp_path / name
    path.write_text(value if isinstance(value, str) else json.dumps(value, ensure_ascii=True), encoding="utf-8")
    return str(path)


def run(args: list[str], stdin: str | None = None) -> Result:
    return CliRunner().invoke(main, args, input=stdin)


def answers(result: Result) -> list[dict[str, Any]]:
    """Every stdout line or the whole stdout as JSON, parsed strictly (no surrogate may come back)."""
    text = result.stdout
    assert not SURROGATE.search(text)
    text.encode("utf-8")
    try:
        values = [json.loads(text)]
    except json.JSONDecodeError:
        values = [json.loads(line) for line in text.splitlines() if line.strip()]
    return [v if isinstance(v, dict) else {"messages": v} for v in values]


def error_of(obj: dict[str, Any]) -> dict[str, Any]:
    err = obj.get("error")
    if err is None and obj.get("files"):
        err = obj["files"][0].get("error")
    assert isinstance(err, dict), obj
    return err


# -- the rule, command by command ------------------------------------------------------------------

def test_macros_jsonl_refuses_a_surrogate_row_and_goes_on(tmp_path: Path) -> None:
    ctx = put(tmp_path, "ctx.json", {"char": "A"})
    rows = [{"template": LONE}, {"template": "{{char}}", "vars": {"v": LONE}}, {"template": "ok {{char}}"},
            {"template": "x", "globals": {LONE: 1}}]
    result = run(["macros", "--context", ctx, "--jsonl"], "\n".join(json.dumps(r) for r in rows) + "\n")
    assert result.exit_code == 0, result.output
    out = answers(result)
    assert [o.get("error", {}).get("code") for o in out] == ["TEXT_SURROGATE", "TEXT_SURROGATE", None, "TEXT_SURROGATE"]
    assert [o["error"]["path"] for o in out if "error" in o] == ["$.template", "$.vars.v", '$.globals["x\\ud800y"]']
    assert [o["error"]["row"] for o in out if "error" in o] == [1, 2, 4]
    assert out[2]["text"] == "ok A"


def test_macros_context_with_a_surrogate_is_refused(tmp_path: Path) -> None:
    ctx = put(tmp_path, "ctx.json", {"char": "A", "character": {"description": LONE}})
    result = run(["macros", "--context", ctx, "--jsonl"], '{"template": "x"}\n')
    assert result.exit_code == 1
    err = error_of(answers(result)[0])  # a batch's whole-command error is JSON on stdout, as its rows are
    assert (err["code"], err["path"]) == ("TEXT_SURROGATE", "$.character.description")
    plain = run(["macros", "--context", ctx], "x")
    assert plain.exit_code == 1 and plain.stdout == ""
    assert "TEXT_SURROGATE" in plain.stderr and "$.character.description" in plain.stderr
    assert "INTERNAL_ERROR" not in result.output + plain.output


def test_import_of_a_card_named_with_a_surrogate(tmp_path: Path) -> None:
    card = put(tmp_path, "c.json", {"spec": "chara_card_v2", "data": {"name": "x\ud800"}})
    result = run(["import", "--json", card])
    assert result.exit_code == 1
    err = error_of(answers(result)[0])
    assert (err["code"], err["path"]) == ("TEXT_SURROGATE", "$.data.name")
    human = run(["import", card])
    assert human.exit_code == 1 and "TEXT_SURROGATE" in human.stderr and "$.data.name" in human.stderr


def test_activate_book_chat_and_jsonl(tmp_path: Path) -> None:
    book, chat = put(tmp_path, "b.json", BOOK), put(tmp_path, "chat.json", ["a"])
    bad_book = put(tmp_path, "bb.json", {"entries": {"0": {"uid": 0, "key": [LONE], "content": "A"}}})
    bad_chat = put(tmp_path, "bc.json", [LONE])
    for args, path in ((["--book", bad_book, "--chat", chat], "$.entries.0.key[0]"),
                       (["--book", book, "--chat", bad_chat], "$[0]")):
        result = run(["activate", *args, "--json"])
        assert result.exit_code == 1
        assert (error_of(answers(result)[0])["code"], error_of(answers(result)[0])["path"]) == ("TEXT_SURROGATE", path)
        plain = run(["activate", *args])
        assert plain.exit_code == 1 and plain.stdout == ""
        assert "TEXT_SURROGATE" in plain.stderr and path in plain.stderr
    lines = [{"entries": [{"keys": ["a"], "content": LONE}], "chat": ["a"]},
             {"entries": [{"keys": ["a"], "content": "fine"}], "chat": ["a"]}]
    result = run(["activate", "--jsonl"], "\n".join(json.dumps(x) for x in lines) + "\n")
    out = answers(result)
    assert result.exit_code == 1 and len(out) == 2
    assert (out[0]["error"]["code"], out[0]["error"]["path"]) == ("TEXT_SURROGATE", "$.entries[0].content")
    assert "error" not in out[1]


@pytest.mark.parametrize("which", ["chat", "preset", "card", "book"])
def test_assemble_inputs(tmp_path: Path, which: str) -> None:
    # A rule-file strategy: every input goes through cli/assemble.py's readers (the builtin-st path is the
    # strategies' own, being rewritten; it reads assets through load_asset, which applies the rule too).
    files = {"chat": CHAT, "preset": PRESET, "card": CARD, "book": BOOK}
    bad = {
        "chat": ([{"id": "m1", "role": "user", "content": LONE}], "$[0].content"),
        "preset": ({**PRESET, "prompts": [{**PRESET["prompts"][0], "content": LONE}]}, "$.prompts[0].content"),
        "card": ({"spec": "chara_card_v2", "data": {"name": "M", "description": LONE}}, "$.data.description"),
        "book": ({"entries": {"0": {"uid": 0, "key": ["a"], "content": LONE}}}, "$.entries.0.content"),
    }
    files[which] = bad[which][0]
    paths = {k: put(tmp_path, f"{k}.json", v) for k, v in files.items()}
    args = ["assemble", "--strategy", "builtin-native-roles", "--chat", paths["chat"], "--preset", paths["preset"],
            "--card", paths["card"], "--book", paths["book"]]
    result = run([*args, "--json"])
    assert result.exit_code == 1, result.output
    err = error_of(answers(result)[0])
    assert (err["code"], err["path"]) == ("TEXT_SURROGATE", bad[which][1])
    plain = run(args)
    assert plain.exit_code == 1 and plain.stdout == "" and "TEXT_SURROGATE" in plain.stderr


def test_assemble_strategy_file_with_a_surrogate(tmp_path: Path) -> None:
    strategy = put(tmp_path, "s.json", {"format": "dsh-tavern-request-assembly", "version": 1, "name": LONE})
    result = run(["assemble", "--strategy", strategy, "--chat", put(tmp_path, "c.json", CHAT), "--json"])
    err = error_of(answers(result)[0])
    assert result.exit_code == 1 and err["code"] == "TEXT_SURROGATE" and err["path"] == "$.name"


def test_render_output_that_cuts_a_pair_is_refused_not_escaped(tmp_path: Path) -> None:
    # The template is valid; JavaScript's slice cuts the emoji's surrogate pair in half.
    template = put(tmp_path, "t.ejs", "<%= '\U0001f600'.slice(0, 1) %>")
    text = run(["render", template])
    assert text.exit_code == 1 and "TEXT_SURROGATE" in text.stderr
    as_json = run(["render", "--json", template])
    assert as_json.exit_code == 1
    err = error_of(answers(as_json)[0])
    assert (err["code"], err["path"]) == ("TEXT_SURROGATE", "$.text")
    batch = run(["render", "--jsonl"], json.dumps({"template": "<%= '\U0001f600'.slice(0, 1) %>"}) + "\n"
                + json.dumps({"template": "ok"}) + "\n")
    out = answers(batch)
    assert out[0]["error"]["code"] == "TEXT_SURROGATE" and out[1] == {"text": "ok", "error": None}


def test_render_vars_with_a_surrogate(tmp_path: Path) -> None:
    template = put(tmp_path, "t.ejs", "<%= variables.a %>")
    result = run(["render", "--json", template, "--vars", put(tmp_path, "v.json", {"a": LONE})])
    assert result.exit_code == 1 and (error_of(answers(result)[0])["code"], error_of(answers(result)[0])["path"]) \
        == ("TEXT_SURROGATE", "$.a")


def test_replay_record_with_a_surrogate(tmp_path: Path) -> None:
    result = run(["replay", put(tmp_path, "r.json", {"record": {"messages": [{"content": LONE}]}}), "--json"])
    err = error_of(answers(result)[0])
    assert result.exit_code == 1 and err["code"] == "TEXT_SURROGATE"


def test_surrogate_pairs_are_text_not_refused(tmp_path: Path) -> None:
    # "\ud83d\ude00" is one emoji in JSON; only lone halves are refused.
    card = put(tmp_path, "c.json", '{"spec": "chara_card_v2", "data": {"name": "\\ud83d\\ude00"}}')
    assert load_asset(card).model.name == "\U0001f600"
    assert load_asset(b'a: "\\ud83d\\ude00"', kind="mvu").model.stat_data["a"] == "\U0001f600"
    with pytest.raises(TemplateError) as info:
        load_asset(b'a: "\\ud83dx"', kind="mvu")
    assert (info.value.code, info.value.path) == ("TEXT_SURROGATE", "$.a")


# -- numbers JSON does not have --------------------------------------------------------------------

@pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity", "1e999", "-1E+999"])
def test_non_finite_numbers_in_assets_are_asset_json(literal: str) -> None:
    data = ('{"entries": {"0": {"uid": 0,\n "key": ["NaN Infinity 1e999"], "order": %s}}}' % literal).encode()
    with pytest.raises(TemplateError) as info:
        load_asset(data, kind="world_book")
    assert info.value.code == "ASSET_JSON"
    assert (info.value.line, info.value.column) == (2, 42)  # the number, not the look-alike text in the string


def test_non_finite_numbers_in_json5_and_yaml_assets() -> None:
    for data in (b"{a: NaN, // json5\n}", b"a: .inf\n", b"a: [1, .nan]\n"):
        with pytest.raises(TemplateError) as info:
            load_asset(data, kind="mvu")
        assert info.value.code == "ASSET_JSON" and info.value.path in ("$.a", "$.a[1]")


def test_non_finite_numbers_in_cli_inputs(tmp_path: Path) -> None:
    ctx = put(tmp_path, "ctx.json", '{"seed": NaN}')
    result = run(["macros", "--context", ctx], "x")
    assert result.exit_code == 1 and "ASSET_JSON" in result.stderr and ":1:10" in result.stderr
    rows = '{"template": "a", "vars": {"n": 1e999}}\n{"template": "b"}\n'
    out = answers(run(["macros", "--jsonl"], rows))
    assert out[0]["error"]["code"] == "INPUT_INVALID" and out[0]["error"]["line"] == 1 and out[1]["text"] == "b"


def test_codes_are_catalogued() -> None:
    assert {"TEXT_SURROGATE", "INPUT_UNKNOWN_KEY"} <= set(CODES)


# -- the property: any Unicode through every JSON boundary ends in a coded outcome -------------------

#: Any code point, lone surrogates included (Hypothesis' text strategy leaves them out by default).
unicode_text = st.lists(
    st.one_of(st.characters(), st.integers(0xD800, 0xDFFF).map(chr)), max_size=12
).map("".join)


def _boundaries(tmp_path: Path, text: str) -> dict[str, tuple[list[str], str | None]]:
    """Each command's JSON boundary carrying ``text``: argv and stdin."""
    ctx = put(tmp_path, "ctx.json", {"char": text})
    plain_ctx = put(tmp_path, "plain.json", {"char": "A"})
    return {
        "macros-row": (["macros", "--context", plain_ctx, "--jsonl"], json.dumps({"template": text}) + "\n"),
        "macros-vars": (["macros", "--jsonl"], json.dumps({"template": "{{getvar::k}}", "vars": {"k": text}}) + "\n"),
        "macros-context": (["macros", "--context", ctx, "--json"], "{{char}}"),
        "import": (["import", "--json", put(tmp_path, "card.json", {"spec": "chara_card_v2", "data": {"name": text}})],
                   None),
        "import-stdin": (["import", "--json", "-"], json.dumps({"entries": {"0": {"uid": 0, "key": [text]}}})),
        "activate": (["activate", "--jsonl"],
                     json.dumps({"entries": [{"keys": ["a"], "content": text}], "chat": ["a " + text]}) + "\n"),
        "activate-settings": (["activate", "--json", "--book", put(tmp_path, "b.json", BOOK), "--chat",
                               put(tmp_path, "chat.json", ["a"]), "--settings", put(tmp_path, "s.json", {text: 1})],
                              None),
        "assemble": (["assemble", "--strategy", "builtin-native-roles", "--chat",
                      put(tmp_path, "c.json", [{"id": "m1", "role": "user", "content": text or "x"}])], None),
        "render-vars": (["render", "--json", put(tmp_path, "t.ejs", "<%= variables.a %>"), "--vars",
                         put(tmp_path, "v.json", {"a": text})], None),
    }


@settings(max_examples=60, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(text=unicode_text, which=st.sampled_from(
    ["macros-row", "macros-vars", "macros-context", "import", "import-stdin", "activate", "activate-settings",
     "assemble", "render-vars"]))
def test_any_unicode_through_any_boundary_gets_a_coded_outcome(tmp_path: Path, text: str, which: str) -> None:
    args, stdin = _boundaries(tmp_path, text)[which]
    result = run(args, stdin)
    assert result.exit_code in (0, 1), (which, result.exit_code, result.output)
    assert not isinstance(result.exception, Exception) or isinstance(result.exception, SystemExit), result.exception
    streams = result.stdout + result.stderr
    assert "INTERNAL_ERROR" not in streams and "Traceback" not in streams
    out = answers(result) if result.stdout.strip() else []
    # what the JSON input means: a high+low pair written as two escapes is one character
    lone = find_surrogate(json.loads(json.dumps(text))) is not None
    codes = [error_of(o)["code"] for o in out if o.get("error") or ("files" in o and not o["files"][0]["ok"])]
    if lone:
        # refused with the rule's code, on stdout (JSON answers) or stderr (option files)
        assert "TEXT_SURROGATE" in codes or "TEXT_SURROGATE" in result.stderr, (which, result.output)
    else:
        assert "TEXT_SURROGATE" not in codes and "TEXT_SURROGATE" not in result.stderr
        assert all(code in CODES for code in codes)


def test_strict_loads_reports_position_not_a_look_alike() -> None:
    with pytest.raises(TemplateError) as info:
        loads('["NaN", NaN]', what="x")
    assert (info.value.line, info.value.column) == (1, 9)


def test_activate_jsonl_goes_on_past_a_line_that_is_not_utf8(tmp_path: Path) -> None:
    good = json.dumps({"entries": [{"keys": ["a"], "content": "A\u2028B"}], "chat": ["a"]}, ensure_ascii=False)
    data = good.encode() + b"\n" + b'{"entries": "\xff"}\n' + good.encode() + b"\n"
    path = tmp_path / "in.jsonl"
    path.write_bytes(data)
    result = run(["activate", "--jsonl", str(path)])
    out = answers(result)
    assert result.exit_code == 1 and len(out) == 3  # U+2028 inside a string does not split a line
    assert out[1]["error"]["code"] == "INPUT_INVALID" and out[1]["error"]["line"] == 2
    assert "error" not in out[0] and "error" not in out[2]


def test_yaml_vars_with_nan_are_refused(tmp_path: Path) -> None:
    template = put(tmp_path, "t.ejs", "<%= variables.a %>")
    yaml_vars = tmp_path / "v.yaml"
    yaml_vars.write_text("a: .nan\n")
    result = run(["render", "--json", template, "--vars", str(yaml_vars)])
    assert result.exit_code == 1 and (error_of(answers(result)[0])["code"], error_of(answers(result)[0])["path"]) \
        == ("INPUT_INVALID", "$.a")


def test_find_surrogate_reports_the_first_in_document_order_with_a_readable_path() -> None:
    assert find_surrogate({"a": ["ok", {"b": "x\ud800"}], "\udc00k": "y"}) == ("$.a[1].b", 1, 0xD800)
    assert find_surrogate({"a": "ok", "\udc00k": "y", "z": "\ud801"}) == ('$["\\udc00k"]', 0, 0xDC00)
    assert find_surrogate({"日本": {"x": "\ud800"}}) == ('$["日本"].x', 0, 0xD800)
    assert find_surrogate({"a": ["\U0001f600", 1.5, None]}) is None


def test_an_encode_failure_no_check_saw_still_gets_the_rules_code() -> None:
    from tavernbox.cli.output import surrogate_error

    refused = surrogate_error(UnicodeEncodeError("utf-8", "a\ud800b", 1, 2, "surrogates not allowed"))
    assert refused is not None and refused.code == "TEXT_SURROGATE" and "U+D800" in refused.message
    assert surrogate_error(UnicodeEncodeError("ascii", "a\xe9b", 1, 2, "ordinal not in range")) is None


def test_assemble_builtin_st_refuses_a_surrogate_before_printing(tmp_path: Path) -> None:
    chat = put(tmp_path, "chat.json", {"messages": [{"role": "user", "content": LONE}, {"role": "assistant", "content": "ok"}]})
    preset = {"prompts": [*PRESET["prompts"], {"identifier": "chatHistory", "name": "Chat History", "marker": True,
                                                 "system_prompt": True}],
              "prompt_order": [{"character_id": 100001, "order": [{"identifier": "main", "enabled": True},
                                                                  {"identifier": "chatHistory", "enabled": True}]}]}
    for extra in ([], ["--json"]):
        result = run(["assemble", "--strategy", "builtin-st", "--chat", chat, "--preset", put(tmp_path, "p.json", preset),
                      *extra])
        assert result.exit_code == 1
        if not extra:  # plain output: the error on stderr, nothing on stdout (nothing printed before the refusal)
            assert result.stdout == "" and "TEXT_SURROGATE" in result.stderr
            continue
        out = answers(result)
        assert len(out) == 1 and error_of(out[0])["code"] == "TEXT_SURROGATE"  # nothing printed before the refusal
