"""Regex entries carried from pass to pass give the trace a look at them in every pass gives.

``_Run.settle_regex_entries`` keeps an entry whose regex keys provably answer as before out of the
pass ("waiting"); its decision is written with the step of the last pass that carried it only when
it stops waiting (its literal turns up in new recursion text, a copy of it activates, a pass looks
at every entry, the loop ends). ``Shortcuts(wi_settled_regex=False)`` looks at every regex entry in
every pass: the two must give the same activation and the same trace, step and state included.
(:data:`PLAIN` rescans every entry in every pass, so a record that is no activation may name a later
step there: it is compared without them.) Keys with a space, tested on recursion pieces by their
word-run windows before a search, are held to the plain search the same way.
"""

from __future__ import annotations

import random
from typing import Any

import pytest

from tavernbox.shortcuts import PLAIN, Shortcuts
from tavernbox.worldinfo import activate_world_info

WORDS = ["ash", "oak", "elm", "fir", "yew", "Ivy", "maſk", "KELVIN", "w0rd12", "w0rd123"]


def _book(rnd: random.Random, size: int) -> list[dict[str, Any]]:
    entries = []
    for uid in range(size):
        a, b = rnd.sample(WORDS, 2)
        keys = [rnd.choice([f"/{a}/", f"/{a}/i", f"/{a}\\s+{b}/i", f"/{a}[\\s\\S]*{b}/", f"/{a}$/", f"/{a}\\d*/i",
                            f"/(?:{a}|{b})x?/", a])]
        if rnd.random() < 0.3:
            keys.append(rnd.choice([f"/{b}/i", b, f"/{b}{a}/"]))
        entry: dict[str, Any] = {"uid": uid if rnd.random() < 0.9 else 0, "key": keys,
                                 "content": " ".join(rnd.sample(WORDS, rnd.randint(1, 3))), "order": rnd.randint(1, 9)}
        if rnd.random() < 0.3:
            entry["keysecondary"] = [rnd.choice([f"/{b}/", f"/{a}.{b}/i", b])]
            entry["selectiveLogic"] = rnd.randint(0, 3)
        if rnd.random() < 0.1:
            entry["delayUntilRecursion"] = rnd.randint(1, 2)
        if rnd.random() < 0.1:
            entry["probability"] = 50
        entries.append(entry)
    return entries


def _decided(record: dict[str, Any]) -> dict[str, Any]:
    if record["outcome"] == "activated":
        return record
    return {name: value for name, value in record.items() if name not in ("step", "state")}


def _settings(rnd: random.Random) -> dict[str, Any]:
    return {"world_info_depth": rnd.randint(1, 3), "world_info_budget": 100, "max_context": 2000,
            "world_info_case_sensitive": rnd.random() < 0.3,
            "world_info_max_recursion_steps": rnd.choice([0, 0, 2, 3]),
            "world_info_min_activations": rnd.choice([0, 0, 0, 4]),
            "world_info_min_activations_depth_max": rnd.choice([0, 5])}


@pytest.mark.parametrize("seed", range(4))
def test_waiting_regex_entries_get_the_decision_of_a_look_in_every_pass(seed: int) -> None:
    rnd = random.Random(seed)
    passes = carried_steps = 0
    for _ in range(60):
        entries = _book(rnd, rnd.randint(6, 24))
        chat = [" ".join(rnd.sample(WORDS, 3)) for _ in range(rnd.randint(1, 6))]
        conf = _settings(rnd)
        runs = [activate_world_info({"entries": entries}, chat, conf, seed=seed, shortcuts=shortcuts)
                for shortcuts in (Shortcuts(), Shortcuts(wi_settled_regex=False), PLAIN)]
        fast, full, plain = (run.trace.to_list() for run in runs)
        assert runs[0].uids == runs[1].uids == runs[2].uids
        assert fast == full
        assert [_decided(r) for r in fast] == [_decided(r) for r in plain]
        assert [s.candidates for s in runs[0].trace.steps] == [s.candidates for s in runs[1].trace.steps]
        passes += len(runs[0].trace.steps)
        last = len(runs[0].trace.steps)
        carried_steps += sum(1 for r in fast if r["reason"] == "no_match" and r["step"] == last and last > 2)
    assert passes > 150  # recursion passes happened
    assert carried_steps > 10  # entries decided in the last of several passes (carried there, or looked at)


