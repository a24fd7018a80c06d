"""``js_yaml.yaml_stringify`` writes what the real ``yaml`` package writes (Tavern Helper's variable macros).

The differential test runs ``tests/oracle/yaml_stringify.js`` (``npm ci --prefix tests/oracle``) over fixed and
generated values; without node or the package it is skipped, except under CI.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
from pathlib import Path

import pytest

from tavernbox.macros.js_yaml import js_ordered, yaml_stringify

ORACLE = Path(__file__).parent / "oracle"

FIXED = [
    None, True, 0, -0.5, 1e21, 1.5e-7, 2**60, "", "plain", "true", "12", "0x1F", "1e3", ".inf", "~", "null", "- a",
    "a: b", "a #b", "#x", "x:", " lead", "trail ", "it's", 'say "hi"', "both ' and \"", "line one\nline two",
    "ends\n", "two\n\n", "\nstarts", "  indented\nmore", "tab\there", "\x00nul", "bell\x07", "del\x7f", "nbsp\xa0x",
    "emoji 🙂 " * 12, "中文" * 50, "word " * 30, "a" * 100, "---", "--- doc", "...", "%x", "multi\n---\nmarker",
    "x\n \ny", "lone \ud800 surrogate", [], {}, [[]], [{}], {"a": []}, {"a": {}}, {"2": "b", "1": "a", "x": 0},
    {"hp": 80, "bag": ["rope", "lamp"], "mood": {"now": "calm", "$meta": 1}, "note": "line one\nline two"},
    {"k": [1, {"deep": True}], "s": "x: y"}, [["a", "b"], ["c"]], [{"a": 1, "b": [2, 3]}],
    {"long key " * 10: "long value " * 12}, {"k" * 1100: 1}, {"multi\nkey": 1}, {"": ""},
    {"Chế Độ": "Chế Độ Kinh Điển " * 8}, {"a": "b" * 90}, {"a": "word " * 20 + "end"},
    "x " + "y" * 90, {"q": "'" + "z " * 50}, {"d": '"' + "q " * 50 + "\n" + "w " * 30},
]

_ALPHABET = ["a", "b", " ", "  ", "\n", "\t", ":", "#", "-", "'", '"', "中", "é", "🙂", "1", ".", "[", "{", "%", "|",
             "\\", "\x01", "x" * 30, "word ", "long sentence with spaces "]


def _text(rng: random.Random) -> str:
    return "".join(rng.choice(_ALPHABET) for _ in range(rng.randrange(0, 12)))


def _value(rng: random.Random, depth: int = 0) -> object:
    kind = rng.randrange(9 if depth < 3 else 5)
    if kind == 0:
        return rng.choice([None, True, False, rng.randrange(-100, 10**6), rng.uniform(-1e3, 1e3)])
    if kind < 5:
        return _text(rng)
    if kind < 7:
        return [_value(rng, depth + 1) for _ in range(rng.randrange(0, 4))]
    return {_text(rng) or str(rng.randrange(20)): _value(rng, depth + 1) for _ in range(rng.randrange(0, 4))}


def _oracle(values: list[object]) -> list[str]:
    node = shutil.which("node")
    if node is None or not (ORACLE / "node_modules" / "yaml").is_dir():
        if os.environ.get("CI") == "true":
            pytest.fail("node and tests/oracle's yaml package are needed under CI")
        pytest.skip("node or tests/oracle/node_modules/yaml absent (npm ci --prefix tests/oracle)")
    stdin = "\n".join(json.dumps(v, ensure_ascii=True) for v in values) + "\n"
    out = subprocess.run([node, str(ORACLE / "yaml_stringify.js")], input=stdin, capture_output=True, text=True,
                         check=True, timeout=120)
    return [json.loads(line) for line in out.stdout.splitlines()]


def test_fixed_values_equal_the_package() -> None:
    expected = _oracle(FIXED)
    for value, want in zip(FIXED, expected, strict=True):
        assert yaml_stringify(value) == want, repr(value)


def test_generated_values_equal_the_package() -> None:
    rng = random.Random(26)
    values = [_value(rng) for _ in range(600)]
    expected = _oracle(values)
    bad = [(v, want, yaml_stringify(v)) for v, want in zip(values, expected, strict=True) if yaml_stringify(v) != want]
    assert not bad, bad[:3]


def test_object_keys_take_javascripts_order() -> None:
    assert list(js_ordered({"b": 1, "10": 2, "2": 3, "a": {"1": 0, "0": 0}})) == ["2", "10", "b", "a"]
    assert yaml_stringify({"b": 1, "1": 2}) == "\"1\": 2\nb: 1\n"


def test_a_multiline_string_in_a_mapping_is_a_literal_block() -> None:
    assert yaml_stringify({"note": "line one\nline two"}) == "note: |-\n  line one\n  line two\n"
