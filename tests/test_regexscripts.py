"""The regex-script engine: scripts read as SillyTavern reads them, run with JavaScript's semantics, bounded."""

from __future__ import annotations

import time
from typing import Any

import pytest

from tavernbox.errors import TemplateError
from tavernbox.regexscripts import (
    Placement,
    RegexRun,
    Substitution,
    escape_for_pattern,
    js_find_problem,
    macro_substituters,
    read_scripts,
)


def script(find: str, replace: str = "", placement: tuple = (2,), **kw: Any) -> dict[str, Any]:
    out = {"scriptName": kw.pop("name", find), "findRegex": find, "replaceString": replace, "trimStrings": [],
           "placement": list(placement) if isinstance(placement, tuple) else placement, "disabled": False, "markdownOnly": False, "promptOnly": True,
           "runOnEdit": True, "substituteRegex": 0, "minDepth": None, "maxDepth": None}
    out.update(kw)
    return out


def run_of(*scripts: dict[str, Any], context: dict[str, Any] | None = None, time_limit: float = 1.0) -> RegexRun:
    plain, escaped = macro_substituters(context or {"user": "Ash", "char": "Sera"})
    return RegexRun(read_scripts(list(scripts), "global", "test", "$.scripts"), plain, escaped, time_limit=time_limit)


def apply(text: str, *scripts: dict[str, Any], placement: Placement = Placement.AI_OUTPUT, depth: int | None = 0,
          **kw: Any) -> str:
    return run_of(*scripts, **kw).apply(text, placement, depth)


# ---------------------------------------------------------------- reading


def test_fields_are_read_with_javascripts_coercions() -> None:
    [s] = read_scripts([script("/a/", minDepth="3", maxDepth=-1, substituteRegex=True, promptOnly="no",
                               disabled=0)], "preset", "p", "$.x")
    assert s.min_depth == 3 and s.max_depth is None  # a maximum below 0 switches the check off
    assert s.substitution is Substitution.RAW  # Number(true) is 1
    assert s.prompt_only and not s.disabled  # any non-empty text is truthy
    [s] = read_scripts([script("/a/", minDepth=-2, maxDepth="x", substituteRegex=7)], "card", "c", "$.x")
    assert s.min_depth is None and s.max_depth is None and s.substitution is None


def test_a_single_exported_script_is_a_list_of_one() -> None:
    [s] = read_scripts(script("/a/"), "global", "file.json", "$")
    assert s.origin.path == "$" and s.origin.kind == "global"


@pytest.mark.parametrize(("bad", "path"), [
    ({"placement": "2"}, "$.s[0].placement"),
    ({"placement": [2, "5"]}, "$.s[0].placement[1]"),
    ({"replaceString": 3}, "$.s[0].replaceString"),
    ({"trimStrings": ["a", 1]}, "$.s[0].trimStrings"),
    ({"minDepth": {}}, "$.s[0].minDepth"),
])
def test_a_field_of_the_wrong_type_is_an_error_at_its_path(bad: dict[str, Any], path: str) -> None:
    with pytest.raises(TemplateError) as err:
        read_scripts([script("/a/", **bad)], "global", "r", "$.s")
    assert err.value.code == "REGEX_SCRIPT_INVALID" and err.value.path == path


def test_scripts_that_are_not_a_list_are_an_error() -> None:
    with pytest.raises(TemplateError) as err:
        read_scripts("x", "global", "r", "$.s")
    assert err.value.code == "REGEX_SCRIPT_INVALID" and err.value.path == "$.s"


# ---------------------------------------------------------------- which scripts run


def test_only_prompt_only_scripts_run_at_prompt_time() -> None:
    assert apply("apple", script("/apple/", "pear")) == "pear"
    assert apply("apple", script("/apple/", "pear", promptOnly=False)) == "apple"
    assert apply("apple", script("/apple/", "pear", promptOnly=False, markdownOnly=True)) == "apple"
    assert apply("apple", script("/apple/", "pear", disabled=True)) == "apple"


def test_placement_and_depth_bounds_choose_the_texts() -> None:
    s = script("/a/g", "b", placement=(1,), minDepth=1, maxDepth=2)
    assert apply("aa", s, placement=Placement.AI_OUTPUT, depth=1) == "aa"
    assert [apply("aa", s, placement=Placement.USER_INPUT, depth=d) for d in (0, 1, 2, 3)] == ["aa", "bb", "bb", "aa"]
    assert apply("aa", s, placement=Placement.USER_INPUT, depth=None) == "bb"  # no depth: no bounds


def test_scripts_run_in_order_on_the_previous_output_and_are_recorded() -> None:
    run = run_of(script("/apple/", "banana", name="one"), script("/banana/", "cherry", name="two"),
                 script("/zzz/", "never", name="three"))
    assert run.apply("apple", Placement.AI_OUTPUT, 0, "chat[0]") == "cherry"
    assert [(e["script"], e["target"], e["depth"]) for e in run.provenance()] == [("one", "chat[0]", 0),
                                                                                  ("two", "chat[0]", 0)]


