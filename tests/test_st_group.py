"""Group chats joining their cards: the request file's ``group`` and SillyTavern 1.18's rules, one by one.

The byte-for-byte proof is ``test_st_oracle_groups.py`` (requests recorded from SillyTavern); these
tests pin each rule alone and name the SillyTavern function it follows (``group-chats.js``
``getGroupCharacterCardsLazy`` and ``getGroupDepthPrompts``, ``world-info.js`` ``getCharacterLore``,
``openai.js`` ``parseExampleIntoIndividual`` and ``script.js`` ``getExtensionPrompt``), plus the
request file's validation.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from st_support import marker, order, prompt

from tavernbox import assemble_request, parse_request
from tavernbox.errors import TemplateError


def preset(*prompts: dict[str, Any], **fields: Any) -> dict[str, Any]:
    return {"prompts": list(prompts), "new_chat_prompt": "", "new_group_chat_prompt": "", "group_nudge_prompt": "",
            **fields, "prompt_order": [{"character_id": 100001, "order": order(prompts)}]}


CARDS_ONLY = preset(marker("charDescription"), marker("charPersonality"), marker("scenario"),
                    marker("dialogueExamples"), marker("chatHistory"), new_example_chat_prompt="")


def card(name: str, description: str = "", personality: str = "", scenario: str = "", mes_example: str = "",
         depth_prompt: dict[str, Any] | None = None, world: str = "") -> dict[str, Any]:
    ext: dict[str, Any] = {"world": world}
    if depth_prompt is not None:
        ext["depth_prompt"] = depth_prompt
    return {"spec": "chara_card_v2", "spec_version": "2.0",
            "data": {"name": name, "description": description, "personality": personality, "scenario": scenario,
                     "mes_example": mes_example, "first_mes": "", "extensions": ext}}


MIRA = card("Mira", "{{char}} keeps the lamp.", "Patient.", "A storm at {{char}}'s lighthouse.",
            "{{user}}: Ships?\n{{char}}: None.")
BO = card("Bo", "  {{char}} smuggles cats.  ", "", "Bo's cellar.", "<START>\n{{char}}: Cats.")
CASS = card("Cass", "{{char}} listens at doors.", "Curious.")
CHAT = {"messages": [{"role": "user", "content": "Hello, all."}]}


def run(speaker: dict[str, Any] = MIRA, p: dict[str, Any] = CARDS_ONLY, **group: Any) -> Any:
    group.setdefault("members", ["Mira", "Bo", "Cass"])
    group.setdefault("cards", [MIRA, BO, CASS])
    return assemble_request({"preset": p, "card": speaker, "chat": CHAT, "user": {"name": "Ash"}, "group": group})


def texts(result: Any) -> list[str]:
    return [m["content"] for m in result.messages]


# -- the request file ------------------------------------------------------------------------------


@pytest.mark.parametrize(("group", "path"), [
    ({"members": ["Mira"], "generation_mode": "join"}, "$.group.generation_mode"),
    ({"members": ["Mira"], "join_prefix": 3}, "$.group.join_prefix"),
    ({"members": ["Mira"], "disabled_members": ["Bo"]}, "$.group.disabled_members[0]"),
    ({"members": ["Mira", "Mira"]}, "$.group.members[1]"),
    ({"members": ["Mira"], "cards": [7]}, "$.group.cards[0]"),
    ({"members": ["Mira"], "muted": ["Mira"]}, "$.group.muted"),
])
def test_group_fields_are_validated_with_their_json_path(group: dict[str, Any], path: str) -> None:
    with pytest.raises(TemplateError) as err:
        parse_request({"preset": CARDS_ONLY, "chat": CHAT, "group": group})
    assert (err.value.code, err.value.path) == ("REQUEST_INVALID", path)


def test_a_member_card_of_someone_outside_the_group_is_refused() -> None:
    with pytest.raises(TemplateError) as err:
        run(members=["Mira", "Bo"], cards=[MIRA, BO, CASS])
    assert (err.value.code, err.value.path) == ("REQUEST_INVALID", "$.group.cards[2]")


def test_a_second_card_for_one_member_is_refused() -> None:
    with pytest.raises(TemplateError) as err:
        run(cards=[MIRA, BO, BO])
    assert (err.value.code, err.value.path) == ("REQUEST_INVALID", "$.group.cards[2]")


def test_join_modes_need_the_replying_member_among_the_members() -> None:
    with pytest.raises(TemplateError) as err:
        run(speaker=card("Zed", "Zed."), generation_mode="append")
    assert (err.value.code, err.value.path) == ("REQUEST_INVALID", "$.card")


def test_member_card_errors_keep_the_path_of_the_card(tmp_path: Path) -> None:
    with pytest.raises(TemplateError) as err:
        run(cards=[str(tmp_path / "nope.json")], generation_mode="append")
    assert (err.value.code, err.value.path) == ("REQUEST_INVALID", "$.group.cards[0]")


def test_member_cards_may_be_paths(tmp_path: Path) -> None:
    (tmp_path / "bo.json").write_text(json.dumps(BO), encoding="utf-8")
    result = assemble_request({"preset": CARDS_ONLY, "card": MIRA, "chat": CHAT, "user": {"name": "Ash"},
                               "group": {"members": ["Mira", "Bo"], "cards": ["bo.json"],
                                         "generation_mode": "append"}}, base_dir=tmp_path)
    assert texts(result)[0] == "Mira keeps the lamp.\nBo smuggles cats."


def test_a_member_without_a_card_is_a_warning_naming_it() -> None:
    result = run(cards=[MIRA, BO], generation_mode="append")
    warned = [w for w in result.warnings if w.code == "ST_GROUP_CARD_MISSING"]
    assert len(warned) == 1 and "'Cass'" in warned[0].message
    assert texts(result)[0] == "Mira keeps the lamp.\nBo smuggles cats."


# -- getGroupCharacterCardsLazy ----------------------------------------------------------------------


def test_swap_mode_sends_the_replying_members_card_alone() -> None:
    """``getGroupCharacterCardsLazy`` returns nothing for SWAP: the current character's fields."""
    assert texts(run(speaker=BO))[:2] == ["Bo smuggles cats.", "Bo's cellar."]


