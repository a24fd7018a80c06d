"""The chat as SillyTavern prepares it for a generation.

``Generate`` first edits the chat for the generation type: what the user typed in the send box is
sent as a message (``send_if_empty`` when the box is empty on a normal generation), ``regenerate``
deletes the last message unless it is the user's, ``swipe`` takes out the message being replaced
(it stays in the chat the macros read, with an unfinished swipe). The chat macros then read the
chat as stored (:func:`_macro_chat`); each history message is the message with its speaker's name
and its macros expanded (:mod:`.history`); a ``continue`` generation takes the last message out to
be continued. :func:`prepare_chat` is that stage; the text passes read the chat messages here,
where SillyTavern builds ``coreChat``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from ..assets.chats import ChatMessage
from ..macros import MacroContext, expand_macros
from .history import ChatHistory, macro_messages
from .passes import TextPass, run_passes, wants
from .postprocess import history_item
from .reasoning import add_reasoning
from .templates import chat_macro_variables, keep_chat_macro_writes
from .texts import Texts

__all__ = ["PreparedChat", "prepare_chat"]


class _Edited(NamedTuple):
    """The chat after the generation type's edits."""

    messages: list[ChatMessage]
    #: what generating added to the chat first: "input", "send_if_empty" or ""
    appended: str
    #: the message a swipe replaces (out of the prompt, still read by the chat macros)
    swiped: ChatMessage | None


@dataclass(slots=True)
class PreparedChat:
    """The chat as the prompt reads it, and the chat the macros read."""

    texts: Texts
    gen: str
    #: the chat as generation sees it (after the edits and the chat-message passes)
    messages: list[ChatMessage]
    roles: list[str]
    appended: str
    #: ``continue`` with ``continue_prefill``: the continued message is sent last as a prefill
    prefill_mode: bool
    #: the chat macros' part of the macro context (``chat``, ``chat_omitted``)
    macro_chat: dict[str, Any]
    #: expands a chat message's macros as ``populateChatHistory`` does
    expand: Callable[[str], str]
    history: ChatHistory
    #: the history is chat messages ``[0, history_end)``
    history_end: int
    #: the continued message (``continue``), as a history item
    continued: dict[str, Any] | None
    #: the continued message's text as written (``{{lastChatMessage}}`` in the continue nudge)
    continued_text: str
    quiet_prompt: str
    #: the macro context of the chat's texts (names, card, persona, the chat the macros read), handed to the
    #: passes with each text (fact ``macros``)
    macro_context: dict[str, Any] | None = None


def prepare_chat(texts: Texts) -> PreparedChat:
    """Stage 3: the chat edited for the generation type, its macros' view, and its history."""
    loaded = texts.loaded
    req, preset = loaded.req, loaded.preset
    gen = req.generation.type
    stored = list(loaded.inputs.chat.messages)
    if req.options.dry_run and loaded.inputs.chat.input_ids:
        # what the user has just sent (the chat's ``input_ids``) is not in SillyTavern's chat on a dry run
        del stored[len(stored) - len(loaded.inputs.chat.input_ids):]
    edited = _edit_for_generation(stored, gen, req.generation.input, preset)
    chat = edited.messages
    roles = [m.role for m in chat]
    # a dry run sends nothing, so neither the typed input nor ``send_if_empty`` is in SillyTavern's
    # chat yet (``Generate`` adds them only when not ``dryRun``)
    unsent = 1 if req.options.dry_run and edited.appended else 0
    macro_chat, has_first = _macro_chat(chat[:len(chat) - unsent], roles[:len(roles) - unsent], edited.swiped)
    macro_base = macro_base_context(texts)
    first = macro_chat["chat"][0] if has_first else None
    if first is not None and "{{" in first["content"]:
        # ``Generate`` substitutes the first message's macros in place before the prompts are built
        first["content"] = expand_macros(first["content"], {**macro_base, **macro_chat},
                                         seed=macro_base.get("seed", 0)).text
    context = {**macro_base, **macro_chat}
    passes = loaded.passes
    if wants(passes, "chat_message"):
        # ``Generate`` substitutes the first message's macros before ``coreChat`` is built
        first_text = first["content"] if first is not None else None
        if first_text is None and chat and "{{" in chat[0].content:
            first_text = expand_macros(chat[0].content, context, seed=macro_base.get("seed", 0)).text
        chat = _passed_chat(chat, gen, passes, edited.appended, first_text, context)
    expand = _chat_macro_expander(context, getattr(loaded, "templates", None))
    if req.options.reasoning.add_to_prompts or gen == "continue":
        chat = add_reasoning(chat, gen, req.options.reasoning, passes, expand,
                             texts.char if req.group is not None else None, texts.user, context)
    history = ChatHistory(chat, behavior=texts.behavior, user=texts.user, char=texts.char,
                          group=req.group is not None, expand=expand)
    prefill_mode = gen == "continue" and bool(preset.get("continue_prefill"))
    prepared = PreparedChat(texts, gen, chat, roles, edited.appended, prefill_mode, macro_chat, expand, history,
                            len(chat), None, "", _quiet_prompt(req.generation.quiet_prompt, gen, expand), context)
    if gen == "continue" and chat:
        _take_continued(prepared)
    return prepared


