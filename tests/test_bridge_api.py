"""The in-VM template API: variables, getvar, getwi, getpreset, getchar, aliases, refused writes."""

from __future__ import annotations

import pytest

from bridge_support import code, sources, text

# --- variables and getvar ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("expr", "expected"),
    [
        ("getvar('a.b[1]')", "20"),
        ("getvar('a.b.0')", "10"),
        ("getvar(\"a['x.y']\")", "quoted"),
        ("getvar('a[\"x.y\"]')", "quoted"),
        ("getvar('a.b')", "exact"),  # an exact top-level key wins, as in lodash
        ("getvar('stat_data.hp[0]')", "42"),
        ("getvar('missing.deep', {defaults: 'dflt'})", "dflt"),
        ("getvar('a.b[5]', {defaults: 0})", "0"),
        ("String(getvar('n', {defaults: 'x'}))", "null"),  # null is a value, not missing
        ("getvar('s', 'cache')", "str"),
        ("getvar('s', {scope: 'cache', clone: true})", "str"),
        ("typeof getvar('nothing')", "undefined"),
        ("Object.keys(getvar()).length", "5"),
        ("JSON.stringify(getvar(null).a.b)", "[10,20]"),
        ("getvar('s.length', {defaults: 'own only'})", "own only"),  # no inherited properties
    ],
)
def test_getvar_paths(expr: str, expected: str) -> None:
    assert text(f"<%- {expr} %>") == expected


@pytest.mark.parametrize("segment", ["__proto__", "prototype", "constructor"])
def test_getvar_refuses_prototype_segments(segment: str) -> None:
    c, exc = code(f"<%- getvar('a.{segment}.x') %>")
    assert c == "TEMPLATE_EXECUTION_FAILED" and segment in exc.message
    c, _ = code(f"<%- getvar('{segment}') %>")
    assert c == "TEMPLATE_EXECUTION_FAILED"


def test_getvar_scope_and_options_are_checked() -> None:
    c, exc = code("<% try { getvar('a', 'local') } catch (e) {} %>ok")
    assert c == "TEMPLATE_UNSUPPORTED" and "local" in exc.message
    c, exc = code("<%- getvar('a', {withMsg: {}}) %>")
    assert c == "TEMPLATE_UNSUPPORTED" and "withMsg" in exc.message
    c, _ = code("<%- getvar('a', 5) %>")
    assert c == "TEMPLATE_EXECUTION_FAILED"


def test_getvar_path_limits() -> None:
    c, _ = code("<%- getvar('a.'.repeat(64) + 'x') %>")
    assert c == "TEMPLATE_DEPENDENCY_INVALID"
    assert text("<%- getvar('a.'.repeat(63) + 'x', {defaults: 'deep'}) %>") == "deep"
    c, _ = code("<%- getvar('x'.repeat(5000)) %>")
    assert c == "TEMPLATE_DEPENDENCY_INVALID"


def test_clone_never_yields_writable_shared_state() -> None:
    out = text("<% const o = getvar('a', {clone: true}); try { o.z = 1; o.b.push(3) } catch (e) {} %>"
               "<%- getvar('a.z', {defaults: 'none'}) %>,<%- getvar('a').b.length %>,<%- Object.isFrozen(o) %>")
    assert out == "none,2,true"


def test_variables_is_read_only_and_deep_frozen() -> None:
    out = text("<% variables.a = 1; variables.s = 'w'; try { variables.a.b.push(1) } catch (e) {} "
               "try { delete variables.s } catch (e) {} %>"
               "<%- typeof variables.a %>,<%- variables.s %>,<%- variables.a.b.length %>,"
               "<%- Object.isFrozen(variables) %>,<%- 'a.b' in variables %>,<%- JSON.stringify(variables.a.b) %>")
    assert out == "object,str,2,true,true,[10,20]"
    c, _ = code("<% (function () { 'use strict'; variables.s = 1 })() %>")
    assert c == "TEMPLATE_EXECUTION_FAILED"


def test_variables_absent_reads_as_empty() -> None:
    assert text("<%- JSON.stringify(variables) %>|<%- getvar('a', {defaults: 'd'}) %>", sources(None)) == "{}|d"


# --- getwi -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("expr", "expected"),
    [
        ("await getwi('Lore', 'Town')", "A quiet town. <%= 1 + 1 %> {{user}}"),  # raw, never evaluated
        ("await getwi('Lore', 7)", "The gate."),
        ("await getwi('Lore', '7')", "The gate."),
        ("await getwi('Lore', /gate/i)", "The gate."),
        ("await getwi('world-book:Lore', 'Castle gate')", "The gate."),
        ("await getwi('Castle gate')", "The gate."),  # one argument: every selected book
        ("await getwi(null, 'Town')", "A quiet town. <%= 1 + 1 %> {{user}}"),  # first book first
        ("await getwi('Extra', 'Town')", "another town"),
        ("await getWorldInfo('Lore', 'Town') === await getwi('Lore', 'Town')", "true"),
        ("JSON.stringify(await getwi('Lore', 'Nope'))", '""'),
        ("JSON.stringify(await getwi('NoSuchBook', 'Town'))", '""'),
    ],
)
def test_getwi(expr: str, expected: str) -> None:
    assert text(f"<%- {expr} %>") == expected


