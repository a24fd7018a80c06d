"""Budgets that skip counting while UTF-8 bytes bound the tokens give exactly the counted decisions.

A token of the shipped tokenizers is at least one UTF-8 byte (``AT_MOST_UTF8_BYTES``), so while the
activated text's bytes stay under the world-info budget no count can reach it, and the tokenizer is
neither run nor loaded. These tests put the budget on every side of the overflow point and compare
each activation with the same counter stripped of its promise (which counts every time).
"""

from __future__ import annotations

from typing import Any

import pytest

from tavernbox.tokenizers import AT_MOST_UTF8_BYTES, at_most_utf8_bytes, get_tokenizer
from tavernbox.worldinfo import activate_world_info, to_json

# multi-byte text (Vietnamese, CJK, emoji) makes bytes, characters and tokens all differ
IGNORES = "Ignores the budget: 龍"
TEXTS = ["Đế quốc La Mã Thần Thánh hùng mạnh, kinh đô ở phía tây.", "king walks to the gate " * 6,
         "龍が空を飛ぶ。 🐉🐉 dragon", "a b c d e f g h i j k l dragon", "Short."]


def _books() -> list[dict[str, Any]]:
    entries = [{"uid": i, "key": ["king"] if i != 3 else ["dragon"], "content": t, "order": 100 - i}
               for i, t in enumerate(TEXTS)]
    entries.append({"uid": 9, "key": ["dragon"], "content": IGNORES, "ignoreBudget": True})
    return [{"name": "b", "entries": entries}]


class Spy:
    """A counter that records each text it counts, with or without the bytes promise."""

    def __init__(self, count: Any, promise: bool) -> None:
        self._count, self.calls = count, 0
        if promise:
            setattr(self, AT_MOST_UTF8_BYTES, True)

    def __call__(self, text: str) -> int:
        self.calls += 1
        return int(self._count(text))


@pytest.mark.parametrize("tokenizer", ["o200k", "cl100k", "words", "estimate"])
def test_activation_with_the_bytes_bound_equals_counting_at_every_budget(tokenizer: str) -> None:
    count = get_tokenizer(tokenizer).count
    total_bytes = sum(len(t.encode()) + 1 for t in [*TEXTS, IGNORES])
    for budget in range(1, total_bytes + 40, 3):
        settings = {"world_info_budget": 100, "max_context": budget, "world_info_depth": 2,
                    "world_info_recursive": True}
        bounded, plain = Spy(count, True), Spy(count, False)
        fast = activate_world_info(_books(), ["the king walks"], settings, token_counter=bounded)
        slow = activate_world_info(_books(), ["the king walks"], settings, token_counter=plain)
        assert to_json(fast) == to_json(slow), budget
        assert bounded.calls <= plain.calls
        if budget > total_bytes:  # nothing the entries hold could reach it: never counted
            assert bounded.calls == 0 and plain.calls > 0


def test_the_first_count_comes_when_the_bytes_reach_the_budget() -> None:
    count = get_tokenizer("o200k").count
    text = "king " * 50  # 250 bytes (251 with its line break), 51 tokens
    books = [{"name": "b", "entries": [{"uid": 1, "key": ["king"], "content": text}]}]
    spy = Spy(count, True)
    a = activate_world_info(books, ["king"], {"world_info_budget": 100, "max_context": 252}, token_counter=spy)
    assert spy.calls == 0 and a.uids == [1]
    spy = Spy(count, True)
    a = activate_world_info(books, ["king"], {"world_info_budget": 100, "max_context": 251}, token_counter=spy)
    assert spy.calls > 0 and a.uids == [1]  # the 251 bytes reach it: counted, 51 tokens fit
    a = activate_world_info(books, ["king"], {"world_info_budget": 100, "max_context": 51}, token_counter=spy)
    assert a.uids == []  # counted, and the count reaches it


def test_the_shipped_tokenizers_promise_and_keep_it() -> None:
    for name in ("o200k", "cl100k", "words", "estimate"):
        tok = get_tokenizer(name)
        assert at_most_utf8_bytes(tok), name
        for text in [*TEXTS, "\ud800 lone surrogate", "x", " \n\t ", "🐉" * 9]:
            assert tok.count(text) <= len(text.encode("utf-8", "surrogatepass")), (name, text)
    assert not at_most_utf8_bytes(len)  # a counter without the attribute is always counted


def test_a_registered_tokenizer_without_the_promise_is_always_counted() -> None:
    from tavernbox.sillytavern.lore import _wi_counter
    from tavernbox.tokenizers import register_tokenizer

    calls: list[str] = []

    class Chars:
        name = "test-chars-x2"

        def count(self, text: str) -> int:
            calls.append(text)
            return 2 * len(text.encode())  # more tokens than bytes: a bound by bytes would be wrong

    register_tokenizer("test-chars-x2", Chars())
    counter = _wi_counter("test-chars-x2")
    assert not at_most_utf8_bytes(counter)
    books = [{"name": "b", "entries": [{"uid": 1, "key": ["king"], "content": "king " * 10}]}]
    a = activate_world_info(books, ["king"], {"world_info_budget": 100, "max_context": 80}, token_counter=counter)
    assert calls and a.uids == []  # 100 "tokens" reach 80, though the text has only 50 bytes


def _fits_by_bytes(messages: list[dict[str, Any]], budget: int) -> bool:
    """The plain rule: every message's UTF-8 bytes, role, 4 and its name's bytes + 1, plus 3."""
    total = 3
    for m in messages:
        total += len(str(m.get("content") or "").encode("utf-8", "surrogatepass")) + len(m["role"]) + 4
        if m.get("name"):
            total += len(m["name"].encode("utf-8", "surrogatepass")) + 1
    return total <= budget


@pytest.mark.parametrize("text", ["plain ascii", "Tiếng Việt có dấu", "龍が空を飛ぶ", "🐉 astral 🐉", "\ud800x"])
def test_fits_without_counting_equals_the_byte_rule_at_every_budget(text: str) -> None:
    from tavernbox.sillytavern.budget import fits_without_counting

    messages = [{"role": "system", "content": text * 3}, {"role": "user", "content": text, "name": text[:4]},
                {"role": "assistant", "content": ""}, {"role": "user", "content": None}]
    limit = 3 + sum(4 * len(str(m.get("content") or "")) + len(m["role"]) + 4 for m in messages) + 40
    for budget in range(0, limit):
        assert fits_without_counting(messages, budget) == _fits_by_bytes(messages, budget), budget
