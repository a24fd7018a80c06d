"""Properties: hostile books and chats never crash activation, and a seed replays exactly."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tavernbox import TemplateError
from tavernbox.worldinfo import REASONS, activate_world_info

WORDS = st.sampled_from(["x", "y", "Dragon", "café", "red dragon", "/dr.g/i", "/(a|aa)+$/", "/a(b/", "  ", "",
                         "{{char}}", "\x01x", "a\nb", "/^x/m", "/x$/"])
ANY = st.one_of(st.none(), st.booleans(), st.integers(-5, 1200), st.floats(allow_nan=True), st.text(max_size=5),
                st.lists(st.integers(0, 3), max_size=2))
FIELDS = ["order", "position", "depth", "role", "probability", "useProbability", "constant", "disable", "selective",
          "selectiveLogic", "scanDepth", "caseSensitive", "matchWholeWords", "excludeRecursion", "preventRecursion",
          "delayUntilRecursion", "ignoreBudget", "sticky", "cooldown", "delay", "group", "groupOverride",
          "groupWeight", "useGroupScoring", "outletName", "triggers", "characterFilter"]


@st.composite
def entries(draw: Any) -> dict[str, Any]:
    entry: dict[str, Any] = {"uid": draw(st.integers(0, 6)), "key": draw(st.lists(WORDS, max_size=3)),
                             "content": draw(st.sampled_from(["", "x y", "@@activate\nA", "mentions Dragon",
                                                              "@@dont_activate", "a b c d e"]))}
    if draw(st.booleans()):
        entry["keysecondary"] = draw(st.lists(WORDS, max_size=2))
    for name in draw(st.lists(st.sampled_from(FIELDS), max_size=4, unique=True)):
        entry[name] = draw(ANY)
    return entry


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(book=st.lists(entries(), max_size=6), chat=st.lists(st.one_of(WORDS, st.text(max_size=12)), max_size=4),
       depth=st.integers(-1, 4), budget=st.integers(0, 100), recursive=st.booleans(), whole=st.booleans(),
       min_act=st.integers(0, 3), seed=st.integers(0, 5))
def test_activation_never_crashes_and_replays(book: list[dict[str, Any]], chat: list[str], depth: int, budget: int,
                                              recursive: bool, whole: bool, min_act: int, seed: int) -> None:
    conf = {"world_info_depth": depth, "world_info_budget": budget, "world_info_recursive": recursive,
            "world_info_match_whole_words": whole, "world_info_min_activations": min_act, "max_context": 50}
    try:
        a = activate_world_info({"entries": book}, chat, conf, seed=seed, regex_timeout=0.05)
    except TemplateError:
        return
    b = activate_world_info({"entries": book}, chat, conf, seed=seed, regex_timeout=0.05)
    assert a.uids == b.uids and [d.value for d in a.draws] == [d.value for d in b.draws]
    assert all(r.reason in REASONS for r in a.trace)
    assert {(x.book, x.uid) for x in a.activated} <= {(r.book, r.uid) for r in a.trace if r.outcome == "activated"}
