"""SillyTavern's context budget: what fits into ``max_context - max_tokens`` and what is left out.

SillyTavern fills a chat-completion request in a fixed order (``populateChatCompletion`` and
``ChatCompletion`` in ``openai.js``), each addition paid from one token budget:

1. 3 tokens for the reply's priming;
2. the prompts that always go in: main, world info, card fields, persona, the other relative
   prompts, the jailbreak (a prompt that does not fit is an error, not a cut; a prompt without text
   costs nothing, as SillyTavern counts only messages with content);
3. reserved first, paid whatever happens: the control prompts sent last (impersonation, quiet
   prompt, a continued message), the new-chat separator, the group nudge, the continue nudge;
4. with ``pin_examples`` ("keep"), the dialogue examples, a whole dialogue (its separator and every
   message) at a time, stopping at the first that does not fit;
5. the chat history with its in-chat injections, newest first, stopping at the first message that
   does not fit: what is kept is always the newest contiguous part;
6. without ``pin_examples`` ("gradual"), the examples with what is left.

:func:`fit` applies this to the assembled messages (each tagged with its kind) and reports every
cut: which chat messages and which dialogues were left out, and the tokens of each collection.
:mod:`.fitting` is the stage that runs it over the placed messages.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import TemplateError
from ..tokenizers import MessageCounter, get_tokenizer

__all__ = ["BudgetReport", "MessageKind", "byte_bound", "counter_for", "fit", "fits_without_counting"]

#: the priming SillyTavern reserves for every reply (``<|start|>assistant<|message|>``)
PRIMING = 3


@dataclass(frozen=True, slots=True)
class MessageKind:
    """What a message is for the budget: ``fixed``, ``reserved``, ``history``, ``example``.

    ``dialogue`` numbers the example dialogue; ``chat_index`` the chat message (history only,
    ``None`` for in-chat injections).
    """

    kind: str
    collection: str
    dialogue: int | None = None
    chat_index: int | None = None


@dataclass(slots=True)
class BudgetReport:
    """What the budget allowed: the figures SillyTavern's prompt itemization shows, and the cuts."""

    tokenizer: str
    max_context: int
    max_tokens: int
    budget: int
    used: int = 0
    collections: dict[str, int] = field(default_factory=dict)
    dropped_messages: list[int] = field(default_factory=list)
    dropped_injections: int = 0
    dropped_dialogues: list[int] = field(default_factory=list)
    #: tokens of what the budget pass weighed and left out
    weighed_dropped_tokens: int = 0
    #: counts the chat messages cut before placement, which no budget could reach (the first time
    #: :attr:`dropped_tokens` is read: a host that never reads it never builds them)
    unplaced_tokens: Callable[[], int] | None = field(default=None, repr=False, compare=False)

    @property
    def left(self) -> int:
        return self.budget - self.used

    @property
    def dropped_tokens(self) -> int:
        """Tokens of everything left out, the chat messages cut before placement included."""
        if self.unplaced_tokens is not None:
            count, self.unplaced_tokens = self.unplaced_tokens, None
            self.weighed_dropped_tokens += count()
        return self.weighed_dropped_tokens

    def to_dict(self) -> dict[str, Any]:
        return {"tokenizer": self.tokenizer, "max_context": self.max_context, "max_tokens": self.max_tokens,
                "budget": self.budget, "used": self.used, "left": self.left, "collections": dict(self.collections),
                "dropped": {"chat_messages": list(self.dropped_messages), "injections": self.dropped_injections,
                            "dialogues": list(self.dropped_dialogues), "tokens": self.dropped_tokens}}


