"""The lore: every world-info source SillyTavern scans, and their activation for this generation.

SillyTavern scans the chat lorebook, the persona's, the character's (linked world or embedded book)
and the global books (:func:`world_info_books`), over the newest chat messages and, as the settings
say, the card's fields and the persona (``getWorldInfoPrompt``). The activated entries are what the
preset's world-info markers, depth injections and outlets place. :func:`gather_lore` is that stage;
the text passes read each activated entry's content here, as SillyTavern's regex extension does.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..assembler.sources import world_info_from_activation
from ..errors import Diagnostic
from ..tokenizers import get_tokenizer
from ..worldinfo import ChatTail, ScanContext, activate_world_info
from .cache import memo_count, scan_books, shared_frozen
from .chat import PreparedChat
from .loading import LoadedInputs
from .passes import TextPass, run_passes, wants
from .request import StRequest

__all__ = ["Lore", "gather_lore", "world_info_books"]


@dataclass(slots=True)
class Lore:
    """The activated world info (``None`` when no book is scanned) and what it gives the placement."""

    chat: PreparedChat
    activation: Any = None
    #: the activated entries as the preset source places them (one shared frozen value), or None
    world_info: Any = None
    #: each outlet's text (``{{outlet::name}}``)
    outlets: dict[str, str] = field(default_factory=dict)


def gather_lore(chat: PreparedChat) -> Lore:
    """Stage 4: every world-info source, scanned over the prepared chat and activated."""
    texts = chat.texts
    loaded = texts.loaded
    req = loaded.req
    books, book_diags = world_info_books(loaded.inputs, req)
    loaded.warnings.extend(book_diags)
    lore = Lore(chat)
    if not books:
        return lore
    wi = req.world_info.model_dump()
    # world info's budget is a share of the prompt's room: the context minus the reply
    # (``getMaxPromptTokens``)
    wi["max_context"] = (req.budget.max_context or int(loaded.preset["openai_max_context"])) - \
        (req.budget.max_tokens if req.budget.max_tokens is not None else int(loaded.preset["openai_max_tokens"]))
    activation = activate_world_info(scan_books(books), _chat_tail(chat), wi, seed=req.options.seed,
                                     context=_scan_context(chat), token_counter=_wi_counter(req.budget.tokenizer))
    loaded.warnings.extend(d for d in activation.diagnostics if d.severity != "info")
    cut = _budget_cut(activation, books, req.budget.tokenizer)
    if cut is not None:
        loaded.warnings.append(cut)
    lore.activation = activation
    entries = world_info_from_activation(activation)
    outlets = {name: activation.by_position.outlet_text(name) for name in activation.by_position.outlets}
    if wants(loaded.passes, "world_info_entry"):
        entries, outlets = _passed_entries(entries, activation, loaded.passes)
    # the same activated entries give the same frozen value, which the assembler takes as it is
    lore.world_info = shared_frozen(entries)
    lore.outlets = outlets
    return lore


def _budget_cut(activation: Any, books: Sequence[Mapping[str, Any]], tokenizer: str) -> Diagnostic | None:
    """The entries the world-info budget left out, said in one warning (SillyTavern's overflow alert):
    how many, the tokens their contents would have taken, and the budget.

    Only a scan whose passes left a candidate out can have cut one, so the trace (built on first
    read) is read only then."""
    if not any(len(step.activated) < len(step.candidates) for step in activation.trace.steps):
        return None
    cut = [r for r in activation.trace.entries if r.reason == "budget"]
    if not cut:
        return None
    contents = {(str(b.get("name")), str(e.get("uid"))): e.get("content") for b in books
                for e in (b["entries"].values() if isinstance(b.get("entries"), Mapping) else b.get("entries") or ())
                if isinstance(e, Mapping)}
    count = _wi_counter(tokenizer)
    tokens = sum(count(text) for r in cut if isinstance(text := contents.get((r.book, str(r.uid))), str))
    n = len(cut)
    return Diagnostic("ST_WORLD_INFO_BUDGET", f"world info: {n} triggered entr{'y' if n == 1 else 'ies'} "
                      f"({tokens} tokens) left out: the world-info budget is {activation.budget} tokens "
                      "(world_info_budget, world_info_budget_cap)", severity="warning", path="$.world_info",
                      data={"entries": [{"book": r.book, "uid": r.uid} for r in cut], "tokens": tokens,
                            "budget": activation.budget})


def _chat_tail(chat: PreparedChat) -> ChatTail:
    """The chat as the scan reads it, built only as deep as the deepest scan reaches.

    A narrator message is part of the chat SillyTavern scans (only hidden ones are not), so it goes
    in as a message of its speaker ("System" unless named)."""
    messages, texts = chat.messages, chat.texts
    speakers = {"user": texts.user, "system": "System", "assistant": texts.char}

    def newest(n: int) -> list[dict[str, Any]]:
        return [{"role": "assistant" if m.role == "system" else m.role, "name": m.name or speakers[m.role],
                 "content": m.content} for m in messages[max(0, len(messages) - n):]]
    return ChatTail(len(messages), newest)


def _scan_context(chat: PreparedChat) -> ScanContext:
    """The card fields and persona the scan may read: the card fields as sent (joined in a join
    mode, overridden by the chat)."""
    texts = chat.texts
    card = texts.card
    dp = card.get("extensions", {}).get("depth_prompt") if isinstance(card.get("extensions"), Mapping) else None
    sent = texts.read_card if texts.read_card is not None else card
    return ScanContext(
        persona_description=texts.loaded.req.user.persona.description,
        character_description=str(sent.get("description") or ""),
        character_personality=str(sent.get("personality") or ""),
        character_depth_prompt=str(dp.get("prompt") or "") if isinstance(dp, Mapping) else "",
        scenario=str(sent.get("scenario") or ""),
        creator_notes=str(card.get("creator_notes") or ""),
    )


def _passed_entries(entries: list[dict[str, Any]], activation: Any,
                    passes: Sequence[TextPass]) -> tuple[list[dict[str, Any]], dict[str, str]]:
    """The activated entries' contents (placed and outlets) through the text passes."""
    def passed(content: str, book: Any, uid: Any, position: Any, depth: Any) -> str:
        return run_passes(passes, "world_info_entry", content,
                          {"book": book, "uid": uid, "position": position, "depth": depth})
    placed = [{**e, "content": passed(e["content"], e["book"], e["uid"], e["position"], e["depth"])}
              for e in entries]
    outlets = {name: "\n".join(passed(a.content, a.entry.book, a.entry.uid, "outlet", a.entry.depth) for a in items)
               for name, items in activation.by_position.outlets.items()}
    return placed, outlets


def world_info_books(inputs: LoadedInputs, request: StRequest) -> tuple[list[dict[str, Any]], list[Diagnostic]]:
    """Every world-info source SillyTavern scans, as source-tagged books for :func:`activate_world_info`.

    * A book given with an explicit ``source`` keeps it.
    * The chat lorebook (``chat.lorebook``, or the export's ``chat_metadata.world_info``) is ``chat``;
      the persona's (``user.persona.lorebook``) is ``persona``.
    * The card's linked world (``data.extensions.world``) is ``character`` when a given book has its
      name; else the card's embedded ``character_book`` stands for it (SillyTavern creates the linked
      world from it on import); a linked world that is neither is a warning naming it.
    * Without a link, the embedded book is the character's book; every other given book is global.

    The activation orders them as SillyTavern does: chat, persona, then character and global by
    ``world_info_character_strategy``.
    """
    diags: list[Diagnostic] = []
    chat_book = inputs.chat.lorebook
    persona_book = request.user.persona.lorebook
    card = inputs.card or {}
    ext = card.get("extensions") if isinstance(card.get("extensions"), Mapping) else {}
    linked = ext.get("world") if isinstance(ext.get("world"), str) and ext.get("world") else None
    names = {getattr(m, "name", None) for m, _s, _w in inputs.books}
    # in a group only the replying member's lorebook is read (``getCharacterLore`` reads the current
    # character): a book another member links is theirs, not a global one
    others = {str(w) for n, m in inputs.members.items() if n != card.get("name") and isinstance(
        m.get("extensions"), Mapping) and isinstance(w := m["extensions"].get("world"), str) and w}
    out: list[dict[str, Any]] = []
    for model, source, _where in inputs.books:
        name = getattr(model, "name", None) or "book"
        if source is None and name in others and name not in (chat_book, persona_book, linked):
            diags.append(Diagnostic("ST_GROUP_LOREBOOK_NOT_READ", f"the book {name!r} is another group member's "
                                    "lorebook; SillyTavern reads only the replying member's", severity="info"))
            continue
        if source is None:
            if name == chat_book:
                source = "chat"
            elif name == persona_book:
                source = "persona"
            elif name == linked:
                source = "character"
            else:
                source = "global"
        out.append({**model.to_st_dict(), "name": name, "source": source})
    embedded = inputs.card_model.character_book if inputs.card_model is not None and \
        request.options.scan_embedded_book else None
    if linked is not None and linked in names:
        pass
    elif embedded is not None:
        name = linked or getattr(embedded, "name", None) or f"{card.get('name', 'character')}'s Lorebook"
        out.append({**embedded.to_st_dict(), "name": name, "source": "character"})
    elif linked is not None:
        diags.append(Diagnostic("ST_LINKED_WORLD_MISSING", f"the card links the world {linked!r}, which is not among "
                                "the given books; its entries are not scanned (add it to books)", path="$.card"))
    for wanted, what in ((chat_book, "chat lorebook"), (persona_book, "persona lorebook")):
        if wanted and wanted not in names:
            diags.append(Diagnostic("ST_LOREBOOK_MISSING", f"the {what} {wanted!r} is not among the given books; "
                                    "its entries are not scanned"))
    return out, diags

def _wi_counter(tokenizer: str) -> Any:
    """The world-info budget's counter: the request's tokenizer, as SillyTavern counts world info.

    Its counts are remembered between requests (the same entries are counted request after
    request), and it carries the tokenizer's promise that no count exceeds the text's UTF-8 bytes
    (:data:`tavernbox.tokenizers.AT_MOST_UTF8_BYTES`): the activation then counts only once the
    activated entries' bytes could reach the budget, so a budget far from full never loads the
    tokenizer (building the o200k encoding is most of a fresh process's first request).
    """
    return memo_count(get_tokenizer(tokenizer).count)
