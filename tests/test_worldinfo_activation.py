"""The activation loop's rules, one test per rule (research digest 2.2-2.9)."""

from __future__ import annotations

from typing import Any

import pytest

from tavernbox import TemplateError
from tavernbox.worldinfo import Activation, activate_world_info, to_json

PLAIN = {"world_info_depth": 2, "world_info_budget": 100, "max_context": 1000, "world_info_include_names": False,
         "world_info_match_whole_words": False}


def e(uid: int, key: list[str] | str | None = None, content: str | None = None, **fields: Any) -> dict[str, Any]:
    keys = [key] if isinstance(key, str) else (key or [])
    return {"uid": uid, "key": keys, "content": content if content is not None else f"E{uid}", **fields}


def act(entries: Any, chat: list[Any], **kwargs: Any) -> Activation:
    settings = {**PLAIN, **kwargs.pop("settings", {})}
    books = entries if not isinstance(entries, list) else {"entries": entries}
    return activate_world_info(books, chat, settings, **kwargs)


def reason(a: Activation, uid: int, book: str = "book") -> str:
    record = a.trace.get(book, uid)
    assert record is not None
    return record.reason


# -- sources and order --------------------------------------------------------------------------


def _books(strategy: int) -> list[str]:
    books = [
        {"name": "glob", "source": "global", "entries": [e(1, "x", "G-hi", order=300), e(2, "x", "G-lo", order=1)]},
        {"name": "char", "source": "character", "entries": [e(1, "x", "C", order=100)]},
        {"name": "chatbook", "source": "chat", "entries": [e(1, "x", "CHAT", order=1)]},
        {"name": "persona", "source": "persona", "entries": [e(1, "x", "P", order=1)]},
    ]
    # a budget of 3 one-word entries shows the scan order: the first three win
    a = activate_world_info(books, ["x"], {**PLAIN, "world_info_budget": 4, "max_context": 100,
                                           "world_info_character_strategy": strategy})
    return [item.content for item in a.activated]


def test_book_order_chat_then_persona_then_character_first() -> None:
    assert _books(1) == ["CHAT", "P", "C"]


def test_book_order_global_first() -> None:
    assert _books(2) == ["CHAT", "P", "G-hi"]


def test_book_order_evenly_merges_character_and_global_by_order() -> None:
    assert _books(0) == ["CHAT", "P", "G-hi"]


def test_book_scanned_once_when_named_by_two_sources() -> None:
    books = [{"name": "same", "source": "global", "entries": [e(1, "x")]},
             {"name": "same", "source": "character", "entries": [e(1, "x")]}]
    a = activate_world_info(books, ["x"], PLAIN)
    assert len(a.activated) == 1 and len(a.trace) == 1


def test_book_entries_object_walked_in_javascript_key_order() -> None:
    # "10" comes after "2" (array-index keys ascending), which decides ties in order
    book = {"entries": {"10": e(10, "x", "ten"), "2": e(2, "x", "two")}}
    assert act(book, ["x"]).before == "ten\ntwo"


# -- the scan buffer ------------------------------------------------------------------------------


def test_buffer_includes_names_when_configured() -> None:
    chat = [{"role": "user", "name": "Alice", "content": "hello"}]
    assert act([e(1, "alice")], chat, settings={"world_info_include_names": True}).uids == [1]
    assert act([e(1, "alice")], chat).uids == []


def test_buffer_skips_system_messages() -> None:
    chat = ["dragon", {"role": "system", "content": "a"}, {"role": "system", "content": "b"}, "c"]
    assert act([e(1, "dragon")], chat).uids == [1]


def test_buffer_drops_the_swiped_message() -> None:
    assert act([e(1, "dragon")], ["a", "dragon"], generation_type="swipe").uids == []


@pytest.mark.parametrize("flag,field", [
    ("matchPersonaDescription", "persona_description"),
    ("matchCharacterDescription", "character_description"),
    ("matchCharacterPersonality", "character_personality"),
    ("matchCharacterDepthPrompt", "character_depth_prompt"),
    ("matchScenario", "scenario"),
    ("matchCreatorNotes", "creator_notes"),
])
def test_buffer_extra_match_sources(flag: str, field: str) -> None:
    context = {field: "a dragon sleeps"}
    assert act([e(1, "dragon", **{flag: True})], ["hi"], context=context).uids == [1]
    assert act([e(1, "dragon")], ["hi"], context=context).uids == []


