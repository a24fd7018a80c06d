"""Character cards: v1/v2/v3 JSON, PNG chunks, accessors, the embedded book, bad input with JSON paths."""

from __future__ import annotations

import base64
import copy
import json
import struct
import zlib
from typing import Any

import pytest

from tavernbox.assets import CharacterCard, load_asset, read_png_card
from tavernbox.errors import TemplateError


def v2_card(**data: Any) -> dict[str, Any]:
    base = {
        "name": "Mira",
        "description": "A cartographer.",
        "personality": "curious",
        "scenario": "A harbour town.",
        "first_mes": "Hello!",
        "mes_example": "<START>\n{{char}}: Hi.",
        "creator_notes": "notes",
        "system_prompt": "You are {{char}}.",
        "post_history_instructions": "Stay in character.",
        "alternate_greetings": ["Hey.", "Good morning."],
        "tags": ["oc"],
        "creator": "me",
        "character_version": "1.2",
        "extensions": {"depth_prompt": {"prompt": "Mira loves maps.", "depth": 2, "role": "user"}},
    }
    base.update(data)
    return {"spec": "chara_card_v2", "spec_version": "2.0", "data": base}


def book_entry(**fields: Any) -> dict[str, Any]:
    entry = {"id": 0, "keys": ["map"], "content": "Maps are drawn by hand.", "enabled": True, "insertion_order": 50}
    entry.update(fields)
    return entry


