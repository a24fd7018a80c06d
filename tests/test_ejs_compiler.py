"""Compiler and render unit tests: program shape, line map, cache, limits checked before the VM."""

from __future__ import annotations

import copy

import pytest

from tavernbox import Limits, render_template
from tavernbox.ejs import compile_source, compile_template, parse_template
from tavernbox.ejs.compiler import strip_trailing_semicolon
from tavernbox.errors import TemplateError


@pytest.mark.parametrize(
    ("code", "expected"),
    [
        (" x; ", " x "),
        (" x ;  \n ", " x   \n "),
        (" x;\u00a0\ufeff", " x\u00a0\ufeff"),  # JavaScript's \s includes NBSP and BOM
        (" a; b ", " a; b "),
        (" x;; ", " x; "),
        ("x", "x"),
        (";", ""),
    ],
)
def test_strip_trailing_semicolon(code: str, expected: str) -> None:
    assert strip_trailing_semicolon(code) == expected


def test_program_shape_and_text_literals() -> None:
    program = compile_template(parse_template('a"\\\n\r\u2028😀<%= x %>')).program
    assert program.startswith("(async function (__tb, locals, escapeFn, include, rethrow) {\n")
    assert program.rstrip().endswith("})")
    # template text becomes JSON string literals: no raw line breaks, quotes or NULs; other
    # non-ASCII stays raw so that the program stays about the template's size
    assert '    ; __append("a\\"\\\\\\n\\r\\u2028😀")\n' in program
    assert "    ; __append(escapeFn( x ))\n" in program


def test_trailing_line_comment_gets_a_newline() -> None:
    program = compile_template(parse_template("<%= x // c %>")).program
    assert "    ; __append(escapeFn( x // c \n))\n" in program


def test_compiled_templates_are_cached_by_content() -> None:
    source = "cache me <%= 1 %>"
    assert compile_source(source) is compile_source(source)
    assert compile_source(source) is not compile_source(source + " ")


@pytest.mark.parametrize(
    ("template", "line", "column"),
    [
        ("<% var a = 1;\n  var b = 2;\n     nope(); %>", 3, 6),  # inside a multi-line scriptlet
        ("<%= \"é😀é\" + nope %>", 1, 13),  # QuickJS columns are UTF-8 bytes; ours are characters
        ("x\r\n<% 1;\r\n  nope() %>", 3, 3),  # CRLF inside code
        ("<% 1;\u2028  nope() %>", 1, 9),  # U+2028 breaks a JS line but not a template line
        ("a\n<%= 1 // c %>\n<%= nope %>", 3, 5),  # the newline added after a // comment
        ("  <%_ x = 1 _%>\n<%- nope %>", 2, 5),  # after slurped spaces
    ],
)
def test_runtime_error_positions_map_to_the_template(template: str, line: int, column: int) -> None:
    with pytest.raises(TemplateError) as info:
        render_template(template)
    assert (info.value.code, info.value.line, info.value.column) == ("TEMPLATE_EXECUTION_FAILED", line, column)


@pytest.mark.parametrize(
    ("template", "line", "column"),
    [
        ("text\n<%= 1 +* 2 %>", 2, 8),
        ("<% if (x) { %>", 1, 12),  # unclosed block: reported at the end of the last code
        ("a\n<%= \"%>\" %>", 2, 5),  # "%>" closes the tag: an unterminated string
    ],
)
def test_syntax_error_positions_map_to_the_template(template: str, line: int, column: int) -> None:
    with pytest.raises(TemplateError) as info:
        render_template(template)
    assert (info.value.code, info.value.line, info.value.column) == ("TEMPLATE_SYNTAX", line, column)


def test_template_too_large_is_refused_before_parsing(monkeypatch: pytest.MonkeyPatch) -> None:
    import tavernbox.ejs.render as render_module

    def boom(_: str) -> None:
        raise AssertionError("parsed an over-long template")

    monkeypatch.setattr(render_module, "compile_source", boom)
    with pytest.raises(TemplateError) as info:
        render_template("<%" * 70000)
    assert info.value.code == "TEMPLATE_TOO_LARGE"
    with pytest.raises(TemplateError) as info:
        render_template("x" * 101, limits=Limits(template_chars=100))
    assert info.value.code == "TEMPLATE_TOO_LARGE"


def test_template_at_the_size_limit_renders() -> None:
    assert render_template("x" * 100, limits=Limits(template_chars=100)).text == "x" * 100


def test_input_snapshot_limit() -> None:
    limits = Limits(input_bytes=100)
    with pytest.raises(TemplateError) as info:
        render_template("<%= variables.s.length %>", {"s": "é" * 47}, limits=limits)  # {"s":"..."} = 102 bytes
    assert info.value.code == "TEMPLATE_INPUT_LIMIT"
    # the size is UTF-8 JSON (2 bytes per é), not the ASCII-escaped form (6 bytes per é)
    assert render_template("<%= variables.s.length %>", {"s": "é" * 46}, limits=limits).text == "46"


