"""Tool transactions: an assistant message's tool calls and the tool results answering them.

A call and its results are one indivisible unit. Depth insertion never lands inside one (the
insertion point moves past it, and the move is recorded), and the final array is checked so a
layout that splits a transaction, answers a call that is not open, or leaves one unanswered fails
with ``ASSEMBLY_TOOL_TOPOLOGY`` instead of reaching a provider that would reject it.

Messages use the chat-completion shape: ``tool_calls: [{"id", ...}]`` on assistant messages,
``tool_call_id`` on ``tool`` messages.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..errors import TemplateError

__all__ = ["advance_past_transactions", "call_ids", "check_topology"]


def call_ids(message: dict[str, Any]) -> list[str]:
    """The tool-call ids an assistant message opens."""
    if message.get("role") != "assistant":
        return []
    return [str(c.get("id")) for c in message.get("tool_calls") or () if isinstance(c, dict)]


def _step(open_calls: set[str], message: dict[str, Any]) -> None:
    open_calls.update(call_ids(message))
    if message.get("role") == "tool":
        open_calls.discard(str(message.get("tool_call_id")))


def advance_past_transactions(messages: Sequence[dict[str, Any]], index: int) -> tuple[int, bool]:
    """The first position at or after ``index`` that is outside every tool transaction.

    Returns ``(position, moved)``. Only the transaction ending just before ``index`` can be open
    there (results directly follow their call; :func:`check_topology` rejects any other shape),
    so the scan looks back over the run of tool results only, not over the whole request. An
    insertion point inside a transaction that never closes cannot be fixed:
    ``ASSEMBLY_TOOL_TOPOLOGY``.
    """
    j = index - 1
    answered: set[str] = set()
    while j >= 0 and messages[j].get("role") == "tool":
        answered.add(str(messages[j].get("tool_call_id")))
        j -= 1
    open_calls = set(call_ids(messages[j])) - answered if j >= 0 else set()
    moved = False
    while open_calls:
        if index >= len(messages):
            raise TemplateError(
                "cannot insert into an unfinished native tool transaction", code="ASSEMBLY_TOOL_TOPOLOGY"
            )
        _step(open_calls, messages[index])
        index += 1
        moved = True
    return index, moved


def check_topology(messages: Sequence[dict[str, Any]]) -> None:
    """Validate the final array: results directly follow their call, nothing left open."""
    open_calls: set[str] = set()
    for i, m in enumerate(messages):
        if m.get("role") == "tool":
            call = str(m.get("tool_call_id"))
            if call not in open_calls:
                raise TemplateError(
                    f"tool result {m.get('id')!r} (message {i}) does not follow its call {call!r}",
                    code="ASSEMBLY_TOOL_TOPOLOGY",
                )
            open_calls.discard(call)
            continue
        if open_calls:
            raise TemplateError(
                f"message {m.get('id')!r} (message {i}) splits a tool call from its results "
                f"(open: {sorted(open_calls)})",
                code="ASSEMBLY_TOOL_TOPOLOGY",
            )
        open_calls.update(call_ids(m))
    if open_calls:
        raise TemplateError(
            f"native tool transaction is incomplete (no result for {sorted(open_calls)})",
            code="ASSEMBLY_TOOL_TOPOLOGY",
        )
