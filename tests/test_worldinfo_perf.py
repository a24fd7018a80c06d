"""The shortcuts that make large books fast must give exactly what the plain way gives."""

from __future__ import annotations

import dataclasses
import gc
from typing import Any

import pytest

from tavernbox.shortcuts import Shortcuts
from tavernbox.worldinfo import Entry, normalize_book
from tavernbox.worldinfo.entries import CharacterFilter, js_key_order, normalize_entry


def _slow_entry(raw: dict[str, Any], fallback: int | str = 0) -> Entry:
    """The same entry through the dataclass constructor: every field passed explicitly."""
    diagnostics: list[Any] = []
    fast = normalize_entry(raw, "book", fallback, "$.entries.0", diagnostics)
    assert fast is not None
    return Entry(**{f.name: getattr(fast, f.name) for f in dataclasses.fields(Entry)})


ENTRIES: list[dict[str, Any]] = [
    {},
    {"uid": 3, "key": ["a", "b"], "content": "text"},
    {"uid": "7", "key": "bare", "keysecondary": [1, 2.0, None], "selectiveLogic": "2"},
    {"uid": 2.0, "order": "15", "probability": float("nan"), "depth": 1.5, "constant": 1, "disable": ""},
    {"uid": True, "content": "@@activate\nbody", "caseSensitive": None, "matchWholeWords": False},
    {"uid": 1, "characterFilter": {"isExclude": True, "names": ["x"]}, "sticky": 2, "cooldown": "1"},
    {"uid": 1, "characterFilter": "nope", "delayUntilRecursion": 2, "scanDepth": 3, "group": "g, h"},
    {"uid": 9, "content": 12, "comment": None, "triggers": ["normal"], "extensions": {"kept": True}},
]


@pytest.mark.parametrize("raw", ENTRIES, ids=lambda raw: ",".join(raw) or "empty")
def test_normalized_entry_equals_the_constructed_one(raw: dict[str, Any]) -> None:
    diagnostics: list[Any] = []
    fast = normalize_entry(raw, "book", 0, "$.entries.0", diagnostics)
    slow = _slow_entry(raw)
    assert fast == slow and hash(fast) == hash(slow) and repr(fast) == repr(slow)
    assert dataclasses.asdict(fast) == dataclasses.asdict(slow)


def test_normalized_entry_has_every_default_and_stays_frozen() -> None:
    entry = normalize_entry({"uid": 1}, "book", 0, "$", [])
    assert entry is not None
    defaults = Entry("book", 1, path="$")
    assert entry == defaults
    assert entry.character_filter == CharacterFilter() and entry.depth == 4 and entry.use_probability is True
    with pytest.raises(dataclasses.FrozenInstanceError):
        entry.order = 5  # type: ignore[misc]
    assert dataclasses.replace(entry, order=5).order == 5


def test_book_load_restores_the_garbage_collector_state() -> None:
    assert gc.isenabled()
    normalize_book({"entries": {"1": {"key": ["x"]}}})
    assert gc.isenabled()
    gc.disable()
    try:
        normalize_book({"entries": {"1": {"key": ["x"]}}})
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_book_key_order_and_fallback_uids() -> None:
    raw = {"b": {}, "10": {}, "2": {}, "02": {}, "4294967295": {}, "0": {}}
    book, _ = normalize_book({"entries": raw})
    assert [e.uid for e in book.entries] == [0, 2, 10, "b", "02", "4294967295"]
    assert js_key_order(raw) == ["0", "2", "10", "b", "02", "4294967295"]
    listed, _ = normalize_book([{"uid": 5}, {"uid": 1}, {"id": "z"}])
    assert [e.uid for e in listed.entries] == [1, 5, "z"]


def test_activation_leaves_an_application_frozen_set_alone() -> None:
    from tavernbox.worldinfo import activate_world_info

    book = {"entries": {"1": {"key": ["x"], "content": "y"}}}
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        assert frozen > 0
        assert activate_world_info(book, ["x"]).uids == [1]
        assert 0 < gc.get_freeze_count() <= frozen and gc.isenabled()  # objects freed meanwhile leave it
    finally:
        gc.unfreeze()
    assert activate_world_info(book, ["x"]).uids == [1]
    assert gc.get_freeze_count() == 0 and gc.isenabled()


