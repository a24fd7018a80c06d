"""The template API in every render (issue 13): the ST-Prompt-Template dialect is the default.

``render_template`` and ``tavernbox render`` give every template ``getvar``, ``_``, ``getwi``,
``getpreset``, ``getchar`` and the refused writes, answered from what the render was given;
``dialect="ejs"`` / ``--dialect ejs`` is plain ejs.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from tavernbox import render_template, render_templates
from tavernbox.bridge import render_with_sources, sources_from_inputs
from tavernbox.cli.main import main
from tavernbox.errors import TemplateError
from tavernbox.sandbox import Limits

VARS = {"stat_data": {"hp": [10, "health"], "name": "Ann"}, "a.b": "flat", "list": [1, 2, 3]}


def failure(source: str, variables: object = None, **kwargs: object) -> TemplateError:
    with pytest.raises(TemplateError) as info:
        render_template(source, variables, **kwargs)  # type: ignore[arg-type]
    return info.value


def test_getvar_and_lodash_read_the_variables_by_default() -> None:
    source = ("<%= getvar('stat_data.hp[0]') %>|<%= getvar('stat_data').name %>|<%= getvar('a.b') %>|"
              "<%= getvar('nope', {defaults: 'd'}) %>|<%= typeof getvar('x.y') %>|<%= getvar(\"list[2]\") %>|"
              "<%= _.get(variables, 'stat_data.hp[1]') %>|<%= _.has(getvar(), 'stat_data.name') %>|"
              "<%= getvar() === variables %>")
    assert render_template(source, VARS).text == "10|Ann|flat|d|undefined|3|health|true|true"


def test_the_default_matches_a_bridge_render_with_the_same_variables() -> None:
    source = ("<%= getvar('stat_data.name') %>[<%= getwi('Book', 'Title') %>][<%= getwi('Title') %>]"
              "[<%= await getpreset('main') %>][<%= getchar() %>][<%= getChara('Bob') %>][<%= getprp('x') %>]")
    plain = render_template(source, VARS).text
    bridged = render_with_sources(source, sources_from_inputs(variables=VARS)).text
    assert plain == bridged == "Ann[][][][][][]"


@pytest.mark.parametrize("call", ["setvar('x', 1)", "incvar('hp')", "delvar('a')", "execute('/echo')",
                                  "activewi('Book', 'x')", "injectPrompt('k', 'v')", "getLocalVar('x')"])
def test_writes_and_unavailable_reads_are_unsupported(call: str) -> None:
    error = failure(f"ok\n<% {call} %>", VARS)
    assert error.code == "TEMPLATE_UNSUPPORTED"
    assert (error.line, error.column) == (2, 4)


def test_a_caught_write_still_fails_the_render() -> None:
    error = failure("<% try { setvar('x', 1) } catch (e) { } %>done", VARS)
    assert error.code == "TEMPLATE_UNSUPPORTED"


def test_variables_stay_frozen_under_the_api() -> None:
    source = ("<% const s = getvar('stat_data'); s.name = 'Eve'; s.hp.push(1) %>"
              "<%= Object.isFrozen(s) && Object.isFrozen(s.hp) %> <%= s.name %>")
    error = failure(source, VARS)
    assert error.code == "TEMPLATE_EXECUTION_FAILED" and "TypeError" in error.message
    source = "<% const s = getvar('stat_data'); s.name = 'Eve' %><%= Object.isFrozen(s) %> <%= getvar('stat_data.name') %>"
    assert render_template(source, VARS).text == "true Ann"


def test_api_calls_count_against_the_bridge_call_limit() -> None:
    source = "<% for (let i = 0; i < 20; i++) getvar('a.b') %>ok"
    assert render_template(source, VARS, Limits(bridge_calls=20)).text == "ok"
    assert failure(source, VARS, limits=Limits(bridge_calls=19)).code == "TEMPLATE_BRIDGE_LIMIT"


def test_a_long_request_is_invalid_as_in_bridge_mode() -> None:
    source = "<%= getpreset('x'.repeat(5000)) %>"
    assert failure(source).code == "TEMPLATE_DEPENDENCY_INVALID"
    with pytest.raises(TemplateError) as info:
        render_with_sources(source, sources_from_inputs())
    assert info.value.code == "TEMPLATE_DEPENDENCY_INVALID"


def test_plain_ejs_has_no_api() -> None:
    error = failure("<%= getvar('a.b') %>", VARS, dialect="ejs")
    assert error.code == "TEMPLATE_EXECUTION_FAILED" and "getvar is not defined" in error.message
    # A template of plain ejs may use the API's names for its own things.
    assert render_template("<% const _ = 5, setvar = 2 %><%= _ + setvar %>", dialect="ejs").text == "7"
    assert render_template("<% const _ = 5 %><%= _ %>").text == "5"


def test_an_unknown_dialect_is_input_invalid() -> None:
    assert failure("<%= 1 %>", dialect="jinja").code == "INPUT_INVALID"
    with pytest.raises(TemplateError) as info:
        render_templates([("<%= 1 %>", None)], dialect="jinja")
    assert info.value.code == "INPUT_INVALID"


def test_batches_take_the_dialect() -> None:
    items = [("<%= getvar('a.b') %>", VARS), ("<% setvar('x', 1) %>", VARS)]
    ok, refused = render_templates(items)
    assert not isinstance(ok, TemplateError) and ok.text == "flat"
    assert isinstance(refused, TemplateError) and refused.code == "TEMPLATE_UNSUPPORTED"
    plain = render_templates(items, dialect="ejs")
    assert all(isinstance(r, TemplateError) and r.code == "TEMPLATE_EXECUTION_FAILED" for r in plain)


def cli(args: list[str], stdin: str | None = None) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, ["render", *args], input=stdin)
    return result.exit_code, result.stdout, result.stderr


def test_cli_renders_the_api_by_default_and_plain_ejs_on_request(tmp_path: Path) -> None:
    template = tmp_path / "t.ejs"
    template.write_text("<%= getvar('stat_data.name') %>")
    (tmp_path / "v.json").write_text(json.dumps(VARS))
    assert cli([str(template), "--vars", str(tmp_path / "v.json")])[:2] == (0, "Ann")
    code, out, err = cli([str(template), "--vars", str(tmp_path / "v.json"), "--dialect", "ejs"])
    assert code == 1 and "getvar is not defined" in err and "Traceback" not in err
    (tmp_path / "w.ejs").write_text("<% setvar('a', 1) %>")
    code, out, _ = cli([str(tmp_path / "w.ejs"), "--json"])
    assert code == 1 and json.loads(out)["error"]["code"] == "TEMPLATE_UNSUPPORTED"
    (tmp_path / "card.json").write_text(json.dumps({"spec": "chara_card_v2", "spec_version": "2.0",
                                                    "data": {"name": "Bob", "description": "d"}}))
    code, _, err = cli([str(template), "--card", str(tmp_path / "card.json"), "--dialect", "ejs"])
    assert code == 2 and "dialect" in err


def test_cli_jsonl_rows_carry_a_dialect() -> None:
    rows = [
        {"template": "<%= getvar('a') %>", "variables": {"a": 1}},
        {"template": "<%= getvar('a') %>", "variables": {"a": 1}, "dialect": "ejs"},
        {"template": "<%= variables.a %>", "variables": {"a": 1}, "dialect": "st-prompt-template"},
        {"template": "x", "dialect": "jinja"},
        {"template": "x", "dialect": ["ejs"]},
        {"template": "<%= getchar() %>", "card": {"name": "Bob", "description": "d"}, "dialect": "ejs"},
    ]
    code, out, _ = cli(["--jsonl"], "\n".join(json.dumps(r) for r in rows) + "\n")
    answers = [json.loads(line) for line in out.splitlines()]
    assert code == 0 and len(answers) == len(rows)
    assert answers[0] == {"text": "1", "error": None}
    assert answers[1]["error"]["code"] == "TEMPLATE_EXECUTION_FAILED"
    assert answers[2] == {"text": "1", "error": None}
    assert [a["error"]["code"] for a in answers[3:]] == ["INPUT_INVALID"] * 3
    assert cli(["--jsonl", "--dialect", "ejs"], "")[0] == 2
