"""A regex key that begins with its literal is tried only where the literal occurs: the same answers.

``Shortcuts.wi_anchored_regex`` (on by default) hands QuickJS the places where the key's required
literal occurs and tries a sticky copy of the regex at each; the plain path searches from the
first place to the end of the text. These tests compare the two, for single searches and for
whole activations with recursion.
"""

from __future__ import annotations

import random
from typing import Any

import pytest

from tavernbox.shortcuts import Shortcuts
from tavernbox.worldinfo import activate_world_info
from tavernbox.worldinfo import matching as matching_module
from tavernbox.worldinfo.regexes import (fold_for_literal, js_regex_resume, js_regex_search, js_regex_search_at,
                                         parse_js_regex)

#: patterns that begin with their literal, with lookbehinds, anchors, flags and classes around it
_PATTERNS = ["/ash\\s+oak/i", "/ash/", "/ash(?<= ash)/", "/ash$/", "/ash\\b/i", "/ash(?=\\s)/u", "/ash[\\s\\S]*?elm/i",
             "/ash.{0,3}?Ivy/is", "/ash(?:oak|elm)?/g", "/ash(?!\\w)/iu", "/ashe?/m", "/ash\\B/"]
_PIECES = ["ash", " ash", "ASH", "aſh", "Ash oak", "ash\n", " oak", "elm", "Ivy", "\U0001f600", "é", "İ", "x", "ashash", "\n"]


def _places(rx: Any, text: str) -> list[int]:
    hay = fold_for_literal(text) if rx.ignore_case else text
    out, at = [], hay.find(rx.literal)
    while at >= 0:
        out.append(at)
        at = hay.find(rx.literal, at + 1)
    return out


@pytest.mark.parametrize("source", _PATTERNS)
def test_trying_the_literal_places_answers_as_the_whole_search(source: str) -> None:
    rx = parse_js_regex(source)
    assert rx is not None and rx.status == "ok" and rx.literal_at_start, source
    rnd = random.Random(source)
    found = missed = 0
    for _ in range(300):
        text = "".join(rnd.choice(_PIECES) for _ in range(rnd.randint(0, 12)))
        places = _places(rx, text)
        if not places:
            continue
        for first in range(min(len(places), 3)):
            plain = js_regex_search(rx, text, pos=places[first])
            assert js_regex_search_at(rx, text, places[first:]) == plain, (source, text, places[first:])
            found += plain
            missed += not plain
    assert found > 20 and (missed > 20 or source in ("/ash/", "/ashe?/m", "/ash(?:oak|elm)?/g"))


def _world(rnd: random.Random) -> tuple[dict[str, Any], list[str]]:
    words = ["ash", "oak", "elm", "fir", "Ivy"]
    entries = []
    for uid in range(16):
        a, b = rnd.sample(words, 2)
        key = rnd.choice([f"/{a}\\s+{b}/i", f"/{a}[\\s\\S]*{b}/", f"/{a}(?<=\\w){b}?/", f"/{a}\\b/i", a])
        entry: dict[str, Any] = {"uid": uid, "key": [key], "content": " ".join(rnd.sample(words, 2)) + f" {a}{b}",
                                 "order": rnd.randint(1, 9)}
        if rnd.random() < 0.3:
            entry["keysecondary"] = [rnd.choice([f"/{b}\\s/", f"/{b}.{a}/i", b])]
            entry["selectiveLogic"] = rnd.randint(0, 3)
        entries.append(entry)
    chat = [" ".join(rnd.choice(words) for _ in range(rnd.randint(1, 4))) for _ in range(3)]
    return {"entries": entries}, chat


