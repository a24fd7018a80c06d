"""The Handlebars engine on its own: SillyTavern's story-string cases, whitespace rules, errors
with their codes and positions, and every budget tripped by hostile input in bounded time."""

from __future__ import annotations

import pytest

from tavernbox.errors import TemplateError
from tavernbox.handlebars import HandlebarsLimits, RenderSettings, compile_template, render

ST = RenderSettings(helpers={"trim": lambda params, options: "{{trim}}"}, missing=lambda name: "{{" + name + "}}")

# a story string in the style of the context templates SillyTavern ships (written here, not copied)
DEFAULT_STORY = (
    "{{#if system}}{{system}}\n{{/if}}{{#if wiBefore}}{{wiBefore}}\n{{/if}}{{#if description}}{{description}}\n"
    "{{/if}}{{#if personality}}{{char}}'s personality: {{personality}}\n{{/if}}{{#if scenario}}Scenario: "
    "{{scenario}}\n{{/if}}{{#if wiAfter}}{{wiAfter}}\n{{/if}}{{#if persona}}{{persona}}\n{{/if}}{{trim}}"
)


def _error(source: str, data: object = None, settings: RenderSettings | None = None) -> TemplateError:
    with pytest.raises(TemplateError) as info:
        render(source, data if data is not None else {}, settings)
    return info.value


def test_the_default_story_string_keeps_only_filled_fields() -> None:
    data = {"system": "", "description": "A knight.", "personality": "brave", "char": "Seraphina", "scenario": "",
            "persona": "A traveller."}
    assert render(DEFAULT_STORY, data, ST) == "A knight.\nSeraphina's personality: brave\nA traveller.\n{{trim}}"


def test_unknown_names_go_to_helper_missing_and_nothing_is_escaped() -> None:
    assert render("{{random::a::b}} <{{x}}> {{{y}}} {{&y}}", {"y": "<b>&"}, ST) == "{{random::a::b}} <{{x}}> <b>& <b>&"
    # without SillyTavern's hook, Handlebars' own: a bare unknown name is empty, a call fails
    assert render("[{{nothing}}]", {}) == "[]"
    assert _error("{{nothing here}}").code == "HANDLEBARS_RUNTIME"


def test_standalone_block_lines_leave_no_blank_lines() -> None:
    source = "A\n  {{#if x}}\n  inside\n  {{else}}\n  other\n  {{/if}}\nB\n{{! note }}\nC"
    assert render(source, {"x": True}) == "A\n  inside\nB\nC"
    assert render(source, {"x": False}) == "A\n  other\nB\nC"
    # a mustache is never standalone
    assert render("A\n  {{x}}\nB", {"x": ""}) == "A\n  \nB"


def test_tilde_strips_all_whitespace_on_its_side() -> None:
    assert render("a \n\t {{~x~}} \n b", {"x": "X"}) == "aXb"
    assert render("{{#if 1~}}\n\n x {{~/if}}.", {}) == "x."


def test_each_with_unless_and_data() -> None:
    data = {"items": ["a", "b", "c"], "obj": {"k": 1, "2": "two", "1": "one"}, "who": {"name": "Ann"}}
    assert render("{{#each items}}{{@index}}{{this}}{{#if @last}}.{{else}},{{/if}}{{/each}}", data) == "0a,1b,2c."
    assert render("{{#each obj}}{{@key}}={{.}};{{/each}}", data) == "1=one;2=two;k=1;"
    assert render("{{#with who as |p|}}{{p.name}}/{{name}}/{{@root.items.length}}{{/with}}", data) == "Ann/Ann/3"
    assert render("{{#unless missing}}none{{/unless}}{{#each missing}}x{{else}}empty{{/each}}", data) == "noneempty"
    assert render("{{#each items as |it i|}}{{#if i}}{{../who.name}}{{/if}}{{it}}{{/each}}", data) == "aAnnbAnnc"


