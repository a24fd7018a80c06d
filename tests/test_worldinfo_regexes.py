"""Regex keys: JavaScript syntax and flags translated faithfully, and bounded in time."""

from __future__ import annotations

import pytest

from tavernbox.worldinfo import activate_world_info
from tavernbox.worldinfo.regexes import js_regex_search, parse_js_regex


def search(key: str, text: str) -> bool:
    rx = parse_js_regex(key)
    assert rx is not None and rx.status == "ok", rx
    return js_regex_search(rx, text)


def test_regex_shape_needs_slashes_and_known_flags() -> None:
    assert parse_js_regex("dragon") is None
    assert parse_js_regex("/dragon/x") is None  # x is not a JavaScript flag
    assert parse_js_regex("/dragon/gi") is not None


def test_regex_with_an_unescaped_slash_is_a_plain_key() -> None:
    assert parse_js_regex("/a/b/") is None


def test_regex_only_the_first_escaped_slash_is_unescaped() -> None:
    # SillyTavern replaces the first "\/" with "/": "a\\/b" becomes "a\/b", which matches "a/b"
    assert search("/a\\\\/b/", "a/b")


def test_regex_duplicate_flags_are_invalid() -> None:
    rx = parse_js_regex("/a/ii")
    assert rx is not None and rx.status == "invalid"


@pytest.mark.parametrize(
    ("key", "text", "expected"),
    [
        ("/\\d/", "\u0663", False),  # JavaScript \d is ASCII only
        ("/\\w/", "é", False),  # and so is \w
        ("/\\s/", "\ufeff", True),  # JavaScript \s includes the BOM
        ("/\\s/", "\x1c", False),  # Python's \s would include \x1c
        ("/a.b/", "a\rb", False),  # . excludes every line terminator
        ("/a.b/s", "a\nb", True),
        ("/x$/", "x\n", False),  # $ without m only at the very end
        ("/x$/m", "x\ny", True),
        ("/^y/m", "x\ny", True),
        ("/\\bcaf\\b/", "café", True),  # \b is an ASCII word boundary
        ("/a{,2}/", "a{,2}", True),  # not a quantifier in JavaScript
        ("/a]/", "a]", True),
        ("/(a)|\\1b/", "b", True),  # a backreference to an unset group matches empty
        ("/(?<n>a)\\k<n>/", "aa", True),
        ("/[\\W\\d]/", "a", False),
        ("/[^\\Wa]/", "b", True),
        ("/\\x41\\u0042/", "AB", True),
        ("/\\u{1F600}/u", "\U0001F600", True),
        ("/\\cJ/", "\n", True),
        ("/\\u{2}/", "uu", True),  # without u, \u{2} is "u" twice (Annex B)
        ("/é/i", "É", True),
        ("/[]/", "anything", False),
        ("/[^]/", "\n", True),
    ],
)
def test_regex_translation_keeps_javascript_meaning(key: str, text: str, expected: bool) -> None:
    assert search(key, text) is expected


def test_regex_sticky_flag_anchors_at_the_start_of_the_buffer() -> None:
    assert search("/\\x01ali/y", "\x01alice")
    assert not search("/ali/y", "\x01alice")


@pytest.mark.parametrize("key", ["/a**/", "/(a/", "/a)/", "/[b-a]/", "/\\u{110000}/u", "/x{2,1}/"])
def test_regex_javascript_syntax_errors_are_invalid(key: str) -> None:
    rx = parse_js_regex(key)
    assert rx is not None and rx.status == "invalid", key


def _activate(key: str, chat: list[str], timeout: float = 0.1) -> tuple[list[int | str], list[str]]:
    a = activate_world_info({"entries": [{"uid": 1, "key": [key], "content": "C"}]}, chat,
                            {"world_info_match_whole_words": False}, regex_timeout=timeout)
    return a.uids, [d.code for d in a.diagnostics]


def test_regex_invalid_falls_back_to_plain_text_with_a_diagnostic() -> None:
    assert _activate("/a(b/", ["x /a(b/ y"]) == ([1], ["WI_REGEX_INVALID"])


def test_regex_refused_syntax_does_not_match() -> None:
    uids, codes = _activate("/(?i:x)/", ["x"])
    assert uids == [] and codes == ["WI_REGEX_REFUSED"]


def test_regex_catastrophic_backtracking_is_bounded_and_refused() -> None:
    uids, codes = _activate("/(a|aa)+$/", ["a" * 60 + "b"], timeout=0.05)
    assert uids == [] and codes == ["WI_REGEX_REFUSED"]


