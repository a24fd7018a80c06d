"""The activation loop's named parts: its options object, the prepared book's scan reach, what a
recursion piece's contents tell of its word runs, and the case-folded texts regex literals are found in."""

from __future__ import annotations

import dataclasses
import random
from typing import Any

import pytest

from tavernbox.errors import TemplateError
from tavernbox.shortcuts import PLAIN
from tavernbox.worldinfo import WorldInfoSettings, activate_world_info, normalize_books
from tavernbox.worldinfo.activation import ActivationOptions, _Prepared, _Run, scan_reach, sort_entries
from tavernbox.worldinfo.matching import KeyMatcher, _ChatIndex, _Part, text_windows, word_runs
from tavernbox.worldinfo.regexes import _FOLD_TO_ASCII, fold_for_literal
from tavernbox.worldinfo.scan import ScanBuffer


def test_the_reach_kept_with_a_prepared_book_is_scan_reach() -> None:
    rnd = random.Random(30)
    for _ in range(40):
        entries = [{"uid": u, "key": ["k"], "scanDepth": rnd.choice([None, 0, 3, 40, True, "7"])}
                   for u in range(rnd.randint(0, 6))]
        books = normalize_books({"entries": entries})[0]
        prepared = _Prepared(sort_entries(books, 1)[0], WorldInfoSettings(), None)
        for _ in range(3):
            settings = WorldInfoSettings(depth=rnd.randint(0, 50), min_activations=rnd.choice([0, 0, 2]))
            assert prepared.reach(settings) == scan_reach(settings, prepared.entries)


def test_options_are_read_once_and_frozen() -> None:
    options = ActivationOptions.read({"world_info_depth": 5}, seed=3, forced=[("b", 1), ("b", "x")],
                                     context={"scenario": "s"}, generation_type="swipe")
    assert options.settings.depth == 5 and options.seed == 3 and options.context.scenario == "s"
    assert options.forced == frozenset({"b.1", "b.x"})
    with pytest.raises(dataclasses.FrozenInstanceError):
        options.seed = 4  # type: ignore[misc]
    assert ActivationOptions.read() == ActivationOptions()


@pytest.mark.parametrize(("kwargs", "path"), [({"generation_type": "later"}, None),
                                              ({"settings": {"world_info_depth": "deep"}}, "$.world_info_depth"),
                                              ({"context": {"scenery": "x"}}, "$.scenery")])
def test_a_bad_option_is_refused_with_its_code(kwargs: dict[str, object], path: str | None) -> None:
    with pytest.raises(TemplateError) as caught:
        ActivationOptions.read(**kwargs)  # type: ignore[arg-type]
    assert caught.value.code == "INPUT_INVALID" and caught.value.path == path