def test_append_joins_trimmed_fields_with_newlines_skipping_empty_ones() -> None:
    """``collectField``: each member's field trimmed, ``{{char}}`` that member, empty ones left out."""
    result = run(generation_mode="append")
    assert texts(result)[:3] == ["Mira keeps the lamp.\nBo smuggles cats.\nCass listens at doors.",
                                 "Patient.\nCurious.", "A storm at Mira's lighthouse.\nBo's cellar."]


def test_prefix_and_suffix_name_the_field_and_the_member() -> None:
    """``replaceAndPrepareForJoin``: ``<FIELDNAME>`` (any case) is the display name; the affixes are not trimmed."""
    result = run(generation_mode="append", join_prefix="<{{char}} <FieldName>> ", join_suffix=" (end <fieldname>)\n",
                 members=["Mira", "Bo"], cards=[MIRA, BO])
    assert texts(result)[:2] == ["<Mira Description> Mira keeps the lamp. (end Description)\n\n"
                                 "<Bo Description> Bo smuggles cats. (end Description)\n",
                                 "<Mira Personality> Patient. (end Personality)\n"]


def test_examples_get_a_start_and_group_names() -> None:
    """``collectField('Example Messages')`` adds ``<START>`` when missing; ``parseExampleIntoIndividual``
    reads any member's name as a character line and prefixes each message with its speaker."""
    result = run(generation_mode="append", members=["Mira", "Bo"], cards=[MIRA, BO])
    examples = [(m["content"], m.get("name")) for m in result.messages if m.get("name")]
    assert examples == [("Ash: Ships?", "example_user"), ("Mira: None.", "example_assistant"),
                        ("Bo: Cats.", "example_assistant")]


def test_muted_members_are_left_out_unless_replying_or_append_disabled() -> None:
    """``collectField`` skips a disabled member unless it is the current character or the mode is APPEND_DISABLED."""
    assert texts(run(generation_mode="append", disabled_members=["Cass"]))[1] == "Patient."
    assert texts(run(speaker=CASS, generation_mode="append", disabled_members=["Cass"]))[1] == "Patient.\nCurious."
    assert texts(run(generation_mode="append_disabled", disabled_members=["Cass"]))[1] == "Patient.\nCurious."


def test_group_not_muted_macro_leaves_the_muted_out() -> None:
    """``{{groupNotMuted}}`` lists the members not in ``disabled_members``; ``{{group}}`` lists them all."""
    p = preset(prompt("main", "{{group}} / {{groupNotMuted}}"), marker("chatHistory"))
    assert texts(run(p=p, disabled_members=["Bo"]))[0] == "Mira, Bo, Cass / Mira, Cass"


