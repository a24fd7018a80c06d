"""ST-Prompt-Template's budgets per template (issue 26): each template of a request gets its own CPU time within the
request's (``PromptTemplateLimits.template_time_ms``; the worker's ``TemplateClock``), a trip names the template
and, where the engine recorded one, its line:column, and a template cannot buy itself more time through the mark
the runtime gives the sandbox (docs/ARCHITECTURE.md, "Per-template time")."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tavernbox import assemble_request
from tavernbox.ejs.st_extensions import parse_extensions
from tavernbox.ejs.st_prompt_template import (
    PromptTemplateLimits,
    TemplateText,
    WorldEntry,
    evaluate_prompt_templates,
)
from tavernbox.errors import TemplateError
from tavernbox.sandbox import Limits, SandboxError, run_program

#: a request budget far above the template limit: a template trip proves the template could not take the rest
LIMITS = PromptTemplateLimits(time_ms=3000.0, template_time_ms=100.0)
TEMPLATE_TRIP = "a template used up its time limit of 100 ms"
BOOK = {"B": [WorldEntry("B", 1, "fast", "<%- 1 + 1 %>"), WorldEntry("B", 2, "slow", "x\n<% for (;;) {} %>"),
              WorldEntry("B", 3, "spins", "<% function spin() {\n  for (;;) {}\n}\nspin() %>")]}


def _trip(texts: list[TemplateText], books: dict[str, list[WorldEntry]] | None = None) -> TemplateError:
    with pytest.raises(TemplateError) as caught:
        evaluate_prompt_templates(texts, books=books or BOOK, default_book="B", limits=LIMITS)
    assert caught.value.code == "TEMPLATE_TIME_LIMIT"
    # the next request, on the same pool, is unaffected
    after = evaluate_prompt_templates([TemplateText("<%- typeof i %> <%- await getwi('B', 'fast') %>", "next")],
                                      books=BOOK, default_book="B", limits=LIMITS)
    assert after.texts == ["undefined 2"]
    return caught.value


def test_a_looping_entry_among_fast_templates_trips_its_own_limit_and_is_named() -> None:
    texts = [TemplateText("a <%- 1 %>", "message 0 (system)"), TemplateText("b <%- await getwi('fast') %>", "message 1"),
             TemplateText("c <%- await getwi('slow') %>", "message 2"), TemplateText("d <%- 2 %>", "message 3")]
    error = _trip(texts)
    assert error.message == f"{TEMPLATE_TRIP} in world info B/slow"
    assert error.line is None  # a loop before the engine recorded any position in the template


def test_a_loop_in_a_helper_function_is_placed_at_the_function() -> None:
    error = _trip([TemplateText("<%- await getwi('spins') %>", "message 0 (system)")])
    assert error.message == f"{TEMPLATE_TRIP} in world info B/spins (running at or after this position)"
    assert (error.line, error.column) == (1, 3)  # `function spin` holds the loop


def test_a_looping_message_is_named_and_the_templates_before_it_ran() -> None:
    error = _trip([TemplateText("<% define('x', 1) %>", "message 0"), TemplateText("<% while (x) {} %>", "message 1 (user)")])
    assert error.message == f"{TEMPLATE_TRIP} in message 1 (user)"


def test_the_request_budget_still_holds_when_no_template_passes_its_own() -> None:
    # eight templates each under 100 ms could pass 300 ms together only through the request budget
    limits = PromptTemplateLimits(time_ms=150.0, template_time_ms=100.0)
    texts = [TemplateText("<% for (let i = 0; i < 1e9; i++) {} %>", f"message {n}") for n in range(8)]
    with pytest.raises(TemplateError) as caught:
        evaluate_prompt_templates(texts, limits=limits)
    assert caught.value.code == "TEMPLATE_TIME_LIMIT"
    assert caught.value.message.startswith(("the render used up its time budget of 150 ms in message ",
                                            f"{TEMPLATE_TRIP} in message "))


#: a template trying to reset its own clock, then looping: each must trip ITS limit (100 ms), not the request's
ESCAPES = {
    "calls-the-hook": "<% for (const h of [typeof __tb !== 'undefined' && __tb.mark, globalThis.mark, "
                      "globalThis.MARK, locals.mark, this && this.mark]) { try { h(-1) } catch (e) {} } for (;;) {} %>",
    "redefines-the-hook": "<% try { Object.defineProperty(__tb, 'mark', { value: () => {} }) } catch (e) {} "
                          "try { globalThis.MARK = () => {} } catch (e) {} for (;;) {} %>",
    "getwi-in-a-loop": "<% for (;;) { await getwi('fast') } %>",
    "getter-on-what-the-runtime-reads": "<% define('world_info', new Proxy({}, { get: () => 'B' })); "
                                        "for (;;) { await getwi('fast') } %>",
    "throwing-titles": "<% for (;;) { try { await getwi({ toString() { throw 1 } }) } catch (e) {} } %>",
    "caller-chain": "<% let f = getwi; try { f = getwi.caller } catch (e) {} "
                    "try { f = arguments.callee.caller } catch (e) {} for (;;) {} %>",
    "detached-jobs": "<% for (let n = 0; n < 100; n++) Promise.resolve().then(() => { for (;;) {} }) %>",
    "late-detached-job": "<% Promise.resolve().then(() => 0).then(() => 0).then(() => 0).then(() => { for (;;) {} }) %>",
}


@pytest.mark.parametrize("name", sorted(ESCAPES))
def test_a_template_cannot_reset_its_own_time(name: str) -> None:
    error = _trip([TemplateText("fine <%- 1 %>", "message 0"), TemplateText(ESCAPES[name], "message 1 (user)")])
    assert error.message.startswith(TEMPLATE_TRIP)
    # named by the template marked when the time ran out: the looping one, or the entry it was reading
    assert " in message 1 (user)" in error.message or " in world info B/fast" in error.message


def test_the_hook_takes_only_small_integers_and_moves_time_only_within_the_budget() -> None:
    # a plain render reaches the harness's hook directly: what it can do with it is what the note says
    limits = Limits(time_ms=300.0, template_time_ms=50.0)
    fast = "(async function (__tb) { __tb.mark(%s); await null; __tb.append('ok') })"
    for value in ("{ toString() { for (;;) {} } }", "new Proxy({}, { get() { for (;;) {} } })", "1.5", "'1'",
                  "-2", "2 ** 40", "NaN"):
        assert run_program(fast % value, "{}", limits=limits).text == "ok"  # ignored: no conversion ran
    # re-marking before each step resets the per-template accounts, never the render's budget
    reset = "(async function (__tb) { for (let n = 0; ; n++) { __tb.mark(n); await null; for (let i = 0; i < 1e5; i++) {} } })"
    with pytest.raises(SandboxError) as caught:
        run_program(reset, "{}", limits=limits)
    assert caught.value.code == "TEMPLATE_TIME_LIMIT"
    assert caught.value.message == "the render used up its time budget of 300 ms"
    # marked and looping: its own limit, named
    loop = "(async function (__tb) { __tb.mark(7); await null; for (;;) {} })"
    with pytest.raises(SandboxError) as caught:
        run_program(loop, "{}", limits=limits)
    assert (caught.value.message, caught.value.js_template) == ("a template used up its time limit of 50 ms", 7)
    assert run_program("(async function (__tb) { __tb.append('next') })", "{}", limits=limits).text == "next"


def test_the_budgets_are_read_from_the_request_with_their_path() -> None:
    settings = parse_extensions({"prompt_template": {"time_limit": 4, "template_time_limit": 0.5}})
    assert (settings.time_limit, settings.template_time_limit) == (4.0, 0.5)
    assert (parse_extensions(None).time_limit, parse_extensions(None).template_time_limit) == (2.0, 1.0)
    for bad in (0, -1, "1", True, 61):
        with pytest.raises(TemplateError) as caught:
            parse_extensions({"prompt_template": {"template_time_limit": bad}})
        assert caught.value.code == "REQUEST_INVALID"
        assert caught.value.path == "$.extensions.prompt_template.template_time_limit"


#: the issue's hostile world-info entries, read by a message: (entry source, code, the entry it names, line:column)
HOSTILE = {
    "loop": ("<% while (true) {} %>", "TEMPLATE_TIME_LIMIT", "hostile", None),
    "hundred-mb": ("<% const big = 'x'.repeat(100 * 1024 * 1024) %>", "TEMPLATE_MEMORY_LIMIT", "hostile", (1, 40)),
    "doubling": ("<% let s = 'x'.repeat(1 << 20); while (true) s = s + s + '.'; %>", "TEMPLATE_MEMORY_LIMIT",
                 "hostile", None),
    "recursion": ("<% function f(n) {\n  return f(n + 1) + 1\n}\nf(0) %>", "TEMPLATE_STACK_LIMIT", "hostile", (2, None)),
    "getwi-cycle": ("<%- await getwi('B', 'cycle') %>", "TEMPLATE_STACK_LIMIT", "cycle", (1, 11)),
    "output": ("x\n<% for (;;) print('xxxxxxxxxxxxxxxx') %>", "TEMPLATE_OUTPUT_LIMIT", "hostile", (2, 13)),
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_a_hostile_entry_is_refused_with_its_code_entry_and_position(name: str) -> None:
    source, code, entry, position = HOSTILE[name]
    books = {"B": [WorldEntry("B", 1, "hostile", source), WorldEntry("B", 2, "cycle", "<%- await getwi('B', 'cycle') %>"),
                   WorldEntry("B", 3, "fast", "<%- 1 + 1 %>")]}
    texts = [TemplateText("fine <%- 1 %>", "message 0"), TemplateText("X <%- await getwi('B', 'hostile') %>", "message 1")]
    limits = PromptTemplateLimits(time_ms=1000.0, template_time_ms=200.0, template_output_chars=1 << 20)
    with pytest.raises(TemplateError) as caught:
        evaluate_prompt_templates(texts, books=books, default_book="B", limits=limits)
    error = caught.value
    assert error.code == code
    assert f"world info B/{entry}" in error.message
    if position is not None:  # where the engine placed it (the doubling's memory runs out in a loop: no frame)
        assert error.line == position[0] and position[1] in (None, error.column)  # (a call's column: the engine's)
    after = evaluate_prompt_templates([TemplateText("<%- typeof s %> <%- await getwi('B', 'fast') %>", "next")],
                                      books=books, default_book="B", limits=limits)
    assert after.texts == ["undefined 2"]


def test_no_template_holds_the_hook() -> None:
    probe = ("<%- [typeof __tb.mark, typeof globalThis.MARK, typeof globalThis.mark, typeof locals.mark, "
             "typeof (this || {}).mark, Object.keys(__tb).join('+'), "
             "(() => { try { return typeof getwi.caller } catch (e) { return 'throws' } })(), "
             "(() => { try { return typeof arguments.callee.caller } catch (e) { return 'throws' } })()].join() %>")
    result = evaluate_prompt_templates([TemplateText(probe, "message 0")], books=BOOK, default_book="B")
    assert result.texts == ["undefined,undefined,undefined,undefined,undefined,api+locals+escape+finish+append,"
                            "throws,throws"]


def test_the_sandbox_limit_is_off_by_default_and_checked() -> None:
    assert Limits().template_time_ms == 0.0 and "template_time_ms" not in Limits().to_wire()
    assert Limits(template_time_ms=250.0).to_wire()["template_time_ms"] == 250.0
    for bad in (-1.0, 60_001.0, float("nan")):
        with pytest.raises(ValueError):
            Limits(template_time_ms=bad)
    # unmarked, a plain render has only its budget: nothing is charged to a template
    with pytest.raises(SandboxError) as caught:
        run_program("(async function (__tb) { for (;;) {} })", "{}", limits=Limits(time_ms=120.0, template_time_ms=50.0))
    assert (caught.value.message, caught.value.js_template) == ("the render used up its time budget of 120 ms", None)


def _request_with_entries(*entries: tuple[str, str, int]) -> dict[str, Any]:
    """The bundled sample request with constant world-info entries ``(comment, content, order)`` in book "lore"."""
    root = Path(__file__).resolve().parents[1] / "corpora"
    request = json.loads((root / "sample-request.json").read_text(encoding="utf-8"))
    for key in ("preset", "card", "chat"):
        request[key] = str(root / request[key])
    request["books"] = [{"name": "lore", "entries": {str(uid): {
        "uid": uid, "key": [], "keysecondary": [], "comment": comment, "constant": True, "content": content,
        "disable": False, "order": order, "position": 0} for uid, (comment, content, order) in enumerate(entries)}}]
    return request


def test_a_request_names_the_world_info_entry_a_looping_template_came_from() -> None:
    request = _request_with_entries(("intro", "The city.", 10), ("spin", "Weather: <% while (true) {} %>", 90))
    request["extensions"] = {"prompt_template": {"template_time_limit": 0.1}}
    with pytest.raises(TemplateError) as caught:
        assemble_request(request)
    assert caught.value.code == "TEMPLATE_TIME_LIMIT"
    # no position from the engine: the only part of the message with a template is the entry
    assert caught.value.message == f"{TEMPLATE_TRIP} in message 1 (system), from world info lore/spin"
    request["books"][0]["entries"]["1"]["content"] = "Weather: <%- 'fine' %>"
    assert "Weather: fine" in json.dumps(assemble_request(request).messages)


def test_a_request_places_a_budget_trip_in_the_entry_it_came_from() -> None:
    hostile = "Weather: <% let n = 1;\nconst big = 'x'.repeat(100 * 1024 * 1024) %>"
    request = _request_with_entries(("intro", "The city.\nIt rains.", 10), ("big", hostile, 90))
    with pytest.raises(TemplateError) as caught:
        assemble_request(request)
    error = caught.value
    assert error.code == "TEMPLATE_MEMORY_LIMIT"
    assert (error.line, error.column) == (4, 37)  # in the message: the entry follows the intro's two lines
    assert error.message.endswith(", from world info lore/big at 2:37")  # in the entry's own text


# -- one request's VMs share its time_limit ------------------------------------------------------------------------


def test_an_evaluation_charges_its_cpu_to_the_meter_and_stops_when_the_request_has_none_left() -> None:
    from tavernbox.ejs.st_prompt_template import TemplateMeter

    meter = TemplateMeter()
    limits = PromptTemplateLimits(time_ms=150.0, template_time_ms=150.0, meter=meter)
    evaluate_prompt_templates([TemplateText("<%- 1 + 1 %>", "m")], limits=limits)
    first = meter.spent_ms
    assert first > 0
    evaluate_prompt_templates([TemplateText("<%- 2 + 2 %>", "m")], limits=limits)
    assert meter.spent_ms > first
    # what an earlier VM of the request used is not given again to the next one
    meter.spent_ms = 150.0
    with pytest.raises(TemplateError) as caught:
        evaluate_prompt_templates([TemplateText("<%- 3 %>", "m")], limits=limits)
    assert caught.value.code == "TEMPLATE_TIME_LIMIT" and "before this evaluation" in caught.value.message
    meter.spent_ms = 120.0
    with pytest.raises(TemplateError) as caught:
        evaluate_prompt_templates([TemplateText("<% for (;;) {} %>", "m")], limits=limits)
    assert caught.value.code == "TEMPLATE_TIME_LIMIT" and "30 ms" in caught.value.message


def test_the_chat_load_and_the_generation_share_one_meter(monkeypatch: pytest.MonkeyPatch) -> None:
    import tavernbox.ejs.st_prompt_template as spt

    meters: list[Any] = []
    real = spt._run

    def spying(payload: Any, books_json: str, limits: Any, *args: Any, **kwargs: Any) -> Any:
        meters.append(limits.meter)
        return real(payload, books_json, limits, *args, **kwargs)

    monkeypatch.setattr(spt, "_run", spying)
    preset = {"prompts": [{"identifier": "main", "name": "Main", "role": "system", "system_prompt": True,
                           "content": "Turn <%- getvar('n') %>."},
                          {"identifier": "chatHistory", "name": "Chat History", "system_prompt": True, "marker": True}],
              "prompt_order": [{"character_id": 100001, "order": [{"identifier": "main", "enabled": True},
                                                                  {"identifier": "chatHistory", "enabled": True}]}]}
    sent = assemble_request({"preset": preset, "chat": {"messages": [
        {"role": "assistant", "content": "<% setvar('n', 1) %>Hi."}, {"role": "user", "content": "<% incvar('n') %>Yo."}]}})
    assert sent.messages[0]["content"] == "Turn 2."
    assert len(meters) >= 2 and all(m is meters[0] for m in meters) and meters[0] is not None
    assert sent.templates.meter is meters[0] and meters[0].spent_ms > 0


def test_the_engine_running_out_of_stack_while_compiling_a_template_is_a_budget_not_a_raw_message() -> None:
    """A budget is ours: a template too deep for the engine to compile fails the request with its code (it used to
    be sent as it was, like a syntax error), and the next request is unaffected."""
    deep = "<%= " + "(" * 50000 + "1" + ")" * 50000 + " %>"
    with pytest.raises(TemplateError) as caught:
        evaluate_prompt_templates([TemplateText(deep, "message 0 (system)"), TemplateText("<%- 2 %>", "m1")])
    assert caught.value.code == "TEMPLATE_STACK_LIMIT" and "message 0 (system)" in caught.value.message
    # a syntax error is still the extension's behaviour: that message sent as it was, with a warning
    after = evaluate_prompt_templates([TemplateText("<%= ( %>", "m0"), TemplateText("<%- 2 %>", "m1")])
    assert after.texts == ["<%= ( %>", "2"] and [w.code for w in after.warnings] == ["TEMPLATE_SYNTAX"]
