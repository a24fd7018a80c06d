"""World info's performance shortcuts are switched by name (``Shortcuts``' ``wi_*`` fields).

``PLAIN`` runs the reference path: every activation equals the default one (which takes the
shortcuts) and none of the nine shortcuts runs. The value travels with the call, so a thread
scanning with ``PLAIN`` and one scanning with the default may share a book at the same time.

Which shortcut ran is observed, not switched: wrappers around the methods that take one record
the thread that called them (the incremental passes, the settled regex entries, the pending
entries filled in without a look, the quick digest, the literal places of an anchored regex, a
pass admitted in bulk, a pass's word-keyed entries decided in its loop, a search spared because the
text lacks a window of a key's word runs, a regex literal not searched for because the text lacks
its first window).
"""

from __future__ import annotations

import json
import random
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tavernbox.shortcuts import DEFAULT, PLAIN, Shortcuts
from tavernbox.worldinfo import activate_world_info
from tavernbox.worldinfo import activation as activation_module
from tavernbox.worldinfo import matching as matching_module

WI_FIELDS = ("wi_incremental", "wi_fast_pending", "wi_settled_regex", "wi_quick_digest", "wi_anchored_regex",
             "wi_bulk_admit", "wi_word_candidates", "wi_key_windows", "wi_literal_windows")

Taken = dict[int, set[str]]  # thread id -> the shortcuts it ran


