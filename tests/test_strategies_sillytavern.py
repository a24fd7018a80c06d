"""SillyTavern prompt-manager placement: the ``preset`` source under ``builtin-st``.

Each test is named after the rule it pins (research ``peers.md`` section 6). The logical messages
(before the DSH system projection) are what SillyTavern's own chat-completion array holds.
"""

from __future__ import annotations

from typing import Any

import pytest

from tavernbox.assembler import Assembler
from tavernbox.assembler.rules import parse_preset
from tavernbox.errors import TemplateError
from tavernbox.strategies import (
    apply_names_behavior,
    builtin_strategy,
    split_examples,
    squash_system_messages,
    st_messages,
    st_registry,
)
from tavernbox.strategies.sillytavern import inject_order

CHAT = [
    {"id": "u1", "role": "user", "content": "U1"},
    {"id": "a1", "role": "assistant", "content": "A1"},
    {"id": "u2", "role": "user", "content": "U2"},
]


_KNOWN = {"main", "nsfw", "jailbreak", "enhanceDefinitions"}


def prompt(identifier: str, content: str = "", role: str = "system", **extra: Any) -> dict[str, Any]:
    # a user prompt carries system_prompt: false (SillyTavern never sends an unknown system prompt)
    flag = {"system_prompt": identifier in _KNOWN}
    return {"identifier": identifier, "name": identifier, "role": role, "content": content, **flag, **extra}


def marker(identifier: str) -> dict[str, Any]:
    return {"identifier": identifier, "name": identifier, "marker": True}


#: the markers SillyTavern appends when an order lacks them; these fixtures switch them off instead
_MERGED_MARKERS = ("worldInfoBefore", "worldInfoAfter", "charDescription", "charPersonality", "scenario")


def st_preset(*prompts: dict[str, Any], order: list[str] | None = None, **fields: Any) -> dict[str, Any]:
    ids = order if order is not None else [p["identifier"] for p in prompts]
    entries = [{"identifier": i, "enabled": True} for i in ids]
    entries += [{"identifier": i, "enabled": False} for i in _MERGED_MARKERS if i not in ids]
    return {"prompts": list(prompts), "prompt_order": [{"character_id": 100001, "order": entries}], **fields}


def run(st: dict[str, Any], messages: list[dict[str, Any]] | None = None, *, strategy: Any = None,
        **assets: Any) -> Any:
    messages = CHAT if messages is None else messages
    users = [m["id"] for m in messages if m["role"] == "user"]
    return Assembler(st_registry()).assemble({
        "preset": strategy or builtin_strategy("builtin-st"), "messages": messages, "input_ids": users[-1:],
        "assets": {"st_preset": st, **assets}, "system_prompt_update": "in-history"})


def texts(result: Any) -> list[str]:
    return [m["content"] for m in result.logical_messages]


def pairs(result: Any) -> list[tuple[str, str]]:
    return [(m["content"], m["role"]) for m in result.logical_messages]


def codes(result: Any) -> list[str]:
    return [d.code for d in result.diagnostics]


HISTORY = marker("chatHistory")


# -- which prompts ---------------------------------------------------------------------------------


def test_prompt_order_uses_character_100001_before_100000() -> None:
    st = {"prompts": [prompt("main", "MAIN"), prompt("nsfw", "AUX"), HISTORY],
          "prompt_order": [{"character_id": 100000, "order": [{"identifier": "nsfw"}, {"identifier": "chatHistory"}]},
                           {"character_id": 100001, "order": [{"identifier": "main"}, {"identifier": "chatHistory"}]}]}
    assert texts(run(st)) == ["MAIN", "U1", "A1", "U2"]


def test_without_an_order_for_100001_sillytaverns_default_order_is_used() -> None:
    """``sanitizeServiceSettings``: no order for the global dummy character 100001 -> the default order."""
    legacy = {"prompts": [prompt("main", "MAIN"), prompt("nsfw", "AUX"), HISTORY],
              "prompt_order": [{"character_id": 7, "order": [{"identifier": "main"}, {"identifier": "chatHistory"}]},
                               {"character_id": "100000", "order": [{"identifier": "nsfw"}, {"identifier": "chatHistory"}]}]}
    result = run(legacy)
    assert texts(result) == ["MAIN", "AUX", "U1", "A1", "U2"] and "ST_PROMPT_ORDER_DEFAULT" in codes(result)


