"""The SillyTavern request file and the ``builtin-st`` product path (issue: SillyTavern-exact request).

Each test pins one SillyTavern behaviour and names the function of SillyTavern 1.18 it follows
(``openai.js``, ``prompt-converters.js``, ``authors-note.js``, ``world-info.js``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from st_support import marker, order, prompt

from tavernbox import assemble_request, parse_request
from tavernbox.cli.main import main as cli
from tavernbox.errors import TemplateError
from tavernbox.assets.chats import parse_chat, parse_chat_jsonl, parse_chat_text
from tavernbox.sillytavern.postprocess import PLACEHOLDER, PromptNames, history_messages, post_process, sanitize_name

ROOT = Path(__file__).resolve().parents[1]


def preset(*prompts: dict[str, Any], **fields: Any) -> dict[str, Any]:
    return {"prompts": list(prompts), **fields,
            "prompt_order": [{"character_id": 100001, "order": order(prompts)}]}


BASIC = preset(prompt("main", "Write {{char}}'s reply to {{user}}."), marker("personaDescription"),
               marker("charDescription"), marker("worldInfoBefore"), marker("chatHistory"),
               prompt("jailbreak", "Stay in character."), new_chat_prompt="")
CARD = {"spec": "chara_card_v2", "spec_version": "2.0",
        "data": {"name": "Mira", "description": "Mira keeps the lighthouse.", "first_mes": "Hello."}}
CHAT = {"messages": [{"role": "assistant", "content": "Hello."}, {"role": "user", "content": "Hi Mira."}]}


def run(**fields: Any) -> Any:
    return assemble_request({"preset": BASIC, "card": CARD, "chat": CHAT, **fields})


def contents(result: Any) -> list[tuple[str, str]]:
    return [(m["role"], m["content"]) for m in result.messages]


# -- the request file ------------------------------------------------------------------------------


def test_unknown_fields_are_errors_with_their_json_path() -> None:
    with pytest.raises(TemplateError) as err:
        parse_request({"preset": BASIC, "chat": CHAT, "user": {"name": "Ash", "persona": {"positon": "none"}}})
    assert err.value.code == "REQUEST_INVALID"
    assert err.value.path == "$.user.persona.positon"


def test_wrong_values_name_the_field() -> None:
    with pytest.raises(TemplateError) as err:
        parse_request({"preset": BASIC, "chat": CHAT, "author_note": {"position": "middle"}})
    assert err.value.path == "$.author_note.position"
    with pytest.raises(TemplateError) as err:
        parse_request({"preset": BASIC, "chat": CHAT, "world_info": {"world_info_character_strategy": 5}})
    assert err.value.path == "$.world_info.world_info_character_strategy"


def test_preset_and_chat_are_required() -> None:
    with pytest.raises(TemplateError) as err:
        parse_request({"chat": CHAT})
    assert err.value.path == "$.preset"
    with pytest.raises(TemplateError) as err:
        parse_request({"preset": BASIC})
    assert err.value.path == "$.chat"


def test_an_invalid_asset_keeps_its_code_and_gains_the_request_path() -> None:
    with pytest.raises(TemplateError) as err:
        assemble_request({"preset": BASIC, "chat": CHAT, "card": {"spec": "chara_card_v2", "data": {"name": "X", "character_book": "x"}}})
    assert err.value.code == "ASSET_INVALID"
    assert err.value.path == "$.card.data.character_book"


def test_asset_paths_resolve_against_the_request_folder(tmp_path: Path) -> None:
    (tmp_path / "p.json").write_text(json.dumps(BASIC))
    (tmp_path / "c.json").write_text(json.dumps(CARD))
    result = assemble_request({"preset": "p.json", "card": "c.json", "chat": CHAT}, base_dir=tmp_path)
    assert ("system", "Mira keeps the lighthouse.") in contents(result)


def test_a_missing_asset_file_is_a_request_error(tmp_path: Path) -> None:
    with pytest.raises(TemplateError) as err:
        assemble_request({"preset": "nope.json", "chat": CHAT}, base_dir=tmp_path)
    assert (err.value.code, err.value.path) == ("REQUEST_INVALID", "$.preset")


# -- the product path: no projection ---------------------------------------------------------------


def test_builtin_st_sends_system_messages_where_sillytavern_puts_them_without_projection() -> None:
    """``populateChatCompletion``: main, markers, history, jailbreak, each its own message."""
    result = run(user={"name": "Ash", "persona": {"description": "Ash is tired."}})
    assert contents(result) == [
        ("system", "Write Mira's reply to Ash."),
        ("system", "Ash is tired."),
        ("system", "Mira keeps the lighthouse."),
        ("assistant", "Hello."),
        ("user", "Hi Mira."),
        ("system", "Stay in character."),
    ]


def test_squash_joins_adjacent_unnamed_system_messages_outside_dry_runs() -> None:
    """``ChatCompletion.squashSystemMessages`` runs only when ``dryRun`` is false."""
    squashed = assemble_request({"preset": {**BASIC, "squash_system_messages": True}, "card": CARD, "chat": CHAT})
    assert contents(squashed)[0] == ("system", "Write Mira's reply to User.\nMira keeps the lighthouse.")
    dry = assemble_request({"preset": {**BASIC, "squash_system_messages": True}, "card": CARD, "chat": CHAT,
                            "options": {"dry_run": True}})
    assert contents(dry)[0] == ("system", "Write Mira's reply to User.")


def test_settings_a_preset_lacks_take_sillytaverns_fresh_install_values() -> None:
    """Importing a preset changes only the settings it carries (``onSettingsPresetChange``)."""
    bare = {k: v for k, v in BASIC.items() if k != "new_chat_prompt"}
    result = assemble_request({"preset": bare, "card": CARD, "chat": CHAT})
    assert ("system", "[Start a new Chat]") in contents(result)


# -- names (setOpenAIMessages, populateChatHistory) ------------------------------------------------


FORCED = {"messages": [{"role": "assistant", "content": "Hello."},
                       {"role": "assistant", "content": "Boo!", "name": "Ghost", "force_avatar": True},
                       {"role": "system", "content": "A storm rises.", "name": "Narrator"},
                       {"role": "user", "content": "Hi."}]}


@pytest.mark.parametrize(("behavior", "expected"), [
    (-1, [("assistant", "Hello.", None), ("assistant", "Boo!", None), ("system", "A storm rises.", None),
          ("user", "Hi.", None)]),
    (0, [("assistant", "Hello.", None), ("assistant", "Ghost: Boo!", None), ("system", "A storm rises.", None),
         ("user", "Hi.", None)]),
    (1, [("assistant", "Hello.", "Mira"), ("assistant", "Boo!", "Ghost"), ("system", "A storm rises.", "Narrator"),
         ("user", "Hi.", "Ash")]),
    (2, [("assistant", "Mira: Hello.", None), ("assistant", "Ghost: Boo!", None), ("system", "A storm rises.", None),
         ("user", "Ash: Hi.", None)]),
])
def test_names_behavior_as_set_open_ai_messages(behavior: int, expected: list[tuple[str, str, str | None]]) -> None:
    """NONE adds nothing; DEFAULT prefixes forced avatars; COMPLETION sets ``name``; CONTENT prefixes all but narrators."""
    p = preset(marker("chatHistory"), names_behavior=behavior, new_chat_prompt="")
    result = assemble_request({"preset": p, "card": CARD, "chat": FORCED, "user": {"name": "Ash"}})
    assert [(m["role"], m["content"], m.get("name")) for m in result.messages] == expected


def test_default_names_prefix_every_other_speaker_in_a_group() -> None:
    """``populateChatHistory`` in a group: the group's new-chat prompt, then the group nudge last."""
    p = preset(marker("chatHistory"), names_behavior=0, squash_system_messages=True)
    chat = {"messages": [{"role": "assistant", "content": "Hi.", "name": "Bo"}, {"role": "user", "content": "Yo."}]}
    result = assemble_request({"preset": p, "card": CARD, "chat": chat, "group": {"members": ["Mira", "Bo"]}})
    assert contents(result) == [("system", "[Start a new group chat. Group members: Mira, Bo]"), ("assistant", "Bo: Hi."),
                                ("user", "Yo."), ("system", "[Write the next reply only as Mira.]")]