# -- regex keys: the required literal may skip a search only when the search could not match -----

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from tavernbox.worldinfo.regexes import fold_for_literal, js_regex_search, parse_js_regex, required_literal  # noqa: E402
from tavernbox.worldinfo import regexes as regexes_module  # noqa: E402

_TOKENS = ["a", "b", "K", "s", "1", "_", "ab", "\\d", "\\x61", "\\k<n>", "(?<n>a)", "(", ")", "(?:", "(?=", "|", "?",
           "*", "+", "{2}", "{1,}", "{,2}", "[ab]", "[]", "[^]", "]", ".", "^", "$", "\\b", "\\\\", "\\ca", "\\c(", "-"]
_TEXT = "abAB1_ sSſKkıİ\n"


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(_TOKENS), min_size=1, max_size=7), st.sampled_from(["", "i", "iu", "y", "m"]),
       st.text(alphabet=_TEXT, max_size=14))
def test_required_literal_is_in_every_matching_text(tokens: list[str], flags: str, text: str) -> None:
    rx = parse_js_regex(f"/{''.join(tokens)}/{flags}")
    if rx is None or rx.status != "ok" or rx.literal is None:
        return
    if js_regex_search(rx, text):
        assert rx.literal in (fold_for_literal(text) if rx.ignore_case else text)


@pytest.mark.parametrize(("pattern", "literal"), [
    ("w01234\\s+(?:the|a)", "w01234"), ("abc|d", None), ("(a|b)cd", "cd"), ("a?bc", "bc"), ("ab+c", "ab"),
    ("\\x41bc", None), ("\\k<name>xy", None), ("[ab]{2}cd", "cd"), ("a{2}b", "b"), ("[]ab", "ab"),
    ("[a]]bc", "bc"), ("^dragon$", "dragon"), ("x{,5}", "5"), ("a)b", None),
])
def test_required_literal_cases(pattern: str, literal: str | None) -> None:
    assert required_literal(pattern) == literal


def test_folding_covers_what_the_regex_engine_folds_to_ascii(monkeypatch: pytest.MonkeyPatch) -> None:
    # the ``regex`` package folds these four to ASCII letters: the literal pre-check must let them by
    monkeypatch.setattr(regexes_module, "SEARCH_ENGINE", "regex")
    for ch, letter in (("\u0130", "i"), ("\u0131", "I"), ("\u017f", "s"), ("\u212a", "k")):
        rx = parse_js_regex(f"/x{letter}/i")
        assert rx is not None and rx.literal == "x" + letter.lower()
        assert js_regex_search(rx, "x" + ch)
        assert rx.literal in fold_for_literal("x" + ch)


def test_javascript_folds_fewer_characters_than_the_regex_package() -> None:
    # what V8 answers (node: new RegExp("x" + letter, flags).test("x" + ch)); QuickJS, which runs
    # the searches, agrees: without "u" no non-ASCII character folds to ASCII, with it two do
    cases = {("\u0130", "i"): (False, False), ("\u0131", "I"): (False, False),
             ("\u017f", "s"): (False, True), ("\u212a", "k"): (False, True)}
    for (ch, letter), (plain, unicode) in cases.items():
        for flags, expected in (("i", plain), ("iu", unicode)):
            rx = parse_js_regex(f"/x{letter}/{flags}")
            assert rx is not None
            assert js_regex_search(rx, "x" + ch) is expected, (ch, flags)
            if expected:  # the pre-check stays conservative
                assert rx.literal in fold_for_literal("x" + ch)