def test_unknown_system_prompts_are_never_sent_and_user_prompts_are() -> None:
    """``populateChatCompletion`` adds only prompts with ``system_prompt === false`` besides the known ones."""
    st = st_preset(prompt("main", "MAIN"), {**prompt("x", "SYS X"), "system_prompt": True}, prompt("y", "USER Y"),
                   HISTORY)
    result = run(st)
    assert texts(result) == ["MAIN", "USER Y", "U1", "A1", "U2"] and "ST_PROMPT_NOT_SENT" in codes(result)


def test_markers_missing_from_the_order_are_appended_after_everything() -> None:
    """``preparePromptsForChatCompletion`` merges the card markers into the collection, appending absent ones."""
    st = {"prompts": [prompt("main", "MAIN"), HISTORY], "prompt_order": [{"character_id": 100001, "order": [
        {"identifier": "main", "enabled": True}, {"identifier": "chatHistory", "enabled": True}]}]}
    card = {"name": "Mira", "description": "DESC"}
    assert texts(run(st, character=card)) == ["MAIN", "U1", "A1", "U2", "DESC"]
    off = st_preset(prompt("main", "MAIN"), marker("charDescription"), HISTORY)
    off["prompt_order"][0]["order"][1]["enabled"] = False
    assert texts(run(off, character=card)) == ["MAIN", "U1", "A1", "U2"]


def test_prompt_order_disabled_items_and_unknown_identifiers_are_skipped() -> None:
    st = st_preset(prompt("main", "MAIN"), prompt("nsfw", "AUX"), HISTORY, prompt("jailbreak", "PHI"),
                   order=["main", "ghost", "nsfw", "chatHistory", "jailbreak"])
    st["prompt_order"][0]["order"][2]["enabled"] = False
    assert texts(run(st)) == ["MAIN", "U1", "A1", "U2", "PHI"]


def test_without_prompt_order_prompts_are_used_as_listed() -> None:
    st = {"prompts": [prompt("main", "MAIN"), prompt("x", "X", enabled=False), HISTORY, prompt("jailbreak", "PHI")]}
    assert texts(run(st)) == ["MAIN", "U1", "A1", "U2", "PHI"]


def test_injection_trigger_excludes_other_generation_types() -> None:
    st = st_preset(prompt("main", "MAIN"), prompt("imp", "ONLY IMPERSONATE", injection_trigger=["impersonate"]), HISTORY)
    assert "ONLY IMPERSONATE" not in texts(run(st))
    assert "ONLY IMPERSONATE" in texts(run(st, generation_type="impersonate"))


def test_relative_prompts_keep_prompt_order_and_roles() -> None:
    st = st_preset(prompt("nsfw", "AUX", "user"), prompt("main", "MAIN"), HISTORY, prompt("enhanceDefinitions", "ENH", "assistant"),
                   prompt("jailbreak", "PHI"))
    assert pairs(run(st)) == [("AUX", "user"), ("MAIN", "system"), ("U1", "user"), ("A1", "assistant"), ("U2", "user"),
                              ("ENH", "assistant"), ("PHI", "system")]


def test_legacy_preset_fields_become_prompts() -> None:
    result = run({"main_prompt": "LEGACY MAIN", "jailbreak_prompt": "LEGACY PHI"})
    assert texts(result)[0] == "LEGACY MAIN" and texts(result)[-1] == "LEGACY PHI"


def test_invalid_preset_is_a_clear_error() -> None:
    with pytest.raises(TemplateError) as err:
        run({"prompts": [{"name": "no identifier"}]})
    assert err.value.code == "ST_PRESET_INVALID" and "identifier" in (err.value.path or "")


def test_no_st_preset_is_a_diagnostic_not_an_error() -> None:
    result = Assembler(st_registry()).assemble({"preset": builtin_strategy("builtin-st"), "messages": CHAT,
                                                "input_ids": ["u2"], "system_prompt_update": "in-history"})
    assert texts(result) == ["U1", "A1", "U2"] and "ST_PRESET_ABSENT" in codes(result)


# -- markers ---------------------------------------------------------------------------------------

CARD = {"name": "Seraphina", "description": "DESC of {{char}}", "personality": "kind", "scenario": "a forest",
        "mes_example": "", "first_mes": "Welcome, {{user}}."}