def test_completion_names_are_sanitised_as_the_prompt_manager_does() -> None:
    """``PromptManager.sanitizeName``: every character outside ``[A-Za-z0-9_]`` becomes ``_``, 64 at most."""
    assert sanitize_name("Sir Ghost-1") == "Sir_Ghost_1"
    assert sanitize_name("x" * 70) == "x" * 64
    history = history_messages([{"role": "user", "content": "a\r\nb"}], behavior=1, user="Ann Lee", char="M")
    assert history == [{"id": "chat-0", "role": "user", "content": "a\nb", "name": "Ann_Lee"}]


# -- post-processing (prompt-converters.js postProcessPrompt / mergeMessages) ----------------------


MESSAGES = [
    {"role": "system", "content": "Main."},
    {"role": "system", "content": "Example line", "name": "example_user"},
    {"role": "system", "content": "Reply line", "name": "example_assistant"},
    {"role": "assistant", "content": "Hello."},
    {"role": "user", "content": "Hi.", "name": "Ash"},
    {"role": "system", "content": "Jailbreak."},
]
NAMES = PromptNames(char="Mira", user="Ash")


def test_merge_joins_same_role_runs_with_a_blank_line_and_prefixes_names() -> None:
    assert post_process(MESSAGES, "merge", NAMES) == [
        {"role": "system", "content": "Main.\n\nAsh: Example line\n\nMira: Reply line"},
        {"role": "assistant", "content": "Hello."},
        {"role": "user", "content": "Ash: Hi."},
        {"role": "system", "content": "Jailbreak."},
    ]


