"""One table of SillyTavern's world-info fields (``world_info_fields.py``): every model built from it agrees.

The world-file model, SillyTavern's new-entry template, activation's name map, the settings'
names and the request's ``world_info`` object are built from the table. The two typed classes
that declare their attributes for the type checker (activation's ``Entry`` and
``WorldInfoSettings``) are held to it here: a row added or changed without them fails.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from pydantic.alias_generators import to_camel

from tavernbox.assets.worldbooks import ST_ENTRY_DEFAULTS, WorldInfoEntry
from tavernbox.errors import TemplateError
from tavernbox.sillytavern.request import WorldInfoOptions, parse_request
from tavernbox.world_info_fields import ENTRY_FIELDS, ENTRY_KINDS, NO_DEFAULT, SETTING_FIELDS
from tavernbox.worldinfo.entries import _SPECS, CharacterFilter, Entry, normalize_entry
from tavernbox.worldinfo.settings import WorldInfoSettings

#: Entry attributes that are not world-file fields (where the entry comes from, what is derived)
_ENTRY_OWN = {"book", "decorators", "hash", "path"}


def _activation_default(row: Any) -> Any:
    """What activation holds for an absent field: the template value in activation's types."""
    if row.kind == "strings":
        return tuple(row.st_default)
    if row.kind == "filter":
        return CharacterFilter()
    if row.kind == "int" and row.st_default is None:
        return 0  # no timed effect
    return row.st_default


def test_every_row_is_well_formed() -> None:
    assert len({f.st_name for f in ENTRY_FIELDS}) == len({f.attr for f in ENTRY_FIELDS}) == len(ENTRY_FIELDS)
    for f in ENTRY_FIELDS:
        assert f.kind in ENTRY_KINDS, f
        # the card book's extensions spell a field as its attribute; SillyTavern's name is its camel case
        assert f.st_name == to_camel(f.attr), f
    assert len({f.st_name for f in SETTING_FIELDS}) == len(SETTING_FIELDS)
    for s in SETTING_FIELDS:
        assert isinstance(s.default, s.kind) or (s.kind is float and isinstance(s.default, int)), s


def test_activation_entries_declare_exactly_the_rows_activation_reads() -> None:
    fields = {f.name: f.default for f in dataclasses.fields(Entry)}
    read = [f for f in ENTRY_FIELDS if f.activation]
    assert set(fields) - _ENTRY_OWN == {f.attr for f in read}
    for row in read:
        if row.kind != "uid":
            assert fields[row.attr] == _activation_default(row), row
    assert set(_SPECS) == {f.st_name for f in read} - {"uid", "content", "characterFilter"}


def test_the_world_file_model_and_template_follow_the_rows() -> None:
    assert list(WorldInfoEntry.model_fields) == [f.attr for f in ENTRY_FIELDS]
    assert {name: info.alias for name, info in WorldInfoEntry.model_fields.items()} == \
        {f.attr: f.st_name for f in ENTRY_FIELDS}
    assert ST_ENTRY_DEFAULTS == {f.st_name: f.st_default for f in ENTRY_FIELDS if f.st_default is not NO_DEFAULT}
    entry = WorldInfoEntry.model_validate({"uid": 7})
    dumped = entry.to_st_dict()
    assert dumped == {"uid": 7, **ST_ENTRY_DEFAULTS}  # every template field filled, displayIndex left out
    # a nullable field keeps null; a template field whose default is not null takes it back from null
    assert WorldInfoEntry.model_validate({"uid": 1, "role": None}).role is None
    with pytest.raises(Exception, match="probability"):
        WorldInfoEntry.model_validate({"uid": 1, "probability": "lots"})


def test_template_values_read_by_activation_are_the_defaults() -> None:
    """An entry written with every template value reads as one that sets none of them."""
    full = normalize_entry({"uid": 3, **ST_ENTRY_DEFAULTS}, "b", 3, "$.entries.3", [])
    bare = normalize_entry({"uid": 3}, "b", 3, "$.entries.3", [])
    assert full is not None and bare is not None
    assert {f.name: getattr(full, f.name) for f in dataclasses.fields(Entry) if f.name != "path"} == \
        {f.name: getattr(bare, f.name) for f in dataclasses.fields(Entry) if f.name != "path"}


def test_settings_and_the_request_follow_the_rows() -> None:
    declared = {f.name: f.default for f in dataclasses.fields(WorldInfoSettings)}
    assert declared == {s.attr: s.default for s in SETTING_FIELDS if s.scan}
    assert WorldInfoSettings._FIELDS == {s.st_name: (s.attr, s.kind) for s in SETTING_FIELDS if s.scan}
    options = WorldInfoOptions()
    assert options.model_dump() == {s.st_name: s.default for s in SETTING_FIELDS if s.request}
    # the request reads what the scan reads, by the same names
    settings = WorldInfoSettings.from_mapping(options.model_dump())
    assert settings == WorldInfoSettings()


@pytest.mark.parametrize(("name", "value"), [("world_info_depth", 1001), ("world_info_budget", -1),
                                             ("world_info_character_strategy", 3), ("world_info_min_activations", -2)])
def test_a_request_enforces_the_rows_bounds(name: str, value: Any) -> None:
    with pytest.raises(TemplateError) as caught:
        parse_request({"preset": {}, "chat": {"messages": []}, "world_info": {name: value}})
    assert caught.value.code == "REQUEST_INVALID" and name in (caught.value.path or "")
