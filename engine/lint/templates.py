"""Single template files and prompt-template resources.

A text file that is not a structured asset (``.txt``, ``.md``, a YAML file that is no MVU data)
is one template: macros and EJS, positioned in the file itself, its stem as the resource title.
A JSON object whose ``id`` starts with ``prompt-template:`` is a prompt-template resource: it is
validated as the bridge validates it, and its ``content`` is linted with its ``name`` as title.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..bridge.resources import PromptTemplateResource
from ..errors import TemplateError
from .codes import LINT_CODES
from .model import Finding, Prompt

__all__ = ["is_resource", "resource_prompt", "template_prompt"]


def template_prompt(file: str, text: str, title: str) -> Prompt:
    """The whole file as one prompt (its positions are the file's own)."""
    prompt = Prompt(file, None, text, title=title)
    prompt.locate = prompt.line_col
    return prompt


def is_resource(value: Any) -> bool:
    return isinstance(value, Mapping) and isinstance(value.get("id"), str) and value["id"].startswith("prompt-template:")


def resource_prompt(file: str, value: Mapping[str, Any], locate: Any) -> tuple[list[Finding], Prompt | None]:
    """Validate a resource; its content as a prompt when it has one."""
    findings: list[Finding] = []
    try:
        PromptTemplateResource.from_dict(value)
    except TemplateError as exc:
        findings.append(Finding("TEMPLATE_RESOURCE_INVALID", LINT_CODES["TEMPLATE_RESOURCE_INVALID"].severity, file,
                                exc.message, exc.path or "$", suggestion="see the prompt-template resource fields"))
    content = value.get("content")
    if not isinstance(content, str):
        return findings, None
    name = value.get("name") if isinstance(value.get("name"), str) else ""
    return findings, Prompt(file, "$.content", content, title=name, locate=locate)