def test_semi_turns_later_system_messages_into_user_ones_and_merges_again() -> None:
    assert post_process(MESSAGES, "semi", NAMES) == [
        {"role": "system", "content": "Main.\n\nAsh: Example line\n\nMira: Reply line"},
        {"role": "assistant", "content": "Hello."},
        {"role": "user", "content": "Ash: Hi.\n\nJailbreak."},
    ]


def test_strict_adds_the_placeholder_user_message_after_a_lone_system_prompt() -> None:
    out = post_process(MESSAGES, "strict", NAMES)
    assert out[:2] == [{"role": "system", "content": "Main.\n\nAsh: Example line\n\nMira: Reply line"},
                       {"role": "user", "content": PLACEHOLDER}]
    assert post_process([{"role": "assistant", "content": "A"}], "strict", NAMES) == [
        {"role": "user", "content": PLACEHOLDER}, {"role": "assistant", "content": "A"}]


def test_single_sends_one_user_message_with_speaker_prefixes() -> None:
    assert post_process(MESSAGES, "single", NAMES) == [{"role": "user", "content": (
        "Main.\n\nAsh: Example line\n\nMira: Reply line\n\nMira: Hello.\n\nAsh: Hi.\n\nJailbreak.")}]


def test_post_processing_option_applies_to_the_assembled_request() -> None:
    result = run(options={"post_processing": "semi"})
    assert [m["role"] for m in result.messages] == ["system", "assistant", "user"]
    assert result.messages[-1]["content"] == "Hi Mira.\n\nStay in character."
    assert result.request_fields["custom_prompt_post_processing"] == "semi"


# -- persona and Author's Note (authors-note.js setFloatingPrompt, script.js) ----------------------


def test_author_note_in_chat_at_depth_with_role() -> None:
    result = run(author_note={"content": "Be brief.", "depth": 1, "role": "user"})
    assert contents(result)[-4:] == [("assistant", "Hello."), ("user", "Be brief."), ("user", "Hi Mira."),
                                     ("system", "Stay in character.")]


@pytest.mark.parametrize(("position", "index"), [("before", 0), ("after", 1)])
def test_author_note_before_or_after_main(position: str, index: int) -> None:
    """``injectToMain``: the note becomes its own message in main's collection, before or after it."""
    result = run(author_note={"content": "Be brief.", "position": position})
    assert contents(result)[index] == ("system", "Be brief.")
    assert ("system", "Write Mira's reply to User.") in contents(result)[:2]


