"""The world-info facts table (research digest 3.3, W1-W39): SillyTavern 1.18 run headless.

Context for every row unless a row says otherwise: depth 2; budget 100 % of 1000 tokens; recursion
on; case-insensitive; whole words off; whitespace-word tokens; a dry run. Chats are oldest first.
Rows that fix ``Math.random`` use the ``rng`` hook with the same value.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tavernbox.worldinfo import Activation, activate_world_info

BASE = {
    "world_info_depth": 2,
    "world_info_budget": 100,
    "max_context": 1000,
    "world_info_recursive": True,
    "world_info_case_sensitive": False,
    "world_info_match_whole_words": False,
    "world_info_include_names": False,
}


def run(entries: list[dict[str, Any]], chat: list[str], *, dry_run: bool = True, rng: float | None = None,
        state: dict[str, Any] | None = None, **settings: Any) -> Activation:
    conf = {**BASE, **settings}
    roll: Callable[[], float] | None = (lambda: rng) if rng is not None else None
    return activate_world_info({"entries": entries}, chat, conf, state, dry_run=dry_run, rng=roll)


def e(uid: int, key: list[str] | str | None = None, content: str | None = None, **fields: Any) -> dict[str, Any]:
    keys = [key] if isinstance(key, str) else (key or [])
    return {"uid": uid, "key": keys, "content": content if content is not None else f"E{uid}", **fields}


def uids(a: Activation) -> set[int | str]:
    return set(a.uids)


def test_w1_order_ties_and_positions() -> None:
    a = run([e(1, "x", "one"), e(2, "x", "two"), e(3, "x", "three", order=50), e(4, "x", "four", order=200, position=1)],
            ["x"])
    assert a.before == "three\ntwo\none"
    assert a.after == "four"


def test_w2_message_beyond_scan_depth_is_not_scanned() -> None:
    assert uids(run([e(1, "old")], ["old", "b", "c"])) == set()


def test_w3_entry_scan_depth_reaches_further() -> None:
    assert uids(run([e(1, "old", scanDepth=3)], ["old", "b", "c"])) == {1}


def test_w4_scan_depth_zero_scans_nothing() -> None:
    assert uids(run([e(1, "old", scanDepth=0)], ["old"])) == set()


def test_w5_case_sensitive_entry() -> None:
    assert uids(run([e(1, "Alice", caseSensitive=True)], ["ALICE"])) == set()
    assert uids(run([e(1, "Alice")], ["ALICE"])) == {1}


def test_w6_substring_vs_whole_words() -> None:
    assert uids(run([e(1, "hero")], ["superhero"])) == {1}
    assert uids(run([e(1, "hero", matchWholeWords=True)], ["superhero"])) == set()


def test_w7_punctuation_is_a_word_boundary() -> None:
    assert uids(run([e(1, "hero", matchWholeWords=True)], ["hero!"])) == {1}


def test_w8_multi_word_key_falls_back_to_substring() -> None:
    assert uids(run([e(1, "red dra", matchWholeWords=True)], ["a red dragon"])) == {1}


def test_w9_non_ascii_letters_are_word_boundaries() -> None:
    assert uids(run([e(1, "caf")], ["café"], world_info_match_whole_words=True)) == {1}
    assert uids(run([e(1, "café")], ["cafés"], world_info_match_whole_words=True)) == set()


def test_w10_regex_key_flags_decide_case() -> None:
    assert uids(run([e(1, "/dragon/i")], ["The DRAGON"])) == {1}
    assert uids(run([e(1, "/dragon/")], ["The DRAGON"])) == set()


def test_w11_caret_never_matches_because_of_the_hidden_prefix() -> None:
    assert uids(run([e(1, "/^alice/im")], ["Alice went"])) == set()


def test_w12_invalid_regex_is_matched_as_plain_text() -> None:
    a = run([e(1, "/a(b/")], ["x /a(b/ y"])
    assert uids(a) == {1}
    assert any(d.code == "WI_REGEX_INVALID" for d in a.diagnostics)


def test_w13_keys_are_trimmed_but_inner_space_is_kept() -> None:
    assert uids(run([e(1, "  alice  ")], ["alice"])) == {1}
    assert uids(run([e(1, "al ice")], ["al  ice"])) == set()


@pytest.mark.parametrize(
    ("logic", "expected"),
    [(0, [False, True, True]), (1, [True, True, False]), (2, [True, False, False]), (3, [False, False, True])],
    ids=["AND_ANY", "NOT_ALL", "NOT_ANY", "AND_ALL"],
)
def test_w14_secondary_key_logics(logic: int, expected: list[bool]) -> None:
    for chat, want in zip(["k", "k a", "k a b"], expected):
        entry = e(1, "k", keysecondary=["a", "b"], selectiveLogic=logic, selective=True)
        assert (1 in uids(run([entry], [chat]))) is want, chat


def test_w15_non_selective_entry_ignores_secondary_keys() -> None:
    entry = e(1, "k", keysecondary=["a", "b"], selectiveLogic=2, selective=False)
    assert uids(run([entry], ["k a b"])) == {1}


def test_w16_constant_and_disabled() -> None:
    assert uids(run([e(1, None, constant=True)], ["anything"])) == {1}
    assert uids(run([e(1, None, constant=True, disable=True)], ["anything"])) == set()


def test_w17_decorators() -> None:
    a = run([e(1, None, "@@activate\nBody")], ["x"])
    assert uids(a) == {1}
    assert a.before == "Body"
    assert uids(run([e(1, "x", "@@dont_activate\nBody")], ["x"])) == set()


def test_w18_decorator_only_content_stays() -> None:
    a = run([e(1, None, "@@activate")], ["x"])
    assert uids(a) == {1}
    assert a.before == "@@activate"


W19 = [e(1, "alice", "Alice knows bob"), e(2, "bob", "Bob is a smith")]


def test_w19_recursion() -> None:
    a = run(W19, ["alice"])
    assert a.before == "Bob is a smith\nAlice knows bob"


def test_w20_recursion_off_prevent_and_exclude() -> None:
    assert uids(run(W19, ["alice"], world_info_recursive=False)) == {1}
    assert uids(run([{**W19[0], "preventRecursion": True}, W19[1]], ["alice"])) == {1}
    assert uids(run([W19[0], {**W19[1], "excludeRecursion": True}], ["alice"])) == {1}


def test_w21_exclude_recursion_still_matches_the_chat() -> None:
    assert uids(run([W19[0], {**W19[1], "excludeRecursion": True}], ["alice bob"])) == {1, 2}


def test_w22_delay_until_recursion_alone_never_activates() -> None:
    assert uids(run([e(1, "bob", delayUntilRecursion=True)], ["bob"])) == set()


def test_w23_delay_levels_step_through() -> None:
    entries = [
        e(1, "start", "go l1"),
        e(2, "l1", "go l2", delayUntilRecursion=1),
        e(3, "l2", "done", delayUntilRecursion=2),
        e(4, "start", "lvl2-direct", delayUntilRecursion=2),
    ]
    assert uids(run(entries, ["start"])) == {1, 2, 3, 4}


def test_w24_max_recursion_steps_one_is_the_initial_pass() -> None:
    assert uids(run(W19, ["alice"], world_info_max_recursion_steps=1)) == {1}


def test_w25_budget_cuts_the_lowest_order() -> None:
    entries = [e(1, "x", "a b c d", order=300), e(2, "x", "a b c d", order=200), e(3, "x", "a b c d", order=100)]
    assert uids(run(entries, ["x"], max_context=100, world_info_budget=10)) == {1, 2}


def test_w26_ignore_budget_gets_in_after_overflow() -> None:
    entries = [e(1, "x", "a b c d", order=300), e(2, "x", "a b c d e f g h", order=200),
               e(3, "x", "a b c d", order=100, ignoreBudget=True)]
    assert uids(run(entries, ["x"], max_context=100, world_info_budget=10)) == {1, 3}


def test_w27_budget_cap() -> None:
    entries = [e(1, "x", "a b c d", order=300), e(2, "x", "a b c d", order=200)]
    assert uids(run(entries, ["x"], world_info_budget_cap=5)) == {1}


def test_w28_zero_budget_is_one_token_and_one_token_overflows() -> None:
    assert uids(run([e(1, "x", "word")], ["x"], world_info_budget=0)) == set()


def test_w29_every_position() -> None:
    entries = [
        e(0, "x", "P0", order=800, position=0),
        e(1, "x", "P1", order=700, position=1),
        e(2, "x", "P2", order=600, position=2),
        e(3, "x", "P3", order=500, position=3),
        e(4, "x", "P4", order=400, position=4, depth=2, role=1),
        e(5, "x", "P5", order=300, position=5),
        e(6, "x", "P6", order=200, position=6),
        e(7, "x", "P7", order=100, position=7, outletName="out"),
    ]
    out = run(entries, ["x"]).by_position.to_json()
    assert out["before"] == "P0" and out["after"] == "P1"
    assert out["an_top"] == ["P2"] and out["an_bottom"] == ["P3"]
    assert out["at_depth"] == [{"depth": 2, "role": "user", "content": "P4"}]
    assert out["em_top"] == ["P5"] and out["em_bottom"] == ["P6"]
    assert out["outlets"] == {"out": "P7"}


def test_w30_min_activations_grow_the_depth() -> None:
    a = run([e(1, "deep")], ["deep", "a", "b", "c"], world_info_min_activations=1, world_info_recursive=False)
    assert uids(a) == {1}


def test_w31_group_roll_picks_by_candidate_order() -> None:
    entries = [e(1, "x", order=10, group="g"), e(2, "x", order=20, group="g")]
    assert uids(run(entries, ["x"], rng=0.0)) == {2}
    assert uids(run(entries, ["x"], rng=0.99)) == {1}


def test_w32_group_weights() -> None:
    entries = [e(1, "x", order=20, group="g", groupWeight=1), e(2, "x", order=10, group="g", groupWeight=99)]
    assert uids(run(entries, ["x"], rng=0.5)) == {2}


def test_w33_group_override_highest_order_wins() -> None:
    entries = [e(1, "x", order=10, group="g", groupOverride=True), e(2, "x", order=20, group="g", groupOverride=True),
               e(3, "x", order=99, group="g")]
    assert uids(run(entries, ["x"])) == {2}


def test_w34_group_scoring() -> None:
    entries = [e(1, ["x"], group="g"), e(2, ["x", "y"], group="g")]
    assert uids(run(entries, ["x y"], world_info_use_group_scoring=True)) == {2}


def test_w35_probability_roll_is_inclusive() -> None:
    assert uids(run([e(1, "x", probability=50)], ["x"], rng=0.50)) == {1}
    assert uids(run([e(1, "x", probability=50)], ["x"], rng=0.51)) == set()


def test_w36_probability_off() -> None:
    assert uids(run([e(1, "x", probability=0, useProbability=False)], ["x"], rng=0.99)) == {1}


def test_w37_delay_counts_messages() -> None:
    assert uids(run([e(1, "x", delay=3)], ["x", "x"])) == set()
    assert uids(run([e(1, "x", delay=3)], ["x", "x", "x"])) == {1}


def _timed_series(chats: list[list[str]]) -> list[bool]:
    state: dict[str, Any] | None = None
    out = []
    for chat in chats:
        a = run([e(1, "trigger", sticky=2, cooldown=2)], chat, dry_run=False, state=state)
        state = a.state
        out.append(1 in uids(a))
    return out


def test_w38_sticky_then_cooldown_with_the_key_everywhere() -> None:
    chats = [["trigger"] * n for n in range(1, 8)]
    assert _timed_series(chats) == [True, True, False, False, True, True, False]


def test_w39_sticky_then_cooldown_with_the_key_once() -> None:
    chats = [["trigger"] + ["other"] * (n - 1) for n in range(1, 8)]
    assert _timed_series(chats) == [True, True, False, False, False, False, False]