# -- getGroupDepthPrompts ----------------------------------------------------------------------------

DP_MIRA = card("Mira", "Mira.", depth_prompt={"prompt": "{{char}} counts thunder.", "depth": 0, "role": "system"})
DP_BO = card("Bo", "Bo.", depth_prompt={"prompt": "{{char}} denies everything.", "depth": 0, "role": "system"})
DP_CASS = card("Cass", "Cass.", depth_prompt={"prompt": "{{char}} listens.", "depth": 0, "role": "system"})


def depth_run(mode: str, speaker: dict[str, Any] = DP_MIRA, **group: Any) -> list[str]:
    p = preset(marker("chatHistory"))
    return texts(run(speaker=speaker, p=p, generation_mode=mode, cards=[DP_MIRA, DP_BO, DP_CASS], **group))


def test_join_modes_send_every_members_depth_prompt_in_member_order() -> None:
    """``getGroupDepthPrompts``: one ``DEPTH_PROMPT_<i>`` per member; the same depth and role join with a newline."""
    assert depth_run("append", speaker=DP_BO) == [
        "Hello, all.", "Mira counts thunder.\nBo denies everything.\nCass listens."]
    assert depth_run("swap", speaker=DP_BO) == ["Hello, all.", "Bo denies everything."]


def test_muted_members_depth_prompts_stay_out_even_under_append_disabled() -> None:
    """``getGroupDepthPrompts`` checks ``disabled_members`` without looking at the mode."""
    assert depth_run("append_disabled", disabled_members=["Bo"]) == ["Hello, all.", "Mira counts thunder.\nCass listens."]
    assert depth_run("append", speaker=DP_BO, disabled_members=["Bo"])[-1] == \
        "Mira counts thunder.\nBo denies everything.\nCass listens."


def test_extension_prompts_at_one_depth_follow_their_sorted_keys() -> None:
    """``getExtensionPrompt`` sorts the keys as strings: ``DEPTH_PROMPT_10`` comes before ``DEPTH_PROMPT_2``."""
    names = [f"M{i}" for i in range(11)]
    cards = [card(n, depth_prompt={"prompt": f"dp {i}", "depth": 0, "role": "system"}) for i, n in enumerate(names)]
    result = assemble_request({"preset": preset(marker("chatHistory")), "card": cards[0], "chat": CHAT,
                               "group": {"members": names, "cards": cards, "generation_mode": "append"}})
    assert texts(result)[-1].split("\n") == ["dp 0", "dp 1", "dp 10", "dp 2", "dp 3", "dp 4", "dp 5", "dp 6", "dp 7",
                                             "dp 8", "dp 9"]


# -- getCharacterLore ----------------------------------------------------------------------------------


def lore(name: str, text: str) -> dict[str, Any]:
    return {"name": name, "entries": {"0": {"uid": 0, "key": ["x"], "content": text, "constant": True,
                                            "position": 0, "order": 100}}}


def test_only_the_replying_members_lorebook_is_read() -> None:
    """``getCharacterLore`` reads the current character's world; another member's linked book is not global."""
    mira, bo = card("Mira", "Mira.", world="mira-lore"), card("Bo", "Bo.", world="bo-lore")
    p = preset(marker("worldInfoBefore"), marker("chatHistory"))
    books = [lore("mira-lore", "Mira's lore."), lore("bo-lore", "Bo's lore."), lore("common", "Common lore.")]
    for mode in ("swap", "append"):
        result = assemble_request({"preset": p, "card": bo, "chat": CHAT, "books": books, "group": {
            "members": ["Mira", "Bo"], "cards": [mira, bo], "generation_mode": mode}})
        assert sorted(texts(result)[0].split("\n")) == ["Bo's lore.", "Common lore."]
        assert any(w.code == "ST_GROUP_LOREBOOK_NOT_READ" and "'mira-lore'" in w.message for w in result.warnings)


