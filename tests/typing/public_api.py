"""What a type checker sees of ``import tavernbox``: each export and what it returns (checked by mypy, never run).

``tavernbox`` imports its stages lazily (module ``__getattr__``), which a type checker would read
as ``Any``; its ``TYPE_CHECKING`` block gives them their real types. Every ``assert_type`` here
fails under mypy (``.ci/static``) if an export loses its type or returns something else.
"""

from __future__ import annotations

from typing import Any, assert_type

import tavernbox
from tavernbox import (
    CODES,
    Activation,
    Assembler,
    Diagnostic,
    Limits,
    MacroContext,
    MacroRegistry,
    MacroResult,
    MvuUpdate,
    SelectionStore,
    Span,
    StrategyLibrary,
    TemplateError,
    TemplateResult,
    TemplateSources,
    activate_world_info,
    apply_mvu_reply,
    assemble_request,
    assemble_requests,
    builtin_strategy,
    compile_macros,
    expand_macros,
    inspect_template_metadata,
    load_asset,
    render_template,
    render_templates,
    render_with_dependencies,
    replay,
    st_registry,
)
from tavernbox.assembler import AssemblyResult, Preset, SourceRegistry
from tavernbox.assets import LoadedAsset
from tavernbox.bridge import BridgeResult, DependencyResolver, TemplateMetadata
from tavernbox.macros import CompiledMacros, MacroDef
from tavernbox.sillytavern import StAssembly
from tavernbox.strategies.builtin import Selection
from tavernbox.worldinfo import ActivatedEntry


def macros(context: MacroContext, registry: MacroRegistry) -> None:
    assert_type(expand_macros("{{user}}", context, seed=1, registry=registry), MacroResult)
    assert_type(expand_macros("{{user}}", {"user": "Ann"}), MacroResult)
    compiled = compile_macros("{{char}}")
    assert_type(compiled, CompiledMacros)
    assert_type(compiled.expand(context).text, str)
    assert_type(MacroRegistry.default(), MacroRegistry)
    assert_type(registry.register_text("greeting", "hello"), MacroDef)
    assert_type(MacroContext.from_dict({"user": "Ann"}), MacroContext)


def templates(limits: Limits) -> None:
    assert_type(render_template("<%= 1 %>", {"a": 1}, limits), TemplateResult)
    assert_type(render_templates([("<%= a %>", {"a": 1})]), list[TemplateResult | TemplateError])
    assert_type(render_template("x").text, str)
    assert_type(Limits(time_ms=10.0), Limits)


def bridge(resolver: DependencyResolver, sources: TemplateSources) -> None:
    assert_type(render_with_dependencies("<%= getvar('a') %>", resolver), BridgeResult)
    assert_type(inspect_template_metadata("[GENERATE:BEFORE] t", "text"), TemplateMetadata)
    update = apply_mvu_reply({"hp": 1}, "_.set('hp', 2)")
    assert_type(update, MvuUpdate)
    assert_type(update.stat_data, dict[str, Any])
    assert_type(sources.for_consumer({"type": "preset"}), TemplateSources)


def world_info(books: Any, chat: Any) -> None:
    activation = activate_world_info(books, chat, {"depth": 2}, seed=3)
    assert_type(activation, Activation)
    assert_type(activation.active("book", 1), ActivatedEntry | None)


def assets_and_assembly(record: dict[str, Any], library: StrategyLibrary, store: SelectionStore) -> None:
    assert_type(load_asset(b"{}", kind="preset"), LoadedAsset)
    assert_type(replay(record), AssemblyResult)
    assert_type(Assembler(st_registry()).assemble({"preset": {}}), AssemblyResult)
    assert_type(st_registry(), SourceRegistry)
    assert_type(builtin_strategy("builtin-st"), Preset)
    assert_type(library.get("builtin-st"), Preset)
    assert_type(store.select("session", "builtin-st"), Selection)


def errors(error: TemplateError, diagnostic: Diagnostic) -> None:
    assert_type(error.code, str)
    assert_type(error.to_dict(), dict[str, Any])
    assert_type(diagnostic.span, Span | None)
    assert_type(CODES, dict[str, str])
    assert_type(tavernbox.__version__, str)


def requests() -> None:
    one = assemble_request({"preset": "p.json", "chat": "c.jsonl"}, base_dir=".")
    assert_type(one, StAssembly)
    assert_type(one.messages, list[dict[str, Any]])
    for answer in assemble_requests([{"preset": "p.json", "chat": "c.jsonl"}], base_dir="."):
        assert_type(answer, StAssembly | TemplateError)
