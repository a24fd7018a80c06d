"""Restricted EJS: ejs 7.0.2's tag language compiled to one JavaScript program for the sandbox.

``render_template(source, variables)`` is the entry point; ``parse_template`` and
``compile_template`` are exposed for tools (``tavernbox inspect``) and tests.
"""

from __future__ import annotations

from .compiler import CompiledTemplate, LineMap, compile_template
from .parser import ParsedTemplate, parse_template
from .render import (
    DIALECT_EJS,
    DIALECT_PROMPT_TEMPLATE,
    DIALECTS,
    TemplateExecutionError,
    TemplateLimitError,
    TemplateResult,
    TemplateSyntaxError,
    compile_source,
    render_template,
    render_templates,
)

__all__ = [
    "DIALECTS",
    "DIALECT_EJS",
    "DIALECT_PROMPT_TEMPLATE",
    "CompiledTemplate",
    "LineMap",
    "ParsedTemplate",
    "TemplateExecutionError",
    "TemplateLimitError",
    "TemplateResult",
    "TemplateSyntaxError",
    "compile_source",
    "compile_template",
    "parse_template",
    "render_template",
    "render_templates",
]
