"""Byte limits at the boundary: logical ``max_profile_bytes`` and the physical projection ceiling."""

from __future__ import annotations

import json

import pytest
from _assembler_support import assemble, rule

from tavernbox import TemplateError
from tavernbox.assembler import Logical, project_system
from tavernbox.assembler.limits import DEFAULT_PROFILE_BYTES, MAX_PROFILE_BYTES, PROJECTION_MAX_BYTES, dumps, json_size

NATIVES = [rule("native-system"), rule("history"), rule("input")]


def test_serialisation_is_pinned() -> None:
    m = {"id": "a", "role": "user", "content": "é\n\"\u0001\ud800"}
    assert dumps(m) == '{"id":"a","role":"user","content":"é\\n\\"\\u0001\\ud800"}'
    assert json_size(m) == len(dumps(m).encode("utf-8"))


def test_logical_bytes_are_the_serialised_non_native_messages() -> None:
    r = assemble([*NATIVES, rule("custom", "c", text="héllo", role="user")])
    extra = [m for m in r.logical_messages if m["content"] == "héllo"]
    expected = len(json.dumps(extra, ensure_ascii=False, separators=(",", ":")).encode("utf-8"))
    assert r.logical_extra_bytes == expected


def test_profile_limit_accepts_equality_and_rejects_one_byte_more() -> None:
    rules = [*NATIVES, rule("custom", "c", text="x" * 1000, role="user")]
    charge = assemble(rules).logical_extra_bytes
    assert assemble(rules, max_profile_bytes=charge).logical_extra_bytes == charge
    with pytest.raises(TemplateError) as err:
        assemble(rules, max_profile_bytes=charge - 1)
    assert err.value.code == "ASSEMBLY_PROFILE_LIMIT"


def test_profile_limit_default_is_512_kib() -> None:
    assert DEFAULT_PROFILE_BYTES == 512 * 1024
    filler = "x" * (DEFAULT_PROFILE_BYTES - 200)
    assemble([*NATIVES, rule("custom", "c", text=filler, role="user")])
    with pytest.raises(TemplateError) as err:
        assemble([*NATIVES, rule("custom", "c", text=filler + "x" * 200, role="user")])
    assert err.value.code == "ASSEMBLY_PROFILE_LIMIT"


@pytest.mark.parametrize("value", [-1, 1.5, "2097152", None, True, float("nan"), float("inf"), MAX_PROFILE_BYTES + 1])
def test_invalid_profile_limits_are_refused(value: object) -> None:
    with pytest.raises(TemplateError) as err:
        assemble(NATIVES, max_profile_bytes=value)
    assert err.value.code == "ASSEMBLY_LIMIT_INVALID"


def _extra(size: int) -> Logical:
    """A non-native user message whose pinned JSON is exactly ``size`` bytes."""
    base = json_size({"id": "x", "role": "user", "content": ""})
    return Logical({"id": "x", "role": "user", "content": "a" * (size - base)}, False)


def test_projection_ceiling_is_two_mebibytes_even_with_a_larger_limit() -> None:
    exact = _extra(PROJECTION_MAX_BYTES)
    assert project_system([exact]).extra_bytes == PROJECTION_MAX_BYTES
    for limit in (PROJECTION_MAX_BYTES, PROJECTION_MAX_BYTES * 4, 2**62):
        with pytest.raises(TemplateError) as err:
            project_system([_extra(PROJECTION_MAX_BYTES + 1)], max_bytes=limit)
        assert err.value.code == "ASSEMBLY_PROJECTION_LIMIT"


def test_projection_limit_one_below_the_charge_fails() -> None:
    logical = [Logical({"id": "b", "role": "system", "content": "BASE"}, True),
               Logical({"id": "m", "role": "system", "content": "MAIN"}, False),
               Logical({"id": "u", "role": "user", "content": "U"}, True)]
    charge = project_system(logical).extra_bytes
    carrier = project_system(logical).messages[0]
    assert charge == json_size(carrier) - json_size(logical[0].message)
    assert project_system(logical, max_bytes=charge).extra_bytes == charge
    with pytest.raises(TemplateError):
        project_system(logical, max_bytes=charge - 1)


def test_unchanged_native_messages_cost_nothing() -> None:
    logical = [Logical({"id": "s", "role": "system", "content": "S"}, True),
               Logical({"id": "u", "role": "user", "content": "U"}, True)]
    assert project_system(logical, max_bytes=0).extra_bytes == 0


@pytest.mark.parametrize("value", [float("nan"), float("inf"), -1, 1.5, "2097152", None])
def test_invalid_projection_limits_are_refused(value: object) -> None:
    with pytest.raises(TemplateError) as err:
        project_system([], max_bytes=value)  # type: ignore[arg-type]
    assert err.value.code == "ASSEMBLY_LIMIT_INVALID"


def test_assembly_reports_both_charges() -> None:
    r = assemble([*NATIVES[:1], rule("custom", "m", text="M" * 500, role="system"), *NATIVES[1:],
                  rule("custom", "t", text="TAIL", role="system")])
    assert r.logical_extra_bytes > 0 and r.extra_bytes > r.logical_extra_bytes  # repeated snapshots cost more
    assert r.system_projection["max_bytes"] == PROJECTION_MAX_BYTES


def test_pinned_serialisation_escapes_lone_surrogates_and_sizes_agree() -> None:
    from tavernbox.assembler.limits import dumps, json_size

    value = {"a": "x\ud800y", "b": "é", "c": "plain"}
    assert dumps(value) == '{"a":"x\\ud800y","b":"é","c":"plain"}'
    assert json_size(value) == len(dumps(value).encode("utf-8")) == 37
    assert json_size({"a": "é"}) == len('{"a":"é"}'.encode()) and dumps(["ascii"]) == '["ascii"]'