def test_activations_with_anchored_regex_keys_equal_the_plain_search() -> None:
    rnd = random.Random(29)
    passes = 0
    for _ in range(60):
        book, chat = _world(rnd)
        conf = {"world_info_depth": rnd.randint(1, 3), "world_info_budget": 100, "max_context": 1000,
                "world_info_recursive": True}
        fast = activate_world_info(book, chat, conf)
        plain = activate_world_info(book, chat, conf, shortcuts=Shortcuts(wi_anchored_regex=False))
        assert fast.uids == plain.uids
        assert fast.trace.to_list() == plain.trace.to_list()
        passes += len(fast.trace.steps)
    assert passes > 60  # recursion passes happened


def test_a_literal_found_too_often_takes_the_plain_search(monkeypatch: pytest.MonkeyPatch) -> None:
    """Past ``MAX_ANCHORS`` places the whole search runs (one engine call, however many places)."""
    calls: list[str] = []
    monkeypatch.setattr(matching_module, "js_regex_search_at",
                        lambda *a, **k: calls.append("at") or js_regex_search_at(*a, **k))
    monkeypatch.setattr(matching_module, "js_regex_resume",
                        lambda *a, **k: calls.append("plain") or js_regex_resume(*a, **k))
    book = {"entries": [{"uid": 0, "key": ["/ab\\s+z/"], "content": "x"}]}
    few = activate_world_info(book, ["ab " * 3], {"world_info_recursive": False})
    many = activate_world_info(book, ["ab " * (matching_module.MAX_ANCHORS + 1) + "z"],
                               {"world_info_recursive": False})
    assert few.uids == [] and many.uids == [0]
    assert calls == ["at", "plain"]


def test_a_catastrophic_key_tried_at_its_places_is_still_refused_on_time(monkeypatch: pytest.MonkeyPatch) -> None:
    """The places share one search's time limit: a pattern that backtracks without end at its literal stops."""
    import time

    tried: list[int] = []
    monkeypatch.setattr(matching_module, "js_regex_search_at",
                        lambda rx, text, starts, timeout: tried.append(len(starts))
                        or js_regex_search_at(rx, text, starts, timeout))
    book = {"entries": {"0": {"uid": 0, "key": ["/zzzz(a|aa)+b/"], "content": "boom"},
                        "1": {"uid": 1, "key": ["dragon"], "content": "fires"}}}
    start = time.perf_counter()
    act = activate_world_info(book, [("zzzz" + "a" * 80 + " ") * 3, "a dragon"], {}, regex_timeout=0.1)
    assert time.perf_counter() - start < 5.0
    assert tried == [3]  # the three places, in one engine call
    assert act.uids == [1]
    [record] = [r for r in act.trace.to_list() if r["uid"] == 0]
    assert "refused: the search took longer than 0.1 s" in record["detail"]
    # the next activation is unaffected
    assert activate_world_info({"entries": [{"uid": 0, "key": ["/zzzz\\s/"], "content": "x"}]}, ["zzzz a"]).uids == [0]


def test_a_text_folded_from_an_earlier_fold_finds_the_same_literals() -> None:
    """:meth:`KeyMatcher._fold` folds a longer haystack from the end of an earlier one; its ASCII is the
    whole text's fold (a final sigma may differ, which no ASCII literal can meet)."""
    from tavernbox.worldinfo.matching import KeyMatcher
    from tavernbox.worldinfo.scan import ScanBuffer

    matcher = KeyMatcher(ScanBuffer([], base_depth=0), case_sensitive=False, whole_words=True)
    rnd = random.Random(4)
    text = ""
    for _ in range(40):
        text = text + "\n" + "".join(rnd.choice(["ASH", "ſ", "İ", "Σ", " ", "K", "x", "ΣA"]) for _ in range(8))
        text = "".join(text)  # a new object each time, as the buffer builds them
        folded, whole = matcher._fold(text), fold_for_literal(text)
        assert len(folded) == len(whole)
        assert all(a == b or not (a.isascii() or b.isascii()) for a, b in zip(folded, whole))
        for literal in ("ash", "k", "sash", "ia", "xa"):
            assert folded.find(literal) == whole.find(literal)
