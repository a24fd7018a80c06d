"""A pass's candidates decided and admitted in bulk give what looking at them one by one gives.

``_Run.admit_in_bulk`` admits every candidate of a pass in one go when no rule of ``_Run.admit``
can refuse one (no probability to roll, contents not expanded, words counted as running sums, the
pass's total still below the budget); otherwise the pass goes through ``_Run.admit`` entry by
entry. ``Shortcuts(wi_bulk_admit=False)`` always goes entry by entry. ``_Run.candidates_by_words``
decides an entry whose keys are all word keys of the index (secondary keys under any logic
included; no rule before them) in the pass's own loop from the word-run maps; ``Shortcuts(wi_word_candidates=False)``
sends each through ``_Run.consider``. Each pair must give the same activation, in the same order,
and the same trace, steps, draws and state, on generated books whose budgets are reached in some
passes, whose entries roll probabilities, ignore the budget, are copies of one another (the same
uid), are sticky, in groups, or have phrase, regex and secondary keys.
"""

from __future__ import annotations

import random
from typing import Any

import pytest

from tavernbox.shortcuts import PLAIN, Shortcuts
from tavernbox.worldinfo import activate_world_info
from tavernbox.worldinfo import activation as activation_module

WORDS = ["ash", "oak", "elm", "fir", "yew", "Ivy", "moss", "reed", "w0rd12"]


def _book(rnd: random.Random, size: int) -> list[dict[str, Any]]:
    entries = []
    for uid in range(size):
        keys = rnd.sample(WORDS, rnd.randint(1, 2))
        if rnd.random() < 0.1:
            keys = [f"/{keys[0]}\\s+\\w+/i"]
        elif rnd.random() < 0.1:
            keys = [f"{keys[0]} {rnd.choice(WORDS)}", *keys[1:]]
        entry: dict[str, Any] = {"uid": uid if rnd.random() < 0.9 else 0, "key": keys,
                                 "content": " ".join(rnd.choices(WORDS, k=rnd.randint(0, 6))),
                                 "order": rnd.randint(1, 9)}
        if rnd.random() < 0.2:
            entry["keysecondary"] = rnd.sample(WORDS, rnd.randint(1, 3))
            if rnd.random() < 0.2:
                entry["keysecondary"].append(f"{rnd.choice(WORDS)} {rnd.choice(WORDS)}")
            entry["selectiveLogic"] = rnd.randint(0, 3)
        if rnd.random() < 0.03:
            entry["probability"] = rnd.choice([0, 50, 99])
        if rnd.random() < 0.08:
            entry["ignoreBudget"] = True
        if rnd.random() < 0.08:
            entry["preventRecursion"] = True
        if rnd.random() < 0.05:
            entry["sticky"] = 2
        rule = rnd.random()  # a rule tested before the keys
        if rule < 0.03:
            entry["disable"] = True
        elif rule < 0.06:
            entry["constant"] = True
        elif rule < 0.09:
            entry["excludeRecursion"] = True
        elif rule < 0.12:
            entry["delayUntilRecursion"] = rnd.randint(1, 2)
        if rnd.random() < 0.05:
            entry["group"] = rnd.choice(["g1", "g2"])
        entries.append(entry)
    return entries


def _answer(activation: Any) -> dict[str, Any]:
    return {"uids": activation.uids, "positions": activation.by_position.to_json(),
            "trace": activation.trace.to_list(), "steps": [s.to_dict() for s in activation.trace.steps],
            "state": activation.state, "draws": activation.draws, "budget": activation.budget}


