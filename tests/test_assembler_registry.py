"""The source registry (protocol 1): descriptors, job building, resolution and output checks."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from _assembler_support import BASIC, assemble, chat, preset, rule, texts

from tavernbox import TemplateError
from tavernbox.assembler import Assembler, CancellationToken, SourceRegistry
from tavernbox.assembler.limits import SOURCE_MAX_BLOCKS
from tavernbox.assembler.registry import build_jobs
from tavernbox.assembler.rules import parse_preset
from tavernbox.assembler.sources import builtin_registry

NATIVES = [rule("native-system"), rule("history"), rule("input")]


def text_source(sid: str, text: str = "T", **extra: Any) -> dict[str, Any]:
    return {"id": sid, "plugin_id": "example", "name": sid,
            "resolve": lambda c, r: {"blocks": [{"type": "text", "id": "b", "text": text}]}, **extra}


def with_builtins(*descs: dict[str, Any]) -> SourceRegistry:
    reg = builtin_registry()
    for d in descs:
        reg.register(d)
    return reg


def test_descriptor_defaults_follow_the_seed() -> None:
    reg = SourceRegistry()
    reg.register(text_source("example.a"))
    d = reg.get("example.a")
    assert d is not None
    assert (d.version, d.stability, d.dependencies, d.multiple, d.depth) == (1, "conversation", (), False, True)
    assert d.roles == ("preserve", "system", "user", "assistant") and d.lifetimes == ("request", "snapshot")


@pytest.mark.parametrize(
    "bad",
    [
        {"plugin_id": "p", "name": "n", "resolve": print},
        {"id": "x", "name": "n", "resolve": print},
        {"id": "x", "plugin_id": "p", "name": " ", "resolve": print},
        {"id": "x", "plugin_id": "p", "name": "n"},
        {"id": "-x", "plugin_id": "p", "name": "n", "resolve": print},
        {"id": "x", "plugin_id": "p", "name": "n", "resolve": print, "roles": ("narrator",)},
        {"id": "x", "plugin_id": "p", "name": "n", "resolve": print, "version": 2},
        {"id": "x", "plugin_id": "p", "name": "n", "resolve": print, "run": "code"},
    ],
)
def test_invalid_descriptors_are_refused(bad: dict[str, Any]) -> None:
    with pytest.raises(TemplateError) as err:
        SourceRegistry().register(bad)
    assert err.value.code == "ASSEMBLY_SOURCE_INVALID"


def test_duplicate_id_is_refused_and_unregister_removes_only_that_registration() -> None:
    reg = SourceRegistry()
    dispose = reg.register(text_source("example.a"))
    with pytest.raises(TemplateError):
        reg.register(text_source("example.a"))
    dispose()
    other = reg.register(text_source("example.a", "second"))
    dispose()  # the old disposer must not remove the new registration
    assert reg.get("example.a") is not None
    other()
    assert reg.get("example.a") is None


def test_dependency_cycle_fails() -> None:
    reg = with_builtins(text_source("example.a", dependencies=("example.b",)),
                        text_source("example.b", dependencies=("example.a",)))
    with pytest.raises(TemplateError) as err:
        assemble([*NATIVES, rule("example.a", "a")], reg=reg)
    assert err.value.code == "ASSEMBLY_DEPENDENCY_CYCLE" and "example.a -> example.b -> example.a" in err.value.message


def test_dependencies_resolve_first_and_unlisted_sources_only_as_dependencies() -> None:
    calls: list[str] = []

    def tracking(sid: str, deps: tuple[str, ...] = ()) -> dict[str, Any]:
        def resolve(c: Any, r: Any) -> dict[str, Any]:
            calls.append(sid)
            return {"blocks": [{"type": "text", "id": "b", "text": sid.upper()}]}

        return {"id": sid, "plugin_id": "example", "name": sid, "resolve": resolve, "dependencies": deps}

    reg = with_builtins(tracking("example.a", ("example.b",)), tracking("example.b"), tracking("example.c"))
    r = assemble([*NATIVES, rule("example.a", "a")], reg=reg)
    assert calls == ["example.b", "example.a"]  # c is registered but neither listed nor depended on
    assert "EXAMPLE.B" not in texts(r)  # an unlisted dependency contributes only through references


def test_disabled_rules_without_an_enabled_dependent_are_never_resolved() -> None:
    def boom(c: Any, r: Any) -> Any:
        raise AssertionError("resolved a disabled rule")

    reg = with_builtins({"id": "example.off", "plugin_id": "example", "name": "off", "resolve": boom})
    r = assemble([*NATIVES, rule("example.off", "off", enabled=False)], reg=reg)
    assert texts(r) == ["S", "U1", "A1", "U2"]


def test_non_multiple_source_with_two_rules_fails() -> None:
    reg = with_builtins(text_source("example.a"))
    with pytest.raises(TemplateError) as err:
        assemble([*NATIVES, rule("example.a", "a1"), rule("example.a", "a2")], reg=reg)
    assert err.value.code == "ASSEMBLY_RULE_DUPLICATE"


@pytest.mark.parametrize(
    "fields",
    [{"role": "assistant"}, {"depth": 2}],
)
def test_capabilities_are_checked_against_each_rule(fields: dict[str, Any]) -> None:
    reg = with_builtins(text_source("example.a", roles=("system", "user"), depth=False))
    with pytest.raises(TemplateError) as err:
        assemble([*NATIVES, rule("example.a", "a", **fields)], reg=reg)
    assert err.value.code == "ASSEMBLY_RULE_UNSUPPORTED"


def test_text_mode_needs_a_parser_and_source_mode_a_resolver() -> None:
    with pytest.raises(TemplateError) as err:
        assemble([*NATIVES, rule("example.a", "a", inputMode="text")], reg=with_builtins(text_source("example.a")))
    assert err.value.code == "ASSEMBLY_RULE_UNSUPPORTED"
    with pytest.raises(TemplateError) as err:
        assemble([*NATIVES, rule("dsh.text", "d")])
    assert err.value.code == "ASSEMBLY_RULE_UNSUPPORTED"


def test_context_is_deep_frozen_and_complete() -> None:
    seen: dict[str, Any] = {}

    def resolve(context: Any, r: Any) -> dict[str, Any]:
        seen["keys"] = set(context)
        with pytest.raises(TypeError):
            context["assets"]["x"] = 1  # type: ignore[index]
        with pytest.raises(TypeError):
            context["native_messages"][0]["content"] = "changed"  # type: ignore[index]
        with pytest.raises(TypeError):
            r["text"] = "changed"  # type: ignore[index]
        seen["token"] = context["token"]
        return {"blocks": []}

    reg = with_builtins({"id": "example.f", "plugin_id": "example", "name": "f", "resolve": resolve})
    assemble([*NATIVES, rule("example.f", "f")], reg=reg, assets={"nested": {"a": [1]}})
    assert seen["keys"] == {"session_id", "turn", "step", "preview", "preset", "assets", "native_messages",
                            "input_ids", "token"}
    assert isinstance(seen["token"], CancellationToken)


def test_resolver_error_fails_the_whole_request() -> None:
    def bad(c: Any, r: Any) -> Any:
        raise RuntimeError("store offline")

    reg = with_builtins({"id": "example.bad", "plugin_id": "example", "name": "bad", "resolve": bad})
    with pytest.raises(TemplateError) as err:
        assemble([*NATIVES, rule("example.bad", "b")], reg=reg)
    assert err.value.code == "ASSEMBLY_SOURCE_FAILED" and "store offline" in err.value.message


@pytest.mark.parametrize(
    ("output", "path"),
    [
        ({"nope": []}, "$"),
        ({"blocks": [{"type": "text", "id": "a"}]}, "$.blocks[0].text"),
        ({"blocks": [{"type": "video", "id": "a"}]}, "$.blocks[0].type"),
        ({"blocks": [{"type": "text", "id": "a", "text": "x"}, {"type": "text", "id": "a", "text": "y"}]}, "$.blocks[1].id"),
        ({"blocks": [{"type": "text", "id": "a", "text": "x", "depth": -1}]}, "$.blocks[0].depth"),
        ({"blocks": [{"type": "text", "id": "a", "text": "x", "role": "narrator"}]}, "$.blocks[0].role"),
        ({"blocks": [{"type": "native", "id": "a"}]}, "$.blocks[0].message_ids"),
        ({"blocks": [{"type": "text", "id": "a", "text": print}]}, "$"),
    ],
)
def test_invalid_output_fails_the_whole_request(output: dict[str, Any], path: str) -> None:
    reg = with_builtins({"id": "example.o", "plugin_id": "example", "name": "o", "resolve": lambda c, r: output})
    with pytest.raises(TemplateError) as err:
        assemble([*NATIVES, rule("example.o", "o")], reg=reg)
    assert err.value.code == "ASSEMBLY_SOURCE_OUTPUT_INVALID" and err.value.path == path


def test_block_count_limit_is_at_ten_thousand() -> None:
    def many(n: int) -> Any:
        return lambda c, r: {"blocks": [{"type": "text", "id": str(i), "text": ""} for i in range(n)]}

    ok = with_builtins({"id": "example.m", "plugin_id": "example", "name": "m", "resolve": many(SOURCE_MAX_BLOCKS)})
    assemble([*NATIVES, rule("example.m", "m")], reg=ok)
    too_many = with_builtins({"id": "example.m", "plugin_id": "example", "name": "m",
                              "resolve": many(SOURCE_MAX_BLOCKS + 1)})
    with pytest.raises(TemplateError) as err:
        assemble([*NATIVES, rule("example.m", "m")], reg=too_many)
    assert err.value.code == "ASSEMBLY_SOURCE_OUTPUT_LIMIT"


def test_output_size_limit_is_eight_mebibytes() -> None:
    big = "x" * (8 * 1024 * 1024)
    reg = with_builtins(text_source("example.big", big))
    with pytest.raises(TemplateError) as err:
        assemble([*NATIVES, rule("example.big", "b")], reg=reg)
    assert err.value.code == "ASSEMBLY_SOURCE_OUTPUT_LIMIT"


def test_async_sources_need_assemble_async() -> None:
    async def resolve(c: Any, r: Any) -> dict[str, Any]:
        await asyncio.sleep(0)
        return {"blocks": [{"type": "text", "id": "b", "text": "ASYNC", "role": "user"}]}

    reg = with_builtins({"id": "example.async", "plugin_id": "example", "name": "a", "resolve": resolve})
    request = {"preset": preset([*NATIVES, rule("example.async", "a")]), "messages": chat(*BASIC), "input_ids": ["u2"],
               "system_prompt_update": "in-history"}
    with pytest.raises(TemplateError) as err:
        Assembler(reg).assemble(request)
    assert err.value.code == "ASSEMBLY_SOURCE_ASYNC"
    result = asyncio.run(Assembler(reg).assemble_async(request))
    assert result.logical_messages[-1]["content"] == "ASYNC"


def test_cancellation_stops_the_request() -> None:
    token = CancellationToken()

    def cancel(c: Any, r: Any) -> dict[str, Any]:
        c["token"].cancel("user pressed stop")
        return {"blocks": []}

    reg = with_builtins({"id": "example.c", "plugin_id": "example", "name": "c", "resolve": cancel})
    request = {"preset": preset([*NATIVES, rule("example.c", "c")]), "messages": chat(*BASIC), "input_ids": ["u2"]}
    with pytest.raises(TemplateError) as err:
        Assembler(reg).assemble(request, token)
    assert err.value.code == "ASSEMBLY_CANCELLED" and "user pressed stop" in err.value.message


def test_registrations_are_captured_per_request() -> None:
    reg = builtin_registry()
    jobs, _ = build_jobs(parse_preset(preset(NATIVES)), reg.capture())
    assert [j.descriptor.id for j in jobs] == ["native-system", "history", "input"]


def test_deeply_nested_assets_and_outputs_are_input_errors() -> None:
    deep: Any = []
    for _ in range(100_000):
        deep = [deep]
    with pytest.raises(TemplateError) as err:
        assemble(NATIVES, assets={"x": deep})
    assert err.value.code == "ASSEMBLY_REQUEST_INVALID" and err.value.path == "$.assets"
    reg = with_builtins({"id": "example.deep", "plugin_id": "example", "name": "deep",
                         "resolve": lambda c, r: {"blocks": [], "extra": deep}})
    with pytest.raises(TemplateError) as err:
        assemble([*NATIVES, rule("example.deep", "d")], reg=reg)
    assert err.value.code == "ASSEMBLY_SOURCE_OUTPUT_INVALID"
    medium: Any = []
    for _ in range(700):  # fine for JSON, too deep for a recursive freeze
        medium = [medium]
    with pytest.raises(TemplateError) as err:
        assemble(NATIVES, assets={"x": medium})
    assert err.value.code == "ASSEMBLY_REQUEST_INVALID"
    with pytest.raises(TemplateError) as err:
        assemble(NATIVES, assets={"x": object()})
    assert err.value.code == "ASSEMBLY_REQUEST_INVALID"