def test_regex_keys_skipped_by_their_literal_give_the_same_scan(monkeypatch: pytest.MonkeyPatch) -> None:
    from tavernbox.worldinfo import activate_world_info
    from tavernbox.worldinfo.matching import KeyMatcher

    words = ["ash", "Oak", "elm", "fir", "yew", "ASH"]
    rnd = __import__("random").Random(11)
    for _ in range(40):
        entries = []
        for uid in range(12):
            a, b = rnd.sample(words, 2)
            key = rnd.choice([f"/{a}/", f"/{a}/i", f"/{a}\\s+{b}/i", f"/{a}$/", f"/\\b{a}/i", a])
            entries.append({"uid": uid, "key": [key], "content": " ".join(rnd.sample(words, 2)),
                            "order": rnd.randint(1, 9)})
        chat = [" ".join(rnd.sample(words, 2))]
        conf = {"world_info_depth": 2, "world_info_budget": 100, "max_context": 1000}
        fast = activate_world_info({"entries": entries}, chat, conf)
        with monkeypatch.context() as patched:
            patched.setattr(KeyMatcher, "_literal_at", lambda self, rx, text, pos, key, hay: pos)
            slow = activate_world_info({"entries": entries}, chat, conf)
        assert fast.uids == slow.uids
        assert fast.trace.to_list() == slow.trace.to_list()


def test_pending_entries_get_the_decision_a_full_look_gives() -> None:
    from tavernbox.worldinfo import activate_world_info

    rnd = __import__("random").Random(3)
    words = ["ash", "oak", "elm", "fir", "yew", "red oak"]
    for _ in range(60):
        entries = []
        for uid in range(15):
            entry: dict[str, Any] = {"uid": uid, "key": rnd.sample(words, rnd.randint(0, 2)),
                                     "content": rnd.choice(words), "order": rnd.randint(1, 9)}
            for flag in ("disable", "constant", "excludeRecursion"):
                if rnd.random() < 0.1:
                    entry[flag] = True
            if rnd.random() < 0.1:
                entry["delayUntilRecursion"] = True
            if rnd.random() < 0.1:
                entry["delay"] = 5
            if rnd.random() < 0.1:
                entry["triggers"] = ["swipe"]
            if rnd.random() < 0.1:
                entry["content"] = "@@dont_activate\nx"
            entries.append(entry)
        chat = [" ".join(rnd.sample(words, 2)) for _ in range(2)]
        conf = {"world_info_depth": rnd.randint(0, 2), "world_info_budget": 100, "max_context": 1000}
        fast = activate_world_info({"entries": entries}, chat, conf).trace.to_list()
        full = activate_world_info({"entries": entries}, chat, conf,
                                   shortcuts=Shortcuts(wi_fast_pending=False)).trace.to_list()
        assert fast == full
    assert any(r["reason"] == "no_match" and r["step"] == 1 for r in fast)


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="ab_1 -é", min_size=1, max_size=12), st.text(alphabet="ab_1 -é\n", max_size=40))
def test_bucket_window_of_a_found_key_is_among_the_text_windows(key: str, text: str) -> None:
    import re

    from tavernbox.worldinfo.matching import gram_of, is_word_gram, text_windows

    if key not in text:
        return
    gram = gram_of(key)
    runs = set(re.findall(r"[A-Za-z0-9_]+", text))
    assert gram in text_windows(text, runs, mixed=bool(gram) and not is_word_gram(gram))


@settings(max_examples=400, deadline=None)
@given(st.text(alphabet="ab_1 -é", min_size=1, max_size=20), st.text(alphabet="ab_1 -é\n", max_size=60))
def test_every_window_of_a_found_keys_word_runs_is_among_the_text_windows(key: str, text: str) -> None:
    import re

    from tavernbox.worldinfo.matching import key_windows, text_windows

    if key not in text:
        return
    runs = set(re.findall(r"[A-Za-z0-9_]+", text))
    # (the word-run windows alone: what ``text_windows`` gives when no bucket window is mixed)
    assert key_windows(key) <= text_windows(text, runs, mixed=False)


def _matcher_counts_after_each_scan(monkeypatch: pytest.MonkeyPatch, counter: str) -> list[int]:
    """The key matcher's ``counter`` as each scan of the test leaves it (one number a scan, in order)."""
    from tavernbox.worldinfo import activation as activation_module

    counts: list[int] = []
    run_passes = activation_module._Run.run

    def counting(self: Any) -> None:
        run_passes(self)
        counts.append(getattr(self.matcher, counter))

    monkeypatch.setattr(activation_module._Run, "run", counting)
    return counts


