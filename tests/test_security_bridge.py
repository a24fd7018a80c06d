"""Attack catalogue, bridge section (research/sandbox-security.md 5.H): lookup and bridge abuse.

Each test names its catalogue id. Expected outcomes follow the catalogue, adapted to this
engine's codes: E_LOOKUPS -> TEMPLATE_DEPENDENCY_LIMIT, E_BRIDGE -> TEMPLATE_BRIDGE_LIMIT, E_KEY ->
TEMPLATE_DEPENDENCY_INVALID, E_LOOKUP_RESULT -> TEMPLATE_INPUT_LIMIT, E_TEMPLATE ->
TEMPLATE_EXECUTION_FAILED. Writes (setvar and friends) are TEMPLATE_UNSUPPORTED here.
"""

from __future__ import annotations

import time

from bridge_support import Scripted, code, sources, text
from tavernbox.bridge import render_with_dependencies
from tavernbox.sandbox import Limits


def test_h1_sequential_lookups_stop_at_the_33rd() -> None:
    resolver = Scripted()
    c, _ = code("<% for (let i = 0; i < 33; i++) await getpreset('k' + i) %>", resolver)
    assert c == "TEMPLATE_DEPENDENCY_LIMIT" and len(resolver.calls) == 32


def test_h2_parallel_lookups_stop_at_the_limit_quickly() -> None:
    resolver = Scripted()
    start = time.monotonic()
    c, _ = code("<% await Promise.all(Array.from({length: 1000}, (_, i) => getpreset('k' + i))) %>", resolver,
                limits=Limits(time_ms=5000.0))
    assert c == "TEMPLATE_DEPENDENCY_LIMIT" and len(resolver.calls) == 32
    assert time.monotonic() - start < 10


def test_h3_cache_hits_count_as_bridge_calls() -> None:
    c, exc = code("<% for (let i = 0; i < 10000; i++) await getvar('same') %>")
    assert c == "TEMPLATE_BRIDGE_LIMIT" and "512" in exc.message


def test_h4_oversized_key_is_refused_before_it_crosses() -> None:
    resolver = Scripted()
    c, _ = code("<% await getpreset('x'.repeat(1e6)) %>", resolver)
    assert c == "TEMPLATE_DEPENDENCY_INVALID" and resolver.calls == []


def test_h5_hostile_key_objects_are_never_converted() -> None:
    resolver = Scripted()
    start = time.monotonic()
    for call in ("getpreset({toString() { for (;;) {} }})", "getvar({toString() { for (;;) {} }})",
                 "getwi('Lore', {toString() { for (;;) {} }})"):
        c, _ = code(f"<% await {call} %>", resolver if "getpreset" in call else None)
        assert c == "TEMPLATE_EXECUTION_FAILED", call
    assert resolver.calls == [] and time.monotonic() - start < 5


def test_h6_deep_paths_are_capped() -> None:
    assert code("<% await getvar('a.'.repeat(5000) + 'x') %>")[0] == "TEMPLATE_DEPENDENCY_INVALID"
    assert code("<% await getvar(Array(100).fill('a').join('.')) %>")[0] == "TEMPLATE_DEPENDENCY_INVALID"
    assert code("<% await _.get(variables, Array(100).fill('a')) %>")[0] == "TEMPLATE_DEPENDENCY_INVALID"
    assert code("<% await setvar('a.'.repeat(5000) + 'x', 1) %>")[0] == "TEMPLATE_UNSUPPORTED"


def test_h7_root_merge_and_proto_keys_have_no_effect() -> None:
    assert code("<% await setvar(null, {__proto__: {polluted: 1}}) %>")[0] == "TEMPLATE_UNSUPPORTED"
    assert code("<%- getvar('__proto__.polluted') %>")[0] == "TEMPLATE_EXECUTION_FAILED"
    assert code("<%- _.get(variables, '__proto__') %>")[0] == "TEMPLATE_EXECUTION_FAILED"
    # a polluting attempt in one render is invisible in the next (fresh VM, frozen intrinsics)
    text("<% try { Object.prototype.polluted = 1 } catch (e) {} try { variables.__proto__.x = 1 } catch (e) {} %>")
    assert text("<%- typeof ({}).polluted %>,<%- typeof getvar().x %>") == "undefined,undefined"


def test_h8_macro_writes_in_template_output_are_inert_text() -> None:
    src = "{{setvar::a::x}}" + "{{setvar::a::{{getvar::a}}{{getvar::a}}}}" * 40 + "<%- 1 %>"
    out = render_with_dependencies(src, sources()).text
    assert out.startswith("{{setvar::a::x}}") and out.endswith("1")  # no macro runs on the bridge path


def test_h9_huge_answers_are_capped_before_injection() -> None:
    resolver = Scripted(lambda r: "x" * (10 * 1024 * 1024))
    c, _ = code("<%- getpreset('big') %>", resolver)
    assert c == "TEMPLATE_INPUT_LIMIT"


def test_h10_non_json_arguments_are_template_errors() -> None:
    resolver = Scripted()
    for arg in ("1n", "(() => { const o = {}; o.o = o; return o })()", "Symbol()", "[1]", "undefined", "Infinity"):
        assert code(f"<%- getpreset({arg}) %>", resolver)[0] == "TEMPLATE_EXECUTION_FAILED", arg
    assert resolver.calls == []


def test_h11_keys_are_opaque_strings() -> None:
    resolver = Scripted(lambda r: repr(r.args))
    out = render_with_dependencies("<%- getpreset('\\u0000') %>|<%- getpreset('\\ud800') %>|"
                                   "<%- getpreset('../../etc/passwd') %>|<%- getpreset('%2e%2e') %>", resolver)
    assert [r.args[0] for r in resolver.calls] == ["\x00", "\ud800", "../../etc/passwd", "%2e%2e"]
    assert out.text.split("|")[2] == "('../../etc/passwd',)"


def test_h12_no_lookup_after_completion() -> None:
    resolver = Scripted()
    out = render_with_dependencies("<% Promise.resolve().then(() => getpreset('late')).catch(() => {}) %>done",
                                   resolver)
    assert out.text == "done" and resolver.calls == [] and out.reads == ()


def test_h13_large_integers_cross_exactly() -> None:
    resolver = Scripted(lambda r: {"ts": 2**31, "big": 2**53 - 1, "neg": -(2**31) - 1})
    assert render_with_dependencies("<%- JSON.stringify(await getpreset('t')) %>", resolver).text == \
        '{"ts":2147483648,"big":9007199254740991,"neg":-2147483649}'


def test_answers_table_cannot_be_forged() -> None:
    # The table is reachable only through the harness closure; intrinsics are frozen.
    resolver = Scripted()
    out = render_with_dependencies(
        "<% try { Object.prototype['[\"preset-prompt\",\"x\"]'] = 'forged' } catch (e) {} %><%- getpreset('x') %>",
        resolver)
    assert out.text == "<preset-prompt:x>" and len(resolver.calls) == 1


def test_leases_never_enter_the_vm() -> None:
    out = text("<%- JSON.stringify(Object.keys(variables)) %>|<%- typeof check_current %>|<%- typeof __tb.locals.lease %>")
    assert out == '["a","a.b","n","s","stat_data"]|undefined|undefined'
