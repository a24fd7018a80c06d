"""Which template token produced each output range of an EJS render (issue 16's EJS view).

The marked render (``compile_template(..., marks=True)``) must explain the output exactly: the
spans tile the attributed output, each span's text is what its token produced, and where the
two renders could disagree the spans are withheld with a reason instead of being guessed.
"""

from __future__ import annotations

import pytest

from tavernbox.ejs import compile_template, parse_template, render_template
from tavernbox.ejs.compiler import mark_label
from tavernbox.ejs.provenance import render_with_provenance
from tavernbox.errors import TemplateError


def spans_of(source: str, variables: object = None) -> tuple[str, list[tuple[str, str, str]]]:
    result, provenance = render_with_provenance(source, variables)
    assert provenance.spans is not None, provenance.reason
    return result.text, [(result.text[s.start:s.end], s.kind, source[s.source_start:s.source_end])
                         for s in provenance.spans]


def test_text_and_output_tags_are_attributed_to_their_tokens() -> None:
    text, spans = spans_of("Hi <%= variables.name %>, <%- '<b>' %>!", {"name": "A&B"})
    assert text == "Hi A&amp;B, <b>!"
    assert spans == [("Hi ", "text", "Hi "), ("A&amp;B", "escaped", "<%= variables.name %>"),
                     (", ", "text", ", "), ("<b>", "output", "<%- '<b>' %>"), ("!", "text", "!")]


def test_loop_output_follows_the_token_that_printed_it() -> None:
    source = "<% for (const x of variables.xs) { %>[<%= x %>]<% } %>"
    text, spans = spans_of(source, {"xs": ["a", "b"]})
    assert text == "[a][b]"
    assert spans == [("[", "text", "["), ("a", "escaped", "<%= x %>"), ("]", "text", "]"),
                     ("[", "text", "["), ("b", "escaped", "<%= x %>"), ("]", "text", "]")]


def test_print_in_a_code_tag_is_attributed_to_the_code_tag() -> None:
    text, spans = spans_of("a<% print('x'.repeat(3)) %>b")
    assert text == "axxxb"
    assert spans == [("a", "text", "a"), ("xxx", "code", "<% print('x'.repeat(3)) %>"), ("b", "text", "b")]


def test_spans_tile_the_output_and_carry_line_and_column() -> None:
    source = "one\n<%= 1 + 1 %>\n<%# a comment %>three <%= 'x' %>"
    result, provenance = render_with_provenance(source)
    assert provenance.spans is not None
    assert "".join(result.text[s.start:s.end] for s in provenance.spans) == result.text
    assert all(a.end == b.start for a, b in zip(provenance.spans, provenance.spans[1:]))
    tag = next(s for s in provenance.spans if s.source_start == source.index("<%= 1"))
    assert (tag.line, tag.column) == (2, 1) and result.text[tag.start:tag.end] == "2"


def test_plain_text_without_tags_is_one_text_span() -> None:
    _, spans = spans_of("no tags here")
    assert spans == [("no tags here", "text", "no tags here")]


def test_random_output_withholds_the_spans_with_a_reason() -> None:
    result, provenance = render_with_provenance("<%= Math.random() %>")
    assert provenance.spans is None and "differs" in (provenance.reason or "")
    assert result.text  # the text is the ordinary render's


def test_reserved_characters_in_the_output_withhold_the_spans() -> None:
    # a variable holding a forged mark cannot make the page attribute text to another token
    forged = mark_label(0) + "evil"
    result, provenance = render_with_provenance("a<%- variables.v %>b", {"v": forged})
    assert result.text == "a" + forged + "b"
    assert provenance.spans is None and provenance.reason


def test_errors_are_the_renders_own() -> None:
    with pytest.raises(TemplateError) as plain:
        render_template("x\n<% if (y) { %>")
    with pytest.raises(TemplateError) as marked:
        render_with_provenance("x\n<% if (y) { %>")
    assert (marked.value.code, marked.value.line, marked.value.column) == \
        (plain.value.code, plain.value.line, plain.value.column)


def test_the_unmarked_program_is_unchanged_by_marking() -> None:
    source = "a<%= 1 %>b<% if (true) { %>c<% } %>"
    plain = compile_template(parse_template(source))
    marked = compile_template(parse_template(source), marks=True)
    assert plain.marks == () and "\ufdd0" not in plain.program
    assert len(marked.marks) == 6 and marked.program != plain.program
    assert marked.line_map.columns != () and len(marked.line_map.columns) == marked.program.count("\n") + 1


def test_a_marked_render_over_the_output_limit_withholds_the_spans_in_bounded_time() -> None:
    # 524,000 bytes in 40 appends fit the 512 KiB (524,288-byte) output limit; the marks (9 bytes
    # each, two per iteration) push the marked render past it: the text stands, the spans are withheld.
    source = "<% const s = 'x'.repeat(13100); for (let i = 0; i < 40; i++) { %><%= s %><% } %>"
    result, provenance = render_with_provenance(source)
    assert len(result.text) == 524_000
    assert provenance.spans is None and "TEMPLATE_OUTPUT_LIMIT" in (provenance.reason or "")