def test_card_markers_fill_from_the_card_with_the_preset_formats() -> None:
    st = st_preset(marker("charDescription"), marker("charPersonality"), marker("scenario"), marker("personaDescription"),
                   HISTORY, personality_format="[{{char}} is {{personality}}]", scenario_format="[Scene: {{scenario}}]")
    result = run(st, character=CARD, persona={"name": "Ann", "description": "PERSONA of {{user}}"})
    assert texts(result)[:4] == ["DESC of Seraphina", "[Seraphina is kind]", "[Scene: a forest]", "PERSONA of Ann"]
    node = next(n for n in result.nodes if n["block_id"] == "preset:charDescription")
    assert node["children"][0]["resource_id"] == "Seraphina" and node["children"][0]["field"] == "description"


def test_marker_role_is_the_prompts_role() -> None:
    st = st_preset({**marker("charDescription"), "role": "user"}, HISTORY)
    assert pairs(run(st, character=CARD))[0] == ("DESC of Seraphina", "user")


def test_empty_card_field_sends_no_format() -> None:
    st = st_preset(marker("charPersonality"), HISTORY, personality_format="[Personality: {{personality}}]")
    assert texts(run(st, character={**CARD, "personality": ""})) == ["U1", "A1", "U2"]


def test_fields_without_an_enabled_marker_are_not_sent() -> None:
    st = st_preset(prompt("main", "MAIN"), marker("charDescription"), HISTORY, order=["main", "chatHistory"])
    result = run(st, character=CARD, persona={"name": "Ann", "description": "PERSONA"})
    # the switched-off description stays off; the persona, absent from the order, is appended
    assert texts(result) == ["MAIN", "U1", "A1", "U2", "PERSONA"]


def test_chat_history_marker_places_new_chat_prompt_then_history_and_input() -> None:
    st = st_preset(prompt("main", "MAIN"), HISTORY, prompt("jailbreak", "PHI"), new_chat_prompt="[Start a new Chat]")
    assert pairs(run(st)) == [("MAIN", "system"), ("[Start a new Chat]", "system"), ("U1", "user"), ("A1", "assistant"),
                              ("U2", "user"), ("PHI", "system")]


def test_unknown_marker_is_reported_and_skipped() -> None:
    st = st_preset(marker("mystery"), HISTORY)
    result = run(st)
    assert texts(result) == ["U1", "A1", "U2"] and "ST_PROMPT_NOT_SENT" in codes(result)


def test_disabled_main_sends_nothing_in_its_slot() -> None:
    st = st_preset(prompt("main", "MAIN"), HISTORY)
    st["prompt_order"][0]["order"][0]["enabled"] = False
    assert texts(run(st)) == ["U1", "A1", "U2"]


# -- card overrides --------------------------------------------------------------------------------


def test_card_system_prompt_replaces_main_with_original_spliced_once() -> None:
    st = st_preset(prompt("main", "BASE"), HISTORY)
    result = run(st, character={**CARD, "system_prompt": "CARD {{original}} / {{original}}"})
    assert texts(result)[0] == "CARD BASE / "  # the second {{original}} is empty; nothing is trimmed after


def test_card_post_history_instructions_replace_jailbreak() -> None:
    st = st_preset(HISTORY, prompt("jailbreak", "JB"))
    assert texts(run(st, character={**CARD, "post_history_instructions": "PHI + {{original}}"}))[-1] == "PHI + JB"


def test_forbid_overrides_keeps_the_preset_text_and_hides_the_card_field() -> None:
    st = st_preset(prompt("main", "BASE", forbid_overrides=True), HISTORY, prompt("jailbreak", "JB", forbid_overrides=True))
    result = run(st, character={**CARD, "system_prompt": "CARD SYS", "post_history_instructions": "CARD PHI"})
    assert texts(result) == ["BASE", "U1", "A1", "U2", "JB"]


def test_prefer_character_prompt_false_keeps_main() -> None:
    st = st_preset(prompt("main", "BASE"), HISTORY)
    assert texts(run(st, character={**CARD, "system_prompt": "CARD"}, prefer_character_prompt=False))[0] == "BASE"


# -- dialogue examples -----------------------------------------------------------------------------