def test_author_note_interval_counts_user_messages() -> None:
    """``setFloatingPrompt``: due when the user-message count is a multiple of the interval."""
    one_user = run(author_note={"content": "Be brief.", "interval": 2})
    assert ("system", "Be brief.") not in contents(one_user)
    chat = {"messages": [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"},
                         {"role": "user", "content": "c"}]}
    two_users = assemble_request({"preset": BASIC, "card": CARD, "chat": chat,
                                  "author_note": {"content": "Be brief.", "interval": 2}})
    assert ("system", "Be brief.") in contents(two_users)


@pytest.mark.parametrize(("position", "expected"), [("top_an", "Ash is tired.\nBe brief."),
                                                    ("bottom_an", "Be brief.\nAsh is tired.")])
def test_persona_around_the_authors_note(position: str, expected: str) -> None:
    result = run(user={"name": "Ash", "persona": {"description": "Ash is tired.", "position": position}},
                 author_note={"content": "Be brief.", "depth": 1})
    assert ("system", expected) in contents(result)
    assert ("system", "Ash is tired.") not in contents(result)


def test_persona_at_depth_with_its_role() -> None:
    result = run(user={"name": "Ash", "persona": {"description": "Ash is tired.", "position": "at_depth", "depth": 0,
                                                  "role": "user"}})
    assert contents(result)[-3:] == [("user", "Hi Mira."), ("user", "Ash is tired."), ("system", "Stay in character.")]


# -- world-info sources (world-info.js getSortedEntries) -------------------------------------------


def book(name: str, content: str, key: str = "mira", **entry: Any) -> dict[str, Any]:
    return {"name": name, "entries": {"0": {"uid": 0, "key": [key], "content": content, "position": 0, **entry}}}


def test_the_cards_embedded_book_is_scanned_and_its_constants_fire() -> None:
    card = {**CARD, "data": {**CARD["data"], "character_book": {"entries": [
        {"id": 1, "keys": ["never"], "content": "Always here.", "constant": True, "enabled": True,
         "insertion_order": 100, "position": "before_char"}]}}}
    result = assemble_request({"preset": BASIC, "card": card, "chat": CHAT})
    assert ("system", "Always here.") in contents(result)


def test_the_linked_world_is_found_by_name_among_the_books() -> None:
    card = {**CARD, "data": {**CARD["data"], "extensions": {"world": "Lighthouse"}}}
    result = assemble_request({"preset": BASIC, "card": card, "chat": CHAT,
                               "books": [book("Lighthouse", "The lamp is old.")]})
    assert ("system", "The lamp is old.") in contents(result)
    assert not [w for w in result.warnings if w.code == "ST_LINKED_WORLD_MISSING"]


def test_a_linked_world_that_is_not_given_is_a_warning_naming_it() -> None:
    card = {**CARD, "data": {**CARD["data"], "extensions": {"world": "Lighthouse"}}}
    result = assemble_request({"preset": BASIC, "card": card, "chat": CHAT})
    warned = [w for w in result.warnings if w.code == "ST_LINKED_WORLD_MISSING"]
    assert warned and "Lighthouse" in warned[0].message


@pytest.mark.parametrize(("strategy", "expected"), [(1, "CHAR\nGLOBAL"), (2, "GLOBAL\nCHAR")])
def test_character_strategy_orders_character_and_global_books(strategy: int, expected: str) -> None:
    """Same ``order``: the strategy decides which source's entry is placed first (entries are
    inserted in reverse of the sorted list, so the first sorted lands last)."""
    card = {**CARD, "data": {**CARD["data"], "extensions": {"world": "Mine"}}}
    result = assemble_request({"preset": BASIC, "card": card, "chat": CHAT,
                               "books": [book("Global", "GLOBAL"), book("Mine", "CHAR")],
                               "world_info": {"world_info_character_strategy": strategy}})
    placed = [c for r, c in contents(result) if "GLOBAL" in c]
    assert placed and placed[0] in (expected, "\n".join(reversed(expected.split("\n"))))