@pytest.fixture
def bulk_calls(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """How many passes were admitted in bulk, and how many fell back to one by one."""
    counts = {"bulk": 0, "one_by_one": 0}
    admit_in_bulk = activation_module._Run.admit_in_bulk

    def observed(self: Any, candidates: list[int], cursor: Any) -> list[str] | None:
        admitted = admit_in_bulk(self, candidates, cursor)
        counts["bulk" if admitted is not None else "one_by_one"] += 1
        return admitted

    monkeypatch.setattr(activation_module._Run, "admit_in_bulk", observed)
    return counts


def _world(rnd: random.Random) -> tuple[list[dict[str, Any]], list[str], dict[str, Any]]:
    entries = _book(rnd, rnd.randint(4, 30))
    chat = [" ".join(rnd.sample(WORDS, 3)) for _ in range(rnd.randint(1, 5))]
    if rnd.random() < 0.3:
        chat = [message.upper() for message in chat]
    conf = {"world_info_depth": rnd.randint(1, 4), "world_info_budget": rnd.choice([5, 100]),
            "max_context": rnd.choice([60, 400, 100_000]), "world_info_recursive": rnd.random() < 0.8,
            "world_info_max_recursion_steps": rnd.choice([0, 0, 3]),
            "world_info_min_activations": rnd.choice([0, 0, 3]),
            "world_info_case_sensitive": rnd.random() < 0.2}
    return entries, chat, conf


@pytest.mark.parametrize("seed", range(4))
def test_bulk_admission_equals_admitting_one_by_one(seed: int, bulk_calls: dict[str, int]) -> None:
    rnd = random.Random(seed)
    overflowed = 0
    for _ in range(80):
        entries, chat, conf = _world(rnd)
        runs = [activate_world_info({"entries": entries}, chat, conf, seed=seed, shortcuts=shortcuts)
                for shortcuts in (Shortcuts(), Shortcuts(wi_bulk_admit=False))]
        bulk, one_by_one = (_answer(run) for run in runs)
        assert bulk == one_by_one
        overflowed += any(r["reason"] == "budget" for r in bulk["trace"])
    assert bulk_calls["bulk"] > 50  # passes admitted at once
    assert bulk_calls["one_by_one"] > 30  # and passes a rule of admit had to decide one by one
    assert overflowed > 10  # budgets reached


@pytest.mark.parametrize("seed", range(4))
def test_word_candidates_equal_a_look_at_each(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    rnd = random.Random(seed)
    looks = {"consider": 0}
    consider = activation_module._Run.consider

    def counting(self: Any, *args: Any) -> bool:
        looks["consider"] += 1
        return consider(self, *args)

    monkeypatch.setattr(activation_module._Run, "consider", counting)
    saved = activated = 0
    for _ in range(80):
        entries, chat, conf = _world(rnd)
        looks["consider"] = 0
        by_words = activate_world_info({"entries": entries}, chat, conf, seed=seed)
        fast = looks["consider"]
        looks["consider"] = 0
        each = activate_world_info({"entries": entries}, chat, conf, seed=seed,
                                   shortcuts=Shortcuts(wi_word_candidates=False))
        assert _answer(by_words) == _answer(each)
        saved += looks["consider"] - fast
        activated += len(by_words.activated)
    assert activated > 300
    assert saved > 300  # entries decided without a look through consider


def test_plain_admits_one_by_one(bulk_calls: dict[str, int]) -> None:
    entries = [{"uid": i, "key": [w], "content": f"{w} and more"} for i, w in enumerate(WORDS)]
    chat = [" ".join(WORDS[:4])]
    default = activate_world_info({"entries": entries}, chat)
    assert bulk_calls["bulk"] > 0
    bulk_calls["bulk"] = 0
    plain = activate_world_info({"entries": entries}, chat, shortcuts=PLAIN)
    assert bulk_calls["bulk"] == 0
    # (PLAIN rescans every entry in every pass, so only activations are compared here)
    assert plain.uids == default.uids
    assert plain.by_position.to_json() == default.by_position.to_json()


@pytest.mark.parametrize("seed", range(3))
def test_word_candidates_with_own_depths_and_cases_equal_a_look_at_each(seed: int,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """Entries with their own scan depth, case and whole-word settings share a pass's word test only
    with entries of the same haystack and case (``_Run.word_test`` per slot); a haystack shallower
    than the chat index reads the chat's words within its depth. Each must decide as ``consider`` does."""
    within = {"calls": 0}
    words_within = activation_module._Run._words_within

    def counting(first: dict[str, int], limit: int) -> set[str]:
        within["calls"] += 1
        return words_within(first, limit)

    monkeypatch.setattr(activation_module._Run, "_words_within", staticmethod(counting))
    rnd = random.Random(100 + seed)
    activated = 0
    for _ in range(60):
        entries, _, conf = _world(rnd)
        for entry in entries:
            if rnd.random() < 0.3:
                entry["scanDepth"] = rnd.randint(1, 6)
            if rnd.random() < 0.2:
                entry["caseSensitive"] = rnd.random() < 0.5
            if rnd.random() < 0.1:
                entry["matchWholeWords"] = rnd.random() < 0.5
        chat = [" ".join(rnd.sample(WORDS, 2)) for _ in range(rnd.randint(3, 8))]
        by_words = activate_world_info({"entries": entries}, chat, conf, seed=seed)
        each = activate_world_info({"entries": entries}, chat, conf, seed=seed,
                                   shortcuts=Shortcuts(wi_word_candidates=False))
        assert _answer(by_words) == _answer(each)
        activated += len(by_words.activated)
    assert activated > 200
    assert within["calls"] > 10  # haystacks shallower than the chat index