def test_phrase_keys_spared_by_their_windows_answer_as_when_searched(monkeypatch: pytest.MonkeyPatch) -> None:
    """``Shortcuts(wi_key_windows=False)`` searches for every phrase key whose bucket window a text
    holds; the default spares those lacking another window of their word runs: same answers."""
    import random

    from tavernbox.worldinfo import activate_world_info

    spared = _matcher_counts_after_each_scan(monkeypatch, "spared_by_windows")
    words = ["willow", "Bramble", "thistle", "oak", "fir", "hawthorn", "heather"]
    rnd = random.Random(29)
    for _ in range(60):
        entries = []
        for uid in range(40):
            a, b, c = rnd.sample(words, 3)
            key = rnd.choice([f"{a} {b}", f"{a}-{b}", f"{a}{b} {c}", f"x{a} {b}x", a])
            entries.append({"uid": uid, "key": [key], "content": " ".join(rnd.sample(words, 2)),
                            "matchWholeWords": rnd.choice([None, False]), "caseSensitive": rnd.choice([None, True]),
                            "keysecondary": [rnd.choice(words) + " " + rnd.choice(words)] if uid % 5 == 0 else []})
        chat = [" ".join(rnd.sample(words, 3)) for _ in range(3)]
        conf = {"world_info_depth": rnd.randint(1, 3), "world_info_budget": 100, "max_context": 100_000,
                "world_info_recursive": True}
        default = activate_world_info({"entries": entries}, chat, conf, shortcuts=Shortcuts())
        searched = activate_world_info({"entries": entries}, chat, conf, shortcuts=Shortcuts(wi_key_windows=False))
        assert default.uids == searched.uids
        assert default.trace.to_list() == searched.trace.to_list()
        assert [s.to_dict() for s in default.trace.steps] == [s.to_dict() for s in searched.trace.steps]
    # the default path took the shortcut (the plain one never does)
    assert sum(spared[0::2]) > 0 and sum(spared[1::2]) == 0


def test_regex_literals_spared_by_the_texts_windows_answer_as_when_searched(monkeypatch: pytest.MonkeyPatch) -> None:
    """``Shortcuts(wi_literal_windows=False)`` searches for every regex key's required literal; the
    default spares a literal whose first window the chat, the extra sources and the recursion pieces
    lack: same answers, also where case-folding the text differs from lower-casing it (long s)."""
    import random

    from tavernbox.worldinfo import activate_world_info

    spared = _matcher_counts_after_each_scan(monkeypatch, "literals_spared")
    words = ["willow", "Bramble", "thistle", "thi\u017ftle", "hawthorn", "HEATHER", "oak", "\u212aelvins"]
    rnd = random.Random(41)
    for _ in range(80):
        entries = []
        for uid in range(30):
            a, b = rnd.sample(words, 2)
            key = rnd.choice([f"/{a}/i", f"/{a}/", f"/{a}\\s+{b}/i", f"/{a.lower()}s?/iu", f"/x?{a}/i",
                              f"/heather|{a}/i", "kelvins", a])
            entries.append({"uid": uid, "key": [key], "content": " ".join(rnd.sample(words, 2)),
                            "order": rnd.randint(1, 9), "scanDepth": rnd.choice([None, None, 1, 5]),
                            "matchPersonaDescription": rnd.random() < 0.3,
                            "keysecondary": [f"/{rnd.choice(words)}/i"] if uid % 4 == 0 else [],
                            "selective": True, "selectiveLogic": rnd.randint(0, 3)})
        chat = [" ".join(rnd.sample(words, 2)) for _ in range(rnd.randint(0, 3))]
        conf = {"world_info_depth": rnd.randint(1, 3), "world_info_budget": 100, "max_context": 100_000,
                "world_info_recursive": True, "world_info_min_activations": rnd.choice([0, 0, 2])}
        context = {"persona_description": rnd.choice(["", "a " + rnd.choice(words)])}
        default = activate_world_info({"entries": entries}, chat, conf, context=context, shortcuts=Shortcuts())
        searched = activate_world_info({"entries": entries}, chat, conf, context=context,
                                       shortcuts=Shortcuts(wi_literal_windows=False))
        assert default.uids == searched.uids
        assert default.trace.to_list() == searched.trace.to_list()
        assert [s.to_dict() for s in default.trace.steps] == [s.to_dict() for s in searched.trace.steps]
    # the default path took the shortcut (the plain one never does)
    assert sum(spared[0::2]) > 20 and sum(spared[1::2]) == 0


