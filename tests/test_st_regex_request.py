"""Regex scripts and reasoning in the request file, the CLI (``--regex``, ``--json``) and ``tavernbox lint``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from st_support import marker, order, prompt

from tavernbox import assemble_request
from tavernbox.cli.main import main as cli
from tavernbox.errors import TemplateError
from tavernbox.lint import lint_files


def preset(**fields: Any) -> dict[str, Any]:
    prompts = (prompt("main", "Write {{char}}'s reply."), marker("worldInfoBefore"), marker("chatHistory"))
    return {"prompts": list(prompts), "new_chat_prompt": "", **fields,
            "prompt_order": [{"character_id": 100001, "order": order(prompts)}]}


CARD = {"spec": "chara_card_v2", "spec_version": "2.0", "data": {"name": "Mira", "description": ""}}
CHAT = {"messages": [{"role": "assistant", "content": "Hello <b>apple</b>."}, {"role": "user", "content": "An apple?"},
                     {"role": "assistant", "content": "Yes, an apple."}, {"role": "user", "content": "apple!"}]}


def script(find: str, replace: str = "", placement: tuple = (2,), **kw: Any) -> dict[str, Any]:
    return {"scriptName": kw.pop("name", find), "findRegex": find, "replaceString": replace,
            "placement": list(placement) if isinstance(placement, tuple) else placement, "promptOnly": True, **kw}


def contents(request: dict[str, Any]) -> list[str]:
    return [m["content"] for m in assemble_request(request).messages]


def request(scripts: Any = None, **fields: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"preset": preset(), "card": CARD, "chat": CHAT}
    if scripts is not None:
        out["extensions"] = {"regex": {"scripts": scripts}}
    out.update(fields)
    return out


# ---------------------------------------------------------------- the request file


def test_global_scripts_then_the_presets_then_the_cards_each_unless_disallowed() -> None:
    card = {**CARD, "data": {**CARD["data"], "extensions": {"regex_scripts": [script("/cherry/g", "date")]}}}
    req = request([script("/apple/g", "banana")], preset=preset(extensions={"regex_scripts": [
        script("/banana/g", "cherry")]}), card=card)
    assert contents(req)[-2] == "Yes, an date."
    req["extensions"]["regex"]["card_scripts"] = False
    assert contents(req)[-2] == "Yes, an cherry."
    req["extensions"]["regex"]["preset_scripts"] = False
    assert contents(req)[-2] == "Yes, an banana."


@pytest.mark.parametrize(("where", "path"), [
    ("global", "$.extensions.regex.scripts[0].placement"),
    ("preset", "$.preset.extensions.regex_scripts[0].placement"),
    ("card", "$.card.data.extensions.regex_scripts[0].placement"),
])
def test_a_bad_script_is_a_coded_error_at_its_json_path(where: str, path: str) -> None:
    bad = [script("/a/", placement="2")]  # type: ignore[arg-type]
    req = request(bad if where == "global" else None)
    if where == "preset":
        req["preset"] = preset(extensions={"regex_scripts": bad})
    if where == "card":
        req["card"] = {**CARD, "data": {**CARD["data"], "extensions": {"regex_scripts": bad}}}
    with pytest.raises(TemplateError) as err:
        assemble_request(req)
    assert err.value.code == "REGEX_SCRIPT_INVALID" and err.value.path == path


def test_the_request_checks_its_regex_and_reasoning_settings() -> None:
    for extra, path in (({"extensions": {"regex": {"scriptz": []}}}, "$.extensions.regex.scriptz"),
                        ({"extensions": {"regex": {"time_limit": 0}}}, "$.extensions.regex.time_limit"),
                        ({"options": {"reasoning": {"max_additions": -1}}}, "$.options.reasoning.max_additions")):
        with pytest.raises(TemplateError) as err:
            assemble_request(request(**extra))
        assert err.value.code == "REQUEST_INVALID" and err.value.path == path


def test_global_scripts_may_be_the_path_of_a_regex_export(tmp_path: Path) -> None:
    (tmp_path / "export.json").write_text(json.dumps(script("/apple/g", "pear")))
    with pytest.raises(TemplateError) as err:  # relative to the request's folder: none here
        assemble_request(request("missing.json"), base_dir=tmp_path)
    assert err.value.code == "REQUEST_INVALID" and err.value.path == "$.extensions.regex.scripts"
    got = assemble_request(request("export.json"), base_dir=tmp_path).messages
    assert got[-2]["content"] == "Yes, an pear."


def test_the_send_box_text_is_stored_through_the_scripts_that_run_on_stored_messages() -> None:
    stored = script("/typed/g", "TYPED", placement=(1,), promptOnly=False)
    prompt_time = script("/TYPED/g", "SENT", placement=(1,), maxDepth=0)
    req = request([stored, prompt_time], generation={"input": "typed words"})
    assert contents(req)[-1] == "SENT words"
    # a message already in the chat was stored before: only the prompt-time script runs on it
    req = request([stored, script("/apple/g", "X", placement=(1,))])
    assert contents(req)[-1] == "X!"


def test_reasoning_from_the_export_and_on_messages_is_added_as_the_settings_say(tmp_path: Path) -> None:
    lines = [{"user_name": "Ash", "character_name": "Mira"},
             {"name": "Mira", "is_user": False, "mes": "Hello.", "extra": {"reasoning": "think one"}},
             {"name": "Ash", "is_user": True, "mes": "Hi.", "extra": {}},
             {"name": "Mira", "is_user": False, "mes": "Well.", "extra": {"reasoning": "think two"}},
             {"name": "Ash", "is_user": True, "mes": "So?", "extra": {}}]
    (tmp_path / "chat.jsonl").write_text("\n".join(json.dumps(x) for x in lines))
    req = request(chat=str(tmp_path / "chat.jsonl"))
    assert "think" not in "".join(contents(req))  # SillyTavern's default: not added
    req["options"] = {"reasoning": {"add_to_prompts": True}}
    assert contents(req)[-2:] == ["<think>think two</think>\nWell.", "So?"]
    req["options"] = {"reasoning": {"add_to_prompts": True, "max_additions": 2, "prefix": "[{{char}}: ",
                                    "suffix": "]", "separator": " "}}
    req["extensions"] = {"regex": {"scripts": [script("/think/g", "muse", placement=(6,))]}}
    assert contents(req)[-4:] == ["[Mira: muse one] Hello.", "Hi.", "[Mira: muse two] Well.", "So?"]
    documented = request(chat={"messages": [{"role": "assistant", "content": "A.", "reasoning": "r"},
                                            {"role": "user", "content": "B."}]},
                         options={"reasoning": {"add_to_prompts": True}})
    assert contents(documented)[-2] == "<think>r</think>\nA."
    with pytest.raises(TemplateError) as err:
        assemble_request(request(chat={"messages": [{"role": "user", "content": "B.", "reasoning": 1}]}))
    assert err.value.path == "$.chat.messages[0].reasoning"


def test_world_info_entries_go_through_the_world_info_scripts() -> None:
    book = {"entries": {"0": {"uid": 0, "key": ["x"], "content": "Lore of apple.", "constant": True},
                        "1": {"uid": 1, "key": ["x"], "content": "apple", "constant": True}}}
    req = request([script("/apple/g", "pear", placement=(5,)), script("/^pear$/", "", placement=(5,))],
                  books=[book])
    sent = contents(req)
    assert "Lore of pear." in sent[1] and "\npear" not in sent[1]


# ---------------------------------------------------------------- the CLI


def test_cli_regex_files_add_global_scripts_and_json_names_what_changed(tmp_path: Path) -> None:
    (tmp_path / "p.json").write_text(json.dumps(preset()))
    (tmp_path / "c.json").write_text(json.dumps(CARD))
    (tmp_path / "chat.json").write_text(json.dumps(CHAT))
    (tmp_path / "one.json").write_text(json.dumps(script("/apple/g", "pear", name="fruit")))
    (tmp_path / "list.json").write_text(json.dumps([script("/pear/g", "plum", name="stone fruit")]))
    args = ["assemble", "--preset", str(tmp_path / "p.json"), "--card", str(tmp_path / "c.json"), "--chat",
            str(tmp_path / "chat.json"), "--regex", str(tmp_path / "one.json"), "--regex", str(tmp_path / "list.json")]
    res = CliRunner().invoke(cli, [*args, "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out["messages"][-2]["content"] == "Yes, an plum."
    assert [(e["script"], e["target"], e["depth"]) for e in out["regex"]] == [
        ("fruit", "chat[0]", 3), ("stone fruit", "chat[0]", 3), ("fruit", "chat[2]", 1), ("stone fruit", "chat[2]", 1)]
    assert out["regex"][0]["set"] == "global" and out["regex"][0]["placement"] == "ai_output"


def test_cli_bad_regex_file_and_catastrophic_script_are_coded_errors(tmp_path: Path) -> None:
    (tmp_path / "p.json").write_text(json.dumps(preset()))
    (tmp_path / "chat.json").write_text(json.dumps({"messages": [{"role": "assistant", "content": "a" * 40 + "!b"}]}))
    (tmp_path / "bad.json").write_text("{not json")
    (tmp_path / "slow.json").write_text(json.dumps(script("/(a+)+b/", name="slow")))
    base = ["assemble", "--preset", str(tmp_path / "p.json"), "--chat", str(tmp_path / "chat.json")]
    res = CliRunner().invoke(cli, [*base, "--json", "--regex", str(tmp_path / "bad.json")])
    assert res.exit_code == 1
    assert json.loads(res.stdout)["error"] | {"message": ""} == {"code": "INPUT_INVALID", "message": "", "line": 1,
                                                                 "column": 2}
    (tmp_path / "req.json").write_text(json.dumps({"extensions": {"regex": {"time_limit": 0.2}}}))
    res = CliRunner().invoke(cli, [*base, "--json", "--request", str(tmp_path / "req.json"), "--regex",
                                   str(tmp_path / "slow.json")])
    error = json.loads(res.stdout)["error"]
    assert res.exit_code == 1 and error["code"] == "REGEX_TIME_LIMIT" and "'slow'" in error["message"]
    res = CliRunner().invoke(cli, [*base, "--messages"])
    assert res.exit_code == 0, res.output


# ---------------------------------------------------------------- lint


def test_lint_reports_scripts_that_never_compile_match_nothing_or_are_slow(tmp_path: Path) -> None:
    scripts = [script("/(open/", name="broken"), script("/zebra/", name="unmatched"),
               script("/(a+)+$/", name="slow"), script("/apple/", name="fine"),
               script("/(open/", name="off", disabled=True), script("/a/", placement="2", name="bad")]
    (tmp_path / "export.json").write_text(json.dumps(scripts[:5]))
    (tmp_path / "bad.json").write_text(json.dumps([scripts[5]]))
    lines = [{"user_name": "Ash"}, {"name": "Mira", "is_user": False, "mes": "an apple", "extra": {}}]
    (tmp_path / "chat.jsonl").write_text("\n".join(json.dumps(x) for x in lines))
    report = lint_files([tmp_path / "export.json", tmp_path / "bad.json", tmp_path / "chat.jsonl"])
    found = sorted((f.code, f.path) for f in report.findings)
    assert found == [("REGEX_NO_MATCH", "$[1].findRegex"), ("REGEX_PATTERN_INVALID", "$[0].findRegex"),
                     ("REGEX_SCRIPT_INVALID", "$[0].placement"), ("REGEX_SLOW", "$[2].findRegex")]
    # without a chat nothing says what the scripts target: no "matches nothing"
    assert "REGEX_NO_MATCH" not in {f.code for f in lint_files([tmp_path / "export.json"]).findings}


def test_in_a_group_only_the_replying_members_reasoning_is_added() -> None:
    chat = {"messages": [{"role": "assistant", "name": "Bo", "content": "Bo here.", "reasoning": "bo thinks"},
                         {"role": "assistant", "name": "Mira", "content": "Mira here.", "reasoning": "mira thinks"},
                         {"role": "user", "content": "Hi both."}]}
    req = request(chat=chat, group={"members": ["Mira", "Bo"]},
                  options={"reasoning": {"add_to_prompts": True, "max_additions": 5}})
    sent = contents(req)
    assert "Mira: <think>mira thinks</think>\nMira here." in sent and "bo thinks" not in "".join(sent)
