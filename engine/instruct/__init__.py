"""SillyTavern's text-completion formatting as pure functions: instruct mode, context templates, stop strings.

What SillyTavern 1.18 does to build a text-completion prompt out of its pieces, one job a function
(``instruct-mode.js``, ``renderStoryString``, ``getStoppingStrings``): the story string
(:mod:`.story`), messages, example dialogues and the last prompt line (:mod:`.messages`), the stop
strings (:mod:`.stops`), prompts placed in the chat at a depth (:mod:`.inject`), and the prompt
joined from those pieces (:mod:`.prompt`). Every function takes the caller's macro substitution
(``Substitute``) rather than reaching for a request: the text-completion back end binds it to the
request's names.
"""

from __future__ import annotations

from .messages import (
    ForceSequence,
    Speaker,
    format_examples,
    format_message,
    format_prompt_line,
    split_example_blocks,
)
from .fitting import PromptBudget, fit_prompt
from .inject import ExtensionPrompt, inject_in_chat
from .prompt import PromptPieces, PromptText, Span, assemble_prompt, assemble_prompt_spans
from .prompt_items import ChatItem
from .stops import StopSettings, stopping_strings
from .story import StoryParams, render_story_string, wrap_story_string
from .templates import Context, Instruct, Substitute, replace_name

__all__ = [
    "ChatItem",
    "Context",
    "ExtensionPrompt",
    "ForceSequence",
    "Instruct",
    "PromptBudget",
    "PromptPieces",
    "PromptText",
    "Span",
    "Speaker",
    "StopSettings",
    "StoryParams",
    "Substitute",
    "assemble_prompt",
    "assemble_prompt_spans",
    "format_examples",
    "format_message",
    "fit_prompt",
    "format_prompt_line",
    "inject_in_chat",
    "render_story_string",
    "split_example_blocks",
    "replace_name",
    "stopping_strings",
    "wrap_story_string",
]
