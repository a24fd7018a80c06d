"""Tampering with every intrinsic the harness touches changes nothing the host receives (issue 13).

The argument (docs/ARCHITECTURE.md, "Why tampering cannot reach the host"): the harness takes
what it needs before any template code exists, checks the type of everything a template hands it,
and builds its reply from primitives with its own JSON.stringify; the intrinsics are frozen on top
of that. Each case below first tries to change one intrinsic (or plants a hostile ``toJSON`` /
``valueOf`` / ``Symbol.toPrimitive``), swallowing the TypeError a frozen object gives, then runs
the same body as the baseline: the output, the bridge requests (what was read, in which order) and
the usage must be those of the baseline, and every limit must still trip with its own code.
"""

from __future__ import annotations

from typing import Any

import pytest

from tavernbox import render_template
from tavernbox.bridge import render_with_sources, sources_from_inputs
from tavernbox.errors import TemplateError
from tavernbox.sandbox import Limits

TAMPER = {
    "array-push": "Array.prototype.push = function () { return 0 }",
    "array-join": "Array.prototype.join = function () { return 'forged' }",
    "array-index-setter": "Object.defineProperty(Array.prototype, '0', { set(v) { globalThis.stolen = v } })",
    "array-iterator": "Array.prototype[Symbol.iterator] = function* () { yield 'forged' }",
    "array-species": "Object.defineProperty(Array, Symbol.species, { get() { return Object } })",
    "string-replace": "String.prototype.replaceAll = function () { return '<forged>' }",
    "string-slice": "String.prototype.slice = function () { return 'forged' }",
    "string-split": "String.prototype.split = function () { return ['forged'] }",
    "string-tostring": "String.prototype.toString = function () { return 'forged' }",
    "json-stringify": "JSON.stringify = function () { return '{\"ok\":true,\"text\":\"forged\",\"bytes\":6}' }",
    "json-define": "Object.defineProperty(JSON, 'stringify', { value: () => 'forged' })",
    "json-parse": "JSON.parse = function () { return { forged: true } }",
    "object-keys": "Object.keys = function () { return ['forged'] }",
    "object-freeze": "Object.freeze = function (o) { return o }",
    "object-proto-tojson": "Object.prototype.toJSON = function () { return 'forged' }",
    "object-proto-then": "Object.prototype.then = function (resolve) { resolve('forged') }",
    "object-proto-setter": "Object.defineProperty(Object.prototype, 'text', { set(v) {}, get() { return 'forged' } })",
    "promise-then": "Promise.prototype.then = function () { return this }",
    "promise-resolve": "Promise.resolve = function () { return new Promise(() => {}) }",
    "promise-global": "globalThis.Promise = function () {}",
    "symbol-toprimitive": "Object.defineProperty(Symbol, 'toPrimitive', { value: Symbol('fake') })",
    "symbol-tostring": "Symbol.prototype.toString = function () { return 'forged' }",
    "global-json-getter": "Object.defineProperty(globalThis, 'JSON', { get() { return { stringify: () => 'forged' } } })",
    "global-enter": "Object.defineProperty(globalThis, '__tbEnter', { get() { return () => {} } })",
    "global-getvar": "Object.defineProperty(globalThis, 'getvar', { get() { return () => 'forged' } })",
    "global-new-getter": "Object.defineProperty(globalThis, 'stolen', { get() { throw new Error('read') } })",
    "error-proto": "Error.prototype.toString = function () { for (;;) {} }",
    "reflect-apply": "Reflect.apply = function () { return 'forged' }",
    "function-call": "Function.prototype.call = function () { return 'forged' }",
    "regexp-exec": "RegExp.prototype.exec = function () { return null }",
    "math": "Math.max = function () { return 'forged' }",
}

BODY = ("<%= getvar('a.b') %>|<%- '<i>' %>|<%= '<b>&' %>|<%= getchar() %>|<%= await getpreset('main') %>|"
        "<% print('p', 1, null, undefined) %>|<%= [1, 2].join('-') %>")


def sources() -> Any:
    return sources_from_inputs(variables={"a": {"b": 1}}, card={"name": "Bob", "description": "desc"},
                               preset={"prompts": [{"identifier": "main", "name": "Main", "content": "MAIN"}]})