def test_examples_split_on_start_case_insensitive_with_names() -> None:
    dialogues = split_examples("{{user}}: hi\n{{char}}: hello\nmore\n<start>\nSeraphina: solo", "Ann", "Seraphina")
    assert dialogues == [[("example_user", "hi"), ("example_assistant", "hello\nmore")],
                         [("example_assistant", "solo")]]
    assert split_examples("<START>", "Ann", "S") == [] and split_examples("  ", "Ann", "S") == []


def test_example_lines_before_any_speaker_join_the_first_message() -> None:
    """``parseExampleIntoIndividual`` keeps every line; only the first ``Name:`` is removed."""
    assert split_examples("<START>\nnarration\nAnn: q", "Ann", "S") == [[("example_user", "narration\n q")]]
    # no speaker lines: an empty dialogue, whose separator SillyTavern still sends (populateDialogueExamples)
    assert split_examples("<START>\nnote\n", "Ann", "S") == [[]]


def test_dialogue_examples_become_named_system_messages_after_the_separator() -> None:
    st = st_preset(marker("dialogueExamples"), HISTORY, new_example_chat_prompt="[Example Chat]")
    card = {**CARD, "mes_example": "<START>\n{{user}}: hi {{char}}\n{{char}}: hello {{user}}\n<START>\n{{char}}: again"}
    result = run(st, character=card, persona={"name": "Ann", "description": ""})
    got = [(m["content"], m["role"], m.get("name")) for m in result.logical_messages][:5]
    assert got == [("[Example Chat]", "system", None), ("hi Seraphina", "system", "example_user"),
                   ("hello Ann", "system", "example_assistant"), ("[Example Chat]", "system", None),
                   ("again", "system", "example_assistant")]


def test_examples_without_marker_are_not_sent() -> None:
    st = st_preset(prompt("main", "MAIN"), HISTORY)
    assert texts(run(st, character={**CARD, "mes_example": "<START>\n{{user}}: hi"})) == ["MAIN", "U1", "A1", "U2"]


# -- in-chat (absolute) prompts: the SillyTavern ordering facts -------------------------------------


def absolute(identifier: str, content: str, depth: int, order: int = 100, role: str = "system") -> dict[str, Any]:
    return prompt(identifier, content, role, injection_position=1, injection_depth=depth, injection_order=order)


def test_same_depth_higher_order_lands_nearer_the_end() -> None:
    st = st_preset(HISTORY, absolute("hi", "HIGH", 0, 200), absolute("lo", "LOW", 0, 10))
    assert texts(run(st))[-2:] == ["LOW", "HIGH"]


def test_same_depth_and_order_one_message_per_role_assistant_user_system() -> None:
    st = st_preset(HISTORY, absolute("s1", "S1", 1), absolute("u", "U", 1, role="user"), absolute("s2", "S2", 1),
                   absolute("a", "A", 1, role="assistant"))
    assert pairs(run(st)) == [("U1", "user"), ("A1", "assistant"), ("A", "assistant"), ("U", "user"),
                              ("S1\nS2", "system"), ("U2", "user")]


def test_depth_counts_chat_messages_only_not_inserted_ones() -> None:
    st = st_preset(HISTORY, absolute("d1", "D1", 1), absolute("d2", "D2", 2), absolute("d0", "D0", 0))
    assert texts(run(st)) == ["U1", "D2", "A1", "D1", "U2", "D0"]


def test_depths_beyond_the_chat_put_the_deepest_first() -> None:
    st = st_preset(HISTORY, absolute("d5", "D5", 5), absolute("d9", "D9", 9), absolute("d3", "D3", 3))
    assert texts(run(st)) == ["D9", "D5", "D3", "U1", "A1", "U2"]


def test_absolute_prompts_do_not_appear_at_their_prompt_order_slot() -> None:
    st = st_preset(absolute("x", "X", 0), prompt("main", "MAIN"), HISTORY)
    assert texts(run(st)) == ["MAIN", "U1", "A1", "U2", "X"]


def test_inject_order_groups_and_sorts() -> None:
    items = [(0, 100, "system", "a"), (2, 50, "user", "b"), (0, 100, "system", "c"), (0, 100, "assistant", "d")]
    assert inject_order(items) == [(2, 50, "user", "b"), (0, 100, "assistant", "d"), (0, 100, "system", "a\nc")]