def _captured_run(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """The ``_Run`` of each activation made while the test runs."""
    runs: list[Any] = []
    run = _Run.run

    def capturing(self: Any) -> None:
        runs.append(self)
        run(self)

    monkeypatch.setattr(_Run, "run", capturing)
    return runs


def test_a_recursion_piece_read_from_its_contents_is_read_as_from_its_text(monkeypatch: pytest.MonkeyPatch) -> None:
    # contents whose lower case adds ASCII word characters (the Kelvin sign, dotted I), or none; keys
    # of every kind the index files: words, phrases, substrings, bounded ones, short ones, and ones
    # whose bucket window holds a non-word character
    alphabet = ["ash", "Oak", "\u212a", "\u0130", "ß", "Σ", "_", "7", " ", "\n", "\x01", ".", "-", "é", "Willow"]
    words = ["ash", "oak", "willow", "kelvin", "longword", "i", "a-b-c-d", "oak-ash", "o.k", "ash oak", "ll"]
    runs = _captured_run(monkeypatch)
    rnd = random.Random(31)
    checked = 0
    for _ in range(80):
        entries = [{"uid": u, "key": [rnd.choice(words), f"{rnd.choice(words)} {rnd.choice(words)}"],
                    "keysecondary": [rnd.choice(words)], "selective": rnd.random() < 0.3,
                    "caseSensitive": rnd.choice([None, True, False]),
                    "matchWholeWords": rnd.choice([None, True, False]),
                    "content": "".join(rnd.choice(alphabet + words) for _ in range(rnd.randint(0, 12)))}
                   for u in range(rnd.randint(1, 12))]
        book, chat = {"entries": entries}, [" ".join(rnd.sample(words, 3))]
        settings = {"world_info_recursive": True, "world_info_budget": 100, "max_context": 100_000}
        # the first scan of a book reads its pieces; the next ones read them from their contents'
        first = _answer(activate_world_info(book, chat, settings))
        assert runs.pop().matcher.known_runs is None
        assert _answer(activate_world_info(book, chat, settings)) == first
        run = runs.pop()
        assert run.matcher.known_runs is not None
        prepared = run.prepared
        for index, piece in enumerate(run.buffer.recursion):
            for cs in (True, False):
                text = piece if cs else piece.lower()
                known = run.piece_runs(index, cs)
                own = set(word_runs(text))
                assert set(known.windows) == text_windows(text, own, False)
                assert set(known.keyed) == own & prepared.word_keys(cs).keys()
                # (the maps' own strings)
                assert all(word is prepared.word_keys(cs)[word] for word in known.keyed)
                # as the piece's own text is read
                reader = KeyMatcher(ScanBuffer([], base_depth=0), case_sensitive=cs, whole_words=True)
                found: set[int] = set()
                reader._read_piece(index, cs, _Part(text), [m[cs] for m in prepared.word_maps],
                                   [(m[cs], mixed[cs]) for m, mixed in prepared.other_maps if m[cs]], found)
                assert set(known.owners) == found
                checked += bool(found)
    assert checked > 100


def test_recursion_pieces_of_expanded_contents_are_read_for_their_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    runs = _captured_run(monkeypatch)
    book = {"entries": [{"uid": 0, "key": ["ash"], "content": "oak {{x}}"}, {"uid": 1, "key": ["oak"], "content": "y"}]}
    plain = activate_world_info(book, ["ash"], {"world_info_recursive": True})
    assert runs.pop().piece_runs(0, False) is not None and sorted(plain.uids) == [0, 1]
    expanded = activate_world_info(book, ["ash"], {"world_info_recursive": True}, expand=lambda text: text.upper())
    assert runs.pop().piece_runs(0, False) is None and sorted(expanded.uids) == [0, 1]


def test_the_folded_text_is_folded_from_the_longest_text_it_extends() -> None:
    matcher = KeyMatcher(ScanBuffer([], base_depth=0), case_sensitive=False, whole_words=True)
    base = "Ab\u0130c \u212aELVIN "
    texts = [base, base + "x" * 3, base + "x" * 3 + "\u017fY", base + "Q", base + "x" * 3 + "\u017fYZ\u0131"]
    for text in texts:
        assert matcher._fold(text) == text.translate(_FOLD_TO_ASCII).lower() == fold_for_literal(text)
    assert fold_for_literal("AbC_1") == "abc_1"


def test_waiting_entries_are_kept_by_index_exactly_when_by_id(monkeypatch: pytest.MonkeyPatch) -> None:
    # an entry keeps waiting unless its id activated; with no id shared that is its index activating.
    # Books with and without shared ids (entries filed under different names with the same uid), each
    # decided as the lookup by id decides (every record, its step too), and as without the shortcuts
    rnd = random.Random(32)
    words = ["ash", "oak", "elm", "fir", "yew", "Ash Oak", "pine"]
    shared = 0
    for _ in range(80):
        size = rnd.randint(6, 16)
        entries = {str(n): {"uid": rnd.randint(0, 3) if rnd.random() < 0.1 else n,
                            "key": [rnd.choice(["/ash\\s+oak/i", "/o.k/", "/pine/", "elm", "fir"]),
                                    rnd.choice(["fir", "/yew/i", "/\\bwood/"])],
                            "content": " ".join(rnd.sample(words, 2)) + rnd.choice(["", " wood"])}
                   for n in range(size)}
        settings = {"world_info_recursive": True, "world_info_budget": 100, "max_context": 100_000}
        chat = [" ".join(rnd.sample(words, 2))]
        activate_world_info({"entries": entries}, chat, settings)  # (entries are found by index from a second scan)
        default = activate_world_info({"entries": entries}, chat, settings)
        plain = activate_world_info({"entries": entries}, chat, settings, shortcuts=PLAIN)
        assert _decided(default) == _decided(plain) and default.uids == plain.uids
        with monkeypatch.context() as patch:
            patch.setattr(_Prepared, "unique_ids", False)
            by_id = activate_world_info({"entries": entries}, chat, settings)
        assert default.trace.to_list() == by_id.trace.to_list()
        shared += len({e["uid"] for e in entries.values()}) < size
    assert 10 < shared < 70


def _answer(activation: Any) -> tuple[Any, ...]:
    """Everything an activation says (its trace read, so pending entries are decided too)."""
    return (activation.uids, activation.by_position.to_json(), activation.trace.to_list(),
            [s.to_dict() for s in activation.trace.steps], activation.state, activation.draws)


def _decided(activation: Any) -> list[dict[str, Any]]:
    """The trace's decisions (when an entry left out was decided differs: a full rescan re-decides it
    in every pass, the incremental loop keeps its decision)."""
    return [r if r["outcome"] == "activated" else {k: v for k, v in r.items() if k not in ("step", "state")}
            for r in activation.trace.to_list()]


def test_the_chat_word_map_gives_each_run_its_newest_message() -> None:
    rnd = random.Random(33)
    pieces = ["ash", "Oak", "w_1", "7", " ", "\n", "\x01", ".", "é", "\u212a", "-", ""]
    for _ in range(300):
        messages = ["".join(rnd.choice(pieces) for _ in range(rnd.randint(0, 9))) for _ in range(rnd.randint(0, 6))]
        if rnd.random() < 0.5:  # mostly ASCII without U+0001 (the messages' runs found in one pass)
            messages = [m.replace("\x01", "").replace("é", "e").replace("\u212a", "K") for m in messages]
        expected: dict[str, int] = {}
        for index in range(len(messages) - 1, -1, -1):  # newest first: index 0
            expected.update(dict.fromkeys(word_runs(messages[index]), index))
        assert _ChatIndex(messages).words() == expected, messages


def test_a_book_keeps_the_runs_of_contents_up_to_its_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    # past the budget of kept content characters, a recursion piece is read again: the same answers
    from tavernbox.worldinfo import activation as activation_module

    runs = _captured_run(monkeypatch)
    monkeypatch.setattr(activation_module, "_KEPT_CONTENT_CHARS", 40)
    words = ["ash", "oak", "elm", "fir", "yew", "willow"]
    entries = [{"uid": u, "key": [words[u % 6]], "content": f"{words[(u + 1) % 6]} " * (2 + u % 5)} for u in range(12)]
    book, chat, settings = {"entries": entries}, ["ash"], {"world_info_recursive": True, "world_info_budget": 100}
    first = _answer(activate_world_info(book, chat, settings))
    runs.pop()
    assert _answer(activate_world_info(book, chat, settings)) == first
    run = runs.pop()
    assert 0 < run.prepared.kept_chars <= 40 and run.prepared.rescanned
    assert [run.piece_runs(index, False) is None for index in range(len(run.buffer.recursion))][-1]
    assert len(set(first[0])) == 12
