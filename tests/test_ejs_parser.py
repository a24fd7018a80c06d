"""Parser unit tests: ejs's tokenisation, slurp pre-pass and close-tag rule, exactly.

The reference implementations below are direct Python transcriptions of what ejs 7.0.2 does
with regular expressions (the digest, section 1.1 and 1.3). They are fine for short test inputs
but quadratic on hostile ones, which is why the real parser does not use them.
"""

from __future__ import annotations

import re
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tavernbox.ejs import parse_template
from tavernbox.ejs.parser import MAX_TAGS
from tavernbox.ejs.nodes import LiteralMarker, StrayClose, Tag, Text
from tavernbox.errors import TemplateError
from tavernbox.testing.strategies import ejs_templates  # the exported re-export path

_TAG = re.compile(r"(<%%|%%>|<%=|<%-|<%_|<%#|<%|%>|-%>|_%>)")
_OPENERS = {"<%", "<%_", "<%=", "<%-", "<%#"}
_CLOSERS = {"%>", "-%>", "_%>"}

soup = st.lists(
    st.sampled_from(["<%", "<%_", "<%=", "<%-", "<%#", "<%%", "%%>", "%>", "-%>", "_%>", " ", "\t", "\n",
                     "a", "-", "_", "%", "<", ">", "1"]),
    max_size=14,
).map("".join)


def reference_slurp(text: str) -> str:
    return re.sub(r"_%>[ \t]*", "_%>", re.sub(r"[ \t]*<%_", "<%_", text))


def reference_tokens(text: str) -> list[str]:
    return [t for t in _TAG.split(reference_slurp(text)) if t]


def reference_accepts(tokens: list[str]) -> int | None:
    """Index of the first opener whose token two places ahead is not a closer, else None."""
    for i, tok in enumerate(tokens):
        if tok in _OPENERS and (i + 2 >= len(tokens) or tokens[i + 2] not in _CLOSERS):
            return i
    return None


def node_tokens(nodes: tuple[object, ...]) -> list[str]:
    return [value for node in nodes for value, _, _ in node.tokens()]  # type: ignore[attr-defined]


@settings(max_examples=150, deadline=None)
@given(st.one_of(soup, ejs_templates()))
def test_tokens_and_close_rule_match_ejs(template: str) -> None:
    tokens = reference_tokens(template)
    failing = reference_accepts(tokens)
    if failing is None:
        parsed = parse_template(template)
        assert node_tokens(parsed.nodes) == tokens
        assert str(parsed) == reference_slurp(template)
    else:
        with pytest.raises(TemplateError) as info:
            parse_template(template)
        assert info.value.code == "TEMPLATE_SYNTAX"
        assert info.value.message == f'Could not find matching close tag for "{tokens[failing]}".'


@settings(max_examples=100, deadline=None)
@given(st.one_of(soup, ejs_templates()))
def test_offsets_point_into_the_original_source(template: str) -> None:
    try:
        parsed = parse_template(template)
    except TemplateError as exc:
        # the error points at the opener ejs names
        assert exc.span is not None
        assert template[exc.span.start:exc.span.end] == exc.message.split('"')[1]
        return
    for node in parsed.nodes:
        for value, offset, _is_tag in node.tokens():
            assert template[offset:offset + len(value)] == value


def test_tags_standing_in_a_tags_middle_have_their_own_offsets() -> None:
    (tag,) = parse_template("<%<%-%>%>").nodes
    assert [(value, offset) for value, offset, _ in tag.tokens()] == [("<%", 0), ("<%-", 2), ("%>", 5), ("%>", 7)]


def test_node_shapes() -> None:
    nodes = parse_template("a<%= x -%>\n<%# c %><%% %%>%>").nodes
    assert nodes == (
        Text("a", 0),
        Tag("<%=", " x ", "-%>", 1, 4, (), 7),
        Text("\n", 10),
        Tag("<%#", " c ", "%>", 11, 14, (), 17),
        LiteralMarker("<%%", 19),
        Text(" ", 22),
        LiteralMarker("%%>", 23),
        StrayClose("%>", 26),
    )


def test_odd_shapes_ejs_accepts() -> None:
    assert parse_template("<%=%>%>").nodes == (Tag("<%=", None, "%>", 0, 3, ("%>",), 5),)
    assert parse_template("<%<%%%>").nodes == (Tag("<%", None, "%>", 0, 2, ("<%%",), 5),)
    assert parse_template("<%<%=%>%>").nodes == (Tag("<%", None, "%>", 0, 2, ("<%=", "%>"), 7),)


def test_slurp_offsets_survive_deleted_spaces() -> None:
    parsed = parse_template("ab  \t<%_ x _%> \t c")
    assert str(parsed) == "ab<%_ x _%>c"
    tag, text = parsed.nodes[1], parsed.nodes[2]
    assert isinstance(tag, Tag) and tag.start == 5 and tag.code_start == 8
    assert text == Text("c", 17)


@pytest.mark.parametrize(
    ("template", "line", "column"),
    [("<%= x", 1, 1), ("ok\n  <% y", 2, 3), ("<% a %>\n\n<%- \"<%\" %>", 3, 1), ("   <%_ z", 1, 4)],
)
def test_unclosed_tag_position(template: str, line: int, column: int) -> None:
    with pytest.raises(TemplateError) as info:
        parse_template(template)
    assert (info.value.code, info.value.line, info.value.column) == ("TEMPLATE_SYNTAX", line, column)


@pytest.mark.parametrize(
    "template",
    [
        " " * 131072,  # the slurp regex [ \t]*<%_ is quadratic on this in a backtracking engine
        " " * 131071 + "x",
        "\t " * 65535 + "<%_ a %>",
        "<" * 131072,
        "%" * 131072,
        "-" * 131072,
        "_%" * 65536,
        "<%= 1 %>" * MAX_TAGS,
        "<%" + "a" * 131070,
    ],
    ids=["spaces", "spaces-x", "slurp-run", "lt", "percent", "dash", "underscore-percent", "many-tags",
         "unclosed-at-start"],
)
def test_parse_time_is_linear(template: str) -> None:
    start = time.perf_counter()
    try:
        parse_template(template)
    except TemplateError as exc:
        assert exc.code == "TEMPLATE_SYNTAX"
    assert time.perf_counter() - start < 2.0


def test_tag_count_cap_is_checked_before_lexing() -> None:
    start = time.process_time()
    with pytest.raises(TemplateError) as info:
        parse_template("<%= 1 %>" * (MAX_TAGS + 1))
    assert info.value.code == "TEMPLATE_TOO_LARGE"
    # CPU time, so another process on the machine cannot fail it
    assert time.process_time() - start < 0.2