def _edit_for_generation(chat: list[ChatMessage], gen: str, typed: str | None, preset: dict[str, Any]) -> _Edited:
    """``Generate``'s edits of the chat for the generation type, before the prompt is built."""
    appended = ""
    if typed and gen != "quiet":  # what the user typed is sent as a message before generating
        chat.append(ChatMessage("user", typed))
        appended = "input"
    elif typed == "" and gen == "normal" and str(preset.get("send_if_empty") or "").strip():
        chat.append(ChatMessage("user", str(preset["send_if_empty"]).strip()))
        appended = "send_if_empty"
    swiped: ChatMessage | None = None
    if gen == "regenerate" and chat and chat[-1].role != "user":
        chat.pop()  # ``Generate`` deletes the last message unless it is the user's, a narrator's too
    elif gen == "swipe" and chat and chat[-1].role == "assistant":
        # the message being replaced is not part of the prompt; it stays in the chat the macros read
        swiped = chat.pop()
    return _Edited(chat, appended, swiped)


def macro_base_context(texts: Texts) -> dict[str, Any]:
    """The macro context's names, persona and card, as the chat's macros read them."""
    req = texts.loaded.req
    card = texts.read_card if texts.read_card is not None else texts.card
    return {"user": texts.user, "char": texts.char, "persona": texts.persona_text,
            "character": {k: v for k, v in card.items() if k != "extensions"},
            "seed": req.options.seed, **({"now": req.options.now} if req.options.now else {}),
            **({"group": list(req.group.members)} if req.group else {}), **texts.muted}


def _passed_chat(chat: list[ChatMessage], gen: str, passes: Sequence[TextPass], appended: str,
                 first_text: str | None, macros: dict[str, Any]) -> list[ChatMessage]:
    """The chat messages through the text passes, each with its depth as ``Generate`` counts it for
    ``coreChat`` (0 = the newest; a ``continue`` shifts every depth down by one). ``first_text`` is the
    first message with its macros substituted (``None``: the chat's first message is not the macros'),
    ``appended`` what the send box added as the last message, ``macros`` the chat's macro context."""
    n, shift = len(chat), 2 if gen == "continue" else 1
    return [m._replace(content=run_passes(passes, "chat_message", first_text if i == 0 and first_text is not None
                                          else m.content, {
        "index": i, "role": m.role, "depth": n - i - shift, "is_user": m.role == "user",
        "is_system": m.role == "system", "name": m.name, "reasoning": m.reasoning,
        "sent_now": bool(appended) and i == n - 1, "macros": macros})) for i, m in enumerate(chat)]


def _quiet_prompt(text: str, gen: str, expand: Callable[[str], str]) -> str:
    """``Generate`` substitutes the quiet prompt's macros before the prompt is prepared, which
    substitutes them again: a macro's value holding a macro is expanded too."""
    return expand(text) if gen == "quiet" and "{{" in text else text