def test_trace_list_without_records_equals_the_records_dicts() -> None:
    from tavernbox.worldinfo import activate_world_info

    entries = [{"uid": 1, "key": ["x"], "comment": "c"}, {"uid": 2, "key": ["y"], "keysecondary": ["x"],
               "selectiveLogic": 0}, {"uid": 3, "key": ["nope"]}, {"uid": 4, "key": ["x"], "group": "g"},
               {"uid": 5, "key": ["x"], "group": "g"}, {"uid": 6, "constant": True, "disable": True}]
    conf = {"world_info_depth": 2, "max_context": 1000}
    direct = activate_world_info({"entries": entries}, ["x y"], conf, seed=4).trace
    listed = direct.to_list()
    assert listed == [r.to_dict() for r in direct.entries] == direct.to_list()
    assert {r["reason"] for r in listed} >= {"key", "no_match", "group", "disabled"}


def test_carried_forward_regex_decisions_equal_a_fresh_look() -> None:
    from tavernbox.worldinfo import activate_world_info

    rnd = __import__("random").Random(8)
    words = ["ash", "oak", "elm", "fir", "yew", "Ivy"]
    carried = 0
    for _ in range(80):
        entries = []
        for uid in range(14):
            a, b = rnd.sample(words, 2)
            keys = [rnd.choice([f"/{a}/", f"/{a}/i", f"/{a}\\s+{b}/i", f"/{a}[\\s\\S]*{b}/", f"/{a}$/", a])]
            if rnd.random() < 0.3:
                keys.append(rnd.choice([f"/{b}/i", b]))
            entry: dict[str, Any] = {"uid": uid, "key": keys, "content": " ".join(rnd.sample(words, 2)),
                                     "order": rnd.randint(1, 9)}
            if rnd.random() < 0.4:
                entry["keysecondary"] = [rnd.choice([f"/{b}/", f"/{a}.{b}/i", b])]
                entry["selectiveLogic"] = rnd.randint(0, 3)
            if rnd.random() < 0.15:
                entry["scanDepth"] = rnd.randint(0, 2)
            entries.append(entry)
        chat = [" ".join(rnd.sample(words, 2)) for _ in range(2)]
        conf = {"world_info_depth": rnd.randint(1, 2), "world_info_budget": 100, "max_context": 1000,
                "world_info_case_sensitive": rnd.random() < 0.3}
        fast = activate_world_info({"entries": entries}, chat, conf)
        full = activate_world_info({"entries": entries}, chat, conf, shortcuts=Shortcuts(wi_settled_regex=False))
        assert fast.uids == full.uids
        assert fast.trace.to_list() == full.trace.to_list()
        carried += len(fast.trace.steps)
    assert carried > 80  # recursion passes happened


# -- entries read through their shape's plan equal the general reading -----------------------------

from tavernbox.assets.worldbooks import ST_ENTRY_DEFAULTS  # noqa: E402
from tavernbox.worldinfo.entries import _normalize_entry_general  # noqa: E402

_VALUES = st.one_of(st.none(), st.booleans(), st.integers(-3, 300), st.floats(allow_nan=True, allow_infinity=True),
                    st.sampled_from(["", "x", "@@activate\nbody", "12", "1.5"]),
                    st.lists(st.one_of(st.text(max_size=3), st.integers(0, 3)), max_size=3),
                    st.fixed_dictionaries({}, optional={"isExclude": st.one_of(st.booleans(), st.none(), st.just(1)),
                                                        "names": st.lists(st.sampled_from(["a", "b"]), max_size=2),
                                                        "tags": st.one_of(st.none(), st.lists(st.just("t")))}))


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.sampled_from(sorted(ST_ENTRY_DEFAULTS) + ["uid", "extensions", "sticky", "cooldown"]),
                       _VALUES, max_size=10), st.booleans())
