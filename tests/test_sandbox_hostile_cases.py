"""Hostile cases of issue 13, each kept as a regression test.

throw null / Promise.reject(null) / throw Symbol; the engine's internal "uninitialized" value
(String.prototype.normalize and localeCompare running out of memory); C-level quadratic work the
engine never interrupts; deeply nested and over-long numbers in the input; the bridge's
time-limit message; the render's fixed clock.
"""

from __future__ import annotations

import json
import time
from datetime import datetime, timezone
from pathlib import Path

import pytest
from click.testing import CliRunner

from tavernbox import render_template
from tavernbox.bridge import render_with_sources, sources_from_inputs
from tavernbox.cli.main import main
from tavernbox.errors import TemplateError
from tavernbox.sandbox import Limits


def failure(source: str, variables: object = None, **kwargs: object) -> TemplateError:
    with pytest.raises(TemplateError) as info:
        render_template(source, variables, **kwargs)  # type: ignore[arg-type]
    return info.value


# --- what a template throws ----------------------------------------------------------------------

@pytest.mark.parametrize("source", ["<% throw null %>", "<% await Promise.reject(null) %>",
                                    "<% await new Promise((_, reject) => reject(null)) %>"])
def test_a_thrown_null_is_the_templates_own_failure(source: str) -> None:
    error = failure(source)
    assert error.code == "TEMPLATE_EXECUTION_FAILED" and error.message == "uncaught null"


def test_a_thrown_symbol_keeps_its_description() -> None:
    assert failure("<% throw Symbol('x') %>").message == "uncaught Symbol(x)"
    assert failure("<% throw Symbol() %>").message == "uncaught Symbol()"
    # The description is the engine's: a tampered Symbol.prototype.toString plays no part.
    error = failure("<% try { Symbol.prototype.toString = () => 'forged' } catch (e) {} throw Symbol('y') %>")
    assert error.message == "uncaught Symbol(y)"


# --- the engine's internal value -------------------------------------------------------------------

@pytest.mark.parametrize("form", ["NFC", "NFD", "NFKC", "NFKD"])
def test_normalize_out_of_memory_is_a_memory_failure(form: str) -> None:
    error = failure(f"<%= '\\u1e9b\\u0323'.repeat(1 << 20).normalize('{form}').length %>")
    assert error.code == "TEMPLATE_MEMORY_LIMIT"


@pytest.mark.parametrize("expression", [
    "'\\u1e9b\\u0323'.repeat(1 << 20).normalize('NFD')",
    "'\\u1e9b\\u0323'.repeat(1 << 20).normalize('NFKC')",
])
def test_no_engine_internal_value_reaches_template_code(expression: str) -> None:
    # Caught by the template: it sees a RangeError, never a value whose typeof is "unknown", and
    # the render still fails with the memory code (the trip is sticky).
    source = f"<% try {{ {expression} }} catch (e) {{ print(typeof e, ':', e instanceof RangeError) }} %>"
    error = failure(source)
    assert error.code == "TEMPLATE_MEMORY_LIMIT"
    probe = f"<% let seen = ''; try {{ {expression} }} catch (e) {{ seen = typeof e }} finally {{ throw new Error(seen) }} %>"
    assert failure(probe).code == "TEMPLATE_MEMORY_LIMIT"


def test_normalize_and_locale_compare_still_work() -> None:
    source = ("<%= '\\u1e9b\\u0323'.normalize('NFKD').length %>|<%= 'e\\u0301'.normalize() === '\\u00e9' %>|"
              "<%= 'a'.localeCompare('b') %>|<%= String.prototype.normalize.length %>|"
              "<%= String.prototype.localeCompare.length %>|<%= String.prototype.normalize.name %>")
    assert render_template(source).text == "3|true|-1|0|1|normalize"
    error = failure("<%= 'a'.normalize('bogus') %>")
    assert error.code == "TEMPLATE_EXECUTION_FAILED" and "RangeError" in error.message


# --- C-level work the engine never interrupts ------------------------------------------------------