def test_buffer_scans_injections() -> None:
    assert act([e(1, "dragon")], ["hi"], context={"injections": ["AN: a dragon"]}).uids == [1]


def test_buffer_regex_dollar_sees_the_assembled_end() -> None:
    # the newest message is first in the buffer, so "$" is at the end of the oldest scanned one
    assert act([e(1, "/old$/")], ["old", "new"]).uids == [1]
    assert act([e(1, "/new$/")], ["old", "new"]).uids == []


# -- filters -----------------------------------------------------------------------------------


def test_trigger_filters_generation_types() -> None:
    entry = e(1, "x", triggers=["continue"])
    assert act([entry], ["x"]).uids == []
    assert act([entry], ["x"], generation_type="continue").uids == [1]
    assert reason(act([entry], ["x"]), 1) == "trigger"


def test_character_filter_names_include_and_exclude() -> None:
    only = e(1, "x", characterFilter={"names": ["alice"], "isExclude": False})
    never = e(2, "x", characterFilter={"names": ["alice"], "isExclude": True})
    a = act([only, never], ["x"], context={"character": "alice"})
    b = act([only, never], ["x"], context={"character": "bob"})
    assert a.uids == [1] and b.uids == [2]
    assert reason(a, 2) == "filter"


def test_character_filter_tags() -> None:
    tagged = e(1, "x", characterFilter={"tags": ["t1"]})
    assert act([tagged], ["x"], context={"character": "a", "character_tags": ["t1"]}).uids == [1]
    assert act([tagged], ["x"], context={"character": "a", "character_tags": ["t2"]}).uids == []


def test_unknown_generation_type_is_an_error() -> None:
    with pytest.raises(TemplateError) as info:
        act([e(1, "x")], ["x"], generation_type="dream")
    assert info.value.code == "INPUT_INVALID"


# -- decorators and forcing ------------------------------------------------------------------------


def test_decorator_with_trailing_space_is_known_but_inert() -> None:
    a = act([e(1, None, "@@activate \nBody")], ["x"])
    assert a.uids == []


def test_decorator_fallback_lines() -> None:
    # "@@@activate" is read only after an unknown decorator
    assert act([e(1, None, "@@unknown\n@@@activate\nBody")], ["x"]).before == "Body"
    assert act([e(1, None, "@@@activate\nBody")], ["x"]).uids == []


def test_forced_activation() -> None:
    assert act([e(1, "nope")], ["x"], forced=[("book", 1)]).uids == [1]


# -- recursion, delay levels, min activations ----------------------------------------------------------


def test_delay_levels_run_even_with_recursion_off() -> None:
    # the first level is taken with the initial pass; the next level forces a recursion step in
    # which every entry up to that level may match
    entries = [e(1, "x", "level one", delayUntilRecursion=1), e(2, "x", "level two", delayUntilRecursion=2)]
    a = act(entries, ["x"], settings={"world_info_recursive": False})
    assert a.uids == [1, 2]
    assert [(s.state, s.level) for s in a.trace.steps] == [("initial", 1), ("recursion", 2)]


def test_budget_cut_entries_still_feed_delayed_recursion() -> None:
    # quirk 2.11 #4: the entry cut by the budget still counts as "successful" and its text is scanned
    entries = [e(1, "x", "a b c d e f g h i j k l dragon", order=100),
               e(2, "dragon", "D", delayUntilRecursion=2, ignoreBudget=True), e(3, "never", delayUntilRecursion=1)]
    a = act(entries, ["x"], settings={"world_info_budget": 5, "max_context": 100})
    assert reason(a, 1) == "budget"
    assert a.uids == [2]


def test_min_activations_scan_up_to_depth_max_plus_one() -> None:
    # quirk 2.11 #6: with depth 1 and depth_max 2 the scan still reaches the third newest message
    chat = ["deep", "b", "c"]
    settings = {"world_info_depth": 1, "world_info_min_activations": 1, "world_info_min_activations_depth_max": 2}
    assert act([e(1, "deep")], chat, settings=settings).uids == [1]
    assert act([e(1, "deep")], ["deep", "a", "b", "c"], settings=settings).uids == []