# ---------------------------------------------------------------- JavaScript semantics


def test_patterns_are_read_as_sillytavern_reads_them() -> None:
    assert apply("Apple apple", script("/apple/gi", "x")) == "x x"
    assert apply("apple apple", script("/apple/", "x")) == "x apple"  # no g: the first match only
    assert apply("a /x/gg b", script("/x/gg", "y")) == "a y b"  # repeated flags: the whole text is the pattern
    assert apply("apple", script("apple", "x")) == "x"  # no slashes: the text itself, no flags
    assert apply("ab\nab", script("/^ab/gm", "x")) == "x\nx"
    assert apply("a\nb", script("/a.b/s", "x")) == "x"
    assert apply("a\nb", script("/a.b/", "x")) == "a\nb"
    assert apply("x😀y", script("/\\u{1F600}/u", "!")) == "x!y"
    assert apply("cost: 20", script("/(?<=cost: )\\d+/", "N")) == "cost: N"
    # y is not among the flags SillyTavern tries (gmixXsuUAJ): the whole text is then the pattern
    assert apply("start /start/gy", script("/start/gy", "S")) == "start S"


def test_the_replacement_is_sillytaverns_not_javascripts() -> None:
    # {{match}} and $0 are the match; $n and $<name> captures; $& and $$ stay as written
    assert apply("key=value", script("/(?<k>key)=(?<v>value)/", "$<v>=$<k> $& $$ {{match}} $0")) == \
        "value=key $& $$ key=value key=value"
    # an absent group gives nothing; a number past the groups reads the next argument (the offset)
    assert apply("xx name: Mira !", script("/name: (\\w+) (\\w+)?/", "[$2][$1][$3]")) == "xx [][Mira][3]!"
    # macros in the replacement are expanded after the captures are put in
    assert apply("hi", script("/(hi)/", "$1 {{user}} and {{char}}")) == "hi Ash and Sera"


def test_trim_strings_are_removed_from_captures_only() -> None:
    s = script("/<b>(.*?)<\\/b>/g", "[{{match}}|$1|x]", trimStrings=["x", "{{user}}"])
    assert apply("<b>xAshy</b>", s) == "[<b>y</b>|y|x]"


def test_substitute_regex_expands_macros_in_the_pattern() -> None:
    ctx = {"user": "Ash.K", "char": "Sera"}
    text = "Ash.K and AshxK; {{user}}"
    assert apply(text, script("/{{user}}/g", "U"), context=ctx) == "Ash.K and AshxK; U"
    assert apply(text, script("/{{user}}/g", "U", substituteRegex=1), context=ctx) == "U and U; {{user}}"
    assert apply(text, script("/{{user}}/g", "U", substituteRegex=2), context=ctx) == "U and AshxK; {{user}}"
    assert escape_for_pattern("a.b\n(c)/") == "a\\.b\\n\\(c\\)\\/"


def test_a_pattern_javascript_cannot_compile_is_skipped_with_one_warning() -> None:
    run = run_of(script("/(open/g", "x"), script("/a/x", "y"), script("/a/", "b"))
    assert run.apply("a", Placement.AI_OUTPUT, 0) == "b"
    assert run.apply("aa", Placement.AI_OUTPUT, 1) == "ba"
    assert [d.code for d in run.diagnostics] == ["REGEX_PATTERN_INVALID", "REGEX_PATTERN_INVALID"]
    assert run.diagnostics[0].path == "$.scripts[0].findRegex"
    assert js_find_problem("/(open/g") and js_find_problem("/a/x") and js_find_problem("/a/g") is None


# ---------------------------------------------------------------- the time budget


def test_a_catastrophic_pattern_stops_within_its_budget_and_the_next_request_is_unaffected() -> None:
    budget = 0.2
    run = run_of(script("/(a+)+b/", "x", name="slow one"), time_limit=budget)
    started = time.thread_time()
    with pytest.raises(TemplateError) as err:
        run.apply("a" * 40 + "!b", Placement.AI_OUTPUT, 0)
    assert time.thread_time() - started < budget + 0.05
    assert err.value.code == "REGEX_TIME_LIMIT"
    assert "slow one" in err.value.message and "global script #0 of test" in err.value.message
    assert apply("apple", script("/apple/", "pear")) == "pear"


def test_the_budget_is_shared_by_every_text_of_a_request() -> None:
    run = run_of(script("/(a+)+b/", "x"), time_limit=0.1)
    with pytest.raises(TemplateError) as err:
        for i in range(1000):
            run.apply("a" * 18 + str(i) + "!b", Placement.AI_OUTPUT, 0)
    assert err.value.code == "REGEX_TIME_LIMIT"


def test_the_time_limit_must_be_positive() -> None:
    with pytest.raises(ValueError):
        run_of(time_limit=0)


