"""Standalone world books: ST defaults, to_st_dict for world info, the list form, bad input with paths."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tavernbox.assets import ST_ENTRY_DEFAULTS, WorldBook, card_book_to_world_book, load_asset
from tavernbox.errors import TemplateError


def load_book(raw: dict[str, Any], name: str | None = "book") -> WorldBook:
    asset = load_asset(json.dumps(raw).encode(), name=name)
    assert asset.kind == "world_book"
    book: WorldBook = asset.model
    return book


def test_to_st_dict_fills_every_template_field_with_sillytavern_defaults() -> None:
    book = load_book({"entries": {"5": {"uid": 5, "key": ["a"], "content": "A"}}})
    entry = book.to_st_dict()["entries"]["5"]
    for field, default in ST_ENTRY_DEFAULTS.items():
        if field not in ("key", "content"):
            assert entry[field] == default, field
    assert (entry["uid"], entry["key"], entry["content"]) == (5, ["a"], "A")
    assert "displayIndex" not in entry


def test_entries_keep_file_order_and_unknown_fields_round_trip() -> None:
    raw = {
        "entries": {
            "10": {"uid": 10, "key": ["x"], "content": "X", "order": 5, "extensions": {"vendor": [1, 2]}, "myFlag": True},
            "2": {"uid": 2, "key": [], "constant": True, "content": "C", "displayIndex": 0},
        },
        "originalData": {"entries": []},
    }
    book = load_book(raw)
    assert list(book.entries) == ["10", "2"]
    assert book.model_dump(by_alias=True, exclude_unset=True) == raw
    st = book.to_st_dict()
    assert st["originalData"] == {"entries": []}
    assert st["entries"]["10"]["myFlag"] is True and st["entries"]["10"]["extensions"] == {"vendor": [1, 2]}
    assert st["entries"]["2"]["displayIndex"] == 0


def test_snake_case_attributes_alias_sillytavern_names() -> None:
    book = load_book({"entries": {"0": {"uid": 0, "excludeRecursion": True, "matchWholeWords": False,
                                        "characterFilter": {"isExclude": True, "names": ["a.png"]}}}})
    e = book.entry_list[0]
    assert e.exclude_recursion is True and e.match_whole_words is False
    assert e.character_filter.is_exclude is True and e.character_filter.names == ["a.png"]


def test_null_in_a_defaulted_field_reads_as_the_default_with_path() -> None:
    asset = load_asset(json.dumps({"entries": {"0": {"uid": 0, "order": None, "key": None}}}).encode())
    codes = {(d.code, d.path) for d in asset.diagnostics}
    assert ("ASSET_VALUE_NORMALISED", "$.entries.0.order") in codes
    assert ("ASSET_VALUE_NORMALISED", "$.entries.0.key") in codes
    e = asset.model.entry_list[0]
    assert (e.order, e.key) == (0, [])  # a null order sorts as 0 in SillyTavern's arithmetic


def test_null_role_is_kept_because_sillytavern_reads_it_as_system() -> None:
    book = load_book({"entries": {"0": {"uid": 0, "role": None}}})
    assert book.entry_list[0].role is None
    assert book.to_st_dict()["entries"]["0"]["role"] is None


def test_uid_mismatch_and_missing_uid_are_reported() -> None:
    asset = load_asset(json.dumps({"entries": {"3": {"uid": 4}, "7": {"content": "no uid"}}}).encode())
    found = {(d.code, d.path) for d in asset.diagnostics}
    assert ("ASSET_UID_MISMATCH", "$.entries.3.uid") in found
    assert ("ASSET_FIELD_MISSING", "$.entries.7.uid") in found
    assert asset.model.entries["7"].uid == 7


def test_wrong_field_type_is_rejected_with_path() -> None:
    with pytest.raises(TemplateError) as info:
        load_asset(json.dumps({"entries": {"0": {"uid": 0}, "1": {"uid": 1, "key": "dragon"}}}).encode())
    assert (info.value.code, info.value.path) == ("ASSET_INVALID", "$.entries.1.key")


def test_wrong_bool_type_is_rejected_with_path() -> None:
    with pytest.raises(TemplateError) as info:
        load_asset(json.dumps({"entries": {"0": {"uid": 0, "constant": {"yes": 1}}}}).encode())
    assert (info.value.code, info.value.path) == ("ASSET_INVALID", "$.entries.0.constant")


def test_entry_that_is_not_an_object_is_rejected() -> None:
    with pytest.raises(TemplateError) as info:
        load_asset(json.dumps({"entries": {"0": "text"}}).encode(), kind="world_book")
    assert (info.value.code, info.value.path) == ("ASSET_INVALID", "$.entries.0")


def test_missing_entries_is_rejected_when_kind_forced() -> None:
    with pytest.raises(TemplateError) as info:
        load_asset(b'{"name": "x"}', kind="world_book")
    assert (info.value.code, info.value.path) == ("ASSET_FIELD_MISSING", "$.entries")


def test_odd_keys_get_bracketed_paths() -> None:
    with pytest.raises(TemplateError) as info:
        load_asset(json.dumps({"entries": {"a b": {"uid": "a b", "depth": "deep"}}}).encode())
    assert info.value.path == '$.entries["a b"].depth'


def test_list_form_book_is_converted_with_an_info_diagnostic() -> None:
    raw = {"name": "Lore", "entries": [{"id": 1, "keys": ["k"], "content": "c", "enabled": True, "insertion_order": 9}]}
    asset = load_asset(json.dumps(raw).encode(), name="file-stem")
    assert asset.kind == "world_book"
    assert asset.name == "Lore"
    assert [d.code for d in asset.diagnostics] == ["ASSET_CONVERTED"]
    e = asset.model.entries["1"]
    assert (e.key, e.order, e.disable, e.position) == (["k"], 9, False, 1)


def test_card_book_to_world_book_accepts_a_plain_dict() -> None:
    book = card_book_to_world_book({"entries": [{"keys": ["a"], "content": "A", "enabled": False, "secondary_keys": ["b"]}]}, name="N")
    assert book.name == "N"
    st = book.to_st_dict()["entries"]["0"]
    assert (st["key"], st["keysecondary"], st["disable"], st["selective"], st["displayIndex"]) == (["a"], ["b"], True, False, 0)


def test_card_book_to_world_book_rejects_bad_entries_with_path() -> None:
    with pytest.raises(TemplateError) as info:
        card_book_to_world_book({"entries": [{"keys": ["a"], "content": "A", "enabled": True, "extensions": {"depth": "x"}}]})
    assert (info.value.code, info.value.path) == ("ASSET_INVALID", "$.entries[0].extensions.depth")


def test_converted_field_errors_point_at_the_card_book_field() -> None:
    entries = [{"keys": ["a"], "content": "A", "enabled": True, "extensions": {"match_whole_words": "yes please", "triggers": "normal"}}]
    with pytest.raises(TemplateError) as info:
        card_book_to_world_book({"entries": entries})
    assert info.value.path == "$.entries[0].extensions.match_whole_words"
    entries[0]["extensions"] = {"position": "top"}
    with pytest.raises(TemplateError) as info:
        card_book_to_world_book({"entries": entries})
    assert info.value.path == "$.entries[0].extensions.position"


def test_book_name_comes_from_the_file_stem(tmp_path: Any) -> None:
    path = tmp_path / "My Lore.json"
    path.write_text(json.dumps({"entries": {}}), encoding="utf-8")
    asset = load_asset(path)
    assert asset.name == "My Lore" and asset.model.name == "My Lore"
    assert asset.counts == {"entries": 0, "constant": 0, "disabled": 0, "with_keys": 0}


def test_huge_order_is_kept_and_flagged_in_books_and_card_books() -> None:
    asset = load_asset(json.dumps({"entries": {"0": {"uid": 0, "order": 2**60 + 1}}}).encode())
    [d] = asset.diagnostics
    assert (d.code, d.path) == ("ASSET_NUMBER_UNSAFE", "$.entries.0.order")
    assert asset.model.entry_list[0].order == 2**60 + 1
    card = {"spec": "chara_card_v2", "data": {"name": "N", "character_book": {"entries": [
        {"keys": [], "content": "", "enabled": True, "insertion_order": 10**18}]}}}
    [d] = load_asset(json.dumps(card).encode()).diagnostics
    assert (d.code, d.path) == ("ASSET_NUMBER_UNSAFE", "$.data.character_book.entries[0].insertion_order")


def test_duplicate_uids_in_a_standalone_book_are_reported() -> None:
    asset = load_asset(json.dumps({"entries": {"1": {"uid": 1}, "2": {"uid": 1}}}).encode())
    found = [(d.code, d.path) for d in asset.diagnostics]
    assert ("ASSET_UID_MISMATCH", "$.entries.2.uid") in found
    assert ("ASSET_DUPLICATE_ID", "$.entries.2.uid") in found
    assert list(asset.model.entries) == ["1", "2"]  # both kept under their own keys
