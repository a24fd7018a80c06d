"""The resolver context: read-only views frozen lazily, unchanged assets shared between requests."""

from __future__ import annotations

from types import MappingProxyType
from typing import Any

import pytest
from _assembler_support import assemble, rule, texts

from tavernbox import TemplateError
from tavernbox.assembler.registry import (
    ASSET_CACHE,
    MAX_ASSET_NESTING,
    FrozenMap,
    freeze,
    freeze_assets,
    memoized,
)
from tavernbox.assembler.sources import builtin_registry

NATIVES = [rule("native-system"), rule("history"), rule("input")]


def _nest(depth: int) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = [value]
    return value


def test_a_view_is_read_only_and_freezes_on_first_read() -> None:
    data = {"a": {"b": [1, {"c": 2}]}, "s": "x"}
    view = freeze(data)
    assert isinstance(view, FrozenMap) and view._frozen == {}  # nothing frozen until read
    inner = view["a"]
    assert isinstance(inner, FrozenMap) and view["a"] is inner  # one frozen object per key
    assert inner["b"] == (1, {"c": 2}) and isinstance(inner["b"][1], MappingProxyType)  # flat: the C view
    assert view.get("missing", 5) == 5 and "s" in view and len(view) == 2 and set(view) == {"a", "s"}
    with pytest.raises(TypeError):
        view["s"] = 1  # type: ignore[index]
    with pytest.raises(TypeError):
        inner["b"][1]["c"] = 3  # type: ignore[index]
    with pytest.raises(TypeError):
        del view["s"]  # type: ignore[attr-defined]
    assert view == {"a": {"b": (1, {"c": 2})}, "s": "x"} and view.copy()["s"] == "x"


def test_an_unchanged_asset_is_one_shared_view_and_a_changed_one_is_not() -> None:
    ASSET_CACHE.clear()
    book = [{"id": 1, "content": "A"}]
    first = freeze_assets({"world_info": book, "persona": {"name": "Ann"}})
    second = freeze_assets({"world_info": [{"id": 1, "content": "A"}], "persona": {"name": "Bo"}})
    assert second["world_info"] is first["world_info"]  # same JSON text: the same frozen value
    assert second["persona"]["name"] == "Bo" and first["persona"]["name"] == "Ann"
    book[0]["content"] = "changed by the caller"  # detached: the caller's later edits are not seen...
    assert first["world_info"][0]["content"] == "A"
    assert freeze_assets({"world_info": book})["world_info"][0]["content"] == "changed by the caller"  # ...until sent


def test_non_string_keys_are_renamed_as_json_does() -> None:
    assert dict(freeze_assets({1: "x", "y": {2: 3}})) == {"1": "x", "y": {"2": 3}}


def test_nesting_limit_is_exact() -> None:
    assert freeze_assets({"x": _nest(MAX_ASSET_NESTING - 1)})["x"] is not None  # the assets object is level 1
    with pytest.raises(RecursionError):
        freeze_assets({"x": _nest(MAX_ASSET_NESTING)})
    with pytest.raises(TemplateError) as err:
        assemble(NATIVES, assets={"x": _nest(MAX_ASSET_NESTING)})
    assert err.value.code == "ASSEMBLY_REQUEST_INVALID" and err.value.path == "$.assets"


def test_memoized_derives_once_per_view_and_plain_values_every_time() -> None:
    calls: list[int] = []
    view = freeze({"a": [1]})
    assert isinstance(view, FrozenMap)
    assert memoized(view, "k", lambda: calls.append(1) or "v") == "v"
    assert memoized(view, "k", lambda: calls.append(1) or "w") == "v"
    assert memoized({"a": 1}, "k", lambda: calls.append(1) or "z") == "z"
    assert len(calls) == 2


