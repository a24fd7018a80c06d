"""The story string: a context template's Handlebars rendered as SillyTavern's ``renderStoryString`` does.

SillyTavern compiles the story string with Handlebars (``noEscape``) in an environment where
``{{trim}}`` stays ``{{trim}}`` (its macro pass removes it with the blank around it) and any name
Handlebars cannot resolve is handed to its macro substitution as ``{{name}}`` (``helperMissing``).
Then it runs the macro substitution over the result, drops leading line breaks, and ends the text
with a line break when the story string sits at the top of the prompt and instruct mode is off,
or on with ``wrap`` and no ``story_string_suffix``. With instruct on, the instruct template's
``story_string_prefix``/``suffix`` wrap it (:func:`wrap_story_string`), in the prompt only.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from functools import lru_cache
from typing import Any

from ..handlebars import CompiledTemplate, HandlebarsLimits, RenderSettings, compile_template
from .templates import Context, Instruct, Substitute, replace_name

__all__ = ["StoryParams", "render_story_string", "wrap_story_string"]


@dataclass(frozen=True, slots=True)
class StoryParams:
    """What SillyTavern 1.18's ``Generate`` passes to the story string (all text)."""

    description: str = ""
    personality: str = ""
    persona: str = ""
    scenario: str = ""
    system: str = ""
    char: str = ""
    user: str = ""
    wiBefore: str = ""  # noqa: N815 - SillyTavern's parameter names
    wiAfter: str = ""  # noqa: N815
    loreBefore: str = ""  # noqa: N815
    loreAfter: str = ""  # noqa: N815
    anchorBefore: str = ""  # noqa: N815
    anchorAfter: str = ""  # noqa: N815
    mesExamples: str = ""  # noqa: N815
    mesExamplesRaw: str = ""  # noqa: N815

    def data(self) -> dict[str, Any]:
        return asdict(self)


@lru_cache(maxsize=64)
def _compiled(source: str, limits: HandlebarsLimits) -> CompiledTemplate:
    """A context template's story string, parsed once (the same few templates serve every request)."""
    return compile_template(source, limits)


def _settings(substitute: Substitute, limits: HandlebarsLimits) -> RenderSettings:
    return RenderSettings(helpers={"trim": lambda params, options: "{{trim}}"},
                          missing=lambda name: substitute("{{" + name + "}}"), limits=limits)


def render_story_string(context: Context, instruct: Instruct | None, params: StoryParams, substitute: Substitute,
                        limits: HandlebarsLimits | None = None) -> str:
    """The rendered story string (before :func:`wrap_story_string`); ``instruct`` is None when off."""
    limits = limits or HandlebarsLimits()
    text = _compiled(context.story_string, limits).render(params.data(), _settings(substitute, limits))
    text = substitute(text)
    text = text.lstrip("\n")
    if text and not text.endswith("\n") and not context.in_chat:
        if instruct is None or (instruct.wrap and not instruct.story_string_suffix):
            text += "\n"
    return text


def wrap_story_string(story: str, context: Context, instruct: Instruct, substitute: Substitute) -> str:
    """``formatInstructModeStoryString``: the instruct template's story-string prefix and suffix."""
    if not story:
        return ""
    if context.in_chat:
        return story
    if instruct.story_string_prefix:
        prefix = replace_name(substitute(instruct.story_string_prefix), "System")
        story = prefix + instruct.separator + story
    if instruct.story_string_suffix:
        story = story + substitute(instruct.story_string_suffix)
    return story
