"""tavernbox: render SillyTavern-style prompt material safely, exactly and reproducibly.

The public API is re-exported here. Heavier stages (the macro engine, the EJS sandbox, world
info) are imported on first use, so ``import tavernbox`` and the CLI start fast.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

# name -> module that defines it (imported lazily on first attribute access)
_LAZY: dict[str, str] = {
    "CODES": "tavernbox.errors",
    "Diagnostic": "tavernbox.errors",
    "TemplateError": "tavernbox.errors",
    "Span": "tavernbox.spans",
    "expand_macros": "tavernbox.macros",
    "MacroContext": "tavernbox.macros",
    "MacroResult": "tavernbox.macros",
    "MacroRegistry": "tavernbox.macros",
    "compile_macros": "tavernbox.macros",
    "render_template": "tavernbox.ejs",
    "render_templates": "tavernbox.ejs",
    "TemplateResult": "tavernbox.ejs",
    "Limits": "tavernbox.sandbox",
    "activate_world_info": "tavernbox.worldinfo",
    "Activation": "tavernbox.worldinfo",
    "load_asset": "tavernbox.assets",
    "Assembler": "tavernbox.assembler",
    "replay": "tavernbox.assembler",
    "builtin_strategy": "tavernbox.strategies",
    "st_registry": "tavernbox.strategies",
    "SelectionStore": "tavernbox.strategies",
    "StrategyLibrary": "tavernbox.strategies",
    "assemble_request": "tavernbox.sillytavern",
    "parse_request": "tavernbox.sillytavern",
    "StAssembly": "tavernbox.sillytavern",
    "StRequest": "tavernbox.sillytavern",
    "render_with_dependencies": "tavernbox.bridge",
    "inspect_template_metadata": "tavernbox.bridge",
    "TemplateSources": "tavernbox.bridge",
    "apply_mvu_reply": "tavernbox.bridge",
    "MvuUpdate": "tavernbox.bridge",
}

__all__ = ["__version__", *sorted(_LAZY)]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'tavernbox' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


if TYPE_CHECKING:  # pragma: no cover - the lazy exports' real types, for type checkers only
    # (``X as X`` marks a re-export)
    from .errors import CODES as CODES, Diagnostic as Diagnostic, TemplateError as TemplateError
    from .spans import Span as Span
    from .assembler import Assembler as Assembler, replay as replay
    from .assets import load_asset as load_asset
    from .bridge import (
        MvuUpdate as MvuUpdate,
        TemplateSources as TemplateSources,
        apply_mvu_reply as apply_mvu_reply,
        inspect_template_metadata as inspect_template_metadata,
        render_with_dependencies as render_with_dependencies,
    )
    from .ejs import (
        TemplateResult as TemplateResult,
        render_template as render_template,
        render_templates as render_templates,
    )
    from .macros import (
        MacroContext as MacroContext,
        MacroRegistry as MacroRegistry,
        MacroResult as MacroResult,
        compile_macros as compile_macros,
        expand_macros as expand_macros,
    )
    from .sandbox import Limits as Limits
    from .sillytavern import (
        StAssembly as StAssembly,
        StRequest as StRequest,
        assemble_request as assemble_request,
        parse_request as parse_request,
    )
    from .strategies import (
        SelectionStore as SelectionStore,
        StrategyLibrary as StrategyLibrary,
        builtin_strategy as builtin_strategy,
        st_registry as st_registry,
    )
    from .worldinfo import Activation as Activation, activate_world_info as activate_world_info