def test_an_entry_waits_through_passes_and_gets_the_last_step() -> None:
    # the regex entry's literal never turns up: it waits from pass 2 on, its record says the last pass
    entries = [{"uid": 0, "key": ["start"], "content": "one"},
               {"uid": 1, "key": ["one"], "content": "two"},
               {"uid": 2, "key": ["two"], "content": "three"},
               {"uid": 3, "key": ["/absent\\s+word/i"], "content": "never"}]
    fast = activate_world_info({"entries": entries}, ["start here"], {"world_info_recursive": True})
    full = activate_world_info({"entries": entries}, ["start here"], {"world_info_recursive": True},
                               shortcuts=Shortcuts(wi_settled_regex=False))
    record = fast.trace.get("book", 3)
    assert record is not None and record.reason == "no_match"
    assert record.step == len(fast.trace.steps) == 4
    assert fast.trace.to_list() == full.trace.to_list()


def test_a_waiting_entry_whose_copy_activates_before_a_full_pass_keeps_its_last_step() -> None:
    # uid 5 twice: the regex copy waits from pass 2; the other copy activates in pass 3 without
    # recursing, so pass 4 (minimum activations) looks at every entry and passes the copy over
    entries = {"a": {"uid": 0, "key": ["start"], "content": "one"},
               "b": {"uid": 1, "key": ["one"], "content": "two"},
               "c": {"uid": 5, "key": ["/absent\\s+zz/"], "content": "c", "order": 200},
               "d": {"uid": 5, "key": ["two"], "content": "d", "preventRecursion": True}}
    conf = {"world_info_recursive": True, "world_info_depth": 1, "world_info_min_activations": 10}
    chat = ["older words", "start"]
    fast = activate_world_info({"entries": entries}, chat, conf)
    full = activate_world_info({"entries": entries}, chat, conf, shortcuts=Shortcuts(wi_settled_regex=False))
    assert [s.state for s in fast.trace.steps][:4] == ["initial", "recursion", "recursion", "min_activations"]
    assert fast.trace.to_list() == full.trace.to_list()
    waited = [r for r in fast.trace.to_list() if r["uid"] == 5 and r["reason"] == "no_match"]
    assert waited and waited[0]["step"] == 3


@pytest.mark.parametrize("key", ["/zed\\s/", "/zed\\s/i", "/ZED\\s+/i"])
def test_a_regex_completed_by_the_newline_before_new_recursion_text_activates(key: str) -> None:
    # the oldest message "zed" ends the first pass's text; recursion text adds "\n\x01other", and
    # "zed\n" matches: a regex whose matches stay within pieces still ends at that newline
    entries = [{"uid": 0, "key": ["start"], "content": "other"}, {"uid": 1, "key": [key], "content": "hit"}]
    chat = ["zed", "start"]
    fast = activate_world_info({"entries": entries}, chat, {"world_info_recursive": True})
    full = activate_world_info({"entries": entries}, chat, {"world_info_recursive": True},
                               shortcuts=Shortcuts(wi_settled_regex=False))
    assert fast.uids == full.uids == [0, 1]
    assert fast.trace.to_list() == full.trace.to_list()


@pytest.mark.parametrize("seed", range(3))
def test_phrase_keys_in_recursion_text_answer_as_the_plain_search(seed: int) -> None:
    # keys with a space are searched as substrings; in a recursion piece whose word-run windows
    # piece_hits kept, a key whose window is none of them is passed over without a search
    rnd = random.Random(seed)
    words = ["amber", "gates", "stone", "river", "a", "the", "tower12", "Tower123"]
    for _ in range(40):
        entries = []
        for uid in range(rnd.randint(5, 16)):
            a, b = rnd.sample(words, 2)
            keys = [rnd.choice([f"{a} {b}", f"{a}.{b}", a, f"{a} {b} {a}"])]
            entries.append({"uid": uid, "key": keys, "content": " ".join(rnd.choices(words, k=rnd.randint(1, 4))),
                            "order": rnd.randint(1, 9), "matchWholeWords": rnd.random() < 0.7})
        chat = [" ".join(rnd.choices(words, k=3)) for _ in range(rnd.randint(1, 3))]
        conf = {"world_info_depth": 2, "world_info_case_sensitive": rnd.random() < 0.3}
        fast = activate_world_info({"entries": entries}, chat, conf)
        plain = activate_world_info({"entries": entries}, chat, conf, shortcuts=PLAIN)
        assert fast.uids == plain.uids
        assert [_decided(r) for r in fast.trace.to_list()] == [_decided(r) for r in plain.trace.to_list()]