def test_extension_prompts_join_the_order_100_message_of_their_role() -> None:
    st = st_preset(HISTORY, absolute("p100", "P100", 1), absolute("p50", "P50", 1, 50))
    card = {**CARD, "extensions": {"depth_prompt": {"prompt": "CHARNOTE", "depth": 1, "role": "system"}}}
    wi = [{"id": "w", "content": "WI DEPTH", "position": "at_depth", "depth": 1, "role": "system"}]
    result = run(st, character=card, world_info=wi, author_note={"content": "NOTE", "depth": 1})
    assert texts(result) == ["U1", "A1", "P50", "P100\nNOTE\nCHARNOTE\nWI DEPTH", "U2"]
    assert "ST_WORLD_INFO_UNPLACED" not in codes(result)
    assert sum("WI DEPTH" in t for t in texts(result)) == 1


def test_extension_prompts_at_a_depth_without_preset_prompts_still_go_in() -> None:
    wi = [{"id": "w", "content": "WI2", "position": "at_depth", "depth": 2, "role": "user"}]
    assert pairs(run(st_preset(HISTORY), world_info=wi)) == [("U1", "user"), ("WI2", "user"), ("A1", "assistant"),
                                                             ("U2", "user")]


# -- world-info positions --------------------------------------------------------------------------


def test_world_info_before_and_after_are_one_message_each_in_order_through_wi_format() -> None:
    st = st_preset(marker("worldInfoBefore"), HISTORY, marker("worldInfoAfter"), wi_format="[{0}]")
    wi = [{"id": 1, "content": "B-HIGH", "position": "before", "order": 200},
          {"id": 2, "content": "B-LOW", "position": "before", "order": 10},
          {"id": 3, "content": "AFTER", "position": "after"}]
    assert texts(run(st, world_info=wi)) == ["[B-LOW\nB-HIGH]", "U1", "A1", "U2", "[AFTER]"]


def test_authors_note_positions_wrap_the_note() -> None:
    wi = [{"id": 1, "content": "TOP", "position": "after", "approximated_from": 2},
          {"id": 2, "content": "BOTTOM", "position": "after", "approximated_from": 3}]
    result = run(st_preset(HISTORY), world_info=wi, author_note={"content": "NOTE", "depth": 0, "role": "user"})
    assert pairs(result)[-1] == ("TOP\nNOTE\nBOTTOM", "user")
    assert "WORLD_BOOK_SLOT_MISSING" not in codes(result)  # the preset gives the position its real slot


def test_example_message_positions_become_extra_dialogues() -> None:
    st = st_preset(marker("dialogueExamples"), HISTORY)
    wi = [{"id": 1, "content": "{{user}}: top q", "position": "before", "approximated_from": 5},
          {"id": 2, "content": "{{char}}: bottom a", "position": "before", "approximated_from": 6}]
    result = run(st, character={**CARD, "mes_example": "{{char}}: card"}, world_info=wi)
    assert texts(result)[:3] == ["top q", "card", "bottom a"]


def test_world_info_disabled_in_the_strategy_is_not_sent() -> None:
    strategy = builtin_strategy("builtin-st").to_dict()
    for r in strategy["rules"]:
        if r["kind"] == "worldbook":
            r["enabled"] = False
    st = st_preset(marker("worldInfoBefore"), HISTORY)
    wi = [{"id": 1, "content": "LORE", "position": "before"}, {"id": 2, "content": "DEEP", "position": "at_depth", "depth": 1}]
    assert texts(run(st, strategy=parse_preset(strategy), world_info=wi)) == ["U1", "A1", "U2"]


def test_outlets_are_read_by_the_outlet_macro() -> None:
    st = st_preset(prompt("main", "Lore: {{outlet::places}}"), HISTORY)
    assert texts(run(st, macro_context={"outlets": {"places": "Eldoria"}}))[0] == "Lore: Eldoria"


# -- greeting --------------------------------------------------------------------------------------


def test_first_turn_greeting_is_an_assistant_message_before_the_conversation() -> None:
    chat = [{"id": "u1", "role": "user", "content": "Hi"}]
    result = run(st_preset(prompt("main", "MAIN"), HISTORY), chat, character=CARD, include_greeting_reference=True,
                 persona={"name": "Ann", "description": ""})
    assert pairs(result) == [("MAIN", "system"), ("Welcome, Ann.", "assistant"), ("Hi", "user")]
    assert "GREETING_AFTER_INPUT" not in codes(result)


