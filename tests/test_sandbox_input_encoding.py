"""The input snapshot crosses to the sandbox as ASCII JSON, measured by its UTF-8 size.

``render_template`` encodes variables with ``\\u`` escapes (CPython's faster encoder) and only
re-encodes a snapshot whose escaped form is over the input limit, to measure its UTF-8 size as
before. These tests pin that the limit still counts UTF-8 bytes on both sides of that switch and
that non-ASCII values reach the template unchanged.
"""

from __future__ import annotations

import json

import pytest

from tavernbox.ejs.render import TemplateLimitError, render_template
from tavernbox.sandbox import Limits

TEMPLATE = "<%= variables.s %>|<%= variables.s.length %>"


def test_non_ascii_values_reach_the_template_unchanged() -> None:
    s = "é€😀\ud800<x>"
    result = render_template(TEMPLATE, {"s": s})
    assert result.text == "é€😀\ud800&lt;x&gt;|" + str(len(s.encode("utf-16-le", "surrogatepass")) // 2)


def test_the_limit_counts_utf8_bytes_when_the_escaped_form_is_longer() -> None:
    variables = {"s": "€" * 100}  # 300 UTF-8 bytes of value, 600 escaped
    utf8 = len(json.dumps(variables, ensure_ascii=False, separators=(",", ":")).encode("utf-8"))
    escaped = len(json.dumps(variables, separators=(",", ":")))
    assert utf8 < escaped
    fits = render_template(TEMPLATE, variables, limits=Limits(input_bytes=utf8))
    assert fits.text == "€" * 100 + "|100"
    with pytest.raises(TemplateLimitError) as caught:
        render_template(TEMPLATE, variables, limits=Limits(input_bytes=utf8 - 1))
    assert caught.value.code == "TEMPLATE_INPUT_LIMIT"
    assert f"is {utf8} bytes of JSON" in caught.value.message