def png_chunk(ctype: bytes, body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + ctype + body + struct.pack(">I", zlib.crc32(ctype + body))


def png_card(chunks: dict[str, Any]) -> bytes:
    """A minimal 1x1 PNG with the given tEXt chunks (dict values are base64-encoded JSON)."""
    ihdr = struct.pack(">IIBBBBB", 1, 1, 8, 0, 0, 0, 0)
    out = b"\x89PNG\r\n\x1a\n" + png_chunk(b"IHDR", ihdr)
    for keyword, value in chunks.items():
        text = value if isinstance(value, str) else base64.b64encode(json.dumps(value).encode()).decode()
        out += png_chunk(b"tEXt", keyword.encode() + b"\x00" + text.encode("latin-1"))
    out += png_chunk(b"IDAT", zlib.compress(b"\x00\x00")) + png_chunk(b"IEND", b"")
    return out


def load(card: dict[str, Any]) -> CharacterCard:
    asset = load_asset(json.dumps(card).encode())
    assert asset.kind == "card"
    model: CharacterCard = asset.model
    return model


def test_v2_card_accessors_read_data() -> None:
    card = load(v2_card())
    assert card.name == "Mira"
    assert card.description == "A cartographer."
    assert card.personality == "curious"
    assert card.scenario == "A harbour town."
    assert card.first_mes == "Hello!"
    assert card.mes_example.startswith("<START>")
    assert card.alternate_greetings == ["Hey.", "Good morning."]
    assert card.greetings == ["Hello!", "Hey.", "Good morning."]
    assert card.system_prompt == "You are {{char}}."
    assert card.post_history_instructions == "Stay in character."
    assert card.creator_notes == "notes"
    assert card.character_version == "1.2"
    dp = card.depth_prompt
    assert dp is not None and (dp.prompt, dp.depth, dp.role) == ("Mira loves maps.", 2, "user")
    assert card.character_book is None


def test_absent_fields_get_sillytavern_empty_defaults() -> None:
    card = load({"spec": "chara_card_v3", "spec_version": "3.0", "data": {"name": "Bare"}})
    assert (card.description, card.first_mes, card.alternate_greetings, card.system_prompt) == ("", "", [], "")
    assert card.depth_prompt is None
    assert card.greetings == []


def test_v3_reads_data_and_keeps_top_level_copies_and_unknown_fields() -> None:
    raw = v2_card(group_only_greetings=["Hi all."], nickname="Mi")
    raw["spec"], raw["spec_version"] = "chara_card_v3", "3.0"
    raw.update({"name": "Stale top-level name", "avatar": "none", "create_date": "2024"})
    raw["data"]["extensions"]["regex_scripts"] = [{"findRegex": "/x/g", "replaceString": "<script>alert(1)</script>"}]
    card = load(raw)
    assert card.name == "Mira"
    assert card.data.group_only_greetings == ["Hi all."]
    dumped = card.model_dump(by_alias=True, exclude_unset=True)
    assert dumped == raw


def test_v1_card_is_read_from_top_level_fields() -> None:
    asset = load_asset(json.dumps({"name": "Old", "description": "d", "first_mes": "hi", "creatorcomment": "c"}).encode())
    assert asset.kind == "card"
    assert (asset.model.name, asset.model.first_mes, asset.model.creator_notes) == ("Old", "hi", "c")
    assert [d.code for d in asset.diagnostics] == ["ASSET_CONVERTED"]


def test_embedded_book_is_converted_like_sillytavern_import() -> None:
    ext = {
        "position": 4,
        "depth": 2,
        "role": 1,
        "probability": 40,
        "useProbability": True,
        "selectiveLogic": 3,
        "group": "g1",
        "group_override": True,
        "group_weight": 7,
        "use_group_scoring": True,
        "scan_depth": 5,
        "case_sensitive": True,
        "match_whole_words": False,
        "exclude_recursion": True,
        "prevent_recursion": True,
        "delay_until_recursion": 2,
        "sticky": 3,
        "cooldown": 4,
        "delay": 1,
        "match_persona_description": True,
        "match_character_description": True,
        "match_character_personality": True,
        "match_character_depth_prompt": True,
        "match_scenario": True,
        "match_creator_notes": True,
        "triggers": ["normal"],
        "ignore_budget": True,
        "outlet_name": "side",
        "automation_id": "auto",
        "vectorized": True,
        "display_index": 9,
        "custom": {"kept": True},
    }
    entry = book_entry(id=7, secondary_keys=["ink"], comment="Maps", selective=True, constant=True, position="before_char", extensions=ext)
    card = load(v2_card(character_book={"name": "Atlas", "entries": [entry]}))
    book = card.character_book
    assert book is not None and book.name == "Atlas"
    e = book.to_st_dict()["entries"]["7"]
    expected = {
        "uid": 7, "key": ["map"], "keysecondary": ["ink"], "comment": "Maps", "content": "Maps are drawn by hand.",
        "constant": True, "selective": True, "order": 50, "position": 4, "disable": False, "addMemo": True,
        "displayIndex": 9, "probability": 40, "useProbability": True, "depth": 2, "selectiveLogic": 3,
        "outletName": "side", "group": "g1", "groupOverride": True, "groupWeight": 7, "scanDepth": 5,
        "caseSensitive": True, "matchWholeWords": False, "useGroupScoring": True, "automationId": "auto",
        "role": 1, "vectorized": True, "sticky": 3, "cooldown": 4, "delay": 1, "excludeRecursion": True,
        "preventRecursion": True, "delayUntilRecursion": 2, "matchPersonaDescription": True,
        "matchCharacterDescription": True, "matchCharacterPersonality": True, "matchCharacterDepthPrompt": True,
        "matchScenario": True, "matchCreatorNotes": True, "triggers": ["normal"], "ignoreBudget": True,
        "extensions": ext,
    }
    assert {k: e[k] for k in expected} == expected


def test_book_conversion_defaults_and_position_from_spec_string() -> None:
    entries = [
        book_entry(id=None, position="after_char", extensions={"probability": None}),
        {"keys": ["b"], "content": "B", "position": "before_char"},
    ]
    del entries[0]["id"]
    card = load(v2_card(character_book={"entries": entries}))
    book = card.character_book
    assert book is not None and book.name == "Mira's Lorebook"
    first, second = book.entry_list
    # ids generated for id-less entries; null extension values fall back like JavaScript's ``??``
    assert (first.uid, second.uid) == (0, 1)
    assert (first.position, second.position) == (1, 0)
    assert first.probability == 100 and first.use_probability is True
    assert first.selective is False  # absent ``selective`` is false in a converted book
    assert first.delay_until_recursion is False
    assert second.disable is True  # absent ``enabled`` means disabled (``!undefined``) in ST's conversion
    assert first.order == 50 and second.order == 100
    assert first.role == 0 and first.depth == 4


def test_generated_uids_avoid_ids_already_used() -> None:
    entries = [{"keys": ["a"], "content": "A", "enabled": True}, book_entry(id=0), book_entry(id=1)]
    card = load(v2_card(character_book={"entries": entries}))
    assert card.character_book is not None
    assert list(card.character_book.entries) == ["2", "0", "1"]


def test_duplicate_book_ids_warn_with_path() -> None:
    asset = load_asset(json.dumps(v2_card(character_book={"entries": [book_entry(id=3), book_entry(id=3)]})).encode())
    [d] = [d for d in asset.diagnostics if d.code == "ASSET_DUPLICATE_ID"]
    assert d.path == "$.data.character_book.entries[1].id"
    assert len(asset.model.character_book.entries) == 1


def test_wrong_key_type_is_rejected_with_its_json_path() -> None:
    entries = [book_entry(id=i) for i in range(3)] + [book_entry(id=3, keys="map, ink")]
    with pytest.raises(TemplateError) as info:
        load_asset(json.dumps(v2_card(character_book={"entries": entries})).encode())
    assert info.value.code == "ASSET_INVALID"
    assert info.value.path == "$.data.character_book.entries[3].keys"
    assert "got string" in info.value.message


def test_missing_keys_is_a_warning_with_its_json_path() -> None:
    entry = book_entry()
    del entry["keys"]
    asset = load_asset(json.dumps(v2_card(character_book={"entries": [entry]})).encode())
    [d] = [d for d in asset.diagnostics if d.code == "ASSET_FIELD_MISSING"]
    assert d.path == "$.data.character_book.entries[0].keys"
    assert asset.model.character_book.entry_list[0].key == []


def test_card_without_name_is_rejected() -> None:
    raw = v2_card()
    del raw["data"]["name"]
    with pytest.raises(TemplateError) as info:
        load_asset(json.dumps(raw).encode(), kind="card")
    assert (info.value.code, info.value.path) == ("ASSET_FIELD_MISSING", "$.data.name")


def test_data_of_wrong_type_is_rejected() -> None:
    with pytest.raises(TemplateError) as info:
        load_asset(json.dumps({"spec": "chara_card_v2", "data": []}).encode())
    assert (info.value.code, info.value.path) == ("ASSET_INVALID", "$.data")


def test_wrong_greeting_type_is_rejected_with_index() -> None:
    with pytest.raises(TemplateError) as info:
        load_asset(json.dumps(v2_card(alternate_greetings=["ok", {"text": "no"}])).encode())
    assert (info.value.code, info.value.path) == ("ASSET_INVALID", "$.data.alternate_greetings[1]")


def test_depth_prompt_with_empty_depth_reads_as_default() -> None:
    raw = v2_card(extensions={"depth_prompt": {"prompt": "", "depth": ""}})
    asset = load_asset(json.dumps(raw).encode())
    [d] = asset.diagnostics
    assert (d.code, d.path) == ("ASSET_VALUE_NORMALISED", "$.data.extensions.depth_prompt.depth")
    assert asset.model.depth_prompt.depth == 4
    assert asset.model.data.extensions["depth_prompt"]["depth"] == ""  # the card itself is untouched


def test_unknown_spec_warns() -> None:
    raw = v2_card()
    raw["spec"] = "chara_card_v9"
    asset = load_asset(json.dumps(raw).encode(), kind="card")
    assert [d.code for d in asset.diagnostics] == ["ASSET_SPEC_UNKNOWN"]


def test_png_card_prefers_ccv3_chunk() -> None:
    v3 = v2_card(name="From v3")
    v3["spec"] = "chara_card_v3"
    asset = load_asset(png_card({"chara": v2_card(name="From v2"), "ccv3": v3}))
    assert asset.kind == "card"
    assert asset.model.name == "From v3"
    assert (asset.encoding, asset.syntax) == ("png", "png:ccv3")


def test_png_card_with_only_chara_chunk() -> None:
    asset = load_asset(png_card({"chara": v2_card(character_book={"entries": [book_entry()]})}))
    assert asset.model.name == "Mira"
    assert asset.counts["book_entries"] == 1


def test_png_falls_back_to_chara_when_ccv3_is_broken() -> None:
    asset = load_asset(png_card({"chara": v2_card(), "ccv3": "!!not base64!!"}))
    assert asset.model.name == "Mira"
    assert any(d.code == "ASSET_PNG" and d.path == "$png.ccv3" for d in asset.diagnostics)


def test_png_without_card_chunk_is_rejected() -> None:
    with pytest.raises(TemplateError) as info:
        load_asset(png_card({"Comment": "hello"}))
    assert info.value.code == "ASSET_PNG"


def test_truncated_png_is_rejected_not_crashed() -> None:
    data = png_card({"chara": v2_card()})
    with pytest.raises(TemplateError) as info:
        read_png_card(data[:60])
    assert info.value.code == "ASSET_PNG"


def test_png_chunk_with_invalid_json_reports_json_error() -> None:
    bad = base64.b64encode(b'{"spec": "chara_card_v2", "data": {').decode()
    with pytest.raises(TemplateError) as info:
        load_asset(png_card({"chara": bad}))
    assert (info.value.code, info.value.path) == ("ASSET_JSON", "$png.chara")
    assert info.value.line == 1


def test_embedded_scripts_pass_through_untouched() -> None:
    script = "while(true){}" * 1000
    raw = v2_card(extensions={"tavern_helper": {"scripts": [{"content": script}]}, "regex_scripts": [{"replaceString": "<%= x %>"}]})
    card = load(copy.deepcopy(raw))
    assert card.data.extensions == raw["data"]["extensions"]


def test_numeric_spec_version_is_accepted_and_kept() -> None:
    raw = v2_card()
    raw["spec_version"] = 2
    card = load(raw)
    assert card.spec_version == 2
    assert card.model_dump(by_alias=True, exclude_unset=True) == raw