def test_chat_and_persona_lorebooks_are_named_in_the_request() -> None:
    chat = {**CHAT, "lorebook": "ChatBook"}
    result = assemble_request({"preset": BASIC, "card": CARD, "chat": chat,
                               "user": {"persona": {"lorebook": "PersonaBook"}},
                               "books": [book("ChatBook", "FROM CHAT"), book("PersonaBook", "FROM PERSONA")]})
    joined = "\n".join(c for _r, c in contents(result))
    assert "FROM CHAT" in joined and "FROM PERSONA" in joined


# -- chats as users have them ----------------------------------------------------------------------


EXPORT = "\n".join(json.dumps(row) for row in [
    {"user_name": "Ash", "character_name": "Mira", "chat_metadata": {"world_info": "ChatBook"}},
    {"name": "Mira", "is_user": False, "is_system": False, "mes": "Hello.", "extra": {}, "swipes": ["Hello.", "Hey."]},
    {"name": "Ash", "is_user": True, "is_system": True, "mes": "hidden", "extra": {}},
    {"name": "Narrator", "is_user": False, "is_system": False, "mes": "Rain.", "extra": {"type": "narrator"}},
    {"name": "Ash", "is_user": True, "is_system": False, "mes": "Hi.\r\n", "extra": {}},
])


def test_sillytavern_chat_export_reads_hidden_narrator_and_lorebook() -> None:
    chat = parse_chat_jsonl(EXPORT)
    assert [(m.role, m.content) for m in chat.messages] == [("assistant", "Hello."), ("system", "Rain."),
                                                            ("user", "Hi.\r\n")]
    assert (chat.lorebook, chat.hidden, chat.user_name) == ("ChatBook", 1, "Ash")
    assert parse_chat_text(EXPORT, hint="chat.jsonl").messages == chat.messages


def test_sillytavern_stored_messages_in_a_json_array_read_as_the_export_does(tmp_path: Path) -> None:
    """A chat saved as one JSON array of SillyTavern's stored messages (``mes``, ``is_user``, the
    metadata object first, as the export's lines) is read as the ``.jsonl`` export, not refused."""
    rows = [json.loads(line) for line in EXPORT.splitlines()]
    export = parse_chat_jsonl(EXPORT)
    for data in (rows, {"messages": rows}):
        chat = parse_chat(data)
        assert chat.messages == export.messages
        assert (chat.lorebook, chat.hidden, chat.user_name) == ("ChatBook", 1, "Ash")
    without_meta = parse_chat(rows[1:])
    assert without_meta.messages == export.messages and without_meta.lorebook is None
    # and the request sends them as the export's reading does
    a = assemble_request({"preset": BASIC, "card": CARD, "chat": rows})
    (tmp_path / "chat.jsonl").write_text(EXPORT)
    b = assemble_request({"preset": BASIC, "card": CARD, "chat": str(tmp_path / "chat.jsonl")})
    assert a.messages == b.messages


def test_a_request_with_nothing_to_send_is_refused_saying_why() -> None:
    """SillyTavern would send ``"messages": []`` here; the refusal names what would fill the request."""
    empty = preset(prompt("main", "Write."), new_chat_prompt="")
    empty["prompt_order"][0]["order"][0]["enabled"] = False
    with pytest.raises(TemplateError) as err:
        assemble_request({"preset": empty, "card": {"name": "Mira"}, "chat": CHAT})
    assert err.value.code == "ASSEMBLY_EMPTY"
    assert "empty messages array" in str(err.value) and "chatHistory" in str(err.value)


def test_a_chat_mixing_stored_and_documented_messages_is_refused_with_its_path() -> None:
    with pytest.raises(TemplateError) as err:
        parse_chat([{"is_user": True, "mes": "Hi."}, {"role": "user", "content": "x"}])
    assert (err.value.code, err.value.path) == ("REQUEST_INVALID", "$[1].role")
    with pytest.raises(TemplateError) as err:
        parse_chat({"messages": [{"is_user": True, "mes": 3}]})
    assert (err.value.code, err.value.path) == ("REQUEST_INVALID", "$.messages[0].mes")


