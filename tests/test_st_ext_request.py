"""The template extensions in the request path: the request's fields, a chat export's variables, ``--json``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tavernbox import assemble_request
from tavernbox.errors import TemplateError

PRESET = {"prompts": [{"identifier": "main", "name": "Main Prompt", "role": "system", "system_prompt": True,
                       "content": "Main. HP {{get_message_variable::stat_data.hp}} <%- getvar('cv') %>"},
                      {"identifier": "chatHistory", "name": "Chat History", "system_prompt": True, "marker": True}],
          "prompt_order": [{"character_id": 100001, "order": [{"identifier": "main", "enabled": True},
                                                              {"identifier": "chatHistory", "enabled": True}]}]}


def _request(**extra: Any) -> dict[str, Any]:
    req: dict[str, Any] = {"preset": PRESET, "chat": {"messages": [
        {"role": "assistant", "content": "Hi.", "variables": {"stat_data": {"hp": 9}}},
        {"role": "user", "content": "<% setvar('seen', 1) %>Hello {{user}}."}], "variables": {"cv": "chat"}},
        "user": {"name": "Ash"}}
    req.update(extra)
    return req


def test_the_default_path_evaluates_templates_and_tavern_helpers_macros() -> None:
    sent = assemble_request(_request())
    assert [m["content"] for m in sent.messages] == ["Main. HP 9 chat", "[Start a new Chat]", "Hi.",
                                                     "Hello Ash."]
    assert not sent.warnings
    # the user's message (the chat's last: generation's message scope) took a copy of the message before it when
    # the chat loaded, then its template wrote ``seen`` (recorded: vars-chat-depths)
    assert sent.variables_patch == {"message": [{"op": "add", "path": "/stat_data", "value": {"hp": 9}},
                                                {"op": "add", "path": "/seen", "value": 1}]}


def test_with_the_extensions_off_sillytavern_alone_is_sent() -> None:
    sent = assemble_request(_request(extensions={"prompt_template": False, "tavern_helper": {"enabled": False}}))
    assert sent.messages[0]["content"] == "Main. HP {{get_message_variable::stat_data.hp}} <%- getvar('cv') %>"
    assert sent.messages[3]["content"] == "<% setvar('seen', 1) %>Hello Ash."
    assert [d.code for d in sent.warnings] == ["MACRO_UNKNOWN"]
    assert sent.variables_patch == {}


def test_the_json_form_reports_the_patch_and_the_reads() -> None:
    out = assemble_request(_request()).to_dict()
    assert out["templates"]["variables_patch"] == {"message": [{"op": "add", "path": "/stat_data", "value": {"hp": 9}},
                                                               {"op": "add", "path": "/seen", "value": 1}]}
    kinds = {(r["kind"], r.get("scope"), r.get("key")) for r in out["templates"]["reads"]}
    assert ("get_message_variable", "message", "stat_data.hp") in kinds and ("getvar", "cache", "cv") in kinds


def test_a_chat_export_carries_the_chat_and_message_variables(tmp_path: Path) -> None:
    lines = [{"user_name": "Ash", "character_name": "Mira", "chat_metadata": {"variables": {"cv": "from export"}}},
             {"name": "Mira", "is_user": False, "is_system": False, "mes": "Hi.", "swipe_id": 1,
              "variables": [{"stat_data": {"hp": 1}}, {"stat_data": {"hp": 2}}]},
             {"name": "Ash", "is_user": True, "is_system": False, "mes": "Hello."}]
    chat = tmp_path / "chat.jsonl"
    chat.write_text("\n".join(json.dumps(line) for line in lines) + "\n", encoding="utf-8")
    sent = assemble_request({"preset": PRESET, "chat": str(chat), "global_variables": {"g": 1}})
    assert sent.messages[0]["content"] == "Main. HP 2 from export"


@pytest.mark.parametrize(("extra", "path"), [
    ({"extensions": {"prompt_template": {"enabled": 1}}}, "$.extensions.prompt_template.enabled"),
    ({"extensions": {"regex": True}}, "$.extensions.regex"),
    ({"global_variables": [1]}, "$.global_variables"),
])
def test_malformed_fields_are_refused_with_their_path(extra: dict[str, Any], path: str) -> None:
    with pytest.raises(TemplateError) as caught:
        assemble_request(_request(**extra))
    assert caught.value.code == "REQUEST_INVALID" and caught.value.path == path


def test_chat_variables_must_be_an_object() -> None:
    req = _request()
    req["chat"]["variables"] = [1]
    with pytest.raises(TemplateError) as caught:
        assemble_request(req)
    assert caught.value.code == "REQUEST_INVALID" and caught.value.path == "$.chat.variables"


def test_a_budget_trip_fails_the_request_with_its_code() -> None:
    req = _request()
    req["chat"]["messages"][1]["content"] = "<% let s = 'x'; for (;;) s += s %>"
    with pytest.raises(TemplateError) as caught:
        assemble_request(req)
    assert caught.value.code == "TEMPLATE_MEMORY_LIMIT"
    assert assemble_request(_request()).messages[0]["content"] == "Main. HP 9 chat"


def test_sillytavern_macros_read_the_chat_and_global_variables_given() -> None:
    preset = {"prompts": [{"identifier": "main", "name": "Main Prompt", "role": "system", "system_prompt": True,
                           "content": "{{getvar::cv}}/{{getglobalvar::g}}/{{setvar::cv::z}}{{getvar::cv}}"},
                          {"identifier": "chatHistory", "name": "Chat History", "system_prompt": True, "marker": True}],
              "prompt_order": [{"character_id": 100001, "order": [{"identifier": "main", "enabled": True},
                                                                  {"identifier": "chatHistory", "enabled": True}]}]}
    sent = assemble_request({"preset": preset, "chat": {"messages": [{"role": "user", "content": "x"}],
                                                        "variables": {"cv": "chat"}}, "global_variables": {"g": "G"}})
    assert sent.messages[0]["content"] == "chat/G/z"


def test_the_provenance_names_the_templates_output() -> None:
    out = assemble_request(_request()).to_dict()
    assert out["provenance_of"] == "messages"
    first = out["provenance"][0]["spans"]
    # the text as the template saw it (Tavern Helper's macros ran before), then what ``<%- getvar('cv') %>`` printed
    assert [(s["kind"], s["template"], s["token"], s["start"], s["end"], s["line"], s["column"]) for s in first] == [
        ("template_output", "message 0 (system)", "text", 0, len("Main. HP 9 "), 1, 1),
        ("template_output", "message 0 (system)", "output", len("Main. HP 9 "), len("Main. HP 9 chat"), 1, 12)]


def test_a_message_variables_must_be_an_object() -> None:
    req = _request()
    req["chat"]["messages"][0]["variables"] = [{"stat_data": {}}]
    with pytest.raises(TemplateError) as caught:
        assemble_request(req)
    assert caught.value.code == "REQUEST_INVALID" and caught.value.path == "$.chat.messages[0].variables"
