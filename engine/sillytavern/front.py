"""The front: every stage a back end shares, from the request to the chat history the budget can reach.

SillyTavern builds a chat-completion request (``prepareOpenAIMessages``) and a text-completion
prompt from the same front half of ``Generate``: the request and its assets (:mod:`.loading`), the
card and persona texts (:mod:`.texts`), the chat prepared for the generation type (:mod:`.chat`),
the activated lore (:mod:`.lore`), and the room the context leaves (:func:`plan_budget`). A back
end takes the :class:`Front` and places it: :func:`tavernbox.sillytavern.assemble.chat_completion`
through the preset's prompt manager (:mod:`.placement`, :mod:`.budget`, :mod:`.postprocess`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..assets.frozen import plain_data
from ..assets.presets import parse_preset as parse_st_preset
from ..strategies.sillytavern import prompt_sequence
from .budget import counter_for
from .cache import derived
from .chat import PreparedChat, prepare_chat
from .history import reachable_start
from .loading import Loaded, load
from .lore import Lore, gather_lore
from .passes import TextPass
from .request import StRequest
from .texts import Texts, card_texts

__all__ = ["Front", "build_front", "plan_budget"]


@dataclass(slots=True)
class Front:
    """What every back end places: the stages' states, the context's room and the reachable history."""

    loaded: Loaded
    texts: Texts
    chat: PreparedChat
    lore: Lore
    #: the context size and the tokens kept for the reply (the request's, else the preset's)
    max_context: int
    max_tokens: int
    #: the history sent is chat messages ``[pre_cut, history_end)`` (0 and 0 without a chat-history marker)
    history_end: int
    no_chat_history: bool
    #: the oldest chat message the budget could reach (:func:`~.history.reachable_start`)
    pre_cut: int
    #: the history messages ``[pre_cut, history_end)``, as placement reads them
    history: list[dict[str, Any]] = field(default_factory=list)
    #: the trailing message the user has just sent (the assembler's input), if any
    input_ids: list[str] = field(default_factory=list)

    @property
    def req(self) -> StRequest:
        return self.loaded.req


def build_front(request: Mapping[str, Any] | StRequest, *, base_dir: str | Path | None = None,
                passes: Sequence[TextPass] = ()) -> Front:
    """The front half of SillyTavern's generation, stage by stage."""
    loaded = load(request, base_dir, passes)
    texts = card_texts(loaded)
    chat = prepare_chat(texts)
    lore = gather_lore(chat)
    return plan_budget(lore)


def plan_budget(lore: Lore) -> Front:
    """Stage 5: the context's room, and the history as deep as that room can reach."""
    chat = lore.chat
    loaded = chat.texts.loaded
    req, preset = loaded.req, loaded.preset
    history_end, no_history = chat.history_end, False
    if not _has_chat_history(preset, chat.gen):
        # no chat-history marker: SillyTavern sends no history, and so none of the in-chat prompts
        # that would have been spliced into it (``populateChatHistory`` returns at once)
        history_end, no_history = 0, True
    max_context = req.budget.max_context or int(preset["openai_max_context"])
    max_tokens = req.budget.max_tokens if req.budget.max_tokens is not None else int(preset["openai_max_tokens"])
    pre_cut = reachable_start(chat.history, history_end, max_context - max_tokens,
                              lambda: counter_for(req.budget.tokenizer))
    history = chat.history.items(pre_cut, history_end)
    input_ids = [history[-1]["id"]] if history and history[-1]["role"] == "user" else []
    if req.options.dry_run:
        # SillyTavern's dry run adds nothing to the chat first (what was typed stays unsent) and
        # builds the prompt from the stored chat whole; ``populateChatHistory`` then adds
        # ``send_if_empty`` after an assistant message, so only there is that one sent
        messages = chat.messages
        after_reply = chat.appended == "send_if_empty" and len(messages) > 1 and messages[-2].role == "assistant"
        if not chat.appended or after_reply:
            input_ids = []
    return Front(loaded, chat.texts, chat, lore, max_context, max_tokens, history_end, no_history, pre_cut,
                 history, input_ids)


def _has_chat_history(preset: Mapping[str, Any], gen: str) -> bool:
    """Whether the preset's prompt sequence for ``gen`` holds the chat-history marker (once per
    cached preset). The parser only reads, so it gets the cached plain data itself, not a copy
    (a JSON round trip of the whole preset, a fifth of a fresh process's first request)."""
    return derived(("has_chat_history", gen), preset, lambda: any(
        p.identifier == "chatHistory"
        for p in prompt_sequence(parse_st_preset({k: plain_data(v) for k, v in preset.items()}), gen)[0]))
