"""Hostile input never crashes the importer: every failure is a TemplateError with an ASSET_ code."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tavernbox.assets import LoadedAsset, load_asset
from tavernbox.errors import TemplateError

KINDS = [None, "card", "world_book", "preset", "mvu"]

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-(2**70), max_value=2**70) | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=6), children, max_size=4),
    max_leaves=20,
)

SAMPLES: dict[str, dict[str, Any]] = {
    "card": {"spec": "chara_card_v2", "data": {"name": "M", "extensions": {"depth_prompt": {"prompt": "p", "depth": 2}},
             "character_book": {"entries": [{"id": 1, "keys": ["k"], "content": "c", "enabled": True, "extensions": {"depth": 1}}]}}},
    "world_book": {"entries": {"0": {"uid": 0, "key": ["k"], "content": "c", "characterFilter": {"names": []}}}},
    "preset": {"prompts": [{"identifier": "main", "role": "system", "injection_order": 1}],
               "prompt_order": [{"character_id": 100001, "order": [{"identifier": "main", "enabled": True}]}]},
    "mvu": {"stat_data": {"$meta": {"extensible": True}, "hp": [1, "d"]}},
    "card_v1": {"name": "Old", "description": "d", "first_mes": "hi", "creatorcomment": "c", "tags": ["t"]},
    "book_list": {"name": "B", "entries": [{"keys": ["k"], "content": "c", "enabled": True, "position": "before_char"}]},
}
SAMPLE_KIND = {"card_v1": "card", "book_list": "world_book"}


def check(data: bytes, kind: str | None) -> None:
    try:
        result = load_asset(data, kind=kind)
    except TemplateError as exc:
        assert exc.code.startswith("ASSET_") or exc.code == "INPUT_INVALID", exc.code
        assert exc.message
        return
    assert isinstance(result, LoadedAsset)
    json.dumps(result.summary())


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(json_values, st.sampled_from(KINDS))
def test_any_json_value_loads_or_fails_cleanly(value: Any, kind: str | None) -> None:
    check(json.dumps(value).encode(), kind)


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix]
    if isinstance(value, dict):
        for k, v in value.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out += _paths(v, (*prefix, i))
    return out


@settings(max_examples=150, deadline=None)
@given(st.sampled_from(sorted(SAMPLES)), st.data(), json_values)
def test_any_field_replaced_by_any_value_fails_cleanly(kind: str, data: st.DataObject, replacement: Any) -> None:
    sample = json.loads(json.dumps(SAMPLES[kind]))
    path = data.draw(st.sampled_from(_paths(sample)[1:]))
    target = sample
    for part in path[:-1]:
        target = target[part]
    target[path[-1]] = replacement
    check(json.dumps(sample).encode(), data.draw(st.sampled_from([None, SAMPLE_KIND.get(kind, kind)])))


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=64), st.sampled_from(KINDS))
def test_arbitrary_bytes_fail_cleanly(data: bytes, kind: str | None) -> None:
    check(data, kind)


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("{}[]:,'\"- \n#abc1&*!|>@`%")), max_size=40), st.sampled_from(KINDS))
def test_yaml_and_json_punctuation_soup_fails_cleanly(text: str, kind: str | None) -> None:
    check(text.encode(), kind)


def test_load_asset_is_public_on_the_package() -> None:
    import tavernbox

    asset = tavernbox.load_asset(json.dumps(SAMPLES["world_book"]).encode())
    assert asset.kind == "world_book"
    assert "load_asset" in tavernbox.__all__


def test_integer_past_the_largest_double_is_flagged_as_infinity() -> None:
    asset = load_asset(b'{"entries": {"0": {"uid": 0, "order": ' + b"9" * 400 + b"}}}")
    [d] = asset.diagnostics
    assert d.code == "ASSET_NUMBER_UNSAFE" and "inf" in d.message and "(400 digits)" in d.message


def test_numbers_too_long_to_read_are_a_clear_json_error() -> None:
    for data, kind in ((b'{"entries": {"0": {"order": ' + b"9" * 5000 + b"}}}", None), (b"hp: " + b"9" * 5000, "mvu")):
        try:
            load_asset(data, kind=kind)
        except TemplateError as exc:
            assert exc.code == "ASSET_JSON" and "5000 digits" in exc.message
        else:
            raise AssertionError("accepted a 5000-digit number")


def _rejects(data: bytes, kind: str | None, needle: str) -> None:
    try:
        load_asset(data, kind=kind)
    except TemplateError as exc:
        assert exc.code == "ASSET_JSON" and needle in exc.message, exc.message
    else:
        raise AssertionError("accepted")


def test_deep_nesting_is_refused_not_a_recursion_error() -> None:
    _rejects(b"[" * 50_000 + b"]" * 50_000, None, "nested deeper than 256")
    _rejects(b'{"a":' * 300 + b"1" + b"}" * 300, "mvu", "nested deeper than 256")
    _rejects(b"a:\n" + b"".join(b" " * i + b"- \n" for i in range(1, 300)), "mvu", "nested deeper than 256")


def test_yaml_alias_bomb_is_refused() -> None:
    lines = [b'l0: &l0 ["x","x","x","x","x","x","x","x","x","x"]']
    for i in range(1, 8):
        lines.append(b"l%d: &l%d [" % (i, i) + b",".join([b"*l%d" % (i - 1)] * 10) + b"]")
    _rejects(b"\n".join(lines), "mvu", "aliases")
    _rejects(b"a: &a [1, *a]\n", "mvu", "nested deeper")  # a recursive alias


def test_yaml_aliases_within_budget_become_independent_copies() -> None:
    asset = load_asset(b"base: &b {hp: 1}\nme: *b\nyou: *b\n", kind="mvu")
    data = asset.model.stat_data
    assert data["me"] == data["you"] == {"hp": 1}
    assert data["me"] is not data["you"]