def test_a_broken_export_line_reports_its_line() -> None:
    with pytest.raises(TemplateError) as err:
        parse_chat_jsonl('{"user_name": "Ash"}\n{"mes": ')
    assert (err.value.code, err.value.line) == ("REQUEST_INVALID", 2)


def test_unknown_chat_message_fields_are_refused() -> None:
    with pytest.raises(TemplateError) as err:
        assemble_request({"preset": BASIC, "chat": {"messages": [{"role": "user", "content": "x", "txt": 1}]}})
    assert err.value.path == "$.chat.messages[0].txt"


# -- the CLI ---------------------------------------------------------------------------------------


def test_cli_request_file_prints_readably_and_warns_on_stderr(tmp_path: Path) -> None:
    card = {**CARD, "data": {**CARD["data"], "extensions": {"world": "Lighthouse"}}}
    (tmp_path / "req.json").write_text(json.dumps({"preset": BASIC, "card": card, "chat": CHAT}))
    res = CliRunner().invoke(cli, ["assemble", "--request", str(tmp_path / "req.json")])
    assert res.exit_code == 0, res.output
    assert "--- [1] system ---\nWrite Mira's reply to User." in res.stdout
    assert "ST_LINKED_WORLD_MISSING" in res.stderr


def test_cli_flags_override_the_request_file(tmp_path: Path) -> None:
    (tmp_path / "req.json").write_text(json.dumps({"preset": BASIC, "card": CARD, "chat": CHAT,
                                                   "user": {"name": "Ash"}}))
    res = CliRunner().invoke(cli, ["assemble", "--request", str(tmp_path / "req.json"), "--user", "Bea", "--messages"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)[0]["content"] == "Write Mira's reply to Bea."


def test_cli_reads_a_jsonl_chat_and_standard_input(tmp_path: Path) -> None:
    (tmp_path / "p.json").write_text(json.dumps(BASIC))
    (tmp_path / "chat.jsonl").write_text(EXPORT)
    res = CliRunner().invoke(cli, ["assemble", "--preset", str(tmp_path / "p.json"), "--chat",
                                   str(tmp_path / "chat.jsonl"), "--messages"])
    assert res.exit_code == 0, res.output
    assert [m["content"] for m in json.loads(res.stdout)][-3:] == ["Rain.", "Hi.\n", "Stay in character."]
    piped = CliRunner().invoke(cli, ["assemble", "--preset", str(tmp_path / "p.json"), "--chat", "-", "--messages"],
                               input=EXPORT)
    assert piped.exit_code == 0, piped.output
    assert json.loads(piped.stdout) == json.loads(res.stdout)


def test_cli_bad_request_is_a_coded_error_not_a_traceback(tmp_path: Path) -> None:
    (tmp_path / "req.json").write_text(json.dumps({"preset": BASIC, "chat": CHAT, "colour": 1}))
    res = CliRunner().invoke(cli, ["assemble", "--request", str(tmp_path / "req.json")])
    assert res.exit_code == 1
    assert json.loads(res.stdout)["error"] == {"code": "REQUEST_INVALID", "message": "unknown field 'colour' at $.colour",
                                               "path": "$.colour"}


def test_cli_json_carries_provenance_and_the_world_info_trace(tmp_path: Path) -> None:
    (tmp_path / "req.json").write_text(json.dumps({"preset": BASIC, "card": CARD, "chat": CHAT,
                                                   "books": [book("Lore", "The lamp.")]}))
    res = CliRunner().invoke(cli, ["assemble", "--request", str(tmp_path / "req.json"), "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert {"messages", "warnings", "nodes", "provenance", "trace", "record"} <= set(out)
    assert out["trace"]["world_info"]


# -- Claude and Google conversions (prompt-converters.js) ------------------------------------------


def test_claude_conversion_takes_leading_system_messages_as_the_system_prompt() -> None:
    """``convertClaudeMessages``: leading system -> ``system``; later system -> user; same roles merged."""
    result = run(options={"target": "claude", "use_sysprompt": True})
    assert result.body["system"] == [{"type": "text", "text": "Write Mira's reply to User."},
                                     {"type": "text", "text": "Mira keeps the lighthouse."}]
    assert result.body["messages"] == [
        {"role": "assistant", "content": [{"type": "text", "text": "Hello."}]},
        {"role": "user", "content": [{"type": "text", "text": "Hi Mira."}, {"type": "text", "text": "Stay in character."}]},
    ]


def test_claude_without_system_prompt_sends_every_system_message_as_user_and_the_prefill_last() -> None:
    result = assemble_request({"preset": {**BASIC, "assistant_prefill": "Sure:  "}, "card": CARD, "chat": CHAT,
                               "options": {"target": "claude"}})
    assert result.body["system"] == []
    assert result.body["messages"][0]["role"] == "user"
    assert result.body["messages"][-1] == {"role": "assistant", "content": [{"type": "text", "text": "Sure:"}]}


def test_google_conversion_uses_model_role_and_system_instruction() -> None:
    """``convertGooglePrompt``: assistant -> model, runs merged with a blank line."""
    result = run(options={"target": "google", "use_sysprompt": True})
    assert result.body["system_instruction"] == {"parts": [{"text": "Write Mira's reply to User."},
                                                           {"text": "Mira keeps the lighthouse."}]}
    assert result.body["contents"] == [{"role": "model", "parts": [{"text": "Hello."}]},
                                       {"role": "user", "parts": [{"text": "Hi Mira.\n\nStay in character."}]}]


def test_cli_target_prints_the_converted_body(tmp_path: Path) -> None:
    (tmp_path / "req.json").write_text(json.dumps({"preset": BASIC, "card": CARD, "chat": CHAT}))
    res = CliRunner().invoke(cli, ["assemble", "--request", str(tmp_path / "req.json"), "--target", "google",
                                   "--messages"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["contents"][0]["role"] == "user"


def test_provenance_describes_the_sent_messages_and_names_world_info_entries() -> None:
    result = assemble_request({"preset": {**BASIC, "squash_system_messages": True}, "card": CARD, "chat": CHAT,
                               "books": [book("Lore", "The lamp is old.")]})
    provenance = result.provenance
    assert len(provenance) == len(result.messages)
    first = result.messages[0]["content"]
    entry_spans = [s for s in provenance[0]["spans"] if s.get("kind") == "world_info"]
    assert [(s["book"], s["uid"]) for s in entry_spans] == [("Lore", 0)]
    span = entry_spans[0]
    assert first[span["start"]:span["end"]] == "The lamp is old."
    # the squashed message's ranges cover it without gaps
    spans = provenance[0]["spans"]
    assert spans[0]["start"] == 0 and spans[-1]["end"] == len(first)


@pytest.mark.parametrize(("text", "code"), [('{"messages": [{"role": "user", "content": "\\ud800"}]}', "TEXT_SURROGATE"),
                                            ('{"messages": [{"role": "user", "content": NaN}]}', "REQUEST_INVALID")])
def test_request_and_chat_files_follow_the_strict_json_rule(tmp_path: Path, text: str, code: str) -> None:
    (tmp_path / "chat.json").write_text(text)
    (tmp_path / "p.json").write_text(json.dumps(BASIC))
    res = CliRunner().invoke(cli, ["assemble", "--preset", str(tmp_path / "p.json"), "--chat", str(tmp_path / "chat.json")])
    assert res.exit_code == 1 and json.loads(res.stdout)["error"]["code"] == code


def test_global_variables_set_in_one_prompt_are_read_in_a_later_one() -> None:
    """SillyTavern expands prompts in order with one variable store: ``{{setglobalvar}}`` carries over."""
    p = preset(prompt("a", "{{setglobalvar::m::X}}{{setvar::l::Y}}"), prompt("b", "[{{getglobalvar::m}}{{getvar::l}}]"),
               marker("chatHistory"))
    result = assemble_request({"preset": p, "chat": CHAT})
    assert contents(result)[0] == ("system", "[XY]")
