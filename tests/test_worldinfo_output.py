"""Output assembly (section 2.10), the trace, timed effects (2.9) and the incremental passes."""

from __future__ import annotations

import random
from typing import Any

import pytest

from tavernbox import TemplateError
from tavernbox.shortcuts import Shortcuts
from tavernbox.worldinfo import Activation, REASONS, activate_world_info

PLAIN = {"world_info_depth": 2, "world_info_budget": 100, "max_context": 1000, "world_info_include_names": False,
         "world_info_match_whole_words": False}


def e(uid: int, key: list[str] | str | None = None, content: str | None = None, **fields: Any) -> dict[str, Any]:
    keys = [key] if isinstance(key, str) else (key or [])
    return {"uid": uid, "key": keys, "content": content if content is not None else f"E{uid}", **fields}


def act(entries: list[dict[str, Any]], chat: list[str], **kwargs: Any) -> Activation:
    settings = {**PLAIN, **kwargs.pop("settings", {})}
    return activate_world_info({"entries": entries}, chat, settings, **kwargs)


# -- output --------------------------------------------------------------------------------------


def test_output_lists_ascend_by_order_and_ties_reverse_activation() -> None:
    a = act([e(1, "x", "A", order=5, position=2), e(2, "x", "B", order=5, position=2), e(3, "x", "C", order=1,
                                                                                    position=2)], ["x"])
    assert [i.content for i in a.by_position.an_top] == ["C", "B", "A"]


def test_output_at_depth_groups_by_depth_and_role_in_first_seen_order() -> None:
    entries = [
        e(1, "x", "d2-system-hi", order=90, position=4, depth=2, role=0),
        e(2, "x", "d0-user", order=80, position=4, depth=0, role=1),
        e(3, "x", "d2-system-lo", order=70, position=4, depth=2, role=0),
        e(4, "x", "d2-assistant", order=60, position=4, depth=2, role=2),
    ]
    groups = [(g.depth, g.role_name, g.content) for g in act(entries, ["x"]).by_position.at_depth]
    assert groups == [(2, "system", "d2-system-lo\nd2-system-hi"), (0, "user", "d0-user"), (2, "assistant", "d2-assistant")]


def test_output_outlets_read_in_descending_order() -> None:
    entries = [e(1, "x", "low", order=1, position=7, outletName="o"), e(2, "x", "high", order=9, position=7,
                                                                        outletName="o")]
    assert act(entries, ["x"]).by_position.outlet_text("o") == "high\nlow"


def test_output_outlet_without_a_name_is_left_out() -> None:
    a = act([e(1, "x", "nameless", position=7)], ["x"])
    assert a.uids == [1] and a.by_position.outlets == {}


def test_output_example_message_positions() -> None:
    entries = [e(1, "x", "top", position=5), e(2, "x", "bottom", position=6)]
    out = act(entries, ["x"]).by_position
    assert [i.content for i in out.em_top] == ["top"] and [i.content for i in out.em_bottom] == ["bottom"]


def test_output_empty_content_is_activated_but_not_placed() -> None:
    a = act([e(1, "x", ""), e(2, "x", "kept")], ["x"])
    assert a.uids == [1, 2] and a.before == "kept"


def _placed_one_by_one(activated: list[Any]) -> dict[str, Any]:
    """SillyTavern's placement written item by item: stable sort by descending order, empty contents
    left out, lists reversed (unshifted), at-depth groups by first (depth, role), outlets pushed."""
    ordered = sorted(activated, key=lambda a: -a.entry.order)
    lists: dict[int, list[Any]] = {p: [] for p in range(8)}
    groups: list[tuple[int, int, list[Any]]] = []
    outlets: dict[str, list[Any]] = {}
    for item in ordered:
        if not item.content:
            continue
        entry = item.entry
        if entry.position == 4:
            group = next((g for g in groups if (g[0], g[1]) == (entry.depth, entry.role)), None)
            if group is None:
                groups.append((entry.depth, entry.role, [item]))
            else:
                group[2].append(item)
        elif entry.position == 7:
            if entry.outlet_name:
                outlets.setdefault(entry.outlet_name, []).append(item)
        elif entry.position in lists:
            lists[entry.position].append(item)
    return {"lists": {p: tuple(reversed(items)) for p, items in lists.items() if p not in (4, 7)},
            "at_depth": [(d, r, tuple(reversed(m))) for d, r, m in groups],
            "outlets": {name: tuple(items) for name, items in outlets.items()}}