def fit(
    messages: Sequence[Mapping[str, Any]],
    kinds: Sequence[MessageKind],
    counter: MessageCounter,
    *,
    max_context: int,
    max_tokens: int,
    pin_examples: bool,
) -> tuple[list[int], BudgetReport]:
    """The indexes of ``messages`` that fit, in order, and the report.

    Raises ``ST_CONTEXT_TOO_SMALL`` when the prompts that must go in do not fit.
    """
    budget = max_context - max_tokens
    report = BudgetReport(counter.tokenizer.name, max_context, max_tokens, budget)
    remaining = budget - PRIMING
    report.collections["priming"] = PRIMING
    cost = [0] * len(messages)

    def price(i: int) -> int:
        if not cost[i]:
            cost[i] = counter.message(messages[i])
        return cost[i]

    must = [i for i, k in enumerate(kinds) if k.kind in ("fixed", "reserved")]
    for i in must:
        remaining -= price(i)
        report.collections[kinds[i].collection] = report.collections.get(kinds[i].collection, 0) + price(i)
    if remaining < 0:
        raise TemplateError(
            f"the prompts that must be sent need {budget - remaining} tokens but the context allows {budget} "
            f"(max_context {max_context} - max_tokens {max_tokens}); raise budget.max_context or shorten the preset",
            code="ST_CONTEXT_TOO_SMALL")
    keep = set(must)
    dialogues: dict[int, list[int]] = {}
    for i, k in enumerate(kinds):
        if k.kind == "example" and k.dialogue is not None:
            dialogues.setdefault(k.dialogue, []).append(i)
    history = [i for i, k in enumerate(kinds) if k.kind == "history"]

    def add_examples() -> None:
        nonlocal remaining
        stopped = False
        for number in sorted(dialogues):
            members = dialogues[number]
            total = sum(price(i) for i in members)
            if not stopped and total <= remaining:
                remaining -= total
                keep.update(members)
                report.collections["examples"] = report.collections.get("examples", 0) + total
            else:
                stopped = True
                report.dropped_dialogues.append(number)
                report.weighed_dropped_tokens += total

    def add_history() -> None:
        nonlocal remaining
        stopped = False
        for i in reversed(history):
            if not stopped and price(i) <= remaining:
                remaining -= price(i)
                keep.add(i)
                report.collections["chat_history"] = report.collections.get("chat_history", 0) + price(i)
            else:
                stopped = True
                report.weighed_dropped_tokens += price(i)
                if kinds[i].chat_index is None:
                    report.dropped_injections += 1
                else:
                    report.dropped_messages.append(kinds[i].chat_index)  # type: ignore[arg-type]
        report.dropped_messages.sort()

    if pin_examples:
        add_examples()
        add_history()
    else:
        add_history()
        add_examples()
    report.used = budget - remaining
    return sorted(keep), report


def fits_without_counting(messages: Sequence[Mapping[str, Any]], budget: int) -> bool:
    """Whether everything surely fits: a token is at least one UTF-8 byte, so bytes bound tokens.

    Lets a request far below its budget skip loading a tokenizer at all. A first pass bounds
    the bytes by the characters (at most 4 UTF-8 bytes each, without encoding anything); only
    when that bound is over the budget are the bytes counted.
    """
    bound = PRIMING
    for m in messages:
        content = m.get("content")
        name = m.get("name")
        bound += 4 * (len(content) if isinstance(content, str) else len(str(content or ""))) \
            + len(str(m.get("role") or "")) + 4 + (4 * len(str(name)) + 1 if name else 0)
        if bound > budget:
            break
    else:
        return True
    total = PRIMING
    for m in messages:
        total += byte_bound(m)
        if total > budget:
            return False
    return True


def byte_bound(message: Mapping[str, Any]) -> int:
    """At least as many as the message's tokens by any tokenizer (:func:`fits_without_counting`)."""
    content = message.get("content")
    text = content if isinstance(content, str) else str(content or "")
    name = message.get("name")
    return len(text.encode("utf-8", "surrogatepass")) + len(str(message.get("role") or "")) + 4 \
        + (len(str(name).encode("utf-8", "surrogatepass")) + 1 if name else 0)


_counters: dict[str, Any] = {}


def counter_for(tokenizer: str) -> MessageCounter:
    """The budget pass's message counter for ``tokenizer``, kept between requests (counts cached by content)."""
    counter = _counters.get(tokenizer)
    if counter is None:
        counter = _counters[tokenizer] = MessageCounter(get_tokenizer(tokenizer))
    return counter