def test_join_modes_scan_the_joined_description() -> None:
    """``globalScanData.characterDescription`` is the description sent: the joined one in a join mode."""
    entry = {"uid": 0, "key": ["cellar"], "content": "The cellar floods.", "position": 0, "order": 100,
             "matchCharacterDescription": True}
    p = preset(marker("worldInfoBefore"), marker("chatHistory"))
    request = {"preset": p, "card": card("Mira", "Mira."), "chat": CHAT, "user": {"name": "Ash"},
               "books": [{"name": "common", "entries": {"0": entry}}],
               "group": {"members": ["Mira", "Bo"], "cards": [card("Bo", "Bo guards the cellar.")]}}
    assert "The cellar floods." not in texts(assemble_request(request))
    request["group"]["generation_mode"] = "append"
    assert texts(assemble_request(request))[0] == "The cellar floods."


def test_the_request_body_names_the_group() -> None:
    """``createGenerationParameters`` sends ``group_names`` (every member) with ``char_name`` and ``user_name``;
    the server's post-processing reads them."""
    result = run(disabled_members=["Cass"])
    assert result.request_fields["group_names"] == ["Mira", "Bo", "Cass"]
    alone = assemble_request({"preset": CARDS_ONLY, "card": MIRA, "chat": CHAT})
    assert alone.request_fields["group_names"] == []


# -- limits ----------------------------------------------------------------------------------------------


def test_a_join_prefix_repeated_over_many_members_trips_the_limit() -> None:
    """The prefix is written once per member and field: 900 members x a 10 KB prefix would pass the macro
    output limit, so the request is refused before any of it is built."""
    names = [f"M{i}" for i in range(900)]
    cards = [card(n, "x") for n in names]
    with pytest.raises(TemplateError) as err:
        assemble_request({"preset": CARDS_ONLY, "card": cards[0], "chat": CHAT, "group": {
            "members": names, "cards": cards, "generation_mode": "append", "join_prefix": "p" * 10_000}})
    assert (err.value.code, err.value.path) == ("ST_GROUP_JOIN_LIMIT", "$.group")


def test_names_substituted_into_a_prefix_are_counted_before_they_are_written() -> None:
    """100,000 ``{{char}}`` in the prefix and a 1,000-character member name: 10^8 characters, refused at once."""
    long_name = "N" * 1000
    with pytest.raises(TemplateError) as err:
        assemble_request({"preset": CARDS_ONLY, "card": card(long_name, "x"), "chat": CHAT, "group": {
            "members": [long_name], "generation_mode": "append", "join_prefix": "{{char}}" * 100_000}})
    assert err.value.code == "ST_GROUP_JOIN_LIMIT"


def test_depth_prompts_are_bounded_too() -> None:
    long_name = "N" * 1000
    dp = {"prompt": "{{char}}" * 100_000, "depth": 0, "role": "system"}
    with pytest.raises(TemplateError) as err:
        assemble_request({"preset": CARDS_ONLY, "card": card(long_name, "x", depth_prompt=dp), "chat": CHAT,
                          "group": {"members": [long_name], "generation_mode": "append"}})
    assert err.value.code == "ST_GROUP_JOIN_LIMIT"


def test_a_joined_field_just_under_the_limit_is_built() -> None:
    """The limit counts what is written: 8 members' 1 MiB descriptions (8 Mi characters with the newlines
    less 1) are joined; one character more each is refused."""
    from tavernbox.sillytavern.groups import MAX_JOINED_CHARS, joined_card

    names = [f"M{i}" for i in range(8)]
    each = (MAX_JOINED_CHARS - 7) // 8
    members = [(n, {"description": "d" * each}) for n in names]
    out = joined_card({"name": "M0"}, members, mode="append", prefix="", suffix="", disabled=(), speaker="M0",
                      user="U")
    assert len(out["description"]) == 8 * each + 7 <= MAX_JOINED_CHARS
    with pytest.raises(TemplateError):
        joined_card({"name": "M0"}, [(n, {"description": "d" * (each + 2)}) for n in names], mode="append",
                    prefix="", suffix="", disabled=(), speaker="M0", user="U")


# -- the chat's scenario and example overrides -------------------------------------------------------


def test_chat_overrides_replace_the_card_fields_in_a_one_character_chat() -> None:
    """``getCharacterCardFieldsLazy``: ``chat_metadata.scenario || character.scenario``, then trimmed."""
    chat = {**CHAT, "scenario": " After the storm, {{char}} sweeps glass. ", "mes_example": "{{char}}: Mind the glass."}
    result = assemble_request({"preset": CARDS_ONLY, "card": MIRA, "chat": chat, "user": {"name": "Ash"}})
    assert texts(result)[:4] == ["Mira keeps the lamp.", "Patient.", "After the storm, Mira sweeps glass.",
                                 "Mind the glass."]
    blank = assemble_request({"preset": CARDS_ONLY, "card": MIRA, "chat": {**CHAT, "scenario": "  "}})
    assert "A storm at Mira's lighthouse." not in texts(blank)  # a blank override wins, and sends nothing