def test_variables_must_be_json() -> None:
    with pytest.raises(TemplateError) as info:
        render_template("x", {"s": {1, 2}})
    assert info.value.code == "INPUT_INVALID"
    with pytest.raises(TemplateError) as info:
        render_template("x", {"n": float("nan")})
    assert info.value.code == "INPUT_INVALID"


def test_variables_are_a_frozen_copy_and_the_caller_is_untouched() -> None:
    data = {"x": 1, "list": [1, 2]}
    before = copy.deepcopy(data)
    text = render_template("<% variables.x = 2; try { variables.list.push(3) } catch (e) { print('frozen') } %>"
                           "<%= variables.x %>|<%= variables.list.length %>", data).text
    assert text == "frozen1|2"
    assert data == before


def test_strings_survive_exactly() -> None:
    text = render_template("<%- variables.s %>|\u0000|<%= '\\ud83d' %>", {"s": "a\u0000<b>\ud800\U0001f600"}).text
    assert text == "a\u0000<b>\ud800\U0001f600|\u0000|\ud83d"


def test_output_after_the_body_settles_is_dropped() -> None:
    # ejs returns its buffer when the body's promise settles; later appends are lost there.
    assert render_template("<% (async () => { await null; await null; print('late') })() %>done").text == "done"


def test_escaping_cannot_be_bypassed_by_tampering() -> None:
    template = ("<% try { String.prototype.replace = function () { return '<'; } } catch (e) {} %>"
                "<%= '<script>' %>")
    assert render_template(template).text == "&lt;script&gt;"


def test_result_carries_usage() -> None:
    result = render_template("<%= 'abc' %>")
    assert result.text == "abc" and result.diagnostics == ()
    assert result.usage is not None and result.usage.output_bytes == 3


def test_text_without_tags_skips_the_vm() -> None:
    result = render_template("plain é\n${x} % > < -", {"a": 1})
    assert result.text == "plain é\n${x} % > < -"
    assert result.usage is not None and result.usage.passes == 0 and result.usage.output_bytes == 21
    with pytest.raises(TemplateError) as info:
        render_template("é" * 60, limits=Limits(output_bytes=100))
    assert info.value.code == "TEMPLATE_OUTPUT_LIMIT"
    assert render_template("é" * 50, limits=Limits(output_bytes=100)).text == "é" * 50


def test_budget_errors_keep_the_sandbox_code_and_the_tag_position() -> None:
    from tavernbox.sandbox import CancelToken

    token = CancelToken()
    token.cancel()
    with pytest.raises(TemplateError) as info:
        render_template("<%= 1 %>", cancel=token)
    assert info.value.code == "TEMPLATE_CANCELLED"
    with pytest.raises(TemplateError) as info:
        render_template("ok\n<% while (true) {} %>", limits=Limits(time_ms=20))
    assert info.value.code == "TEMPLATE_TIME_LIMIT"
    with pytest.raises(TemplateError) as info:
        render_template("<% for (;;) print('xxxxxxxx') %>", limits=Limits(output_bytes=1000))
    assert info.value.code == "TEMPLATE_OUTPUT_LIMIT"
    # and the next render is normal
    assert render_template("<%= 'after' %>").text == "after"


@pytest.mark.parametrize(
    "template",
    ["%%>a" * 32768, "😀" * 131064 + "<%= 1 %>", "a%>" * 43690, "<%%" * 4096 + "%%>b" * 29000],
    ids=["literal-close-and-text", "emoji", "stray-closers", "literal-markers"],
)
def test_program_stays_within_the_sandbox_bound_for_any_legal_template(template: str) -> None:
    from tavernbox.sandbox.limits import PROGRAM_CHARS_FACTOR

    assert len(template) <= Limits().template_chars
    program = compile_source(template).program
    assert len(program) <= PROGRAM_CHARS_FACTOR * len(template)
    assert render_template(template).usage is not None


def test_adjacent_output_is_merged_into_one_append() -> None:
    program = compile_source("a<%% b %%> c %> d<%# x %>e<%= 1 %>f").program
    assert '    ; __append("a<% b %> c %> de")\n    ; __append(escapeFn( 1 ))\n    ; __append("f")\n' in program


def test_compile_cache_is_bounded_by_count_and_size() -> None:
    from tavernbox.ejs.render import _CompileCache

    cache = _CompileCache(size=3, chars=10_000)
    for i in range(5):
        cache.get(f"<%= {i} %>")
    assert len(cache) == 3
    first = cache.get("<%= 4 %>")
    assert cache.get("<%= 4 %>") is first  # most recent entries survive
    big = "x" * 3000 + "<%= 1 %>"
    cache.get(big)
    cache.get(big + " ")
    assert cache.chars <= 10_000
    assert len(cache) <= 3