def test_getwi_only_reads_activated_entries() -> None:
    # Catching the failure inside the VM changes nothing: the host refused the read.
    c, exc = code("<% try { await getwi('Lore', 'Secret') } catch (e) { print('caught') } %>")
    assert c == "TEMPLATE_DEPENDENCY_NOT_ACTIVE" and "entry 1" in exc.message
    assert code("<%- await getwi('Lore', 1) %>", sources(activated={"Lore": [0]}))[0] == "TEMPLATE_DEPENDENCY_NOT_ACTIVE"
    # the refusal is reported where the template asked
    c, exc = code("first line\n  <%- await getwi('Lore', 1) %>", sources(activated={"Lore": [0]}))
    assert (c, exc.line) == ("TEMPLATE_DEPENDENCY_NOT_ACTIVE", 2) and exc.column is not None and exc.column > 4


def test_getwi_refuses_data_argument_and_bad_types() -> None:
    assert code("<%- await getwi('Lore', 'Town', {x: 1}) %>")[0] == "TEMPLATE_UNSUPPORTED"
    assert code("<%- await getwi('Lore', {}) %>")[0] == "TEMPLATE_EXECUTION_FAILED"


# --- getpreset, getchar ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("expr", "expected"),
    [
        ("await getpreset('main')", "Be helpful."),
        ("await getpreset('Jailbreak')", "JB text"),
        ("JSON.stringify(await getpreset('absent'))", '""'),
        ("await getPresetPrompt('jb')", "JB text"),
        ("await getchar()", "Alice is a <b>witch</b>."),
        ("await getchar('Alice')", "Alice is a <b>witch</b>."),
        ("JSON.stringify(await getchar('Bob'))", '""'),
        ("await getChara()", "Alice is a <b>witch</b>."),
    ],
)
def test_getpreset_getchar(expr: str, expected: str) -> None:
    assert text(f"<%- {expr} %>") == expected


def test_getchar_escapes_with_output_tag() -> None:
    assert text("<%= await getchar() %>") == "Alice is a &lt;b&gt;witch&lt;/b&gt;."


def test_getchar_template_argument_unsupported() -> None:
    assert code("<%- await getchar('Alice', 'name: {{name}}') %>")[0] == "TEMPLATE_UNSUPPORTED"


# --- writes and commands ----------------------------------------------------------------------


@pytest.mark.parametrize("call", ["setvar('a', 1)", "incvar('n')", "decvar('n')", "delvar('a')",
                                  "insvar('a', 1)", "execute('/echo hi')", "activewi('Lore', 'Town')",
                                  "setLocalVar('a', 1)", "patchVariables('a', [])", "evalTemplate('x')",
                                  "getLocalVar('a')", "getChatMessage(-1)", "injectPrompt('k', 'p')"])
def test_writes_and_commands_are_unsupported_even_when_caught(call: str) -> None:
    name = call.split("(")[0]
    c, exc = code(f"before\n<% try {{ await {call} }} catch (e) {{ print('swallowed') }} %>after")
    assert c == "TEMPLATE_UNSUPPORTED"
    assert exc.message.startswith(f"{name}() is not supported")
    assert exc.line == 2


def test_unsupported_message_says_read_only() -> None:
    _, exc = code("<% setvar('a', 1) %>")
    assert "templates are read-only" in exc.message


def test_no_lookup_after_completion() -> None:
    # The body finished synchronously; a late callback's lookup is refused, never served.
    out = text("<% Promise.resolve().then(() => getpreset('main')).catch(() => {}) %>done")
    assert out == "done"


def test_api_names_cannot_be_overwritten_for_the_next_call() -> None:
    # A template may rebind the name in its own scope (that is plain JavaScript: ``locals`` is its
    # own copy), which only changes what that template sees; the next render starts clean.
    assert text("<% getvar = () => 'forged' %><%- getvar('s') %>") == "forged"
    assert text("<% { let getvar = () => 'forged' } %><%- getvar('s') %>") == "str"
    assert text("<%- getvar('s') %>") == "str"


def test_long_user_text_in_refusals_is_clipped() -> None:
    _, exc = code("<%- getvar('a', {['k'.repeat(100000)]: 1}) %>")
    assert exc.code == "TEMPLATE_UNSUPPORTED" and len(exc.message) < 2100
