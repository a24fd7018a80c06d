"""Handlebars for SillyTavern's story strings: a grammar and renderer of tavernbox's own.

SillyTavern renders a text-completion *context template*'s story string with Handlebars 4.7
(``Handlebars.compile(storyString, {noEscape: true})``, then its macros). This package parses
the same language (``grammars/handlebars.lark`` over a modal lexer), applies Handlebars'
whitespace rules, and renders with its semantics: paths, ``{{#if}}``/``{{else}}``/``{{#unless}}``
/``{{#each}}``/``{{#with}}``/``lookup``/``log``, block parameters, sub-expressions, comments
and ``~``. It is checked against the real ``handlebars`` package by a differential test.

``compile_template(source)`` parses once; ``CompiledTemplate.render(data, settings)`` renders.
Every failure is a :class:`~tavernbox.errors.TemplateError` with a stable code and the offset it
concerns: ``HANDLEBARS_SYNTAX``, ``HANDLEBARS_UNSUPPORTED`` (partials, decorators, raw blocks),
``HANDLEBARS_RUNTIME`` (what Handlebars throws while rendering), and the budget's
``HANDLEBARS_TOO_LARGE``, ``HANDLEBARS_NESTING_LIMIT``, ``HANDLEBARS_OUTPUT_LIMIT``,
``HANDLEBARS_TIME_LIMIT``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..errors import TemplateError
from ..spans import Span
from .limits import HandlebarsLimits, cpu_budget
from .nodes import Program
from .parser import parse
from .runtime import Helper, HelperOptions, RenderSettings, render_program
from .values import UNDEFINED

__all__ = [
    "UNDEFINED",
    "CompiledTemplate",
    "HandlebarsLimits",
    "Helper",
    "HelperOptions",
    "RenderSettings",
    "compile_template",
    "render",
]


@dataclass(frozen=True, slots=True)
class CompiledTemplate:
    """A parsed, whitespace-controlled template; render it any number of times."""

    source: str
    program: Program
    limits: HandlebarsLimits

    def render(self, data: Any, settings: RenderSettings | None = None) -> str:
        """The text for ``data`` (the context: a dict of JSON values for a story string)."""
        settings = settings or RenderSettings(limits=self.limits)
        with cpu_budget(settings.limits.cpu_seconds):
            return render_program(self.program, self.source, data, settings)


def compile_template(source: str, limits: HandlebarsLimits | None = None) -> CompiledTemplate:
    """Parse ``source``; ``TemplateError`` (``HANDLEBARS_*``) where Handlebars would refuse it."""
    limits = limits or HandlebarsLimits()
    if len(source) > limits.max_template_chars:
        raise TemplateError(
            f"the template has {len(source):,} characters; the limit is {limits.max_template_chars:,}",
            code="HANDLEBARS_TOO_LARGE", span=Span(0, 0), source=source[:200])
    with cpu_budget(limits.cpu_seconds):
        program = parse(source, limits)
    return CompiledTemplate(source, program, limits)


def render(source: str, data: Any, settings: RenderSettings | None = None) -> str:
    """Compile and render in one step."""
    limits = settings.limits if settings is not None else None
    return compile_template(source, limits).render(data, settings)