def test_a_blank_override_leaves_the_joined_field_in_a_join_mode() -> None:
    """``getGroupCharacterCardsLazy``: ``baseChatReplace(override.trim()) || collectField(...)``."""
    result = assemble_request({"preset": CARDS_ONLY, "card": MIRA, "chat": {**CHAT, "scenario": "  "},
                               "group": {"members": ["Mira", "Bo"], "cards": [BO], "generation_mode": "append"}})
    assert texts(result)[2] == "A storm at Mira's lighthouse.\nBo's cellar."


def test_chat_override_fields_are_checked_and_read_from_an_export() -> None:
    from tavernbox.assets.chats import parse_chat, parse_chat_jsonl

    with pytest.raises(TemplateError) as err:
        parse_chat({"messages": [], "scenario": 3}, path="$.chat")
    assert (err.value.code, err.value.path) == ("REQUEST_INVALID", "$.chat.scenario")
    head = {"user_name": "Ash", "character_name": "Mira",
            "chat_metadata": {"scenario": "Calm sea.", "mes_example": "<START>\n{{char}}: Hm."}}
    line = {"name": "Ash", "is_user": True, "is_system": False, "mes": "Hi", "extra": {}}
    chat = parse_chat_jsonl(json.dumps(head) + "\n" + json.dumps(line) + "\n")
    assert (chat.scenario, chat.mes_example) == ("Calm sea.", "<START>\n{{char}}: Hm.")


def test_an_exports_overrides_survive_standard_input(tmp_path: Path) -> None:
    """``--chat -`` reads the export the same as a file: its ``chat_metadata.scenario`` is kept."""
    from click.testing import CliRunner

    from tavernbox.cli.main import main as cli

    (tmp_path / "p.json").write_text(json.dumps(CARDS_ONLY))
    (tmp_path / "c.json").write_text(json.dumps(MIRA))
    head = {"user_name": "Ash", "character_name": "Mira", "chat_metadata": {"scenario": "Calm sea at {{char}}'s."}}
    export = json.dumps(head) + "\n" + json.dumps({"name": "Ash", "is_user": True, "mes": "Hi", "extra": {}}) + "\n"
    res = CliRunner().invoke(cli, ["assemble", "--preset", str(tmp_path / "p.json"), "--card", str(tmp_path / "c.json"),
                                   "--chat", "-", "--messages"], input=export)
    assert res.exit_code == 0, res.output
    assert "Calm sea at Mira's." in [m["content"] for m in json.loads(res.stdout)]


def test_macros_in_the_chat_read_the_joined_card() -> None:
    """``populateChatHistory`` expands chat messages with the same card fields (``getCharacterCardFieldsLazy``)."""
    chat = {"messages": [{"role": "user", "content": "Recap: {{personality}}"}]}
    result = assemble_request({"preset": preset(marker("chatHistory")), "card": MIRA, "chat": chat, "group": {
        "members": ["Mira", "Bo", "Cass"], "cards": [BO, CASS], "generation_mode": "append"}})
    assert texts(result) == ["Recap: Patient.\nCurious."]


def test_the_sample_group_request_joins_both_cards() -> None:
    """``corpora/sample-group-request.json``, the README's group example, assembles from the CLI."""
    from click.testing import CliRunner

    from tavernbox.cli.main import main as cli

    root = Path(__file__).resolve().parents[1]
    res = CliRunner().invoke(cli, ["assemble", "--request", str(root / "corpora" / "sample-group-request.json"),
                                   "--messages"])
    assert res.exit_code == 0, res.output
    contents = [m["content"] for m in json.loads(res.stdout)]
    assert "[Mira's Description]\nMira keeps the lighthouse" in contents[3]
    assert "\n[Tobin's Description]\nTobin runs the ferry to Gull Rock" in contents[3]
    assert "Tobin keeps glancing at the harbour." in "\n".join(contents)
    assert contents[-2] == "[Write the next reply only as Mira.]"