def _take_continued(prepared: PreparedChat) -> None:
    """``continue``: the last message is the one continued (sent last, after the nudge or as a prefill)."""
    texts, chat = prepared.texts, prepared.messages
    prepared.continued = None if prepared.prefill_mode else prepared.history.item(len(chat) - 1)
    # ``{{lastChatMessage}}`` is the message as written, without the name prefix names_behavior adds
    prepared.continued_text = chat[-1].content.replace("\r", "")
    if prepared.prefill_mode:  # taken out before the in-chat injections, sent last (``continuePrefill``)
        prepared.history_end -= 1
        # made from the history message before ``populateChatHistory`` prepares it: its macros are
        # sent as written
        m = chat[-1]
        prepared.continued = history_item(len(chat) - 1, m.role, m.content or "", m.name, m.force_avatar, m.id,
                                          behavior=texts.behavior, user=texts.user, char=texts.char,
                                          group=texts.loaded.req.group is not None)


def _macro_chat(chat: Sequence[ChatMessage], roles: Sequence[str],
                swiped: ChatMessage | None) -> tuple[dict[str, Any], bool]:
    """The chat the chat macros read (``{{lastMessage}}``, ``{{lastMessageId}}``...): SillyTavern's
    ``chat`` array while the prompts are built, as stored, not the history messages as sent.

    Its chat macros return ``chat[i].mes`` (``getLastMessage`` and friends in ``chat-macros.js``):
    the stored text, without the ``Name: `` prefix ``names_behavior`` adds to the history and with
    the macros inside it unexpanded (in the experimental engine, SillyTavern's default, a macro's
    value is not scanned again). That array still holds the continued message in prefill mode and
    is read whether or not the preset has a chat-history marker. ``chat`` is the chat as generation
    sees it (typed input added, the regenerated message removed); ``swiped`` is the message a swipe
    replaces, which stays in SillyTavern's chat with an unfinished swipe (``swipe_id`` one past its
    swipes) that ``getLastMessageId`` skips while ``{{allChatRange}}`` still counts it. A narrator
    message is neither the user's nor hidden (``is_user`` and ``is_system`` false), so the macros
    take it for a character message. Only the few messages the macros read are handed over
    (:func:`macro_messages`) with the count of the others: the macros read the same, and a macro
    context of a 200-message chat costs milliseconds to build and copy where four messages cost
    microseconds. Returns that context part and whether its first message is the chat's first.
    """
    as_read = [r if r != "system" else "assistant" for r in roles]
    n = len(chat)
    picks = macro_messages(as_read)
    items: list[dict[str, Any]] = [{"role": as_read[i], "name": chat[i].name or "", "content": chat[i].content}
                                   for i in picks]
    if swiped is not None:
        items.append({"role": "assistant", "name": swiped.name or "", "content": swiped.content,
                      "swipes": [swiped.content], "swipe_id": 1})
    return {"chat": items, "chat_omitted": n - len(picks)}, bool(picks) and picks[0] == 0

def _chat_macro_expander(context: dict[str, Any], run: Any = None) -> Callable[[str], str]:
    """Expands a chat message's macros, as SillyTavern prepares each history message
    (``populateChatHistory`` passes every one through ``preparePrompt``).

    The macro context (with the chat of :func:`_macro_chat`) is built once, on the first message
    that has a macro. With the request's variables (``run``, the template extensions' state) a
    message's ``{{getvar}}`` reads the chat's variables and its ``{{setvar}}`` writes them, as
    SillyTavern's ``chat_metadata.variables`` (:func:`.templates.chat_macro_variables`).
    """
    built: list[MacroContext] = []

    def expand(text: str) -> str:
        if not built:
            built.append(MacroContext.from_dict(context))
        result = expand_macros(text, chat_macro_variables(run, built[0]), seed=context.get("seed", 0))
        keep_chat_macro_writes(run, result.variables)
        return result.text

    return expand