@pytest.mark.parametrize("seed", range(3))
def test_placement_by_ranks_equals_placing_one_by_one(seed: int) -> None:
    """Items made in bulk (``ActivatedEntry.many``, as the activation makes them) equal the constructed
    ones; ``build_positions`` gives each list, group and outlet (and their orders) as placing the
    items one by one does, and so does ``place_activated`` from the ranks of the entries' orders and
    their positions (the per-entry lists the activation keeps with its books)."""
    from tavernbox.worldinfo.activation import _placement
    from tavernbox.worldinfo.entries import normalize_entry
    from tavernbox.worldinfo.output import ActivatedEntry, build_positions, place_activated

    rnd = random.Random(seed)
    for _ in range(60):
        entries = []
        for uid in range(rnd.randint(0, 40)):
            raw = {"uid": uid, "order": rnd.choice([1, 5, 5, 9, 2.5, 100]), "position": rnd.randint(0, 7),
                   "depth": rnd.randint(0, 2), "role": rnd.randint(0, 2),
                   "outletName": rnd.choice(["", "a", "b"])}
            entry = normalize_entry(raw, "book", uid, f"$.entries.{uid}", [])
            assert entry is not None
            entries.append(entry)
        contents = [rnd.choice(["", "x", "y z"]) for _ in entries]
        steps = [rnd.randint(1, 3) for _ in entries]
        activated = ActivatedEntry.many(entries, contents, steps)
        assert activated == [ActivatedEntry(*row) for row in zip(entries, contents, steps)]
        placed = build_positions(activated)
        expected = _placed_one_by_one(activated)
        by_name = {0: placed.before, 1: placed.after, 2: placed.an_top, 3: placed.an_bottom, 5: placed.em_top,
                   6: placed.em_bottom}
        assert by_name == expected["lists"]
        assert [(g.depth, g.role, g.entries) for g in placed.at_depth] == expected["at_depth"]
        assert placed.outlets == expected["outlets"] and list(placed.outlets) == list(expected["outlets"])
        ranks, positions = _placement(entries)
        assert ranks is not None
        assert place_activated(activated, ranks, positions) == placed


def test_orders_that_are_not_plain_numbers_are_not_ranked() -> None:
    """A NaN order (sorting by it depends on where it stands) or one of another type is read from the
    entries at placement, as ``build_positions`` reads it, rather than ranked."""
    from tavernbox.worldinfo.activation import _placement
    from tavernbox.worldinfo.entries import Entry

    assert _placement([Entry("b", 1, order=3), Entry("b", 2, order=2.5)]).ranks == [0, 1]
    assert _placement([Entry("b", 1, order=float("nan")), Entry("b", 2)]).ranks is None
    assert _placement([Entry("b", 1, order="5"), Entry("b", 2)]).ranks is None  # type: ignore[arg-type]


def test_output_entries_know_their_book_and_step() -> None:
    a = act([e(1, "x", "mentions y"), e(2, "y")], ["x"])
    assert [(i.book, i.uid, i.step) for i in a.activated] == [("book", 1, 1), ("book", 2, 2)]


# -- trace -------------------------------------------------------------------------------------


def test_trace_has_one_record_per_entry_with_known_reasons() -> None:
    entries = [
        e(1, "x", "mentions y"), e(2, "y"), e(3, "x", disable=True), e(4, "x", keysecondary=["z"], selectiveLogic=3),
        e(5, "nope"), e(6, None), e(7, "x", probability=1),
    ]
    a = act(entries, ["x"], rng=lambda: 0.5)
    assert len(a.trace) == len(entries)
    reasons = {r.uid: r.reason for r in a.trace}
    assert reasons == {1: "key", 2: "key", 3: "disabled", 4: "secondary_logic", 5: "no_match", 6: "no_keys",
                       7: "probability"}
    assert all(r.reason in REASONS for r in a.trace)


def test_trace_records_the_recursion_step_and_key() -> None:
    a = act([e(1, "x", "mentions y"), e(2, ["q", "y"])], ["x"])
    record = a.trace.get("book", 2)
    assert record is not None
    assert (record.outcome, record.step, record.state, record.key) == ("activated", 2, "recursion", "y")
    assert "fired by key 'y'" in record.detail


def test_trace_steps_summarise_each_pass() -> None:
    a = act([e(1, "x", "mentions y"), e(2, "y")], ["x"])
    assert [(s.step, s.state, s.activated) for s in a.trace.steps] == [
        (1, "initial", ("book.1",)), (2, "recursion", ("book.2",)), (3, "recursion", ())]


