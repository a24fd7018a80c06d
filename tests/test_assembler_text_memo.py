"""Answers kept per long text object: equal texts in other objects get the same answers."""

from __future__ import annotations

from tavernbox.assembler.identity import derived_id, text_hash, text_identity
from tavernbox.assembler.limits import json_size, string_json_size
from tavernbox.assembler.render import compose_text, RenderOutput
from tavernbox.assembler.text_memo import TextMemo


def _copy(text: str) -> str:
    return "".join(list(text))  # an equal string in another object


def test_a_memo_answers_by_object_and_computes_for_another_object() -> None:
    calls: list[str] = []
    memo = TextMemo(lambda t: calls.append(t) or len(t))
    text = "x" * 5000
    assert memo(text) == memo(text) == 5000 and len(calls) == 1
    other = _copy(text)
    assert other is not text and memo(other) == 5000 and len(calls) == 2


def test_a_memo_stays_within_its_characters() -> None:
    memo = TextMemo(len, max_entries=100, max_chars=10_000)
    texts = [str(i) * 2000 for i in range(10)]
    for t in texts:
        memo(t)
    assert memo._chars <= 10_000 and len(memo._items) <= 5


def test_long_text_identities_are_the_hashes_whatever_the_object() -> None:
    text = "Tiếng Việt " * 1000
    for key, role in (("k", "system"), ("k", "user"), ("other", "system")):
        expected = (text_hash(text, role), derived_id("text", key, text_hash(text, role)))
        assert text_identity(key, role, text) == expected
        assert text_identity(key, role, text) == expected  # kept
        assert text_identity(key, role, _copy(text)) == expected


def test_long_string_sizes_are_json_sizes() -> None:
    for text in ("Tiếng Việt \"quoted\"\n" * 400, "\ud800" + "a" * 5000, "🐉" * 3000):
        assert string_json_size(text) == string_json_size(_copy(text)) == json_size(text)


def test_a_long_text_with_reserved_characters_is_cleaned_each_time() -> None:
    dirty = ("Tiếng Việt " * 200) + "\ufdd0\ufdd1" + "tail"
    clean = dirty.replace("\ufdd0", "").replace("\ufdd1", "")
    for _ in range(2):
        out = compose_text(dirty, [], (), lambda t: RenderOutput(t), False)
        assert out.text == clean
    plain = "Tiếng Việt " * 200
    assert compose_text(plain, [], (), lambda t: RenderOutput(t), False).text == plain
