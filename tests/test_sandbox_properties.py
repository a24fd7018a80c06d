"""Property tests: any text survives the boundary exactly, escaping matches ejs's rule, and the
output budget counts exactly the UTF-8 bytes of what was appended."""

from __future__ import annotations

import json
import re

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tavernbox.sandbox import Limits, SandboxError, run_program
from sandbox_helpers import prog

_PAIR = re.compile("[\ud800-\udbff][\udc00-\udfff]")


def utf16_normal(text: str) -> str:
    """What a JS string round trip gives: adjacent surrogate halves become one code point."""
    return _PAIR.sub(lambda m: m.group().encode("utf-16", "surrogatepass").decode("utf-16"), text)


def ejs_escape(text: str) -> str:
    for char, entity in (("&", "&amp;"), ("<", "&lt;"), (">", "&gt;"), ('"', "&#34;"), ("'", "&#39;")):
        text = text.replace(char, entity)
    return text


texts = st.text(alphabet=st.characters(codec=None, categories=None), max_size=60) | st.text(
    alphabet=st.sampled_from(list("<>&\"'a\x00\ud800\udc00é😀\u2028")), max_size=40
)
SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(texts, texts)
def test_data_and_program_literals_round_trip(data: str, literal: str) -> None:
    program = prog("append(variables); append('|'); append(" + json.dumps(literal) + ")")
    text = run_program(program, json.dumps(data)).text
    assert text == utf16_normal(data) + "|" + utf16_normal(literal)


@SETTINGS
@given(texts)
def test_escape_matches_the_ejs_rule(data: str) -> None:
    text = run_program(prog("append(escape(variables))"), json.dumps(data)).text
    assert text == utf16_normal(ejs_escape(data))


@SETTINGS
@given(texts)
def test_output_budget_counts_utf8_bytes(data: str) -> None:
    size = len(utf16_normal(data).encode("utf-8", "surrogatepass"))
    program = prog("append(variables)")
    result = run_program(program, json.dumps(data), limits=Limits(output_bytes=size))
    assert result.usage.output_bytes == size
    if size:
        try:
            run_program(program, json.dumps(data), limits=Limits(output_bytes=size - 1))
        except SandboxError as exc:
            assert exc.code == "TEMPLATE_OUTPUT_LIMIT"
        else:
            raise AssertionError("one byte under the output size must trip the budget")