QUADRATIC = {
    "indexOf": "const s = 'a'.repeat(1 << 21); s.indexOf('a'.repeat(1 << 20) + 'b')",
    "includes": "const s = 'a'.repeat(1 << 21); s.includes('a'.repeat(1 << 20) + 'b')",
    "split": "const s = 'a'.repeat(1 << 21); s.split('a'.repeat(1 << 20) + 'b')",
    "replace": "const s = 'a'.repeat(1 << 21); s.replace('a'.repeat(1 << 20) + 'b', 'x')",
    "normalize": "'\\ufdfa'.repeat(1 << 16).normalize('NFKC')",
    "array-includes": "const b = 'a'.repeat(1 << 20); Array(400000).fill(b).includes(b.slice(1) + 'b')",
}


@pytest.mark.parametrize("name", sorted(QUADRATIC))
def test_uninterruptible_work_is_stopped_by_its_cpu_time(name: str) -> None:
    # The wall deadline is 10 s away: what stops the render is the pool's watch of the worker's
    # CPU time (budget + 50 ms), about 130 ms of CPU; the loose bound is 5x the 300 ms.
    limits = Limits(deadline_grace_ms=10_000.0)
    started = time.monotonic()
    error = failure(f"<% {QUADRATIC[name]} %>", limits=limits)
    wall = time.monotonic() - started
    assert error.code == "TEMPLATE_TIME_LIMIT"
    assert "cannot interrupt" in error.message and "75 ms" in error.message
    assert wall < 5.0
    # The pool replaced the stopped worker: the next render works.
    assert render_template("<%= 1 + 1 %>").text == "2"


def test_work_inside_the_budget_is_not_stopped() -> None:
    # The same kind of C-level work, small enough to finish: the watch never fires.
    source = "<% const s = 'a'.repeat(1 << 12); %><%= s.indexOf('a'.repeat(1 << 11) + 'b') %>"
    assert render_template(source, limits=Limits(deadline_grace_ms=10_000.0)).text == "-1"


# --- input the host cannot read ----------------------------------------------------------------------

def nested(depth: int) -> object:
    value: object = 1
    for _ in range(depth):
        value = [value]
    return value


def test_deep_variables_are_an_input_limit_and_readable_nesting_renders() -> None:
    assert render_template("<%= JSON.stringify(variables).length %>", nested(500)).text == "1001"
    assert render_template("<%= JSON.stringify(getvar('0.0.0')).length %>", nested(300)).text == "595"
    error = failure("<%= 1 %>", nested(5000))
    assert error.code == "TEMPLATE_INPUT_LIMIT" and "nested" in error.message
    with pytest.raises(TemplateError) as info:
        render_with_sources("<%= getvar('a') %>", sources_from_inputs(variables=nested(5000)))
    assert info.value.code == "TEMPLATE_INPUT_LIMIT"
    with pytest.raises(TemplateError) as info:
        render_with_sources("<%= getvar('a') %>", sources_from_inputs(mvu={"stat_data": nested(5000)}))
    assert info.value.code == "TEMPLATE_INPUT_LIMIT"


def test_an_integer_too_long_to_convert_is_input_invalid() -> None:
    assert failure("<%= 1 %>", {"n": 10 ** 5000}).code == "INPUT_INVALID"
    with pytest.raises(TemplateError) as info:
        render_with_sources("<%= 1 %>", sources_from_inputs(variables={"n": 10 ** 5000}))
    assert info.value.code == "INPUT_INVALID"


def cli(args: list[str], stdin: str | None = None) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, ["render", *args], input=stdin)
    return result.exit_code, result.stdout, result.stderr