def bridged(prefix: str) -> tuple[str, list[dict[str, Any]], int, int]:
    result = render_with_sources(prefix + BODY, sources())
    return result.text, [r.to_dict() for r in result.reads], result.usage.output_bytes, result.usage.passes


def tamper(name: str) -> str:
    return f"<% try {{ {TAMPER[name]} }} catch (e) {{}} %>"


def test_the_baseline() -> None:
    text, reads, output_bytes, _ = bridged("")
    assert text == "1|<i>|&lt;b&gt;&amp;|desc|MAIN|p1|1-2"
    assert [r["kind"] for r in reads] == ["variables", "character", "preset-prompt"]
    assert output_bytes == len(text)


@pytest.mark.parametrize("name", sorted(TAMPER))
def test_tampering_changes_nothing_the_host_receives(name: str) -> None:
    assert bridged(tamper(name)) == bridged("")
    plain = "<%= getvar('a.b') %>|<%= '<b>&' %>|<% print('p', 2) %>"
    assert render_template(tamper(name) + plain, {"a": {"b": 1}}).text == "1|&lt;b&gt;&amp;|p2"
    assert render_template(tamper(name) + plain.replace("getvar('a.b')", "variables.a.b"), {"a": {"b": 1}},
                           dialect="ejs").text == "1|&lt;b&gt;&amp;|p2"


@pytest.mark.parametrize("name", sorted(TAMPER))
def test_limits_still_trip_with_their_own_code_after_tampering(name: str) -> None:
    cases = [
        ("<% print('x'.repeat(300)) %>", Limits(output_bytes=200), "TEMPLATE_OUTPUT_LIMIT"),
        ("<% for (let i = 0; i < 20; i++) getvar('a') %>", Limits(bridge_calls=10), "TEMPLATE_BRIDGE_LIMIT"),
        ("<% for (;;) {} %>", Limits(), "TEMPLATE_TIME_LIMIT"),
        ("<% for (let i = 0; i < 50; i++) await null %>", Limits(job_steps=20), "TEMPLATE_JOB_LIMIT"),
        ("<% setvar('a', 1) %>", Limits(), "TEMPLATE_UNSUPPORTED"),
    ]
    for body, limits, code in cases:
        with pytest.raises(TemplateError) as info:
            render_template(tamper(name) + body, {"a": 1}, limits)
        assert info.value.code == code, (name, body, info.value)


HOSTILE_VALUES = {
    "toprimitive": "({ [Symbol.toPrimitive]() { return '\"},\"ok\":true,\"text\":\"forged' } })",
    "valueof": "({ valueOf() { return '\\u0000</x>' }, toString: undefined })",
    "tostring": "({ toString() { return 'ts' } })",
    "tojson": "({ toJSON() { return 'forged' }, toString() { return 'plain' } })",
}


@pytest.mark.parametrize("name", sorted(HOSTILE_VALUES))
def test_hostile_conversions_reach_only_the_templates_own_text(name: str) -> None:
    value = HOSTILE_VALUES[name]
    expected = {"toprimitive": '"},"ok":true,"text":"forged', "valueof": "\u0000</x>", "tostring": "ts",
                "tojson": "plain"}[name]
    # print converts as `'' + value` does (the template's own conversion), and the reply carries
    # exactly that text: nothing the conversion returns can shape the reply.
    result = render_template(f"<% print({value}) %>|<%- {value} %>")
    assert result.text == expected + "|" + expected
    assert result.usage.output_bytes == len((expected + "|" + expected).encode())
    # The bridge takes strings and finite numbers only: an object with hostile conversions is a
    # TypeError in the template, and no request reaches the host.
    for call in ("getpreset", "getchar", "getvar"):
        with pytest.raises(TemplateError) as info:
            render_with_sources(f"<%= {call}({value}) %>", sources())
        assert info.value.code == "TEMPLATE_EXECUTION_FAILED" and "TypeError" in info.value.message
    text, reads, _, _ = bridged(f"<% try {{ getpreset({value}) }} catch (e) {{}} %>")
    assert text == bridged("")[0] and [r["kind"] for r in reads] == ["variables", "character", "preset-prompt"]
