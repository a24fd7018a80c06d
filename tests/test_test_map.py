"""``tests/TEST_MAP.md`` (which test files exercise which module) is current."""

from __future__ import annotations

import make_test_map


def test_the_test_map_is_current() -> None:
    want = make_test_map.build()
    assert make_test_map.MAP.read_text(encoding="utf-8") == want, (
        "tests/TEST_MAP.md is stale: run python tests/make_test_map.py"
    )


def test_a_name_counts_for_the_module_that_defines_it() -> None:
    assert make_test_map._defining_module("tavernbox.macros", "MacroContext") == "tavernbox.macros.context"
    assert make_test_map._defining_module("tavernbox.macros", "evaluator") == "tavernbox.macros.evaluator"
    assert make_test_map._defining_module("tavernbox.macros", "expand_macros") == "tavernbox.macros"
    text = make_test_map.build()
    evaluator = next(line for line in text.splitlines() if line.startswith("| `tavernbox.macros.evaluator` |"))
    assert "`test_macros_engine.py`" in evaluator