def test_min_activations_stop_after_budget_overflow() -> None:
    entries = [e(1, "x", "a b c d e f"), e(2, "deep", "D", ignoreBudget=True)]
    settings = {"world_info_budget": 5, "max_context": 100, "world_info_min_activations": 2}
    assert act(entries, ["deep", "b", "x"], settings=settings).uids == []


def test_min_activations_leave_out_the_recursion_buffer() -> None:
    entries = [e(1, "x", "mentions dragon"), e(2, "dragon", "D", delayUntilRecursion=False),
               e(3, "far", "F")]
    settings = {"world_info_depth": 1, "world_info_min_activations": 3, "world_info_recursive": True}
    a = act(entries, ["far", "x"], settings=settings)
    assert set(a.uids) == {1, 2, 3}
    states = [s.state for s in a.trace.steps]
    assert states[:2] == ["initial", "recursion"] and "min_activations" in states


def test_max_recursion_steps_limits_passes() -> None:
    chain = [e(1, "a", "b"), e(2, "b", "c"), e(3, "c", "d")]
    assert act(chain, ["a"], settings={"world_info_max_recursion_steps": 2}).uids == [1, 2]
    assert act(chain, ["a"]).uids == [1, 2, 3]


# -- inclusion groups ------------------------------------------------------------------------


def test_group_loser_trace_names_the_winner() -> None:
    a = act([e(1, "x", group="g", order=20), e(2, "x", group="g", order=10)], ["x"], rng=lambda: 0.0)
    assert a.uids == [1]
    record = a.trace.get("book", 2)
    assert record is not None and record.reason == "group" and record.winner == 1
    assert "lost to uid 1" in record.detail
    assert [d.kind for d in a.draws] == ["group"]


def test_group_already_activated_blocks_later_members() -> None:
    entries = [e(1, "x", "mentions y", group="g"), e(2, "y", group="g")]
    a = act(entries, ["x"])
    assert a.uids == [1] and reason(a, 2) == "group"
    assert "activated in an earlier pass" in a.trace.get("book", 2).detail  # type: ignore[union-attr]


def test_group_multi_membership_loser_leaves_every_group() -> None:
    entries = [e(1, "x", group="a,b", order=30), e(2, "x", group="a", order=20), e(3, "x", group="b", order=10)]
    a = act(entries, ["x"], rng=lambda: 0.99)  # group a: uid 2 wins; uid 1 is out of group b too
    assert set(a.uids) == {2, 3}


def test_group_sticky_member_holds_the_group() -> None:
    entries = [e(1, "x", group="g", order=20, sticky=3), e(2, "x", group="g", order=10)]
    first = act(entries, ["x"], rng=lambda: 0.0)
    assert first.uids == [1]
    second = act(entries, ["x", "y"], state=first.state, rng=lambda: 0.99)
    assert second.uids == [1]
    assert reason(second, 2) == "group"
    assert second.trace.get("book", 2).winner == 1  # type: ignore[union-attr]


def test_group_member_on_cooldown_is_dropped_even_when_sticky() -> None:
    entries = [e(1, "x", group="g", sticky=3, cooldown=3)]
    first = act(entries, ["x"])
    second = act(entries, ["x", "x"], state=first.state)
    assert first.uids == [1] and second.uids == []
    assert reason(second, 1) == "cooldown"


def test_group_scoring_per_entry_flag() -> None:
    entries = [e(1, ["x"], group="g", useGroupScoring=True, order=30), e(2, ["x", "y"], group="g", order=10)]
    assert act(entries, ["x y"], rng=lambda: 0.0).uids == [2]


# -- probability and randomness -------------------------------------------------------------------------


def test_probability_draws_are_recorded_and_seeded() -> None:
    entries = [e(i, "x", probability=50) for i in range(20)]
    a = act(entries, ["x"], seed=1)
    b = act(entries, ["x"], seed=1)
    c = act(entries, ["x"], seed=2)
    assert a.uids == b.uids and [d.value for d in a.draws] == [d.value for d in b.draws]
    assert a.uids != c.uids
    assert len(a.draws) == 20 and all(d.kind == "probability" for d in a.draws)
    assert {d.subject for d in a.draws if d.outcome == "pass"} == {f"book.{u}" for u in a.uids}


def test_probability_failure_bans_for_the_scan() -> None:
    entries = [e(1, "x", "mentions y"), e(2, ["x", "y"], probability=10)]
    a = act(entries, ["x"], rng=lambda: 0.5)
    assert a.uids == [1] and reason(a, 2) == "probability"
    assert len(a.draws) == 1  # not rolled again in the recursion pass


