"""A raw book (the dicts a host loaded) is found again by its content, whichever digest finds it.

``activation._normalized_books`` looks a book up by the digest of ``marshal``'s current encoding
first (fast, but it marks shared objects, so the same content held with other sharing gives other
bytes) and then by version 2's (no back-references: equal content, equal bytes). Equal bytes of
either always mean equal content, so a hit is never another book.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from tavernbox.shortcuts import Shortcuts
from tavernbox.worldinfo import activate_world_info
from tavernbox.worldinfo import activation as activation_module

BOOK = {"entries": {str(uid): {"uid": uid, "key": [f"k{uid}", "shared"], "content": f"entry {uid} k{uid + 1}",
                               "order": uid} for uid in range(30)}}
CHAT = ["we talk of k3 and more"]


@pytest.fixture
def normalized(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Every book actually normalised (a cache miss), with an empty cache to start from."""
    monkeypatch.setattr(activation_module, "_NORMALIZED_CACHE", {})
    calls: list[Any] = []
    real = activation_module.normalize_books

    def counting(books: Any) -> Any:
        calls.append(books)
        return real(books)

    monkeypatch.setattr(activation_module, "normalize_books", counting)
    return calls


def test_fresh_parses_of_one_text_are_normalised_once(normalized: list[Any]) -> None:
    text = json.dumps(BOOK)
    results = [activate_world_info(json.loads(text), CHAT).trace.to_list() for _ in range(3)]
    assert len(normalized) == 1
    assert results[0] == results[1] == results[2]


def test_the_same_content_held_with_other_sharing_is_found_too(normalized: list[Any]) -> None:
    parsed = json.loads(json.dumps(BOOK))
    activate_world_info(parsed, CHAT)
    # no shared key strings, and one list object used by two entries: other back-references
    rebuilt = {"entries": {"".join(k): {"".join(f): copy.deepcopy(v) for f, v in e.items()}
                           for k, e in parsed["entries"].items()}}
    rebuilt["entries"]["1"]["key"] = rebuilt["entries"]["2"]["key"] = ["k2", "shared"]
    parsed["entries"]["1"]["key"] = ["k2", "shared"]
    assert activate_world_info(rebuilt, CHAT).trace.to_list() == activate_world_info(parsed, CHAT).trace.to_list()
    assert len(normalized) == 2  # the original, then the changed content once (both sharings found it)
    quick = activation_module.marshal.version
    assert activation_module._digest(rebuilt, quick) != activation_module._digest(parsed, quick)  # other bytes
    assert activation_module._digest(rebuilt, 2) == activation_module._digest(parsed, 2)
    assert normalized[1] is rebuilt  # the changed content missed the first book's digests


def test_values_equal_in_python_but_of_other_types_are_other_books(normalized: list[Any]) -> None:
    for value in (1, True, 1.0, "1"):
        book = {"entries": {"0": {"uid": 0, "key": ["k"], "content": "c", "constant": value}}}
        activate_world_info(book, CHAT)
        activate_world_info(json.loads(json.dumps(book)), CHAT)
    assert [b["entries"]["0"]["constant"] for b in normalized] == [1, True, 1.0, "1"]
    assert [type(b["entries"]["0"]["constant"]) for b in normalized] == [int, bool, float, str]


def test_without_the_quick_digest_the_activation_is_the_same(monkeypatch: pytest.MonkeyPatch,
                                                             normalized: list[Any]) -> None:
    quick = activate_world_info(json.loads(json.dumps(BOOK)), CHAT)
    monkeypatch.setattr(activation_module, "_NORMALIZED_CACHE", {})
    plain = activate_world_info(json.loads(json.dumps(BOOK)), CHAT, shortcuts=Shortcuts(wi_quick_digest=False))
    assert quick.uids == plain.uids and quick.trace.to_list() == plain.trace.to_list()
    assert quick.by_position.to_json() == plain.by_position.to_json()