@pytest.fixture
def taken(monkeypatch: pytest.MonkeyPatch) -> Iterator[Taken]:
    """Record, per thread, each world-info shortcut that runs while the test does."""
    seen: Taken = {}
    lock = threading.Lock()

    def note(name: str) -> None:
        with lock:
            seen.setdefault(threading.get_ident(), set()).add(name)

    run = activation_module._Run

    def recording(name: str, method: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
            note(name)
            return method(self, *args, **kwargs)
        return wrapper

    monkeypatch.setattr(run, "first_pass_entries", recording("wi_incremental", run.first_pass_entries))
    monkeypatch.setattr(run, "changed_entries", recording("wi_incremental", run.changed_entries))
    monkeypatch.setattr(run, "settle_regex_entries", recording("wi_settled_regex", run.settle_regex_entries))
    monkeypatch.setattr(run, "candidates_by_words", recording("wi_word_candidates", run.candidates_by_words))

    consider, resolve_pending = run.consider, run.resolve_pending
    looks = threading.local()

    def counting_consider(self: Any, *args: Any, **kwargs: Any) -> Any:
        looks.n = getattr(looks, "n", 0) + 1
        return consider(self, *args, **kwargs)

    def observed_resolve_pending(self: Any) -> None:
        pending = sum(1 for d in self.decisions if d is activation_module._PENDING)
        looks.n = 0
        resolve_pending(self)
        if looks.n < pending:  # some pending entry was decided without a look
            note("wi_fast_pending")

    monkeypatch.setattr(run, "consider", counting_consider)
    monkeypatch.setattr(run, "resolve_pending", observed_resolve_pending)

    digest = activation_module._digest

    def observed_digest(books: Any, version: int) -> bytes:
        if version != 2:
            note("wi_quick_digest")
        return digest(books, version)

    monkeypatch.setattr(activation_module, "_digest", observed_digest)

    anchors = matching_module.KeyMatcher._anchors

    def observed_anchors(self: Any, *args: Any) -> list[int] | None:
        places = anchors(self, *args)
        if places is not None:
            note("wi_anchored_regex")
        return places

    monkeypatch.setattr(matching_module.KeyMatcher, "_anchors", observed_anchors)

    admit_in_bulk = run.admit_in_bulk

    def observed_admit_in_bulk(self: Any, *args: Any) -> list[str] | None:
        admitted = admit_in_bulk(self, *args)
        if admitted is not None:
            note("wi_bulk_admit")
        return admitted

    monkeypatch.setattr(run, "admit_in_bulk", observed_admit_in_bulk)

    run_passes = run.run

    def observed_run(self: Any) -> None:
        run_passes(self)
        if self.matcher.spared_by_windows:
            note("wi_key_windows")
        if self.matcher.literals_spared:
            note("wi_literal_windows")

    monkeypatch.setattr(run, "run", observed_run)
    yield seen


def _decided(record: dict[str, Any]) -> dict[str, Any]:
    """A trace record's decision. An entry left out: a full rescan re-decides it in every pass, the
    incremental loop keeps its first decision, so only when it was decided may differ."""
    if record["outcome"] == "activated":
        return record
    return {name: value for name, value in record.items() if name not in ("step", "state")}


def _answer(activation: Any) -> dict[str, Any]:
    """Everything an activation says (the trace read, so pending entries are decided too)."""
    return {"uids": sorted(activation.uids), "positions": activation.by_position.to_json(),
            "trace": [_decided(r) for r in activation.trace.to_list()],
            "steps": [s.to_dict() for s in activation.trace.steps],
            "state": activation.state, "draws": activation.draws, "budget": activation.budget}


def _conformance(row: dict[str, Any], shortcuts: Shortcuts) -> dict[str, Any]:
    settings = {**row["settings"], "max_context": row["max_context"]}
    return _answer(activate_world_info({"name": "conformance", "entries": row["entries"]}, row["chat"], settings,
                                       shortcuts=shortcuts))


@pytest.mark.needs_shared("conformance/st-worldinfo.jsonl")
def test_plain_equals_the_default_on_the_conformance_rows_and_runs_no_shortcut(
        taken: Taken, shared: Callable[..., Path]) -> None:
    path = shared("conformance", "st-worldinfo.jsonl")
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    assert len(rows) == 640
    me = threading.get_ident()
    by_default: set[str] = set()
    for row in rows:
        taken.clear()
        default = _conformance(row, DEFAULT)
        by_default |= taken.pop(me, set())
        plain = _conformance(row, PLAIN)
        assert plain == default, row["id"]
        assert not taken, (row["id"], taken)
    # the observers see every shortcut when it may run, so "none ran" above means something (no row has
    # a phrase key whose bucket window a text holds while it lacks another of its windows: the
    # random books below take that one)
    assert by_default == set(WI_FIELDS) - {"wi_key_windows"}


def test_plain_switches_off_every_world_info_shortcut() -> None:
    assert all(getattr(DEFAULT, name) for name in WI_FIELDS)
    assert not any(getattr(PLAIN, name) for name in WI_FIELDS)
    # the macro engine's stay switched by PLAIN too
    assert not (PLAIN.plans or PLAIN.reuse_parse or PLAIN.regions)


def test_each_switch_turns_off_only_its_own_shortcut(taken: Taken) -> None:
    book, chat, conf = _book(random.Random(11))
    me = threading.get_ident()
    reference = _answer(activate_world_info(book, chat, conf, shortcuts=PLAIN))
    taken.clear()
    assert _answer(activate_world_info(book, chat, conf)) == reference
    assert taken.pop(me) == set(WI_FIELDS)
    for name in WI_FIELDS:
        # off alone: the others still run, but for the three that only the incremental loop can take
        # (an entry is left pending, or its regex decision settled, only by its passes, and only its
        # first pass collects the windows of the chat a regex literal is looked for in; the windows of
        # a recursion piece are known from its contents' without them)
        answer = _answer(activate_world_info(book, chat, conf, shortcuts=Shortcuts(**{name: False})))
        assert answer == reference, name
        within = ({"wi_settled_regex", "wi_fast_pending", "wi_literal_windows"} if name == "wi_incremental"
                  else set())
        expected = set(WI_FIELDS) - {name} - within
        assert taken.pop(me) == expected, name


def test_a_bad_shortcuts_value_is_refused_with_its_code() -> None:
    from tavernbox import TemplateError

    with pytest.raises(TemplateError) as info:
        activate_world_info({"entries": []}, ["x"], shortcuts={"wi_incremental": False})  # type: ignore[arg-type]
    assert info.value.code == "INPUT_INVALID"
    assert "Shortcuts" in str(info.value)


def _book(rnd: random.Random, n: int = 120) -> tuple[dict[str, Any], list[str], dict[str, Any]]:
    """A book with recursion, anchored regex keys, secondary keys and entries no key of which is in the chat."""
    words = ["ash", "oak", "elm", "fir", "yew", "Ivy", "moss", "reed", "willow", "Bramble"]
    entries = []
    for uid in range(n):
        a, b = rnd.sample(words, 2)
        # (phrases of long words: a text may hold the bucket's window and lack another of theirs)
        key = rnd.choice([f"/{a}\\s+{b}/i", f"/{a}[\\s\\S]*{b}/", f"/{a}\\b/i", a, f"{a}{b}", "absent",
                          f"{a} {b}", f"{a}-{b}", "willow bramble", "Bramble-willow"])
        entry: dict[str, Any] = {"uid": uid, "key": [key], "content": " ".join(rnd.sample(words, 2)),
                                 "order": rnd.randint(1, 9)}
        if rnd.random() < 0.3:
            entry["keysecondary"] = [rnd.choice([f"/{b}/", b])]
            entry["selectiveLogic"] = rnd.randint(0, 3)
        if rnd.random() < 0.1:
            entry["group"] = rnd.choice(["g", "h"])
        entries.append(entry)
    chat = [" ".join(rnd.sample(words[:4], 2)) for _ in range(3)]
    conf = {"world_info_depth": 2, "world_info_budget": 100, "max_context": 100_000, "world_info_recursive": True}
    return {"entries": entries}, chat, conf


def test_a_plain_thread_and_a_default_thread_share_a_book(taken: Taken) -> None:
    scenarios = [_book(random.Random(seed)) for seed in range(4)]
    reference = [_answer(activate_world_info(book, chat, conf, shortcuts=PLAIN, seed=5))
                 for book, chat, conf in scenarios]
    rounds = 8
    start = threading.Barrier(2)
    answers: dict[str, list[dict[str, Any]]] = {"plain": [], "default": []}
    idents: dict[str, int] = {}
    errors: list[BaseException] = []

    def scan(name: str, shortcuts: Shortcuts) -> None:
        idents[name] = threading.get_ident()
        try:
            start.wait()
            for _ in range(rounds):
                for book, chat, conf in scenarios:  # the very same book objects in both threads
                    answers[name].append(_answer(activate_world_info(book, chat, conf, shortcuts=shortcuts, seed=5)))
        except BaseException as error:  # noqa: BLE001 - reported below
            errors.append(error)

    taken.clear()
    threads = [threading.Thread(target=scan, args=("plain", PLAIN)),
               threading.Thread(target=scan, args=("default", DEFAULT))]
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)  # switch threads often, inside the scans rather than between them
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=300)
    finally:
        sys.setswitchinterval(interval)
    assert not errors, errors
    assert answers["plain"] == answers["default"] == reference * rounds
    assert idents["plain"] not in taken  # the plain thread ran no shortcut, while the other ran them all
    assert taken[idents["default"]] == set(WI_FIELDS)
