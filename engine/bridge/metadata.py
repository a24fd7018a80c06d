"""``inspect_template_metadata``: which lifecycle a prompt-template resource asks for.

ST-Prompt-Template gives special meaning to title tags (``[GENERATE:BEFORE]``, ``[RENDER:AFTER]``,
``@INJECT ...``) and to a leading run of ``@@decorator`` lines. This engine runs a template at
one point only, before a model request, so only ``[GENERATE:BEFORE]``/``[GENERATE:AFTER]`` are
supported (they suggest ``before_model_request``; the caller still chooses the placement).
Every other tag and every decorator, official or not, is reported (``TEMPLATE_LIFECYCLE_UNSUPPORTED``)
and makes the resource impossible to enable (``UNSUPPORTED_EVENT``), so nothing silently runs at
the wrong time or not at all. ``@@@`` at the start of a line is a literal, not a decorator.
Reading the metadata never imports, enables or runs anything.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from ..errors import Diagnostic
from ..spans import Span

__all__ = ["OFFICIAL_DECORATORS", "Decorator", "TemplateMetadata", "inspect_template_metadata"]

#: The decorators ST-Prompt-Template knows (research 2.6): recognised here, never executed.
OFFICIAL_DECORATORS = frozenset({
    "activate", "dont_activate", "message_formatting", "generate_before", "generate_after", "render_before",
    "render_after", "dont_preload", "initial_variables", "always_enabled", "only_preload", "iframe",
    "preprocessing", "if", "private",
})

_SUPPORTED_TAG = re.compile(r"\[GENERATE:(BEFORE|AFTER)\]", re.I)
_UNSUPPORTED_TAGS = [
    (re.compile(r"\[GENERATE:\d+:(?:BEFORE|AFTER)\]", re.I), "an indexed GENERATE tag"),
    (re.compile(r"\[GENERATE:REGEX:[^\]]*\]", re.I), "a regex GENERATE tag"),
    (re.compile(r"\[PRELOAD\]", re.I), "PRELOAD"),
    (re.compile(r"\[RENDER(?::[^\]]*)?\]", re.I), "a RENDER tag"),
    (re.compile(r"\[InitialVariables\]", re.I), "InitialVariables"),
    (re.compile(r"\[Preprocessing\]", re.I), "Preprocessing"),
    (re.compile(r"@INJECT\b", re.I), "@INJECT"),
]
_DECORATOR = re.compile(r"@@([A-Za-z_][A-Za-z0-9_]*)?[ \t]*(.*)")


@dataclass(frozen=True, slots=True)
class Decorator:
    """One ``@@name argument`` line at the start of the content."""

    name: str
    argument: str
    official: bool
    span: Span


@dataclass(frozen=True)
class TemplateMetadata:
    """What the title and the leading decorators ask for."""

    name: str
    events: tuple[str, ...]
    placement: str | None
    decorators: tuple[Decorator, ...]
    diagnostics: tuple[Diagnostic, ...] = field(default=())

    @property
    def supported(self) -> bool:
        """False when a tag or decorator asks for something this engine does not run."""
        return not any(d.severity == "error" for d in self.diagnostics)

    def to_dict(self, content: str | None = None) -> dict[str, Any]:
        """JSON-ready; with ``content``, decorator diagnostics carry line and column."""
        return {
            "name": self.name,
            "events": list(self.events),
            "placement": self.placement,
            "decorators": [{"name": d.name, "argument": d.argument, "official": d.official,
                            "start": d.span.start, "end": d.span.end} for d in self.decorators],
            "supported": self.supported,
            "diagnostics": [d.to_dict(content) for d in self.diagnostics],
        }


def inspect_template_metadata(name: str, content: str) -> TemplateMetadata:
    """Read the title tags of ``name`` and the leading ``@@`` decorators of ``content``."""
    diags: list[Diagnostic] = []
    events: list[str] = []
    placement: str | None = None
    for m in _SUPPORTED_TAG.finditer(name):
        events = ["before_model_request"]
        # A suggestion only: the assembly rule still decides where the text goes (it is not ST's
        # automatic prefix of the first message / suffix of the last).
        placement = m.group(1).lower()
    for pattern, what in _UNSUPPORTED_TAGS:
        for m in pattern.finditer(name):
            diags.append(Diagnostic("TEMPLATE_LIFECYCLE_UNSUPPORTED", f"title tag {m.group(0)} ({what}) is not supported",
                                    severity="error", path="name", data={"tag": m.group(0)}))
    decorators: list[Decorator] = []
    offset = 0
    if content.startswith("@@"):
        for line in content.splitlines(keepends=True):
            bare = line.rstrip("\r\n")
            if not bare.startswith("@@") or bare.startswith("@@@"):
                break  # the first non-decorator line (or the @@@ literal) starts the content
            dm = _DECORATOR.match(bare)
            assert dm is not None
            dec_name, argument = dm.group(1) or "", dm.group(2).strip()
            official = dec_name in OFFICIAL_DECORATORS
            span = Span(offset, offset + len(bare))
            decorators.append(Decorator(dec_name, argument, official, span))
            message = (f"decorator @@{dec_name} is recognised but not executed by this engine" if official
                       else f"unknown decorator @@{dec_name}")
            diags.append(Diagnostic("TEMPLATE_LIFECYCLE_UNSUPPORTED", message, span=span, severity="error",
                                    data={"decorator": dec_name, "official": official}))
            offset += len(line)
    return TemplateMetadata(name, tuple(events), placement, tuple(decorators), tuple(diags))