def test_entry_read_by_shape_equals_the_general_reading(fields: dict[str, Any], full: bool) -> None:
    raw = {**ST_ENTRY_DEFAULTS, **fields} if full else fields
    for _ in range(2):  # the second read goes through the cached plan
        fast_diagnostics: list[Any] = []
        slow_diagnostics: list[Any] = []
        fast = normalize_entry(raw, "book", 4, "$.entries.4", fast_diagnostics)
        slow = _normalize_entry_general(raw, "book", 4, "$.entries.4", slow_diagnostics)
        assert fast == slow
        assert [(d.code, d.path, d.message) for d in fast_diagnostics] == \
            [(d.code, d.path, d.message) for d in slow_diagnostics]


# -- word keys in earlier recursion pieces, answered from the piece index ----------------------------


def test_word_keys_in_earlier_recursion_pieces_are_found_from_the_piece_index() -> None:
    """A word key first tested passes after the piece holding it was added is still found there.

    Entry 3 is looked at in the third pass (its primary key is in the second piece) and needs its
    secondary key from the first piece; entry 5's NOT ANY key is in no piece at all. The
    incremental loop answers these from the words :meth:`KeyMatcher.piece_hits` recorded; the
    full rescans (``Shortcuts(wi_incremental=False)``) search the pieces, and both must agree.
    """
    from tavernbox.worldinfo import activate_world_info

    entries = {
        "1": {"uid": 1, "key": ["start"], "content": "Alpha"},
        "2": {"uid": 2, "key": ["alpha"], "content": "beta"},
        "3": {"uid": 3, "key": ["beta"], "keysecondary": ["ALPHA"], "selectiveLogic": 0, "content": "gamma"},
        "4": {"uid": 4, "key": ["gamma"], "keysecondary": ["alpha", "omega"], "selectiveLogic": 3, "content": "x"},
        "5": {"uid": 5, "key": ["gamma"], "keysecondary": ["omega"], "selectiveLogic": 2, "content": "y"},
        "6": {"uid": 6, "key": ["alpha"], "caseSensitive": True, "content": "z"},
    }
    settings = {"world_info_recursive": True, "world_info_match_whole_words": True, "world_info_budget": 100,
                "max_context": 1000}
    fast = activate_world_info({"entries": entries}, ["start here"], settings)
    assert fast.uids == [1, 2, 3, 5]
    assert [(s.step, list(s.activated)) for s in fast.trace.steps][:4] == [
        (1, ["book.1"]), (2, ["book.2"]), (3, ["book.3"]), (4, ["book.5"])]
    assert fast.trace.get("book", 4).reason == "secondary_logic"  # type: ignore[union-attr]
    assert fast.trace.get("book", 6).reason == "no_match"  # type: ignore[union-attr]
    slow = activate_world_info({"entries": entries}, ["start here"], settings,
                               shortcuts=Shortcuts(wi_incremental=False))
    assert slow.uids == fast.uids
    # a full rescan re-decides unchanged entries in later steps: compare what was decided, not when
    assert [(r.outcome, r.reason, r.key, r.secondary) for r in slow.trace] == \
        [(r.outcome, r.reason, r.key, r.secondary) for r in fast.trace]


def test_chat_window_filter_keeps_keys_whose_window_spans_punctuation() -> None:
    """The first pass's chat windows only rule out a key when they could hold its window.

    With only word-character windows among the primary keys, the first pass keeps the windows of
    the chat's word runs; a secondary key whose window has punctuation in it ("ab-cd-") is not
    among those yet is in the chat, so it must still be searched for. A word-window key absent
    from the chat is ruled out and the entry owning it is not activated.
    """
    from tavernbox.worldinfo import activate_world_info

    entries = {
        "1": {"uid": 1, "key": ["alpha"], "keysecondary": ["ab-cd-ef"], "selectiveLogic": 0, "content": "one"},
        "2": {"uid": 2, "key": ["red dragon"], "content": "two"},
        "3": {"uid": 3, "key": ["alpha"], "keysecondary": ["blue dragon"], "selectiveLogic": 0, "content": "three"},
        "4": {"uid": 4, "key": ["alpha"], "keysecondary": ["dragon red"], "selectiveLogic": 2, "content": "four"},
    }
    settings = {"world_info_match_whole_words": True, "world_info_budget": 100, "max_context": 1000}
    activation = activate_world_info({"entries": entries}, ["Alpha saw a red dragon near ab-cd-ef."], settings)
    assert activation.uids == [1, 2, 4]
    assert activation.trace.get("book", 3).reason == "secondary_logic"  # type: ignore[union-attr]


