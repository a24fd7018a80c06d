"""Upstream facts 38 and 44-50 of research/dsh-assembler.md section 15, as our own cases.

Facts 1-37, 39-43, 48, 49, 51, 52 live in ``test_assembler_facts.py``, ``test_assembler_templates.py``,
``test_assembler_leases.py``, ``test_snapshots_retention.py`` and ``test_assembler_sources.py``;
fact 55 in ``test_strategies_builtin.py``; facts 53 and 54 (MVU reply updates) in ``test_mvu_update.py``.
"""

from __future__ import annotations

from typing import Any

import pytest
from _assembler_support import rule
from bridge_support import Scripted, code

from tavernbox import TemplateError, render_template
from tavernbox.assembler import Assembler
from tavernbox.assembler.limits import PROJECTION_MAX_BYTES
from tavernbox.assembler.sources import builtin_registry
from tavernbox.bridge import inspect_template_metadata
from tavernbox.sandbox import CancelToken, Limits

KIND = "pmp-dsh-tavern/prompt-template"
MESSAGES = [{"id": "s", "role": "system", "content": "S"}, {"id": "u", "role": "user", "content": "hi"}]


def _assemble(rules: list[dict[str, Any]], messages: list[dict[str, Any]] | None = None, **request: Any) -> Any:
    return Assembler(builtin_registry()).assemble({
        "preset": {"format": "dsh-tavern-request-assembly", "version": 1, "name": "t", "rules": rules},
        "messages": messages or MESSAGES, "input_ids": ["u"], **request})


def _custom(text: str) -> list[dict[str, Any]]:
    return [rule("native-system"), rule("custom", "c", text=text, role="system"), rule("history"), rule("input")]


# -- fact 38: the projection limit ------------------------------------------------------------------


def test_fact38_limit_one_below_the_charge_fails_and_equality_passes() -> None:
    charge = _assemble(_custom("EXTRA")).extra_bytes
    assert charge > 0
    assert _assemble(_custom("EXTRA"), max_projection_bytes=charge).extra_bytes == charge
    with pytest.raises(TemplateError) as info:
        _assemble(_custom("EXTRA"), max_projection_bytes=charge - 1)
    assert info.value.code == "ASSEMBLY_PROJECTION_LIMIT"


def test_fact38_two_mebibytes_is_the_ceiling_whatever_the_limit_argument() -> None:
    # the byte-exact ceiling cases (2 MiB passes, one byte more fails with any limit argument) are
    # test_assembler_limits.test_projection_ceiling_is_two_mebibytes_even_with_a_larger_limit; here
    # the request path: a larger limit argument is accepted, and the ceiling still applies
    r = _assemble(_custom("EXTRA"), max_projection_bytes=PROJECTION_MAX_BYTES * 4)
    assert r.system_projection["max_bytes"] == PROJECTION_MAX_BYTES


@pytest.mark.parametrize("value", [float("nan"), float("inf"), -1, 1.5, "2097152", True])
def test_fact38_invalid_limits_are_refused(value: Any) -> None:
    with pytest.raises(TemplateError) as info:
        _assemble(_custom("EXTRA"), max_projection_bytes=value)
    assert info.value.code in ("ASSEMBLY_LIMIT_INVALID", "ASSEMBLY_REQUEST_INVALID")


def test_fact38_an_unchanged_native_message_costs_nothing_even_with_limit_zero() -> None:
    r = _assemble([rule("native-system"), rule("history"), rule("input")], max_projection_bytes=0)
    assert r.extra_bytes == 0 and [m["content"] for m in r.messages] == ["S", "hi"]


# -- facts 44-47: prompt templates in the sandbox ---------------------------------------------------


def test_fact44_dash_close_eats_the_newline() -> None:
    assert render_template("a\n<% const a = 1; -%>\nb").text == "a\nb"


@pytest.mark.parametrize(
    "body",
    [
        "process.cwd()",
        "require('fs')",
        "await fetch('http://x')",
        "setvar('a', 1)",
        "execute('/echo')",
        "await getvar('a', {scope: 'global'})",
        "await getvar('constructor')",
        "await import('x')",
    ],
)
def test_fact45_host_reach_and_writes_are_rejected_with_a_template_code(body: str) -> None:
    c, exc = code(f"<% {body} %>")
    assert c is not None and c.startswith("TEMPLATE_"), (body, exc)


def test_fact45_no_host_globals_exist() -> None:
    assert render_template("<%= typeof process %>/<%= typeof fetch %>/<%= typeof globalThis.require %>").text == (
        "undefined/undefined/undefined"
    )


def test_fact46_budgets_unsettled_promises_syntax_cancellation_and_isolation() -> None:
    cases = [
        ("<% while(true){} %>", Limits(time_ms=20.0), "TEMPLATE_TIME_LIMIT"),
        ("<% await new Promise(() => {}) %>", None, "TEMPLATE_UNSETTLED"),
        ("<%= 'x'.repeat(100) %>", Limits(output_bytes=20), "TEMPLATE_OUTPUT_LIMIT"),
        ("<% invalid ( %>", None, "TEMPLATE_SYNTAX"),
    ]
    for source, limits, expected in cases:
        with pytest.raises(TemplateError) as info:
            render_template(source, limits=limits)
        assert info.value.code == expected, source
    token = CancelToken()
    token.cancel()
    with pytest.raises(TemplateError) as info:
        render_template("<%= 1 %>", cancel=token)
    assert info.value.code == "TEMPLATE_CANCELLED"
    render_template("<% globalThis.leak = 1 %>")
    assert render_template("<%= typeof globalThis.leak %>").text == "undefined"


def test_fact47_a_thousand_bridge_calls_stop_at_32_lookups() -> None:
    resolver = Scripted()
    c, _ = code(
        "<% for (let i = 0; i < 1000; i++) { try { await getpreset('k' + i) } catch (e) {} } %>",
        resolver,
        limits=Limits(time_ms=5000.0),
    )
    assert c == "TEMPLATE_DEPENDENCY_LIMIT" and len(resolver.calls) <= 32
    assert render_template("<%= typeof __input %>/<%= typeof __data %>").text == "undefined/undefined"


# -- fact 50: lifecycle decorators and titles --------------------------------------------------------


def test_fact50_titles_and_decorators() -> None:
    meta = inspect_template_metadata("[GENERATE:BEFORE] Guide", "text")
    assert meta.events == ("before_model_request",) and meta.placement == "before" and meta.supported
    assert not inspect_template_metadata("[PRELOAD]", "text").supported
    assert inspect_template_metadata("Guide", "@@@preload\nbody").supported
    two = inspect_template_metadata("Guide", "@@preload\n@@render_after\nbody")
    assert [d.name for d in two.decorators] == ["preload", "render_after"]
