"""One focused test per rule of the macro engine (spec section 1), named after the rule."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from tavernbox import Diagnostic, TemplateError
from tavernbox.macros import MacroContext, MacroResult, expand_macros

CTX: dict[str, Any] = {
    "user": "User",
    "char": "Character",
    "persona": "PERSONA",
    "character": {
        "description": "DESC about {{user}} and {{random::a}}",
        "personality": "PERS",
        "first_mes": "Hi!",
        "alternate_greetings": ["Alt1", "Alt2"],
        "post_history_instructions": "JB",
    },
    "chat_id_hash": 123456,
    "now": "2026-11-30T10:15:00Z",
}


def run(text: str, **extra: Any) -> MacroResult:
    ctx = {**CTX, **{k: v for k, v in extra.items() if k not in ("seed", "dynamic")}}
    return expand_macros(text, ctx, seed=extra.get("seed"), dynamic=extra.get("dynamic"))


def text(template: str, **extra: Any) -> str:
    return run(template, **extra).text


def codes(result: MacroResult) -> list[str]:
    return [d.code for d in result.diagnostics]


# ---- names, arguments, lexical rules ------------------------------------------------------


def test_names_are_case_insensitive_and_aliases_resolve() -> None:
    assert text("{{USER}} {{Char}} {{DESCRIPTION}}") == "User Character DESC about User and {{random::a}}"
    assert text("{{charFirstMessage}} {{greeting::2}}") == "Hi! Alt2"


def test_double_colon_arguments_keep_empty_ones() -> None:
    assert text("{{reverse::::abc}}") == "{{reverse::::abc}}"  # two args: arity fails
    assert text("{{setvar::x::}}[{{getvar::x}}]") == "[]"


def test_legacy_colon_form_is_exactly_one_argument() -> None:
    assert text("{{reverse:abc:def}}") == "fed:cba"
    assert text("{{reverse:::abc}}") == "cba:"


def test_legacy_whitespace_form_is_exactly_one_argument() -> None:
    assert text("{{reverse abc def}}") == "fed cba"
    assert text("{{setvar k v}}") == "{{setvar k v}}"


def test_arguments_are_trimmed_but_inner_whitespace_kept() -> None:
    assert text("{{reverse:: a  b }}") == "b  a"


def test_flags_are_parsed_and_do_nothing() -> None:
    assert text("{{!reverse::hello}}{{ ! ? > reverse::ab }}{{#user}}") == "ollehbaUser"


def test_markers_become_macros_case_insensitively() -> None:
    assert text("<USER>/<bot>/<Char>") == "User/Character/Character"


def test_brace_escapes() -> None:
    assert text(r"\{\{user\}\}") == "{{user}}"
    assert text(r"\{{user}}") == "\\User"


def test_extra_braces_stay_text() -> None:
    assert text("{{{char}}}") == "{Character}"
    assert text("{{char}}}}") == "Character}}"


def test_pipe_inside_a_macro_leaves_it_as_written() -> None:
    assert text("{{reverse::a|b}}") == "{{reverse::a|b}}"
    assert text("{{setvar::x}}a|b{{/setvar}}{{getvar::x}}") == "a|b"


def test_unterminated_macro_is_text_with_nested_macros_resolved() -> None:
    assert text("Test {{ hehe {{user}}") == "Test {{ hehe User"


# ---- evaluation order and failure modes ----------------------------------------------------


def test_inside_out_left_to_right_side_effects() -> None:
    assert text("A {{setvar::t::4}}{{getvar::t}} B {{setvar::t::2}}{{getvar::t}} C") == "A 4 B 2 C"


def test_single_pass_output_is_not_rescanned() -> None:
    assert text("{{dyn}}", dynamic={"dyn": "{{char}}"}) == "{{char}}"
    # card fields only get names substituted, never other macros
    assert text("{{description}}") == "DESC about User and {{random::a}}"


def test_unknown_macro_stays_with_nested_resolved_and_a_located_diagnostic() -> None:
    result = run("x\n{{unknown::{{user}}}}")
    assert result.text == "x\n{{unknown::User}}"
    diag = [d for d in result.diagnostics if d.code == "MACRO_UNKNOWN"][0]
    assert (diag.span.start, diag.span.end) == (2, 2 + len("{{unknown::{{user}}}}"))
    assert diag.to_dict("x\n{{unknown::{{user}}}}")["line"] == 2


def test_arity_error_stays_as_written() -> None:
    result = run("{{char::extra}}")
    assert result.text == "{{char::extra}}" and codes(result) == ["MACRO_ARITY"]


def test_type_error_stays_as_written() -> None:
    result = run("{{newline::x}}")
    assert result.text == "{{newline::x}}" and codes(result) == ["MACRO_ARGUMENT_TYPE"]


def test_handler_error_stays_as_written() -> None:
    result = run("{{space::-1}}{{original}}")
    assert result.text == "{{space::-1}}{{original}}"
    assert codes(result) == ["MACRO_HANDLER_ERROR", "MACRO_HANDLER_ERROR"]


def test_diagnostic_spans_point_into_the_callers_text_through_markers() -> None:
    source = "<USER> {{nope}}"
    result = run(source)
    diag = result.diagnostics[0]
    assert source[diag.span.start : diag.span.end] == "{{nope}}"


# ---- scoped macros, if/else, trim, comments -------------------------------------------------


def test_scoped_macro_body_is_the_last_argument_auto_trimmed_and_dedented() -> None:
    assert text("{{setvar::v}}\n  parent\n    child\n  sibling\n{{/setvar}}[{{getvar::v}}]") == "[parent\n  child\nsibling]"


def test_scoped_macro_with_hash_flag_keeps_whitespace() -> None:
    assert text("{{#setvar::v}}\n  content  \n{{/setvar}}[{{getvar::v}}]") == "[\n  content  \n]"


def test_opener_that_cannot_take_a_body_keeps_both_tags() -> None:
    assert text("{{user}}Hello {{char}}!{{/user}}") == "{{user}}Hello Character!{{/user}}"


def test_unmatched_closer_stays_raw() -> None:
    assert text("{{/setvar}}") == "{{/setvar}}"


def test_unknown_scoped_macro_keeps_opener_body_and_closer() -> None:
    # deliberate deviation (docs/DEVIATIONS.md): SillyTavern 1.18 outputs "{{foo}}x User}}"
    assert text("{{foo}}x {{user}}{{/foo}}") == "{{foo}}x User{{/foo}}"


def test_if_evaluates_only_the_chosen_branch() -> None:
    result = run("{{if 0}}{{setvar::a::1}}{{else}}{{setvar::b::1}}{{/if}}")
    assert result.variables["local"] == {"b": "1"}


def test_if_condition_resolves_variables_and_zero_argument_macros() -> None:
    assert text("{{if .v}}yes{{else}}no{{/if}}", variables={"local": {"v": "off"}}) == "no"
    assert text("{{if char}}has char{{/if}}") == "has char"
    assert text("{{if !0}}inverted{{/if}}") == "inverted"


def test_stray_else_is_removed() -> None:
    assert text("a{{else}}b") == "ab"


def test_trim_removes_adjacent_newlines_only() -> None:
    assert text("A\n\n{{trim}}\n\nB") == "AB"
    assert text("a {{trim}} b") == "a  b"


def test_comments_vanish_but_their_nested_macros_run() -> None:
    result = run("{{// note {{setvar::x::1}} }}[{{getvar::x}}]")
    assert result.text == "[1]"


# ---- variables --------------------------------------------------------------------------------


def test_numbers_read_back_as_numbers() -> None:
    assert text("{{setvar::x::007}}{{getvar::x}}|{{setvar::y::1e3}}{{getvar::y}}") == "7|1000"


def test_addvar_appends_to_json_arrays_and_concatenates_text() -> None:
    result = run('{{setvar::l::["a"]}}{{addvar::l::b}}{{addvar::s::foo}}{{addvar::s::1}}')
    assert result.variables["local"] == {"l": '["a","b"]', "s": "foo1"}


def test_incvar_returns_the_new_value() -> None:
    assert text("{{incvar::c}}{{incvar::c}}{{decvar::c}}") == "121"


def test_hasvar_counts_an_empty_value_as_present() -> None:
    assert text("{{hasvar::e}}|{{hasvar::missing}}", variables={"local": {"e": ""}}) == "true|false"


def test_global_variables_are_a_separate_scope() -> None:
    result = run("{{setglobalvar::g::1}}{{setvar::g::2}}{{getglobalvar::g}}{{getvar::g}}")
    assert result.text == "12" and result.variables == {"local": {"g": "2"}, "global": {"g": "1"}}


@pytest.mark.parametrize(
    ("template", "local", "expected", "after"),
    [
        ("{{.x}}", {"x": "5"}, "5", {"x": "5"}),
        ("{{.x = 7}}", {}, "", {"x": "7"}),
        ("{{.x += 2}}", {"x": "5"}, "", {"x": 7}),
        ("{{.x -= 2}}", {"x": "5"}, "", {"x": 3}),
        ("{{.x++}}", {}, "1", {"x": 1}),
        ("{{.x--}}", {}, "-1", {"x": -1}),
        ("{{.x || d}}", {"x": "0"}, "d", {"x": "0"}),
        ("{{.x ?? d}}", {"x": "0"}, "0", {"x": "0"}),
        ("{{.x ||= d}}", {}, "d", {"x": "d"}),
        ("{{.x ??= d}}", {"x": ""}, "", {"x": ""}),
        ("{{.x == 5}}", {"x": "5"}, "true", {"x": "5"}),
        ("{{.x != 5}}", {"x": "5"}, "false", {"x": "5"}),
        ("{{.x > 4}}", {"x": "5"}, "true", {"x": "5"}),
        ("{{.x >= 6}}", {"x": "5"}, "false", {"x": "5"}),
        ("{{.x < abc}}", {"x": "5"}, "false", {"x": "5"}),
        ("{{.x <= 5}}", {"x": "5"}, "true", {"x": "5"}),
    ],
)
def test_variable_shorthand_operator(template: str, local: dict, expected: str, after: dict) -> None:
    result = run(template, variables={"local": local})
    assert result.text == expected and result.variables["local"] == after


def test_variable_shorthand_value_is_evaluated_lazily() -> None:
    result = run("{{.x ?? {{setvar::hit::1}}v}}", variables={"local": {"x": "1"}})
    assert "hit" not in result.variables["local"]


def test_global_shorthand() -> None:
    assert run("{{$g = 3}}{{$g}}").variables["global"] == {"g": "3"}


def test_callers_variables_are_never_mutated() -> None:
    ctx = {**CTX, "variables": {"local": {"x": "1"}, "global": {"g": "1"}}}
    before = copy.deepcopy(ctx)
    expand_macros("{{setvar::x::2}}{{setglobalvar::g::2}}{{incvar::n}}", ctx)
    assert ctx == before


# ---- random, roll, pick, time ----------------------------------------------------------------


def test_random_and_roll_are_seeded_and_every_draw_is_recorded() -> None:
    template = "{{random::a::b::c::d}} {{roll::3d6}} {{random::x,y}}"
    a, b = run(template, seed=11), run(template, seed=11)
    assert (a.text, a.draws) == (b.text, b.draws)
    assert [d.kind for d in a.draws] == ["random", "roll", "random"]
    assert a.draws[1].macro == "{{roll::3d6}}" and len(a.draws[1].rolls) == 3
    assert sum(a.draws[1].rolls) == int(a.draws[1].value)
    texts = {run(template, seed=s).text for s in range(20)}
    assert len(texts) > 1


def test_context_seed_is_used_when_no_seed_is_passed() -> None:
    template = "{{random::a::b::c::d::e::f::g::h}}" * 4
    assert run(template, seed=5).text == expand_macros(template, {**CTX, "seed": 5}).text


def test_roll_grammar() -> None:
    assert text("{{roll::2d1+3}}|{{roll 1d1}}|{{roll::0d6}}|{{roll::d1}}") == "5|1||1"


def test_pick_is_stable_for_the_same_chat_text_and_offset() -> None:
    assert text("{{pick::a::b::c}}{{pick::a::b::c}}") == "ba"
    first = text("{{pick::red::green::blue}}")
    assert all(text("{{pick::red::green::blue}}") == first for _ in range(3))


def test_pick_reroll_seed_changes_the_choice_space() -> None:
    template = "".join(f"{{{{pick::{i}::b::c::d::e}}}}" for i in range(10))
    assert text(template) != text(template, pick_reroll_seed="r1")


def test_time_macros_read_the_injected_clock() -> None:
    assert text("{{date}} {{weekday}} {{isodate}} {{isotime}} {{time}}") == (
        "November 30, 2026 Monday 2026-11-30 10:15 10:15 AM"
    )
    assert text("{{time::UTC+2}}") == "12:15 PM"
    assert text("{{datetimeformat::YYYY}}") == "2026"


# ---- registry-free built-ins and context ----------------------------------------------------


def test_original_is_used_once() -> None:
    assert text("{{original}}|{{original}}", original="O") == "O|"


def test_chat_macros() -> None:
    chat = [
        {"role": "user", "content": "hello"},
        {"role": "assistant", "content": "reply"},
        {"role": "system", "content": "sys"},
    ]
    assert text("{{lastMessage}}|{{lastUserMessage}}|{{lastCharMessage}}|{{lastMessageId}}|{{allChatRange}}", chat=chat) == (
        "sys|hello|reply|2|0-2"
    )


def test_context_from_dict_rejects_wrong_shapes_with_a_path() -> None:
    with pytest.raises(TemplateError) as info:
        MacroContext.from_dict({"chat": [{"role": "robot", "content": "x"}]})
    assert info.value.code == "INPUT_INVALID" and info.value.path == "$.chat[0].role"


def test_empty_text_and_plain_text() -> None:
    assert text("") == ""
    plain = "no macros at all: { } : | ! # / . $"
    assert text(plain) == plain


def test_result_diagnostics_are_library_diagnostics() -> None:
    result = run("{{nope}}")
    assert all(isinstance(d, Diagnostic) for d in result.diagnostics)
    assert result.to_dict("{{nope}}")["diagnostics"][0]["column"] == 1


def test_compiled_text_expands_like_expand_macros_in_any_context() -> None:
    from tavernbox.macros import compile_macros

    template = "{{user}} {{if {{getvar::x}}}}x={{getvar::x}}{{else}}none{{/if}} {{random::a::b::c}} <BOT>"
    compiled = compile_macros(template)
    for local in ({"x": "1"}, {}):
        ctx = {**CTX, "variables": {"local": local, "global": {}}}
        for seed in (1, 2):
            assert compiled.expand(ctx, seed=seed) == expand_macros(template, ctx, seed=seed)


def test_post_processing_runs_once_on_the_whole_output() -> None:
    assert text("\\{{{trim}}\\}") == "{}"


def test_idle_duration_measures_the_user_message_before_the_latest_reply() -> None:
    chat = [
        {"role": "user", "content": "old", "send_date": "2026-11-30T08:00:00Z"},
        {"role": "assistant", "content": "reply", "send_date": "2026-11-30T10:00:00Z"},
        {"role": "system", "content": "note"},
    ]
    assert text("{{idleDuration}}", chat=chat) == "2 hours"
    assert text("{{idle_duration}}", chat=chat[1:]) == "just now"


def test_time_offset_of_a_day_or_more_is_moment_s_shift() -> None:
    # moment reads UTC+1500 as 1500 minutes (25 h); datetime's timezone() refuses >= 24 h
    result = run("{{time::UTC+1500}} {{time_UTC+1500}} {{time::UTC-1500}}")
    assert result.text == "11:15 AM 11:15 AM 9:15 AM"
    assert not result.diagnostics


def test_idle_duration_reads_sillytavern_send_dates_in_the_clock_s_zone() -> None:
    chat = [
        {"role": "user", "content": "old", "send_date": "November 30, 2026 9:00am"},
        {"role": "assistant", "content": "reply"},
    ]
    assert text("{{idleDuration}}", chat=chat) == "an hour"
    # the form is local time: at +05:00, 9:00am is 04:00 UTC, an hour before 10:15+05:00
    assert text("{{idleDuration}}", chat=chat, now="2026-11-30T10:15:00+05:00") == "an hour"
    garbled = [{**chat[0], "send_date": "the day before yesterday"}, chat[1]]
    assert text("{{idleDuration}}", chat=garbled) == "Invalid date"


def test_time_diff_reads_dates_without_offset_in_the_clock_s_zone() -> None:
    template = "{{timeDiff::2023-01-01T12:00::2023-01-01T09:00Z}}"
    assert text(template) == "in 3 hours"
    assert text(template, now="2026-11-30T10:15:00+05:00") == "2 hours ago"


def test_draw_offsets_point_into_the_callers_text() -> None:
    source = "<USER> rolls {{roll::1d1}}"
    draw = run(source).draws[0]
    assert source[draw.offset :].startswith("{{roll::1d1}}")


def test_if_condition_naming_a_macro_is_resolved_through_post_processing() -> None:
    # "{{trim}}" and "{{else}}" vanish in post-processing, so such conditions are falsy
    assert text("{{if trim}}yes{{else}}no{{/if}}|{{if comment}}yes{{else}}no{{/if}}") == "no|no"
    assert text("{{if original}}yes{{/if}}") == "yes"  # cannot run: stays as written, truthy


def test_random_list_items_after_a_single_colon_are_trimmed() -> None:
    assert text("[{{random: a :: a }}]") == "[a]"


def test_addvar_on_json_arrays_prints_numbers_like_javascript() -> None:
    result = run("{{addvar::l::x}}{{incvar::l}}", variables={"local": {"l": "[1.0, 1e3]"}})
    assert result.variables["local"]["l"] == '[1,1000,"x",1]'
    assert run("{{addvar::l::x}}", variables={"local": {"l": "[NaN]"}}).variables["local"]["l"] == "[NaN]x"


def test_pick_offsets_count_utf16_units_like_javascript() -> None:
    from tavernbox.macros.prng import pick_index

    template = "😀{{pick::a::b::c::d::e::f}}"
    expected = "abcdef"[pick_index(123456, template, 2, 6)]  # the emoji is two JS code units
    assert text(template) == "😀" + expected


def test_dedent_removes_a_width_not_a_prefix() -> None:
    from tavernbox.macros.evaluator import dedent_trim

    assert dedent_trim("\n  a\n\t\tb\n c\n") == "a\nb\nc"
    assert dedent_trim("\n\t x\n \ty\n") == "x\ny"


def test_addvar_text_onto_zero_drops_the_zero_like_sillytavern() -> None:
    result = run("{{setvar::z::0}}{{addvar::z::abc}}{{addvar::w::Infinity}}{{addvar::w::-Infinity}}")
    assert result.variables["local"]["z"] == "abc"
    assert result.variables["local"]["w"] == "Infinity"  # JSON has no Infinity


def test_host_state_macros_read_the_context() -> None:
    ctx = {
        "group": ["Character", "Zed", "Quiet"],
        "muted": ["Quiet"],
        "extensions": ["vectors"],
        "outlets": {"lore": "OUT"},
        "limits": {"max_prompt": 4096},
        "instruct": {"input_sequence": "<|user|>", "output_sequence": "<|bot|>"},
        "model": "m-1",
        "input": "typed",
        "is_mobile": True,
        "character": {"mes_example": "<START>\nA: hi\n<START>\nB: yo"},
    }
    assert text(
        "{{group}}|{{groupNotMuted}}|{{notChar}}|{{hasExtension::vectors}}|{{outlet::lore}}|{{maxPrompt}}|"
        "{{instructInput}}|{{instructFirstOutputPrefix}}|{{model}}|{{input}}|{{isMobile}}",
        **ctx,
    ) == "Character, Zed, Quiet|Character, Zed|Zed|true|OUT|4096|<|user|>|<|bot|>|m-1|typed|true"
    assert text("{{mesExamples}}", **ctx) == "<START>\nA: hi\n<START>\nB: yo\n"


def test_trim_mark_removal_equals_sillytaverns_regex() -> None:
    import random
    import re

    from tavernbox.macros.evaluator import _remove_trim_marks

    reference = re.compile(r"(?:\r?\n)*\{\{trim\}\}(?:\r?\n)*", re.IGNORECASE)
    rng = random.Random(7)
    pieces = ["\n", "\r", "\r\n", "{{trim}}", "{{TRIM}}", "a", " ", "{{", "}}"]
    for _ in range(3000):
        sample = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 12)))
        assert _remove_trim_marks(sample) == reference.sub("", sample), repr(sample)