def test_sticky_entries_skip_the_probability_roll() -> None:
    entries = [e(1, "x", sticky=3, probability=50)]
    first = act(entries, ["x"], rng=lambda: 0.1)
    second = act(entries, ["x", "y"], state=first.state, rng=lambda: 0.9)
    assert second.uids == [1] and reason(second, 1) == "sticky" and second.draws == ()


# -- budget and tokens -------------------------------------------------------------------------------


def test_budget_pluggable_token_counter() -> None:
    entries = [e(1, "x", "abcdefghij", order=2), e(2, "x", "k", order=1)]
    a = act(entries, ["x"], settings={"world_info_budget": 10, "max_context": 100}, token_counter=len)
    assert a.uids == [] and a.budget == 10
    b = act(entries, ["x"], settings={"world_info_budget": 10, "max_context": 100})
    assert b.uids == [1, 2]


def test_budget_estimate_tokenizer() -> None:
    entries = [e(1, "x", "a" * 40)]
    assert act(entries, ["x"], settings={"world_info_budget": 10, "max_context": 100, "tokenizer": "estimate"}).uids == []
    assert act(entries, ["x"], settings={"world_info_budget": 20, "max_context": 100, "tokenizer": "estimate"}).uids == [1]


def test_budget_rounds_half_up_like_javascript() -> None:
    assert act([e(1, "x")], ["x"], settings={"world_info_budget": 2.5, "max_context": 100}).budget == 3


# -- macro expansion ---------------------------------------------------------------------------------


def test_expand_hook_expands_keys_and_contents() -> None:
    def expand(text: str) -> str:
        return text.replace("{{char}}", "Seraphina")

    a = act([e(1, "{{char}}", "{{char}} is here")], ["seraphina waves"], expand=expand)
    assert a.before == "Seraphina is here"


def test_expand_hook_error_becomes_a_diagnostic() -> None:
    def expand(text: str) -> str:
        raise TemplateError("too big", code="MACRO_OUTPUT_LIMIT")

    a = act([e(1, "x", "body")], ["x"], expand=expand)
    assert a.before == "body"
    assert any(d.code == "MACRO_OUTPUT_LIMIT" for d in a.diagnostics)


# -- input normalisation ----------------------------------------------------------------------------


def test_entry_defaults_for_absent_fields() -> None:
    from tavernbox.worldinfo import normalize_book

    book, diagnostics = normalize_book({"entries": {"5": {}}})
    entry = book.entries[0]
    assert (entry.uid, entry.order, entry.position, entry.depth, entry.probability) == (5, 100, 0, 4, 100)
    assert entry.selective and entry.use_probability and not entry.constant
    assert diagnostics == []


def test_entry_bad_field_types_become_diagnostics_with_paths() -> None:
    a = act({"entries": {"1": {"uid": 1, "key": "x", "order": "high", "content": "C"}}}, ["x"])
    assert a.uids == [1]
    paths = {d.path for d in a.diagnostics}
    assert "$.entries.1.order" in paths and "$.entries.1.key" in paths


def test_books_that_are_not_books_are_input_errors() -> None:
    with pytest.raises(TemplateError) as info:
        activate_world_info({"entries": 5}, ["x"])
    assert info.value.code == "INPUT_INVALID"


def test_settings_with_wrong_types_name_the_setting() -> None:
    with pytest.raises(TemplateError) as info:
        activate_world_info({"entries": []}, ["x"], {"world_info_recursive": "yes"})
    assert info.value.path == "$.world_info_recursive"


def test_chat_must_be_a_list() -> None:
    with pytest.raises(TemplateError):
        activate_world_info({"entries": []}, "not a list")


# -- the JSON shape --------------------------------------------------------------------------------


def test_to_json_has_exactly_the_documented_keys() -> None:
    out = to_json(act([e(1, "x")], ["x"]))
    assert list(out) == ["before", "after", "an_top", "an_bottom", "at_depth", "em_top", "em_bottom", "outlets",
                         "activated", "trace", "state"]
    assert out["activated"] == [{"book": "book", "uid": 1}]


def test_budget_words_split_on_javascript_whitespace() -> None:
    from tavernbox.worldinfo.settings import count_words

    assert count_words("a b\x1cc \ufeff d\n") == 3
    assert count_words("") == 0