def test_greeting_after_input_when_an_explicit_depth_puts_it_there() -> None:
    strategy = builtin_strategy("builtin-st").to_dict()
    for r in strategy["rules"]:
        if r["kind"] == "character":
            r["depth"] = 0
    chat = [{"id": "u1", "role": "user", "content": "Hi"}]
    result = run(st_preset(HISTORY), chat, strategy=parse_preset(strategy), character=CARD, include_greeting_reference=True)
    assert texts(result) == ["Hi", "Welcome, User."] and "GREETING_AFTER_INPUT" in codes(result)


# -- squashing and names ---------------------------------------------------------------------------


def test_squash_joins_adjacent_unnamed_system_messages_with_a_newline() -> None:
    messages = [{"role": "system", "content": "A"}, {"role": "system", "content": ""}, {"role": "system", "content": "B"},
                {"role": "system", "content": "EX", "name": "example_user"}, {"role": "system", "content": "C"},
                {"role": "user", "content": "U"}, {"role": "system", "content": "D"}]
    assert [(m["content"], m.get("name")) for m in squash_system_messages(messages)] == [
        ("A\nB", None), ("EX", "example_user"), ("C", None), ("U", None), ("D", None)]


def test_squash_applies_to_an_assembled_st_array_keeping_separators_apart() -> None:
    st = st_preset(prompt("main", "MAIN"), prompt("nsfw", "AUX"), marker("dialogueExamples"), HISTORY,
                   new_example_chat_prompt="[Example Chat]", new_chat_prompt="[Start a new Chat]")
    result = run(st, character={**CARD, "mes_example": "{{char}}: hey"})
    assert [m["content"] for m in st_messages(result, squash=True)] == [
        "MAIN\nAUX", "[Example Chat]", "hey", "[Start a new Chat]", "U1", "A1", "U2"]
    assert st_messages(result) == result.logical_messages


@pytest.mark.parametrize(
    ("behavior", "expected"),
    [
        (-1, [("Hi", None), ("Yo", None)]),
        (0, [("Hi", None), ("Yo", None)]),
        (1, [("Hi", "Ann"), ("Yo", "Sera_phina")]),
        (2, [("Ann: Hi", None), ("Sera phina: Yo", None)]),
    ],
)
def test_names_behavior(behavior: int, expected: list[tuple[str, str | None]]) -> None:
    messages = [{"id": "u", "role": "user", "content": "Hi"}, {"id": "a", "role": "assistant", "content": "Yo"},
                {"id": "s", "role": "system", "content": "S", "name": "narrator"}]
    out = apply_names_behavior(messages, behavior, "Ann", "Sera phina")
    assert [(m["content"], m.get("name")) for m in out[:2]] == expected
    assert out[2] == messages[2]


def test_names_behavior_default_prefixes_assistant_in_groups() -> None:
    out = apply_names_behavior([{"id": "a", "role": "assistant", "content": "Yo", "name": "Bob"}], 0, "Ann", "X", group=True)
    assert out[0]["content"] == "Bob: Yo"


# -- modules placement keeps list ownership ---------------------------------------------------------


def test_modules_placement_routes_jailbreak_to_the_phi_row_and_keeps_listed_rows() -> None:
    strategy = builtin_strategy("builtin-st").to_dict()
    strategy.pop("layout")
    strategy["placement"] = "modules"
    st = st_preset(prompt("main", "MAIN"), marker("charDescription"), HISTORY, prompt("jailbreak", "JB"))
    result = run(st, strategy=parse_preset(strategy), character=CARD)
    # list placement: the preset row (MAIN; the description macro belongs to the listed character row),
    # the character row (every card field), history, input, then the PHI row holding the routed jailbreak
    assert texts(result) == ["MAIN", "DESC of Seraphina", "kind", "a forest", "U1", "A1", "U2", "JB"]


def test_replay_reproduces_an_st_assembly() -> None:
    from tavernbox.assembler import replay

    st = st_preset(prompt("main", "MAIN"), marker("dialogueExamples"), HISTORY, absolute("x", "X", 1))
    result = run(st, character={**CARD, "mes_example": "{{user}}: q\n{{char}}: a"})
    assert replay(result.record).messages == result.messages