def test_trace_budget_reason() -> None:
    a = act([e(1, "x", "a b c", order=2), e(2, "x", "d e f", order=1)], ["x"],
            settings={"world_info_budget": 5, "max_context": 100})
    assert a.trace.get("book", 2).reason == "budget"  # type: ignore[union-attr]


def test_trace_to_dict_leaves_out_empty_fields() -> None:
    a = act([e(1, "x")], ["x"])
    assert a.trace.to_list() == [{"book": "book", "uid": 1, "outcome": "activated", "reason": "key",
                                  "detail": "fired by key 'x'", "step": 1, "state": "initial", "key": "x"}]


# -- timed effects ---------------------------------------------------------------------------------


def test_timed_sticky_keeps_an_entry_after_its_key_leaves() -> None:
    first = act([e(1, "x", sticky=2)], ["x"])
    assert first.state["sticky"]["book.1"]["start"] == 1 and first.state["sticky"]["book.1"]["end"] == 3
    second = act([e(1, "x", sticky=2)], ["x", "y"], state=first.state, settings={"world_info_depth": 1})
    assert second.uids == [1] and second.trace.get("book", 1).reason == "sticky"  # type: ignore[union-attr]


def test_timed_regenerate_at_the_same_length_starts_fresh() -> None:
    first = act([e(1, "x", cooldown=5)], ["x"])
    again = act([e(1, "x", cooldown=5)], ["x"], state=first.state)
    assert again.uids == [1]


def test_timed_cooldown_blocks_a_matching_entry() -> None:
    first = act([e(1, "x", cooldown=5)], ["x"])
    later = act([e(1, "x", cooldown=5)], ["x", "x"], state=first.state)
    assert later.uids == [] and later.trace.get("book", 1).reason == "cooldown"  # type: ignore[union-attr]


def test_timed_records_of_missing_entries_wait_for_their_end() -> None:
    state = {"sticky": {"gone.1": {"hash": "nope", "start": 1, "end": 5, "protected": False}}, "cooldown": {}}
    assert "gone.1" in act([e(1, "x")], ["a", "b"], state=state).state["sticky"]
    assert "gone.1" not in act([e(1, "x")], ["a"] * 5, state=state).state["sticky"]


def test_timed_dry_run_neither_reads_nor_writes_records() -> None:
    first = act([e(1, "x", cooldown=5)], ["x"])
    dry = act([e(1, "x", cooldown=5)], ["x", "x"], state=first.state, dry_run=True)
    assert dry.uids == [1] and dry.state == first.state


def test_timed_state_with_a_bad_shape_names_the_path() -> None:
    with pytest.raises(TemplateError) as info:
        act([e(1, "x")], ["x"], state={"sticky": {"book.1": {"start": "one", "end": 2}}})
    assert info.value.path == "$.sticky.book.1.start"


def test_timed_delay_is_computed_without_state() -> None:
    assert act([e(1, "x", delay=2)], ["x"]).trace.get("book", 1).reason == "delay"  # type: ignore[union-attr]


# -- incremental recursion passes agree with full passes ------------------------------------------------


def _random_book(rnd: random.Random) -> tuple[list[dict[str, Any]], list[str], dict[str, Any]]:
    words = ["alpha", "beta", "Gamma", "delta", "eps", "zeta", "eta", "theta", "red dragon", "café", "x-y"]
    entries = []
    for uid in range(12):
        keys = rnd.sample(words, rnd.randint(1, 2))
        if rnd.random() < 0.1:
            keys.append("/th.ta/i")
        content = " ".join(rnd.sample(words, rnd.randint(0, 3)))
        entry = e(uid, keys, content, order=rnd.choice([10, 50, 100]))
        if rnd.random() < 0.3:
            entry.update(keysecondary=rnd.sample(words, 2), selectiveLogic=rnd.randint(0, 3))
        for flag in ("caseSensitive", "matchWholeWords", "excludeRecursion", "preventRecursion"):
            if rnd.random() < 0.2:
                entry[flag] = rnd.random() < 0.5
        if rnd.random() < 0.2:
            entry["delayUntilRecursion"] = rnd.choice([True, 2])
        if rnd.random() < 0.2:
            entry["group"] = rnd.choice(["g", "h"])
        entries.append(entry)
    chat = [" ".join(rnd.sample(words, 2)) for _ in range(3)]
    settings = {"world_info_match_whole_words": rnd.random() < 0.5, "world_info_case_sensitive": rnd.random() < 0.3,
                "world_info_depth": rnd.randint(1, 3), "world_info_budget": rnd.choice([5, 100]),
                "max_context": 100, "world_info_min_activations": rnd.choice([0, 0, 4])}
    return entries, chat, settings


