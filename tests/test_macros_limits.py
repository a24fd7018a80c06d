"""Hostile input: every limit of the macro engine, with its code, and linear time.

Cards and presets come from strangers, so each limit stops before allocating or recursing:
input over 2 MiB, brace or scope nesting deeper than 64, more than 1,000 dice, more than
10,000 newlines/spaces, and output passing 8 MiB.
"""

from __future__ import annotations

import gc
import time

import pytest

from tavernbox import TemplateError
from tavernbox.macros import MAX_INPUT_CHARS, expand_macros
from tavernbox.macros.evaluator import MAX_OUTPUT_CHARS
from tavernbox.shortcuts import DEFAULT
from macro_support import NO_REUSE

CTX = {"user": "User", "char": "Character"}


def codes(text: str) -> set[str]:
    return {d.code for d in expand_macros(text, CTX).diagnostics}


def test_input_over_2_mib_is_refused() -> None:
    with pytest.raises(TemplateError) as info:
        expand_macros("a" * (MAX_INPUT_CHARS + 1), CTX)
    assert info.value.code == "MACRO_INPUT_LIMIT"
    assert expand_macros("a" * MAX_INPUT_CHARS, CTX).text == "a" * MAX_INPUT_CHARS


def test_brace_nesting_of_64_levels_expands() -> None:
    text = "{{reverse::" * 64 + "ab" + "}}" * 64
    assert expand_macros(text, CTX).text == "ab"  # an even number of reversals


def test_brace_nesting_beyond_64_levels_stays_as_written() -> None:
    text = "x " + "{{reverse::" * 65 + "ab" + "}}" * 65 + " {{user}}"
    result = expand_macros(text, CTX)
    assert result.text == "x " + "{{reverse::" * 65 + "ab" + "}}" * 65 + " User"
    diag = [d for d in result.diagnostics if d.code == "MACRO_NESTING_LIMIT"][0]
    assert diag.span.start == 2


def test_unclosed_deep_nesting_does_not_recurse() -> None:
    text = "{{reverse::" * 30_000
    assert expand_macros(text, CTX).text == text


def test_scope_nesting_beyond_the_limit_stays_as_written() -> None:
    text = "{{if 1}}" * 5000 + "x" + "{{/if}}" * 5000
    result = expand_macros(text, CTX)
    assert result.text == text
    assert "MACRO_NESTING_LIMIT" in {d.code for d in result.diagnostics}


def test_mixed_name_scope_nesting_is_bounded() -> None:
    names = [f"n{i}" for i in range(200)]
    text = "".join(f"{{{{setvar::{n}}}}}" for n in names) + "x" + "".join("{{/setvar}}" for _ in names)
    result = expand_macros(text, CTX)
    assert "MACRO_NESTING_LIMIT" in {d.code for d in result.diagnostics}


def test_many_unclosed_openers_stay_linear() -> None:
    text = "{{user}}" * 20_000 + "{{/user}}"
    start = time.perf_counter()
    result = expand_macros(text, CTX)
    assert result.text == "{{user}}" + "User" * 19_999 + "{{/user}}"
    assert time.perf_counter() - start < 30


def test_newline_and_space_repeats_beyond_10000_stay_as_written() -> None:
    assert expand_macros("{{newline::10000}}", CTX).text == "\n" * 10_000
    assert codes("{{newline::10001}}") == {"MACRO_REPEAT_LIMIT"}
    assert expand_macros("{{space::99999999999999999999}}", CTX).text == "{{space::99999999999999999999}}"


def test_roll_beyond_1000_dice_stays_as_written() -> None:
    result = expand_macros("{{roll::1001d6}}", CTX)
    assert result.text == "{{roll::1001d6}}" and {d.code for d in result.diagnostics} == {"MACRO_ROLL_LIMIT"}
    assert expand_macros("{{roll::1000d1}}", CTX).text == "1000"


def test_output_passing_8_mib_stops() -> None:
    text = "{{newline::10000}}" * (MAX_OUTPUT_CHARS // 10_000 + 1)
    with pytest.raises(TemplateError) as info:
        expand_macros(text, CTX)
    assert info.value.code == "MACRO_OUTPUT_LIMIT"


def test_variable_doubling_stops_before_allocating() -> None:
    text = "{{setvar::x::ab}}" + "{{setvar::x::{{getvar::x}}{{getvar::x}}}}" * 60
    with pytest.raises(TemplateError) as info:
        expand_macros(text, CTX)
    assert info.value.code == "MACRO_OUTPUT_LIMIT"


DENSE = "Hi {{user}}, {{reverse::abc}} {{setvar::v::{{char}}}}{{getvar::v}} {{if 1}}y{{/if}}.\n"
PROSE = "{{char}} looks at {{user}} across the table and says something quiet and kind.\n"


def _dense(size: int, unit: str = DENSE) -> str:
    return unit * (size // len(unit))


def test_2_mib_of_macro_text_expands() -> None:
    text = _dense(MAX_INPUT_CHARS, PROSE)
    assert len(text) > MAX_INPUT_CHARS - 100
    result = expand_macros(text, CTX)
    assert result.text.startswith("Character looks at User across the table")
    assert result.text.count("\n") == text.count("\n")


def test_time_is_linear_in_size() -> None:
    # CPU time (not wall time: other processes share the machine), best of three, and a 4x size
    # step, so linear growth (~4x) and quadratic growth (~16x) are far apart whatever the load.
    # The collector is paused while timing: in a full test run the heap holds every earlier test's
    # objects, and a full collection landing in one sample measures them, not the engine.
    def measure(size: int) -> float:
        best = float("inf")
        for attempt in range(3):
            # a text never expanded before: expand_macros keeps the templates of recent texts
            text = f"{attempt}:{size}" + _dense(size)
            gc.collect()
            gc.disable()
            try:
                start = time.process_time()
                expand_macros(text, CTX)
                best = min(best, time.process_time() - start)
            finally:
                gc.enable()
        return best

    small, large = measure(64 * 1024), measure(256 * 1024)
    assert large / small < 8, (small, large)


def test_deepest_allowed_nesting_fits_the_stack_when_every_level_is_reparsed() -> None:
    # junk ahead makes the parse unclean, so every argument is re-parsed at its own depth
    text = "{{user!}} " + "{{reverse::" * 64 + "ab" + "}}" * 64 + " {{if 1}}" * 90 + "z" + "{{/if}}" * 90
    for reuse in (True, False):
        result = expand_macros(text, CTX, shortcuts=DEFAULT if reuse else NO_REUSE)
        assert result.text.startswith("User ab ")
