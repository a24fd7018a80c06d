"""Fitting: the placed messages cut to the context budget, as ``populateChatCompletion`` fills it.

The budget's rules are :mod:`.budget`'s (:func:`~.budget.fit`); this stage tags each placed message
with its part in the budget (from the block that produced it) and keeps what fits.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .budget import BudgetReport, MessageKind, counter_for, fit, fits_without_counting
from .placement import Placed

__all__ = ["Fitted", "fit_budget"]


@dataclass(slots=True)
class Fitted:
    """The placed messages the budget kept, and what it reports (``None``: not counted, everything fit)."""

    placed: Placed
    logical: list[dict[str, Any]]
    report: BudgetReport | None


def fit_budget(placed: Placed) -> Fitted:
    """Stage 7: the placed messages cut to the context budget, as ``populateChatCompletion`` fills it."""
    front = placed.front
    req = front.req
    native_index = {h["id"]: i + front.pre_cut for i, h in enumerate(front.history)}
    logical = placed.logical
    kinds = [_kind(placed.block_of.get(m["id"], ""), native_index.get(m["id"])) for m in logical]
    if req.budget.examples == "disabled":
        keep_rows = [i for i, k in enumerate(kinds) if k.kind != "example"]
        logical, kinds = [logical[i] for i in keep_rows], [kinds[i] for i in keep_rows]
    fitted = _fit(logical, kinds, req.budget.tokenizer, req.budget.examples, front.max_context, front.max_tokens)
    if fitted is None:
        return Fitted(placed, logical, None)
    kept, report = fitted
    if front.pre_cut:
        report.dropped_messages = list(range(front.pre_cut)) + report.dropped_messages
        counter = counter_for(req.budget.tokenizer)
        history, pre_cut = front.chat.history, front.pre_cut
        # built and counted only when asked for (as the budget pass prices them: empty ones too)
        report.unplaced_tokens = lambda: sum(map(counter.message, history.items(0, pre_cut)))
    return Fitted(placed, [logical[i] for i in kept], report)


def _fit(logical: list[dict[str, Any]], kinds: list[MessageKind], tokenizer: str, examples: str,
         max_context: int, max_tokens: int) -> Any:
    """The budget pass: ``(kept indexes, report)``, or ``None`` when surely everything fits uncounted."""
    if tokenizer in ("o200k", "cl100k", "words") and fits_without_counting(logical, max_context - max_tokens):
        return None
    # a prompt without text costs nothing: SillyTavern counts a message's tokens only when it has
    # content (``Message.createAsync``)
    return fit(logical, kinds, counter_for(tokenizer), max_context=max_context, max_tokens=max_tokens,
               pin_examples=examples == "keep")


def _kind(block_id: str, chat_index: int | None) -> MessageKind:
    """A placed message's part in the budget, from the block that produced it."""
    if chat_index is not None:
        return MessageKind("history", "chat_history", chat_index=chat_index)
    if block_id.startswith("preset:inject:"):
        return MessageKind("history", "chat_history")
    if block_id.startswith("preset:dialogueExamples:"):
        return MessageKind("example", "examples", dialogue=int(block_id.split(":")[2]))
    if block_id in ("preset:chatHistory:newChat", "preset:chatHistory:groupNudge"):
        return MessageKind("reserved", "chat_history")
    if block_id == "preset:chatHistory:sendIfEmpty":
        return MessageKind("reserved", "chat_history")
    if block_id.startswith("preset:control:"):
        return MessageKind("reserved", "control_prompts")
    if block_id.startswith("preset:worldInfo"):
        return MessageKind("fixed", "world_info")
    if block_id.startswith(("preset:charDescription", "preset:charPersonality", "preset:scenario")):
        return MessageKind("fixed", "character")
    if block_id.startswith("preset:personaDescription"):
        return MessageKind("fixed", "persona")
    return MessageKind("fixed", "prompts")
