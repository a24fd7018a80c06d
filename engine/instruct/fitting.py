"""The text-completion context budget: what ``Generate`` keeps when the prompt is too long.

SillyTavern counts with the model's tokenizer, ``token_padding`` tokens added to every count of a
whole prompt, against ``max_context - max_tokens``:

1. the fixed part (story string, pinned examples, ``chat_start``, the last prompt line, the
   message continued) is counted first;
2. the prompts placed in the chat at a depth are added, newest first, then the other messages,
   newest first, each while the running count stays under the budget: the first that does not fit
   ends the history there (what is older is left out);
3. the instruct template's ``user_alignment_message`` opens the history unless the oldest message
   kept is a user's;
4. everything kept is counted again, then the example dialogues are added one by one, each while
   the count stays under the budget.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

__all__ = ["Fitted", "PromptBudget", "fit_prompt"]


@dataclass(frozen=True, slots=True)
class PromptBudget:
    """How the prompt is counted: the tokenizer, the room (``max_context - max_tokens``), the padding."""

    count: Callable[[str], int]
    max_prompt: int
    padding: int = 64
    pin_examples: bool = False


@dataclass(frozen=True, slots=True)
class Fitted:
    """What fits: the indexes of the kept messages (oldest first) and how many example dialogues."""

    kept: list[int]
    examples: int
    alignment: bool


def fit_prompt(budget: PromptBudget, *, fixed: Sequence[str], messages: Sequence[str], injected: Sequence[bool],
               users: Sequence[bool], examples: Sequence[str], alignment: str, chat_start: str) -> Fitted:
    """``messages``, ``injected`` and ``users`` are oldest first; ``fixed`` the story string, the
    last prompt line and the message continued."""

    def count(text: str) -> int:
        return budget.count(text.replace("\r", "")) if text else 0

    pinned = "".join(examples) if budget.pin_examples else ""

    def whole(chat: str, examples_text: str) -> int:
        story, last_line, cycle = fixed
        return count("".join((story, examples_text, alignment, chat, last_line, cycle))) + budget.padding

    newest = list(reversed(messages))
    newest_injected = [i for i, flag in enumerate(reversed(injected)) if flag]
    newest_users = {i for i, flag in enumerate(reversed(users)) if flag}
    chat = chat_start
    tokens = whole(chat, pinned)
    kept: list[str | None] = [None] * len(newest)
    last_added = 0
    for order in (newest_injected, range(len(newest))):
        for i in order:
            if kept[i] is not None:
                continue
            tokens += count(newest[i])
            if tokens >= budget.max_prompt:
                break
            chat += newest[i]
            kept[i] = newest[i]
            last_added = max(last_added, i)
    with_alignment = bool(alignment) and last_added not in newest_users
    if with_alignment:
        chat = alignment + chat
    tokens = whole(chat, pinned)
    shown = len(examples) if budget.pin_examples else 0
    if not budget.pin_examples:
        running = ""
        for example in examples:
            tokens += count(example)
            running += example
            if tokens >= budget.max_prompt:
                break
            shown += 1
    last = len(newest) - 1
    return Fitted([last - i for i in range(len(newest) - 1, -1, -1) if kept[i] is not None], shown, with_alignment)
