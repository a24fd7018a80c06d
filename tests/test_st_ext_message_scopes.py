"""Per-message variable scopes and SillyTavern's own variable macros with the template extensions installed, against
the recordings of ``golden/st_oracle/ext_scenarios.py``'s ``vars-`` group (``ext_variables_requests.jsonl``): each
chat message's templates read and write its own message's variables when the chat loads, generation reads and writes
the last message's, and ``{{setvar}}``'s family writes what the templates and Tavern Helper read. The patch applied
to the request's variables must give what SillyTavern held after generating."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from st_ext_support import assert_sends_as_recorded, ext_cases, ext_request

from tavernbox import assemble_request
from tavernbox.ejs import st_extensions
from tavernbox.ejs.st_extensions import load_chat, parse_extensions
from tavernbox.ejs.st_prompt_template import PromptTemplateLimits, TemplateText, evaluate_chat_templates
from tavernbox.errors import TemplateError
from tavernbox.macros.st_extension_settings import load_steps
from tavernbox.macros.st_variables import StVariables, copied_forward

#: the recorded cases of the group, each reproduced byte for byte
EQUAL = ("vars-chat-depths", "vars-chat-depths-raw-off", "vars-chat-depths-limit", "vars-chat-depths-no-preload",
         "vars-st-macros", "vars-st-macros-pt-off")
#: whose ``after_generation`` the patch gives: all of them (SillyTavern's page may build the prompt again in a dry run
#: after the reply, repeating the macros' writes; the macro scenarios set what they count from, so it changes nothing)
PATCHED = EQUAL


def _case(cid: str) -> dict[str, Any]:
    case = ext_cases().get(cid)
    if case is None:
        pytest.fail(f"tests/golden/st_oracle/ext_variables_requests.jsonl has no case {cid}")
    return case


@pytest.mark.parametrize("cid", EQUAL)
def test_the_request_path_sends_what_sillytavern_with_the_extensions_sent(cid: str) -> None:
    assert_sends_as_recorded(_case(cid))


def _pointer_parts(path: str) -> list[str]:
    return [p.replace("~1", "/").replace("~0", "~") for p in path.split("/")[1:]]


def _patched(obj: Any, ops: list[dict[str, Any]]) -> Any:
    """RFC 6902 add/replace/remove applied to a copy of ``obj`` (objects only: what the patch here writes)."""
    out = copy.deepcopy(obj) if obj is not None else {}
    for op in ops:
        *parents, last = _pointer_parts(op["path"])
        node = out
        for key in parents:
            node = node[key]
        if op["op"] == "remove":
            del node[last]
        else:
            node[last] = op["value"]
    return out


@pytest.mark.parametrize("cid", PATCHED)
def test_the_patch_applied_to_the_request_gives_what_sillytavern_held_after_generating(cid: str) -> None:
    case = _case(cid)
    request = ext_request(case)
    patch = assemble_request(request).variables_patch
    after = case["after_generation"]
    given = [m.get("variables") for m in request["chat"]["messages"]]
    last = len(given) - 1
    for i, item in enumerate(after["chat"][:len(given)]):
        key = "message" if i == last else f"message[{i}]"
        now = _patched(given[i], patch.get(key, [])) if key in patch else given[i]
        held = item["variables"]
        # a message without variables counts as an empty object (the extension gives every shown message one)
        assert (now or {}) == (held[0] if held else {}), f"message {i}"
    assert _patched(request["chat"].get("variables") or {}, patch.get("chat", [])) == (after["chat_variables"] or {})
    held_global = {k: v for k, v in after["global_variables"].items() if not k.startswith("LAST_")}
    assert _patched(request.get("global_variables") or {}, patch.get("global", [])) == held_global


def test_sillytavern_macro_writes_are_in_the_patch_and_read_by_the_templates() -> None:
    case = _case("vars-st-macros")
    sent = assemble_request(ext_request(case))
    chat = {op["path"]: op for op in sent.variables_patch["chat"]}
    # {{incvar}} twice (5 -> 7), then the card's template added 10; {{flushvar}} removed ``old``; the post-history
    # prompt's {{setvar}} came after the main prompt's (``who``), the history's newest message first (``order``)
    assert chat["/cnt"]["value"] == 17 and chat["/old"]["op"] == "remove"
    assert chat["/who"]["value"] == "phi" and chat["/order"]["value"] == "2" and chat["/fromchat"]["value"] == "c1"
    glob = {op["path"]: op.get("value") for op in sent.variables_patch["global"]}
    assert glob == {"/gd": 2, "/gn": 12, "/pg": "G1", "/ga": 10, "/tg": "T"}
    # the templates read every macro's write: the post-history instructions' own template sees the history's
    assert sent.messages[-1]["content"] == "PHI  T: L/from-main/c1/12/phi/2"


def test_with_the_template_extension_off_the_macros_still_write() -> None:
    sent = assemble_request(ext_request(_case("vars-st-macros-pt-off")))
    chat = {op["path"]: op.get("value") for op in sent.variables_patch["chat"]}
    assert chat["/cnt"] == 7 and chat["/fromchat"] == "c1" and chat["/order"] == "2"


def _load(contents: list[str], messages: list[Any], flags: Any = (), **settings: Any) -> Any:
    return load_chat(contents, settings=parse_extensions({"prompt_template": {"enabled": True, **settings}}),
                     variables=StVariables.build(chat={"c": 1}, messages=messages), flags=flags)


def test_a_chat_without_templates_copies_forward_as_the_vm_does(monkeypatch: pytest.MonkeyPatch) -> None:
    contents = ["a", "b", "c", "d", "e"]
    messages: list[Any] = [None, {"x": 1, "k": {"deep": [1]}}, None, {"x": 2}, None]
    flags = [(False, False), (False, False), (False, False), (False, True), (False, False)]
    fast = _load(contents, messages).variables.messages
    fast_flagged = _load(contents, messages, flags).variables.messages
    monkeypatch.setattr(st_extensions, "COPY_WITHOUT_VM", False)
    plain = _load(contents, messages).variables.messages
    assert fast_flagged == _load(contents, messages, flags).variables.messages
    assert fast_flagged[3] == {"x": 2} and fast_flagged[4] == {"x": 2}  # message 3 took its copy before
    assert fast == plain == ({}, {"x": 1, "k": {"deep": [1]}}, {"x": 1, "k": {"deep": [1]}},
                             {"x": 2, "k": {"deep": [1]}}, {"x": 2, "k": {"deep": [1]}})
    assert messages[2] is None  # the caller's list is not changed
    # a copy is a copy: the copied object is not the earlier message's
    assert fast[2]["k"] is not fast[1]["k"]


def test_which_messages_the_extension_evaluates_when_the_chat_loads() -> None:
    def steps(contents: list[str], **settings: Any) -> list[int]:
        return load_steps(contents, parse_extensions({"prompt_template": {"enabled": True, **settings}}))

    assert steps(["a", "b", "", "..."]) == [0, 1]
    assert steps(["a", "b", "c", "d"], depth_limit=1) == [2, 3]
    assert steps(["a", "b"], preload_worldinfo_enabled=False) == [] == steps(["a", "b"], render_enabled=False)
    assert steps(["only"]) == []
    assert steps([str(i) for i in range(150)])[0] == 50  # the 100 messages SillyTavern shows
    assert copied_forward([None, None], [1], {"init": 1}) == (None, {"init": 1})


def test_each_message_writes_its_own_scope_and_others_read_the_copy() -> None:
    texts = [TemplateText("<% setvar('a', 1) %>", "chat message 0"), TemplateText("plain", "chat message 1"),
             TemplateText("<%- getvar('a') %>/<%- getvar('b') %><% setvar('a', 2) %>", "chat message 2")]
    result = evaluate_chat_templates(texts, steps=[0, 1, 2], variables=StVariables.build(
        messages=[None, None, {"b": "own"}]))
    assert result.texts == ["", "plain", "1/own"]
    assert result.variables_after is not None
    assert result.variables_after.messages == ({"a": 1}, {"a": 1}, {"a": 2, "b": "own"})


def test_a_looping_chat_template_trips_the_budget_naming_its_message() -> None:
    texts = [TemplateText("fine", "chat message 0"), TemplateText("x <% while (true) {} %>", "chat message 1")]
    with pytest.raises(TemplateError) as caught:
        evaluate_chat_templates(texts, steps=[0, 1], variables=StVariables.build(),
                                limits=PromptTemplateLimits(time_ms=150.0))
    assert caught.value.code == "TEMPLATE_TIME_LIMIT" and "chat message 1" in caught.value.message
    after = evaluate_chat_templates([TemplateText("<%- typeof n %>", "chat message 0")], steps=[0],
                                    variables=StVariables.build())
    assert after.texts == ["undefined"]


def _gen_request(gen: str) -> dict[str, Any]:
    preset = {"prompts": [{"identifier": "main", "name": "Main Prompt", "role": "system", "system_prompt": True,
                           "content": "<% setvar('w', getvar('x')) %>Main"},
                          {"identifier": "chatHistory", "name": "Chat History", "system_prompt": True, "marker": True}],
              "prompt_order": [{"character_id": 100001, "order": [{"identifier": "main", "enabled": True},
                                                                  {"identifier": "chatHistory", "enabled": True}]}]}
    return {"preset": preset, "generation": {"type": gen}, "user": {"name": "Ash"}, "chat": {"messages": [
        {"role": "user", "content": "Hi."}, {"role": "assistant", "content": "Hello.", "variables": {"x": 1}},
        {"role": "user", "content": "More?"}, {"role": "assistant", "content": "Yes.", "variables": {"x": 2}}]}}


@pytest.mark.parametrize(("gen", "key", "value"), [("normal", "message", 2), ("continue", "message", 1),
                                                   ("swipe", "message", 1), ("regenerate", "message", 1)])
def test_generation_writes_the_message_the_extension_reads(gen: str, key: str, value: int) -> None:
    # normal: the last message (x=2); continue and swipe generate it in place, so the one before it (a copy of
    # message 1's); regenerate removes it first, so the user's message before it is the last
    patch = assemble_request(_gen_request(gen)).variables_patch
    ops = {op["path"]: op["value"] for op in patch[key]}
    assert ops["/w"] == value


def test_a_chat_exports_messages_read_their_current_swipes_variables(tmp_path: Any) -> None:
    # the oracle's chat form stores swipe 0 only; an export's ``variables[swipe_id]`` is the message's scope
    import json

    preset = _gen_request("normal")["preset"]
    lines = [{"user_name": "Ash", "character_name": "Mira", "chat_metadata": {}},
             {"name": "Mira", "is_user": False, "is_system": False, "mes": "A <%- getvar('hp') %>", "swipe_id": 1,
              "swipes": ["A", "B"], "variables": [{"hp": 1}, {"hp": 2}]},
             {"name": "Ash", "is_user": True, "is_system": False, "mes": "U <%- getvar('hp') %><% setvar('hp', 3) %>"}]
    chat = tmp_path / "chat.jsonl"
    chat.write_text("\n".join(json.dumps(line) for line in lines) + "\n", encoding="utf-8")
    sent = assemble_request({"preset": preset, "chat": str(chat), "user": {"name": "Ash"}})
    assert [m["content"] for m in sent.messages[-2:]] == ["A 2", "U 2"]
    assert sent.variables_patch == {"message": [{"op": "add", "path": "/hp", "value": 3}]}


def test_an_exports_messages_shown_before_are_not_evaluated_again_nor_copied(tmp_path: Any) -> None:
    # ``is_ejs_processed``: the extension evaluates the message again without writing (its text, which raw-message
    # evaluation already replaced, stays); ``variables_initialized``: it took its copy when it was first shown
    import json

    preset = _gen_request("normal")["preset"]

    def row(mes: str, user: bool, variables: Any = None, shown: bool = False) -> dict[str, Any]:
        out: dict[str, Any] = {"name": "Ash" if user else "Mira", "is_user": user, "is_system": False, "mes": mes}
        if variables is not None:
            out.update(variables=[variables], swipe_id=0, swipes=[mes])
        if shown:
            out.update(is_ejs_processed=[True], variables_initialized=[True])
        return out

    lines = [{"user_name": "Ash", "character_name": "Mira", "chat_metadata": {}},
             row("A", False, {"a": 1}, shown=True),
             row("U <% setvar('w', 1) %>kept", True, {"b": 2}, shown=True),
             row("New <%- getvar('a') %>/<%- getvar('b') %>", False)]
    chat = tmp_path / "chat.jsonl"
    chat.write_text("\n".join(json.dumps(line) for line in lines) + "\n", encoding="utf-8")
    sent = assemble_request({"preset": preset, "chat": str(chat), "user": {"name": "Ash"},
                             "extensions": {"prompt_template": {"filter_message_enabled": False}}})
    # message 1 kept its own variables (no copy of message 0's) and wrote nothing when the chat loaded; message 2
    # took message 1's; generation (the filter off) evaluated message 1's template in message 2's scope
    assert sent.messages[-1]["content"] == "New /2"
    assert sent.messages[-2]["content"] == "U kept"
    assert sent.variables_patch == {"message": [{"op": "add", "path": "/b", "value": 2},
                                                {"op": "add", "path": "/w", "value": 1}]}
    # the export's flags are read as the current swipe's
    from tavernbox.assets.chats import parse_chat_jsonl

    assert parse_chat_jsonl(chat.read_text(encoding="utf-8")).template_flags == (
        (True, True), (True, True), (False, False))
