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
   the count stays under the budget;
5. for a continue (the message continued held back to go last), the assembled prompt is counted
   once more (``checkPromptSize``: a line break more, the last prompt line counted twice, once on the
   newest message and once alone): while it is over the budget, an example dialogue goes (the last
   one first; pinned examples stay), else the oldest message (the user alignment message is the
   oldest), and the prompt is counted again (:func:`recheck_continue`). Each count adds the last
   prompt line to the newest message again, as SillyTavern does; instruct mode adds nothing on a
   continue, but without it the ``Char:`` line is added each time.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

__all__ = ["Fitted", "PromptBudget", "Rechecked", "fit_prompt", "recheck_continue"]


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


@dataclass(frozen=True, slots=True)
class Rechecked:
    """What the continue's second count leaves: how many of the oldest messages it drops, how many
    example dialogues stay, and how many times the newest message had the last prompt line added
    (0 when no message is left)."""

    dropped: int
    examples: int
    modified: int


def recheck_continue(budget: PromptBudget, *, story: str, examples: Sequence[str], chat_start: str,
                     messages: Sequence[str], held: str, modify: Callable[[str], str]) -> Rechecked:
    """SillyTavern's ``checkPromptSize`` for a continue: ``messages`` are those sent, oldest first
    (the user alignment message first when it is sent), ``examples`` those kept, ``held`` the message
    continued and ``modify`` ``modifyLastPromptLine`` (the text with the last prompt line added)."""
    shown = 0 if budget.pin_examples else len(examples)
    dropped = modified = 0
    newest = messages[-1] if messages else ""
    while True:
        kept = messages[dropped:]
        if kept:
            newest = modify(newest)
            modified += 1
        example_text = "".join(examples) if budget.pin_examples else "".join(examples[:shown])
        joint = "".join(kept[:-1]) + newest if kept else ""
        prompt = "".join((story, example_text, chat_start, joint, "\n", modify(""), held)).replace("\r", "")
        if budget.count(prompt) + budget.padding <= budget.max_prompt:
            break
        if shown > 0:
            shown -= 1
        elif kept:
            dropped += 1
        else:
            break
    return Rechecked(dropped, len(examples) if budget.pin_examples else shown, modified if dropped < len(messages) else 0)