# ---------------------------------------------------------------- shortcuts and their plain paths


@pytest.mark.parametrize(("find", "subject", "replacement", "trims"), [
    ("/apple/g", "an apple, apple", "pear", []),
    ("/(?<k>key)=(?<v>value)/", "key=value", "$<v>=$<k> $&", []),
    ("/<b>(.*?)<\\/b>/g", "<b>xbolx</b>", "[{{match}}|$1]", ["x"]),
    ("/(open/", "open", "x", []),
    ("/(x)/g", "x {{user}} x", "$1", []),
])
def test_a_kept_replacement_equals_the_plain_path(find: str, subject: str, replacement: str, trims: list) -> None:
    from tavernbox.regexscripts import js_replace, js_replace_uncached

    plain = js_replace_uncached(find, subject, replacement, trims, 1.0)
    assert js_replace(find, subject, replacement, trims, 1.0) == plain
    assert js_replace(find, subject, replacement, trims, 1.0) == plain  # now from the cache


def test_scripts_of_a_frozen_list_are_read_once_and_equal_a_fresh_read() -> None:
    from tavernbox.assets.frozen import freeze_json
    from tavernbox.regexscripts import read_scripts_cached

    frozen = freeze_json([script("/a/", "b"), script("/c/", "d", minDepth="2")])
    first = read_scripts_cached(frozen, "preset", "p", "$.x")
    assert first == read_scripts(frozen, "preset", "p", "$.x")
    again = read_scripts_cached(frozen, "preset", "p", "$.x")
    assert again == first and all(a is b for a, b in zip(again, first))


def test_a_text_without_a_word_every_match_needs_is_left_unasked_and_unchanged() -> None:
    from tavernbox.regexscripts.prefilter import may_match, required_text

    assert required_text("/(?<=<meow_FM>[\\s\\S]+?)seeds[:：][\\s\\S]+?/i") == ("seeds", True)
    assert required_text("/a|b/") is None and required_text("/x?/") is None
    assert required_text("/start/gy") == ("start", False)  # y: the whole text is the pattern, "start" is in it
    assert not may_match("/seeds/i", "no such word") and may_match("/seeds/i", "SEEDS") and may_match("/seeds/i", "ſeeds")
    assert not may_match("/seeds/", "SEEDS")
    # the catastrophic pattern costs nothing on a text that lacks its "b"
    run = run_of(script("/(a+)+b/", "x"), time_limit=0.05)
    assert run.apply("a" * 40, Placement.AI_OUTPUT, 0) == "a" * 40


def test_the_prefilter_gives_what_the_plain_path_gives_on_the_corpus_scripts(tmp_path: Any) -> None:
    import json
    import os
    from pathlib import Path

    corpus = Path(os.environ.get("TAVERNBOX_SHARED", Path(__file__).resolve().parents[2] / "shared")) / "corpora"
    if not corpus.is_dir():
        if os.environ.get("CI") == "true":
            pytest.fail("the shared corpus is missing")
        pytest.skip("the shared corpus is not here")
    raw = []
    for name in ("presets/nemo-engine-v10.json", "presets/tawa-delta.vi.json", "presets/hoxilo-it-takes-two-v5.2.vi.json",
                 "cards/mvu-qingkong-li.v3.json", "cards/landlord-simulator-z5.20.v3.json"):
        data = json.loads((corpus / name).read_text(encoding="utf-8-sig"))
        base = data.get("data", data) if name.startswith("cards/") else data
        raw += [dict(s, promptOnly=True, disabled=False, minDepth=None, maxDepth=None)
                for s in base["extensions"]["regex_scripts"]]
    texts = ["<UpdateVariable>x</UpdateVariable> <StatusPlaceHolderImpl/> plain", "<think>a</think>b <vexnote>n</vexnote>",
             "<meow_FM>seeds: 1\nseri: no.2</meow_FM> tail", "She smiled warmly. Her heart pounded.", "<ink>x</ink>",
             "<update>v</update> rest", "nothing any script looks for"]
    shortcut = RegexRun(read_scripts(raw, "preset", "p", "$"), lambda t: t, prefilter=True)
    plain = RegexRun(read_scripts(raw, "preset", "p", "$"), lambda t: t, prefilter=False)
    for placement in (Placement.AI_OUTPUT, Placement.USER_INPUT):
        for text in texts:
            assert shortcut.apply(text, placement, 0) == plain.apply(text, placement, 0)


def test_kept_replacements_stay_within_their_character_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    from tavernbox.regexscripts import jsreplace

    monkeypatch.setattr(jsreplace, "RESULT_CACHE_CHARS", 50_000)
    for i in range(40):
        jsreplace.js_replace("/z/g", f"{i}" + "x" * 5_000, "", [], 1.0)
    assert jsreplace._held[0] <= 50_000
    assert sum(jsreplace._cost(k, v) for k, v in jsreplace._RESULTS.items()) == jsreplace._held[0]