def test_sources_see_one_frozen_asset_across_requests_and_a_preset_is_parsed_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import tavernbox.assets.presets as presets
    from tavernbox.strategies import builtin_strategy, st_registry

    ASSET_CACHE.clear()
    seen: list[Any] = []
    reg = builtin_registry()
    reg.register({"id": "example.peek", "plugin_id": "example", "name": "peek",
                  "resolve": lambda c, r: seen.append(c["assets"]["big"]) or {"blocks": []}})
    for _ in range(2):
        assemble([*NATIVES, rule("example.peek", "p")], reg=reg, assets={"big": {"k": list(range(50))}})
    assert seen[0] is seen[1]

    parses: list[int] = []
    real = presets.parse_preset
    monkeypatch.setattr(presets, "parse_preset", lambda *a, **k: parses.append(1) or real(*a, **k))
    st = {"prompts": [{"identifier": "main", "name": "Main", "content": "Be {{char}}.", "role": "system"},
                      {"identifier": "chatHistory", "marker": True}],
          "prompt_order": [{"character_id": 100001, "order": [{"identifier": "main", "enabled": True},
                                                               {"identifier": "chatHistory", "enabled": True}]}]}
    from tavernbox.assembler import Assembler

    results = [Assembler(st_registry()).assemble({
        "preset": builtin_strategy("builtin-st"), "messages": [{"id": "u", "role": "user", "content": "hi"}],
        "input_ids": ["u"], "assets": {"st_preset": st, "character": {"name": "C"}}}) for _ in range(2)]
    assert texts(results[0]) == texts(results[1]) and "Be C." in texts(results[0])
    assert parses == [1]


def test_an_unchanged_source_output_is_validated_once_and_records_stay_independent(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import tavernbox.assembler.blocks as blocks

    blocks.VALIDATED_OUTPUTS.clear()
    checked: list[str] = []
    real = blocks._block
    monkeypatch.setattr(blocks, "_block", lambda raw, i, sid: checked.append(raw["id"]) or real(raw, i, sid))
    out = {"blocks": [{"type": "text", "id": "b1", "text": "one"}, {"type": "text", "id": "b2", "text": "two"}]}
    reg = builtin_registry()
    reg.register({"id": "example.same", "plugin_id": "example", "name": "same", "resolve": lambda c, r: out})
    first = assemble([*NATIVES, rule("example.same", "s")], reg=reg)
    second = assemble([*NATIVES, rule("example.same", "s")], reg=reg)
    assert [c for c in checked if c in ("b1", "b2")] == ["b1", "b2"]  # the second request reused them
    assert texts(first) == texts(second) and texts(first)[-2:] == ["one", "two"]
    outputs = [e["output"] for r in (first, second) for e in r.record["entries"] if e["rule"]["id"] == "s"]
    assert outputs[0] == outputs[1] and outputs[0] is not outputs[1]
    outputs[0]["blocks"].clear()  # a caller editing one record leaves the next one whole
    third = assemble([*NATIVES, rule("example.same", "s")], reg=reg)
    assert [e["output"] for e in third.record["entries"] if e["rule"]["id"] == "s"][0]["blocks"]


def test_an_invalid_output_fails_every_time() -> None:
    reg = builtin_registry()
    reg.register({"id": "example.bad", "plugin_id": "example", "name": "bad",
                  "resolve": lambda c, r: {"blocks": [{"type": "text", "id": "b", "text": 5}]}})
    for _ in range(2):
        with pytest.raises(TemplateError) as err:
            assemble([*NATIVES, rule("example.bad", "b")], reg=reg)
        assert err.value.code == "ASSEMBLY_SOURCE_OUTPUT_INVALID"


def test_the_asset_cache_is_bounded() -> None:
    from tavernbox.assembler.registry import _AssetCache, _MISSING

    cache = _AssetCache(max_entries=2, max_chars=40)
    for text in ("a" * 5, "b" * 5, "c" * 5):
        cache.put(text, text.upper())
    assert cache.get("a" * 5) is _MISSING and cache.get("c" * 5) == "CCCCC"  # least recently used out first
    cache.put("d" * 11, "D")  # over a quarter of the character budget: never kept
    assert cache.get("d" * 11) is _MISSING
