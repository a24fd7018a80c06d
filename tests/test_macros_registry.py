"""The registry: host macros with arity and types, text-reference macros, per-call dynamic macros."""

from __future__ import annotations

import pytest

from tavernbox.macros import MacroCall, MacroDef, MacroRegistry, expand_macros

CTX = {"user": "User", "char": "Character"}


def host_registry() -> MacroRegistry:
    registry = MacroRegistry.default()
    registry.register(
        "repeat",
        lambda call: call.args[0] * int(call.args[1]),
        aliases=("rep",),
        min_args=2,
        max_args=2,
        arg_types=("string", "integer"),
    )
    registry.register("shout", lambda call: call.args[0].upper() + "!", min_args=1, max_args=1)
    registry.register_text("house", "The Rusty Anchor")
    return registry


def test_host_macro_runs_with_aliases_and_case_insensitive_names() -> None:
    registry = host_registry()
    result = expand_macros("{{repeat::ab::3}} {{REP::x::2}} {{shout::{{user}}}}", CTX, registry=registry)
    assert result.text == "ababab xx USER!"


def test_host_macro_wrong_arity_or_type_stays_as_written() -> None:
    registry = host_registry()
    result = expand_macros("{{repeat::ab}} {{repeat::ab::many}}", CTX, registry=registry)
    assert result.text == "{{repeat::ab}} {{repeat::ab::many}}"
    assert [d.code for d in result.diagnostics] == ["MACRO_ARITY", "MACRO_ARGUMENT_TYPE"]


def test_host_macro_takes_a_scoped_body_when_its_arity_allows() -> None:
    registry = host_registry()
    assert expand_macros("{{shout}}\n  hey {{user}}\n{{/shout}}", CTX, registry=registry).text == "HEY USER!"


def test_host_handler_failure_stays_as_written() -> None:
    registry = MacroRegistry.default()

    def boom(call: MacroCall) -> str:
        raise RuntimeError("nope")

    registry.register("boom", boom)
    result = expand_macros("a {{boom}} b", CTX, registry=registry)
    assert result.text == "a {{boom}} b" and result.diagnostics[0].code == "MACRO_HANDLER_ERROR"


def test_text_reference_macro_is_inserted_without_rescanning() -> None:
    registry = host_registry()
    registry.register_text("tricky", "{{user}}")
    assert expand_macros("{{house}}: {{tricky}}", CTX, registry=registry).text == "The Rusty Anchor: {{user}}"


def test_text_reference_macro_can_be_computed() -> None:
    registry = MacroRegistry.default()
    calls = []
    registry.register_text("now_playing", lambda: calls.append(1) or "jazz")
    assert expand_macros("{{now_playing}}", CTX, registry=registry).text == "jazz" and calls == [1]


def test_default_registry_is_a_private_copy() -> None:
    mine = MacroRegistry.default()
    mine.unregister("user")
    assert "user" not in mine and "USER" not in mine
    assert expand_macros("{{user}}", CTX).text == "User"
    assert expand_macros("{{user}}", CTX, registry=mine).text == "{{user}}"


def test_invalid_names_and_arities_are_refused() -> None:
    registry = MacroRegistry()
    with pytest.raises(ValueError):
        registry.register("9lives", lambda c: "")
    with pytest.raises(ValueError):
        registry.register("ok", lambda c: "", min_args=2, max_args=1)


def test_dynamic_macros_shadow_builtins_per_call_only() -> None:
    assert expand_macros("{{user}}", CTX, dynamic={"USER": "Someone"}).text == "Someone"
    assert expand_macros("{{user}}", CTX).text == "User"


def test_dynamic_string_or_callable_macros_take_no_arguments() -> None:
    result = expand_macros("{{myvalue}} {{myvalue::extra}}", CTX, dynamic={"myvalue": "x"})
    assert result.text == "x {{myvalue::extra}}"
    seen: list[str] = []

    def with_call(call: MacroCall) -> str:
        seen.append(call.ctx.user)
        return "called"

    assert expand_macros("{{fn}}{{bare}}", CTX, dynamic={"fn": with_call, "bare": lambda: "!"}).text == "called!"
    assert seen == ["User"]


def test_dynamic_macro_may_be_a_full_definition() -> None:
    shout = MacroDef(name="shout", handler=lambda call: call.args[0].upper(), min_args=1, max_args=1)
    assert expand_macros("{{shout::hey}}", CTX, dynamic={"shout": shout}).text == "HEY"


def test_dynamic_macros_are_not_consulted_by_if_conditions() -> None:
    # SillyTavern 1.18: {{if name}} resolves registered zero-argument macros only
    assert expand_macros("{{if wiBefore}}yes{{/if}}", CTX, dynamic={"wiBefore": ""}).text == "yes"
    assert expand_macros("{{if {{wiBefore}}}}yes{{/if}}", CTX, dynamic={"wiBefore": ""}).text == ""