def test_javascript_values_print_as_javascript_prints_them() -> None:
    data = {"n": 1.0, "f": 0.1, "big": 1e21, "t": True, "arr": [1, None, "x"], "o": {}}
    assert render("{{n}} {{f}} {{big}} {{t}} {{arr}} {{o}}", data) == "1 0.1 1e+21 true 1,,x [object Object]"
    # consecutive values join with JavaScript's +: two numbers add, as in Handlebars' compiled code
    assert render("{{n}}{{n}}", data) == "2"
    assert render("{{n}}-{{n}}", data) == "1-1"


@pytest.mark.parametrize(
    ("source", "code", "line", "column"),
    [
        ("ok\n{{#if x}}\nnever closed", "HANDLEBARS_SYNTAX", 3, 13),
        ("{{#if x}}{{/each}}", "HANDLEBARS_SYNTAX", 1, 4),
        ("a\n  {{foo/../bar}}", "HANDLEBARS_SYNTAX", 2, 5),
        ("{{foo", "HANDLEBARS_SYNTAX", 1, 3),
        ("x\n{{#> layout}}{{/layout}}", "HANDLEBARS_UNSUPPORTED", 2, 1),
        ("{{{{raw}}}}{{{{/raw}}}}", "HANDLEBARS_UNSUPPORTED", 1, 1),
        ("a\x00b", "HANDLEBARS_SYNTAX", 1, 2),
        ("\n\n  {{#if a b}}x{{/if}}", "HANDLEBARS_RUNTIME", 3, 3),
        ("{{> partial}}", "HANDLEBARS_RUNTIME", 1, 1),
    ],
)
def test_errors_have_a_code_and_a_position(source: str, code: str, line: int, column: int) -> None:
    error = _error(source, {"a": 1})
    assert (error.code, error.line, error.column) == (code, line, column), error.message


def test_a_partial_that_never_runs_is_no_error() -> None:
    assert render("{{#if no}}{{> partial}}{{/if}}ok", {}) == "ok"


def _bounded(source: str, data: object, limits: HandlebarsLimits, code: str) -> None:
    # the budget itself bounds the time and memory (its error is the proof); speed is measured by
    # benchmarks/bench_handlebars.py, not asserted here
    with pytest.raises(TemplateError) as info:
        compile_template(source, limits).render(data, RenderSettings(limits=limits))
    assert info.value.code == code
    # the next render is unaffected
    assert render("{{a}}", {"a": "fine"}) == "fine"


def test_a_template_over_the_size_limit_is_refused_before_parsing() -> None:
    _bounded("x" * 101, {}, HandlebarsLimits(max_template_chars=100), "HANDLEBARS_TOO_LARGE")


def test_deep_nesting_is_refused_before_it_is_built() -> None:
    source = "{{#if a}}" * 5000 + "x" + "{{/if}}" * 5000
    _bounded(source, {"a": 1}, HandlebarsLimits(), "HANDLEBARS_NESTING_LIMIT")
    _bounded("{{lookup " + "(lookup " * 100 + "a" + ")" * 100 + "}}", {}, HandlebarsLimits(),
             "HANDLEBARS_NESTING_LIMIT")


def test_nested_each_that_multiplies_its_output_stops_at_the_limit() -> None:
    data = {"a": list(range(200))}
    source = "{{#each a}}{{#each ../a}}{{#each ../../a}}0123456789{{/each}}{{/each}}{{/each}}"
    _bounded(source, data, HandlebarsLimits(max_output_chars=1 << 20), "HANDLEBARS_OUTPUT_LIMIT")


def test_a_render_past_its_cpu_budget_stops() -> None:
    data = {"a": list(range(400))}
    source = "{{#each a}}{{#each ../a}}{{#each ../../a}}{{/each}}{{@index}}{{/each}}{{/each}}"
    _bounded(source, data, HandlebarsLimits(cpu_seconds=0.05, max_output_chars=1 << 30), "HANDLEBARS_TIME_LIMIT")