def test_cli_reports_deep_and_long_numbers_with_a_code(tmp_path: Path) -> None:
    template = tmp_path / "t.ejs"
    template.write_text("<%= 1 %>")
    deep = "[" * 3000 + "]" * 3000
    long_number = '{"n": 1' + "0" * 5000 + "}"
    for name, text, code in (("deep.json", deep, "TEMPLATE_INPUT_LIMIT"), ("long.json", long_number, "INPUT_INVALID"),
                             ("deep.yaml", deep, "TEMPLATE_INPUT_LIMIT"), ("long.yaml", "n: 1" + "0" * 5000,
                                                                           "INPUT_INVALID")):
        (tmp_path / name).write_text(text)
        status, _, err = cli([str(template), "--vars", str(tmp_path / name)])
        assert status == 1 and code in err and "Traceback" not in err and "INTERNAL_ERROR" not in err, (name, err)
    rows = ['{"template": "<%= 1 %>", "variables": ' + deep + "}",
            '{"template": "<%= 1 %>", "variables": {"n": 1' + "0" * 5000 + "}}",
            '{"template": "<%= 1 %>", "variables": {"n": 1e400}, "card": {"name": "x"}}',
            '{"template": "<%= 1 %>", "variables": ' + "[" * 990 + "]" * 990 + ', "card": {"name": "x"}}']
    status, out, _ = cli(["--jsonl"], "\n".join(rows) + "\n")
    codes = [json.loads(line)["error"]["code"] for line in out.splitlines()]
    assert status == 0 and codes[:3] == ["TEMPLATE_INPUT_LIMIT", "INPUT_INVALID", "INPUT_INVALID"]
    assert codes[3] in ("TEMPLATE_INPUT_LIMIT", "TEMPLATE_STACK_LIMIT")


# --- the bridge's time-limit message ---------------------------------------------------------------

def test_a_bridge_time_limit_reports_the_configured_budget() -> None:
    with pytest.raises(TemplateError) as info:
        render_with_sources("<% getvar('a'); for (;;) {} %>", sources_from_inputs(variables={"a": 1}))
    error = info.value
    assert error.code == "TEMPLATE_TIME_LIMIT"
    assert error.message == "the render used up its time budget of 75 ms over 2 passes", error.message
    with pytest.raises(TemplateError) as info:
        render_with_sources("<% getvar('a'); for (;;) {} %>", sources_from_inputs(variables={"a": 1}),
                            limits=Limits(time_ms=40.5))
    assert "budget of 40.5 ms" in info.value.message


# --- the render's clock -----------------------------------------------------------------------------

CLOCK = ("<%= Date.now() %>|<%= new Date().toISOString() %>|<%= Date() %>|<%= new Date(0).getTime() %>|"
         "<% class D extends Date {} %><%= new D().getTime() %>|<%= new Date() instanceof Date %>|"
         "<%= Date.prototype.constructor === Date %>|<%= Date.length %>|<%= Date.name %>|<%= typeof Date.parse %>")


def test_date_reads_the_renders_fixed_now() -> None:
    expected = ("1714979289123|2024-05-06T07:08:09.123Z|Mon May 06 2024 07:08:09 GMT+0000|0|1714979289123|true|"
                "true|7|Date|function")
    assert render_template(CLOCK, now="2024-05-06T07:08:09.123Z").text == expected
    moment = datetime(2024, 5, 6, 7, 8, 9, 123000, tzinfo=timezone.utc)
    assert render_template(CLOCK, now=moment).text == expected
    assert render_template(CLOCK, now=moment.replace(tzinfo=None)).text == expected
    # The same instant all render long, whatever the template does meanwhile.
    busy = "<% const a = Date.now(); for (let i = 0; i < 200000; i++); %><%= Date.now() - a %>"
    assert render_template(busy, now=moment).text == "0"
    assert failure(CLOCK, now="yesterday").code == "INPUT_INVALID"


def test_without_now_the_clock_is_taken_once_from_the_host() -> None:
    before = time.time() * 1000
    value = int(render_template("<%= Date.now() %>").text)
    assert before - 1000 <= value <= time.time() * 1000 + 1000


def test_every_bridge_pass_reads_the_same_now() -> None:
    source = "<%= Date.now() %>:<%= getvar('a') %>:<%= await getpreset('x') %>:<%= Date.now() %>"
    result = render_with_sources(source, sources_from_inputs(variables={"a": 1}), now="2001-02-03T04:05:06Z")
    assert result.text == "981173106000:1::981173106000" and result.usage.passes >= 2