# the SillyTavern in-chat ordering facts as a table: (absolute prompts as (content, depth, order, role), expected texts)
ORDERING_CASES = {
    "depth0-orders-ascending": ([("C", 0, 300, "system"), ("A", 0, 1, "system"), ("B", 0, 100, "system")],
                                ["U1", "A1", "U2", "A", "B", "C"]),
    "depth1-higher-order-nearer-end": ([("HI", 1, 200, "system"), ("LO", 1, 10, "system")],
                                       ["U1", "A1", "LO", "HI", "U2"]),
    "one-order-roles-assistant-user-system": ([("S", 0, 100, "system"), ("U", 0, 100, "user"),
                                               ("A", 0, 100, "assistant")], ["U1", "A1", "U2", "A", "U", "S"]),
    "roles-grouped-per-order": ([("S100", 1, 100, "system"), ("U50", 1, 50, "user"), ("A100", 1, 100, "assistant"),
                                 ("S50", 1, 50, "system")], ["U1", "A1", "U50", "S50", "A100", "S100", "U2"]),
    "same-role-joined-in-prompt-order": ([("X", 2, 100, "user"), ("Y", 2, 100, "user")],
                                         ["U1", "X\nY", "A1", "U2"]),
    "depth-ignores-inserted-messages": ([("D3", 3, 100, "system"), ("D2", 2, 100, "system"), ("D1", 1, 100, "system")],
                                        ["D3", "U1", "D2", "A1", "D1", "U2"]),
    "beyond-chat-deepest-first": ([("D4", 4, 100, "system"), ("D7", 7, 100, "system")], ["D7", "D4", "U1", "A1", "U2"]),
    "empty-content-skipped": ([("", 0, 100, "system"), ("E", 0, 100, "user")], ["U1", "A1", "U2", "E"]),
}


@pytest.mark.parametrize(("items", "expected"), list(ORDERING_CASES.values()), ids=list(ORDERING_CASES))
def test_st_in_chat_ordering_facts(items: list[tuple[str, int, int, str]], expected: list[str]) -> None:
    prompts = [absolute(f"p{i}", content, depth, order, role) for i, (content, depth, order, role) in enumerate(items)]
    assert texts(run(st_preset(HISTORY, *prompts))) == expected


@pytest.mark.parametrize("depth", [-1, 10_001])
def test_injection_depth_outside_the_walked_range_is_never_injected(depth: int) -> None:
    result = run(st_preset(HISTORY, absolute("x", "X", depth), absolute("y", "Y", 0)))
    assert texts(result) == ["U1", "A1", "U2", "Y"] and "ST_INJECTION_SKIPPED" in codes(result)


@pytest.mark.parametrize(
    ("persona", "expected"),
    [
        ({"position": 0}, ["PERSONA", "U1", "A1", "NOTE", "U2"]),
        ({"position": 2}, ["U1", "A1", "PERSONA\nNOTE", "U2"]),
        ({"position": 3}, ["U1", "A1", "NOTE\nPERSONA", "U2"]),
        ({"position": 4, "depth": 2, "role": 1}, ["U1", "PERSONA", "A1", "NOTE", "U2"]),
        ({"position": 9}, ["U1", "A1", "NOTE", "U2"]),
    ],
)
def test_persona_description_positions(persona: dict[str, Any], expected: list[str]) -> None:
    st = st_preset(marker("personaDescription"), HISTORY)
    result = run(st, persona={"name": "Ann", "description": "PERSONA", **persona}, author_note={"content": "NOTE", "depth": 1})
    assert texts(result) == expected


def test_extension_prompts_join_in_sillytavern_key_order() -> None:
    card = {**CARD, "extensions": {"depth_prompt": {"prompt": "CHARNOTE", "depth": 1}}}
    wi = [{"id": "w", "content": "WI", "position": "at_depth", "depth": 1, "role": "system"}]
    result = run(st_preset(HISTORY), character=card, world_info=wi, author_note={"content": "NOTE", "depth": 1},
                 persona={"name": "Ann", "description": "PERSONA", "position": 4, "depth": 1})
    assert texts(result)[2] == "NOTE\nCHARNOTE\nPERSONA\nWI"