def test_incremental_passes_match_full_rescans() -> None:
    rnd = random.Random(5)
    for _ in range(150):
        entries, chat, settings = _random_book(rnd)
        fast = activate_world_info({"entries": entries}, chat, settings, seed=3)
        slow = activate_world_info({"entries": entries}, chat, settings, seed=3,
                                   shortcuts=Shortcuts(wi_incremental=False))
        assert fast.uids == slow.uids
        assert fast.by_position.to_json() == slow.by_position.to_json()
        assert [(r.outcome, r.reason) for r in fast.trace] == [(r.outcome, r.reason) for r in slow.trace]


def test_prepared_books_are_reused_without_carrying_state_between_scans() -> None:
    from tavernbox.worldinfo import normalize_books

    entries = [e(1, "x", "mentions y"), e(2, "y"), e(3, "/z+/"), e(4, "red dragon")]
    books = normalize_books({"entries": entries})[0]
    chats = [["x"], ["z red dragon"], ["nothing"], ["x z"]]
    for chat in chats:
        reused = activate_world_info(books, chat, PLAIN)
        fresh = activate_world_info({"entries": entries}, chat, PLAIN)
        assert reused.uids == fresh.uids
        assert reused.trace.to_list() == fresh.trace.to_list()


def test_first_pass_decides_entries_it_did_not_look_at() -> None:
    # uid 3 waits for the recursion step that uid 1 causes; uids 2 and 4 are never looked at
    entries = [e(1, "x"), e(2, "nope"), e(3, "x", delayUntilRecursion=True), e(4, "x", disable=True)]
    a = act(entries, ["x"])
    assert [(r.uid, r.reason, r.step) for r in a.trace] == [
        (1, "key", 1), (2, "no_match", 1), (3, "key", 2), (4, "disabled", 1)]


def test_output_author_note_wraps_the_note() -> None:
    out = act([e(1, "x", "T", position=2), e(2, "x", "B", position=3)], ["x"]).by_position
    assert out.author_note("NOTE") == "T\nNOTE\nB"
    assert act([e(1, "x", "T", position=2)], ["x"]).by_position.author_note("NOTE") == "T\nNOTE"
    assert act([e(1, "nope")], ["x"]).by_position.author_note("NOTE") == "NOTE"


def test_list_books_with_a_repeated_uid_keep_the_later_entry() -> None:
    a = act([e(1, "x", "first"), e(1, "x", "second")], ["x"])
    assert a.before == "second"
    assert any(d.path == "$.entries[1].uid" for d in a.diagnostics)


def test_timed_chat_length_counts_past_the_1000_message_buffer() -> None:
    chat = ["filler"] * 1199 + ["x"]
    assert act([e(1, "x", delay=1100)], chat).uids == [1]


def test_activation_record_answers_which_entries_are_active() -> None:
    a = act([e(1, "x", "one"), e(2, "nope")], ["x"])
    active = a.active("book", 1)
    assert active is not None and active.content == "one"
    assert a.active("book", 2) is None and a.trace.get("book", 2).reason == "no_match"  # type: ignore[union-attr]


def test_a_book_scanned_again_is_placed_from_its_ranks_as_its_first_scan_placed_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A first scan reads its activated entries' orders and positions (``build_positions``); a book
    found again in the cache keeps every entry's rank and position (``place_activated``): both place
    alike, ties in order included."""
    from tavernbox.worldinfo import activation as activation_module

    ranked = {"calls": 0}
    place = activation_module.place_activated

    def counting(*args: Any) -> Any:
        ranked["calls"] += 1
        return place(*args)

    monkeypatch.setattr(activation_module, "place_activated", counting)
    rnd = random.Random(5)
    entries = [e(uid, "key", f"E{uid}" if rnd.random() < 0.9 else "", order=rnd.choice([1, 2, 2.0, 7]),
                 position=rnd.randint(0, 7), depth=rnd.randint(0, 1), role=rnd.randint(0, 2),
                 outletName=rnd.choice(["", "o"])) for uid in range(40)]
    book = {"name": f"ranks-{rnd.random()}", "entries": entries}
    first = activate_world_info(book, ["the key"], PLAIN)
    assert ranked["calls"] == 0
    again = activate_world_info(book, ["the key"], PLAIN)
    assert ranked["calls"] == 1
    assert again.by_position == first.by_position and again.by_position.to_json() == first.by_position.to_json()
