"""The EJS golden suite: every whitespace rule, tag shape and error position, as data.

``tests/golden/ejs_cases.json`` holds ``{id, template, variables, text}`` or
``{id, template, variables, error: {code, line?, column?}}``. One runner renders each case
through ``tavernbox.render_template`` (the real sandbox). Cases marked ``"oracle": true`` are
also checked against ejs 7.0.2 by tests/test_ejs_differential.py.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from ejs_support import render


def cases(shared: Any = None) -> list[dict[str, Any]]:
    """The recorded cases of ``golden/ejs_cases.json``."""
    golden: list[dict[str, Any]] = json.loads(
        (Path(__file__).parent / "golden" / "ejs_cases.json").read_text(encoding="utf-8"))["cases"]
    return golden


@pytest.mark.cases("case", cases, ids=lambda c: c["id"])
def test_golden(case: dict[str, Any]) -> None:
    text, error = render(case["template"], case["variables"])
    if "text" in case:
        assert error is None, f"unexpected {error!s}"
        assert text == case["text"]
    else:
        expected = case["error"]
        assert error is not None, f"rendered {text!r}"
        assert error.code == expected["code"], str(error)
        if "line" in expected:
            assert error.line == expected["line"], str(error)
        if "column" in expected:
            assert error.column == expected["column"], str(error)


def test_case_ids_are_unique() -> None:
    ids = [c["id"] for c in cases()]
    assert len(ids) == len(set(ids))