def test_activated_entry_keeps_the_frozen_dataclass_behaviour() -> None:
    """Its hand-written ``__init__`` (writing the slots directly) must keep what the generated one gave."""
    from tavernbox.worldinfo.output import ActivatedEntry

    entry = normalize_entry({"uid": 4, "key": ["k"]}, "book", 0, "$", [])
    assert entry is not None
    item = ActivatedEntry(entry, "text", 2)
    assert item == ActivatedEntry(entry=entry, content="text", step=2)
    assert hash(item) == hash(ActivatedEntry(entry, "text", 2))
    assert (item.book, item.uid, item.content, item.step) == ("book", 4, "text", 2)
    assert repr(item).startswith("ActivatedEntry(entry=Entry(") and repr(item).endswith(", content='text', step=2)")
    assert dataclasses.replace(item, step=3).step == 3
    assert dataclasses.astuple(item)[1:] == ("text", 2)
    with pytest.raises(dataclasses.FrozenInstanceError):
        item.step = 5  # type: ignore[misc]
    with pytest.raises(TypeError):
        ActivatedEntry(entry, "text")  # type: ignore[call-arg]


@pytest.mark.parametrize(("depth", "expected"), [(1, []), (2, [1, 2]), (3, [1, 2, 4])])
def test_substring_keys_found_at_their_window_places(depth: int, expected: list[int]) -> None:
    """A substring key is found through the places of its word window in the chat, at the right message.

    The newest message has the window ("dragon") but not the key; the next one has the key inside a
    longer run ("xDragon red"); the oldest has "old dragon" (the window 4 characters into the key).
    Which entries fire depends on the depth.
    """
    from tavernbox.worldinfo import activate_world_info

    entries = {"1": {"uid": 1, "key": ["dragon red"], "content": "one"},
               "2": {"uid": 2, "key": ["Gon red"], "content": "two"},
               "3": {"uid": 3, "key": ["dragon rex"], "content": "three"},
               "4": {"uid": 4, "key": ["old dragon"], "content": "four"}}
    chat = ["old dragon red", "then xDragon red", "a dragon blue and red"]  # oldest first
    settings = {"world_info_depth": depth, "world_info_match_whole_words": True, "world_info_budget": 100,
                "max_context": 1000, "world_info_recursive": False}
    activation = activate_world_info({"entries": entries}, chat, settings)
    assert sorted(activation.uids) == expected


@settings(max_examples=200, deadline=None)
@given(st.sets(st.text(alphabet="ab_1", min_size=1, max_size=14), max_size=12))
def test_word_run_windows_are_every_window_of_every_run(runs: set[str]) -> None:
    """The word-run windows (runs of exactly GRAM characters taken whole) are all GRAM-windows of the runs."""
    from tavernbox.worldinfo.matching import GRAM, text_windows

    expected = {w[i:i + GRAM] for w in runs for i in range(len(w) - GRAM + 1)} | {""}
    assert text_windows(" ".join(runs), runs, mixed=False) == expected


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("aZ9_ -.\n\t\x01\x1c\x85\xa0é\u2028\U0001f600")), max_size=40))
def test_word_runs_split_in_c_equal_the_regex_runs(text: str) -> None:
    """``word_runs`` (an ASCII text translated and split) gives exactly the regex's ``[A-Za-z0-9_]+`` runs."""
    from tavernbox.worldinfo.matching import _WORD_RUN, word_runs

    assert word_runs(text) == _WORD_RUN.findall(text)
    ascii_only = text.encode("ascii", "ignore").decode("ascii")
    assert word_runs(ascii_only) == _WORD_RUN.findall(ascii_only)