def test_regex_keys_ignore_case_and_whole_word_settings() -> None:
    a = activate_world_info({"entries": [{"uid": 1, "key": ["/Drag/"], "content": "C"}]}, ["Dragon"],
                            {"world_info_match_whole_words": True, "world_info_case_sensitive": False})
    assert a.uids == [1]


def test_regex_resumed_search_finds_matches_across_recursion_pieces() -> None:
    entries = [
        {"uid": 1, "key": ["x"], "content": "the dragon"},
        {"uid": 2, "key": ["dragon"], "content": "lord"},
        {"uid": 3, "key": ["/dragon[\\s\\S]+lord/"], "content": "C"},
        {"uid": 4, "key": ["/dragon$/"], "content": "D"},  # not resumable: "$" looks past the text
    ]
    a = activate_world_info({"entries": entries}, ["x"], {"world_info_match_whole_words": False})
    assert a.uids == [1, 2, 4, 3]
    assert [(r.uid, r.step) for r in a.trace if r.outcome == "activated"] == [(1, 1), (2, 2), (3, 3), (4, 2)]


def test_regex_resumable_only_without_lookahead() -> None:
    assert parse_js_regex("/dragon/").resumable  # type: ignore[union-attr]
    assert not parse_js_regex("/dragon$/").resumable  # type: ignore[union-attr]
    assert not parse_js_regex("/\\bdragon/").resumable  # type: ignore[union-attr]
    assert not parse_js_regex("/a(?=b)/").resumable  # type: ignore[union-attr]


# -- patterns whose matches stay within one piece of the scanned text ------------------------------

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from tavernbox.worldinfo.jsregex import js_compile_error, js_search  # noqa: E402
from tavernbox.worldinfo.regexes import stays_within_pieces  # noqa: E402


@pytest.mark.parametrize(("pattern", "within"), [
    (r"w01234\s+(?:the|a)", True), (r"a\.b", True), (r"[a-z]+\d*", True), (r"(?<n>ab)\k<n>", True),
    (r"[\w-]", True), (r"[-a]", True), (r"[]", True), (r"\bdragon\b", True), (r"x\u00e9", True), (r"[\x02-\x7f]", False),
    (r"a.b", False), (r"[^a]", False), (r"[^]", False), (r"[\s\S]", False), (r"a\Sb", False), (r"\W", False),
    (r"\D", False), (r"[\x00-\x7f]", False), (r"[\0-a]", False), (r"\x01", False), ("\x01", False), ("\\\x01", False),
    (r"\u0001", False), (r"\u{1}", False), (r"(a)\1", False), (r"\1", False), (r"\cA", False), (r"\p{Cc}", False),
    (r"[\w-z]", False), ("[\x00-a]", False),
])
def test_patterns_that_cannot_match_the_piece_start_character(pattern: str, within: bool) -> None:
    assert stays_within_pieces(pattern) is within


_TOKENS = ["a", "b", "x", " ", r"\s", r"\w", r"\d", r"\S", r"\W", r"\D", ".", "[a-c]", "[^a]", r"[\s\S]", "[ab-]",
           r"[\x00-\x7f]", r"[\x02-z]", r"\x01", r"\u0001", r"\1", r"\cA", "(?:a|b)", "(a)", "(?<=a)", "[]", r"\n",
           "*", "+", "?", "{1,3}", "|"]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(_TOKENS), min_size=1, max_size=6), st.sampled_from(["", "i", "u", "s"]),
       st.text("ab x\n\x01", max_size=8), st.text("ab x\n\x01", max_size=8))
def test_a_match_of_a_within_pieces_pattern_never_spans_a_joint(tokens: list[str], flags: str, old: str,
                                                                new: str) -> None:
    # what KeyMatcher.regex_unchanged relies on: once "\n\x01" and a piece are added, a match the old
    # text lacked starts in the old text's last piece and ends at that newline, or starts after it
    pattern = "".join(tokens)
    if not stays_within_pieces(pattern) or js_compile_error(pattern, flags) is not None:
        return
    text = old + "\n\x01" + new
    last_piece = max(0, old.rfind("\x01"))
    expected = (js_search(pattern, flags, old, 0, 1.0)
                or js_search(pattern, flags, text[:len(old) + 1], last_piece, 1.0)
                or js_search(pattern, flags, text, len(old) + 1, 1.0))
    assert js_search(pattern, flags, text, 0, 1.0) == expected
