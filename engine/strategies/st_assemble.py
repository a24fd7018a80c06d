"""The SillyTavern-exact request: a request file in, the ``messages`` SillyTavern would send out.

:func:`assemble_request` is the product's main job. It reads the request (:mod:`.st_request`), loads
the assets, gathers every world-info source SillyTavern scans (:func:`world_info_books`), activates
world info, lets the assembler place the blocks with the ``builtin-st`` strategy, and finishes the
array as SillyTavern does (:mod:`.st_postprocess`): squashed system messages (outside dry runs),
names, prompt post-processing. The DSH system projection is never applied here: it belongs to the
strategies that ask for it.

Where SillyTavern's behaviour depends on state a file does not carry (the chat lorebook, a persona's
lorebook, the Author's Note), the request names it; the defaults are SillyTavern's shipped ones.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# every stage of the request path is imported with this module, not inside the first request:
# a server's first request then costs what a later one does, its one-time work aside
from ..assembler import Assembler, AssemblyRequest
from ..assembler.sources import world_info_from_activation
from ..assets.cache import load_cached, parse_cached  # read-only views of validated assets, cached
from ..assets.frozen import plain_data
from ..assets.presets import parse_preset as parse_st_preset
from ..errors import Diagnostic, TemplateError, bound_diagnostics
from ..macros import MacroContext, expand_macros
from ..tokenizers import MessageCounter, get_tokenizer
from ..worldinfo import ChatTail, ScanContext, activate_world_info, to_json
from .builtin import builtin_strategy
from .sillytavern import prompt_sequence, squash_system_messages, st_registry
from .st_cache import derived, memo_count, scan_books, shared_frozen
from .st_chat import ChatMessage, StChat, parse_chat, parse_chat_text
from .st_history import ChatHistory, macro_messages, reachable_start
from .st_postprocess import PromptNames, history_item, post_process, to_claude, to_google
from .st_budget import MessageKind, fit, fits_without_counting
from .st_group import JOIN_MODES, join_group_cards
from .st_replay import SentSteps, kept_messages, sendable, st_record
from .st_request import StRequest, parse_request
from .st_warnings import asset_warnings, named_render_warning, said_before

__all__ = ["LoadedInputs", "StAssembly", "assemble_request", "load_inputs", "world_info_books"]

_PERSONA_POSITIONS = {"in_prompt": 0, "top_an": 2, "bottom_an": 3, "at_depth": 4, "none": 9}


@dataclass(slots=True)
class StAssembly:
    """The assembled request: ``messages`` is exactly what is sent."""

    messages: list[dict[str, Any]]
    warnings: list[Diagnostic]
    result: Any
    world_info: Any = None
    request_fields: dict[str, Any] = field(default_factory=dict)
    #: the request body's prompt part for ``options.target``: ``{"messages"}`` (OpenAI-compatible),
    #: ``{"system", "messages"}`` (Claude) or ``{"contents", "system_instruction"}`` (Google)
    body: dict[str, Any] = field(default_factory=dict)
    #: what the context budget allowed and what it left out (``None``: not counted, everything fit)
    budget: Any = None
    #: ``(message id, text, character ranges)`` per sent message, from which :attr:`provenance` is built
    provenance_source: list[Any] = field(default_factory=list, repr=False)
    #: what the provenance describes: the messages, or (with post-processing) the messages before it
    provenance_of: str = "messages"
    #: what was done to the assembler's logical messages before sending them: with its record, the replay
    sent_steps: SentSteps | None = None
    _provenance: list[dict[str, Any]] | None = field(default=None, repr=False, compare=False)

    @property
    def provenance(self) -> list[dict[str, Any]]:
        """Span provenance of each sent message: which prompt, card field, world-info entry (book and
        uid), macro or chat message produced each range (UTF-16 offsets, as JavaScript counts).

        Built on first access, the same list after: one dict per span is the largest part of a
        request with many macros (40,000 spans: ~10 MB), so ``to_dict`` twice must not build it twice.
        """
        if self._provenance is None:
            from ..assembler.compose import build_provenance

            self._provenance = build_provenance(self.provenance_source)
        return self._provenance

    def to_dict(self) -> dict[str, Any]:
        """The CLI's ``--json`` form: messages, warnings, nodes, provenance, trace and record."""
        # the assembler's fields read one by one: its ``to_dict`` would also build the provenance of
        # the logical messages, which this form does not include
        inner = self.result
        out: dict[str, Any] = {
            "messages": self.messages,
            "body": self.body,
            "request_fields": self.request_fields,
            "budget": self.budget.to_dict() if self.budget is not None else None,
            "warnings": [d.to_dict() for d in self.warnings],
            "logical_messages": inner.logical_messages,
            "nodes": inner.nodes,
            "provenance": self.provenance,
            "provenance_of": self.provenance_of,
            "trace": {"world_info": _wi_trace(self.world_info)},
            "record": inner.record if self.sent_steps is None else st_record(inner.record, self.sent_steps, self.body),
        }
        return out


def _wi_trace(activation: Any) -> Any:
    if activation is None:
        return None
    return to_json(activation).get("trace")


@dataclass(slots=True)
class LoadedInputs:
    """The request's assets, read and validated."""

    preset: dict[str, Any]
    preset_name: str
    card: dict[str, Any] | None
    card_model: Any
    books: list[tuple[Any, str | None, str]]  # (assets WorldBook, explicit source, where)
    chat: StChat
    diagnostics: list[Diagnostic]
    #: a group's member cards by member name (``group.cards``), as read like ``card``
    members: dict[str, dict[str, Any]] = field(default_factory=dict)


def _resolve(value: Any, base_dir: Path | None) -> Any:
    if isinstance(value, str):
        path = Path(value)
        if not path.is_absolute() and base_dir is not None:
            path = base_dir / path
        return path
    return value


def _load(kind: str, value: Any, base_dir: Path | None, where: str) -> tuple[Any, str]:
    """An asset model from an object or a path; errors keep their code and gain the request path."""
    value = _resolve(value, base_dir)
    try:
        if isinstance(value, Path):
            if not value.exists():
                raise TemplateError(f"{where}: no such file {str(value)!r}", code="REQUEST_INVALID", path=where)
            return load_cached(value, kind=kind), value.stem
        if not isinstance(value, Mapping):
            raise TemplateError(f"{where} must be an object or a path", code="REQUEST_INVALID", path=where)
        data = dict(value)
        if kind == "preset":
            return parse_cached(data, kind="preset", base_path=where), str(data.get("name") or "preset")
        if kind == "card":
            return parse_cached(data, kind="card", base_path=where), ""
        return parse_cached(data, kind="world_book", base_path=where), str(data.get("name") or "")
    except TemplateError as exc:
        if exc.code == "REQUEST_INVALID" or (exc.path or "").startswith(where):
            raise
        raise TemplateError(f"{where}: {exc.message}", code=exc.code,
                            path=where + (exc.path[1:] if exc.path and exc.path.startswith("$") else ""),
                            line=exc.line, column=exc.column) from None


def load_inputs(request: StRequest, base_dir: Path | None = None) -> LoadedInputs:
    """Read every asset the request names (objects or paths)."""
    diags: list[Diagnostic] = []
    preset_model, preset_name = _load("preset", request.preset, base_dir, "$.preset")
    diags.extend(asset_warnings(preset_model, "$.preset", _resolve(request.preset, base_dir)))
    preset = preset_model.model_dump(mode="json", exclude_none=True)
    card = card_model = None
    if request.card is not None:
        card_model, _ = _load("card", request.card, base_dir, "$.card")
        diags.extend(asset_warnings(card_model, "$.card", _resolve(request.card, base_dir)))
        dumped = card_model.model_dump(mode="json")
        data = dumped.get("data", dumped)
        card = {k: v for k, v in data.items() if k != "character_book"}
    books: list[tuple[Any, str | None, str]] = []
    for i, item in enumerate(request.books):
        where = f"$.books[{i}]"
        source = None
        if isinstance(item, Mapping) and "book" in item and "entries" not in item:
            source = item.get("source")
            item, where = item["book"], f"{where}.book"
        model, stem = _load("world_book", item, base_dir, where)
        diags.extend(asset_warnings(model, where, _resolve(item, base_dir)))
        if not getattr(model, "name", None) and stem:
            model = model.with_name(stem)
        books.append((model, source, where))
    chat_value = _resolve(request.chat, base_dir)
    if isinstance(chat_value, Path):
        try:
            text = chat_value.read_text(encoding="utf-8")
        except OSError as exc:
            raise TemplateError(f"$.chat: cannot read {str(chat_value)!r}: {exc.strerror or exc}",
                                code="REQUEST_INVALID", path="$.chat") from None
        chat = parse_chat_text(text, hint=chat_value.name)
    else:
        chat = parse_chat(chat_value, path="$.chat")
    members: dict[str, dict[str, Any]] = {}
    member_names = set(request.group.members) if request.group is not None else set()
    for i, value in enumerate(request.group.cards if request.group is not None else ()):
        where = f"$.group.cards[{i}]"
        model, _ = _load("card", value, base_dir, where)
        diags.extend(asset_warnings(model, where, _resolve(value, base_dir)))
        dumped = model.model_dump(mode="json")
        data = dumped.get("data", dumped)
        name = str(data.get("name") or "")
        if name not in member_names:
            raise TemplateError(f"{where}: the card of {name!r} is not a member of the group ($.group.members)",
                                code="REQUEST_INVALID", path=where)
        if name in members:
            raise TemplateError(f"{where}: a second card for the member {name!r}", code="REQUEST_INVALID", path=where)
        members[name] = {k: v for k, v in data.items() if k != "character_book"}
    return LoadedInputs(preset, preset_name, card, card_model, books, chat, diags, members)


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


#: what SillyTavern uses for a setting a preset does not carry: importing a preset changes only
#: the settings it has, so a missing one keeps the value of a fresh install (its shipped
#: ``settings.json``, else the code default where that file has none)
ST_PRESET_DEFAULTS: dict[str, Any] = {
    "openai_max_context": 4095,
    "openai_max_tokens": 300,
    "names_behavior": 0,
    "squash_system_messages": False,
    "wi_format": "{0}",
    "scenario_format": "{{scenario}}",
    "personality_format": "{{personality}}",
    "new_chat_prompt": "[Start a new Chat]",
    "new_group_chat_prompt": "[Start a new group chat. Group members: {{group}}]",
    "new_example_chat_prompt": "[Example Chat]",
    "continue_nudge_prompt": "[Continue your last message without repeating its original content.]",
    "group_nudge_prompt": "[Write the next reply only as {{char}}.]",
    "impersonation_prompt": "[Write your next reply from the point of view of {{user}}, using the chat history so far "
                            "as a guideline for the writing style of {{user}}. Write 1 reply only in internet RP style. "
                            "Don't write as {{char}} or system. Don't describe actions of {{char}}.]",
    "send_if_empty": "",
    "continue_prefill": False,
    "continue_postfix": " ",
    "use_sysprompt": False,
    "assistant_prefill": "",
    "assistant_impersonation": "",
}


def with_st_defaults(preset: Mapping[str, Any]) -> dict[str, Any]:
    """The preset with every setting it lacks (or leaves null) at SillyTavern's fresh-install value."""
    out = dict(preset)
    for key, value in ST_PRESET_DEFAULTS.items():
        if out.get(key) is None:
            out[key] = value
    return out


#: card fields SillyTavern reads through ``baseChatReplace(field.trim())`` (``getCharacterCardFields``)
_TRIMMED_FIELDS = ("description", "personality", "scenario", "mes_example", "system_prompt",
                   "post_history_instructions", "creator_notes")


def _card_as_sillytavern_reads_it(card: Mapping[str, Any]) -> dict[str, Any]:
    """The card fields as SillyTavern's prompt builder sees them: trimmed, carriage returns removed.

    SillyTavern has no nickname: ``{{char}}`` is the card's ``name``, so ``nickname`` is dropped.
    """
    out = {k: v for k, v in card.items() if k != "nickname"}
    for key in _TRIMMED_FIELDS:
        if isinstance(out.get(key), str):
            out[key] = out[key].strip().replace("\r", "")
    ext = out.get("extensions")
    if isinstance(ext, Mapping) and isinstance(ext.get("depth_prompt"), Mapping) \
            and isinstance(ext["depth_prompt"].get("prompt"), str):
        dp = dict(ext["depth_prompt"])
        dp["prompt"] = dp["prompt"].strip().replace("\r", "")
        out["extensions"] = {**ext, "depth_prompt": dp}
    return out


def _counter(tokenizer: str) -> Any:
    """The budget pass's message counter for ``tokenizer``, kept between requests (counts cached by content)."""
    counter = _counters.get(tokenizer)
    if counter is None:
        counter = _counters[tokenizer] = MessageCounter(get_tokenizer(tokenizer))
    return counter


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


def _chat_macro_expander(context: dict[str, Any]) -> Callable[[str], str]:
    """Expands a chat message's macros, as SillyTavern prepares each history message
    (``populateChatHistory`` passes every one through ``preparePrompt``).

    The macro context (with the chat of :func:`_macro_chat`) is built once, on the first message
    that has a macro.
    """
    built: list[MacroContext] = []

    def expand(text: str) -> str:
        if not built:
            built.append(MacroContext.from_dict(context))
        return expand_macros(text, built[0], seed=context.get("seed", 0)).text

    return expand


def _author_note_active(interval: int, users: int) -> bool:
    """SillyTavern's interval rule (``setFloatingPrompt``): counted in the chat's ``users`` user messages."""
    if interval == 1:
        return True
    if users <= 0 or interval <= 0:
        return False
    left = users % interval if users >= interval else interval - users
    return left == 0


def _wi_entries_for_spans(entries: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    return [e for e in entries if isinstance(e.get("content"), str) and e["content"].strip()]


_WI_BLOCKS = ("preset:worldInfoBefore", "preset:worldInfoAfter", "preset:inject:", "preset:authorsNote",
              "preset:dialogueExamples")


def _with_entry_spans(text: str, spans: list[Any], entries: list[Mapping[str, Any]]) -> list[Any]:
    """World-info spans narrowed to the entry each range came from: book, uid and comment.

    A world-info marker's range holds the activated entries' texts joined; each entry's text found
    in it (in placement order) gets a range of its own naming the entry, so a reader sees which
    lorebook entry put which words in the request. Text not found as written (an entry whose macros
    expanded) keeps the marker's range.
    """
    if not entries or not any(str(info.get("block_id") or "").startswith(_WI_BLOCKS) for _a, _b, info in spans):
        return spans
    out: list[Any] = []
    for start, end, info in spans:
        if not str(info.get("block_id") or "").startswith(_WI_BLOCKS):
            out.append((start, end, info))
            continue
        cursor = start
        for entry in entries:
            at = text.find(entry["content"], cursor, end)
            if at < 0:
                continue
            if at > cursor:
                out.append((cursor, at, info))
            stop = at + len(entry["content"])
            out.append((at, stop, {**info, "kind": "world_info", "book": entry.get("book"), "uid": entry.get("uid"),
                                   "comment": entry.get("comment") or None}))
            cursor = stop
        if cursor < end:
            out.append((cursor, end, info))
    return out


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


def _fit(logical: list[dict[str, Any]], kinds: list[MessageKind], block_of: Mapping[str, str],
         preset: Mapping[str, Any], req: StRequest, max_context: int, max_tokens: int) -> Any:
    """The budget pass: ``(kept indexes, report)``, or ``None`` when surely everything fits uncounted."""
    budget = max_context - max_tokens
    name = req.budget.tokenizer
    if name in ("o200k", "cl100k", "words") and fits_without_counting(logical, budget):
        return None
    counter = _counter(name)
    # a prompt without text costs nothing: SillyTavern counts a message's tokens only when it has
    # content (``Message.createAsync``)
    return fit(logical, kinds, counter, max_context=max_context, max_tokens=max_tokens,
               pin_examples=req.budget.examples == "keep")


_counters: dict[str, Any] = {}


def _has_chat_history(preset: Mapping[str, Any], gen: str) -> bool:
    """Whether the preset's prompt sequence for ``gen`` holds the chat-history marker (once per
    cached preset). The parser only reads, so it gets the cached plain data itself, not a copy
    (a JSON round trip of the whole preset, a fifth of a fresh process's first request)."""
    return derived(("has_chat_history", gen), preset, lambda: any(
        p.identifier == "chatHistory"
        for p in prompt_sequence(parse_st_preset({k: plain_data(v) for k, v in preset.items()}), gen)[0]))


_REGISTRY: list[Any] = []


def _registry() -> Any:
    """The sources the request path assembles with (built-ins and the preset source): built once,
    as nothing registers into it (each assembly works on its own capture of the registrations)."""
    if not _REGISTRY:
        _REGISTRY.append(st_registry())
    return _REGISTRY[0]


_LAST_CHAT_MESSAGE = re.compile(r"\{\{\s*lastChatMessage\s*\}\}", re.I)


def _wi_counter(tokenizer: str) -> Any:
    """The world-info budget's counter: the request's tokenizer, as SillyTavern counts world info.

    Its counts are remembered between requests (the same entries are counted request after
    request), and it carries the tokenizer's promise that no count exceeds the text's UTF-8 bytes
    (:data:`tavernbox.tokenizers.AT_MOST_UTF8_BYTES`): the activation then counts only once the
    activated entries' bytes could reach the budget, so a budget far from full never loads the
    tokenizer (building the o200k encoding is most of a fresh process's first request).
    """
    return memo_count(get_tokenizer(tokenizer).count)


def assemble_request(request: Mapping[str, Any] | StRequest, *, base_dir: str | Path | None = None) -> StAssembly:
    """Assemble what SillyTavern sends for ``request`` (a request-file object, see :mod:`.st_request`)."""
    try:
        return _assemble_request(request, base_dir=base_dir)
    except TemplateError as exc:
        if exc.code != "ASSEMBLY_EMPTY":
            raise
        # SillyTavern would send ``"messages": []``, which chat-completion APIs refuse: say why it is empty
        raise TemplateError(
            "nothing to send: the preset's enabled prompts, the card and the world info give no text, and no chat "
            "history is sent (SillyTavern would send an empty messages array, which chat-completion APIs refuse); "
            "enable a prompt with content or a chatHistory marker in the preset's prompt_order, or use a card with "
            "a description", code="ASSEMBLY_EMPTY") from None


def _assemble_request(request: Mapping[str, Any] | StRequest, *, base_dir: str | Path | None = None) -> StAssembly:
    req = parse_request(request)
    base = Path(base_dir) if base_dir is not None else None
    inputs = load_inputs(req, base)
    warnings = list(inputs.diagnostics)
    preset = with_st_defaults(inputs.preset)
    card = inputs.card or {}
    user = req.user.name
    # the persona as SillyTavern reads it (``baseChatReplace(persona_description.trim())``)
    persona_text = req.user.persona.description.strip().replace("\r", "")
    char = str(card.get("name") or "Assistant")
    behavior = req.options.names_behavior if req.options.names_behavior is not None else int(preset["names_behavior"])
    group = req.group is not None
    read_card = _card_as_sillytavern_reads_it(card) if inputs.card is not None else None
    group_prompts: list[dict[str, Any]] = []
    join = req.group is not None and req.group.generation_mode in JOIN_MODES
    overrides = {"scenario": inputs.chat.scenario, "mes_example": inputs.chat.mes_example}
    if join:  # the members' cards joined into the replying member's (``getGroupCharacterCardsLazy``)
        read_card, group_prompts, group_diags = join_group_cards(read_card, inputs.members, req.group, user,
                                                                 _card_as_sillytavern_reads_it, overrides)
        warnings.extend(group_diags)
    elif read_card is not None:
        # the chat's overrides, when set, replace the card's fields (``getCharacterCardFieldsLazy``)
        read_card.update({k: v.strip().replace("\r", "") for k, v in overrides.items() if v})
    muted = {"muted": list(req.group.disabled_members)} if req.group is not None and req.group.disabled_members else {}
    # the chat stays as parsed messages: only what the budget can reach becomes history (st_history)
    chat: list[ChatMessage] = list(inputs.chat.messages)
    gen = req.generation.type
    typed = req.generation.input
    appended = ""  # what generating adds to the chat first: "input" or "send_if_empty"
    if typed and gen != "quiet":  # what the user typed is sent as a message before generating
        chat.append(ChatMessage("user", typed))
        appended = "input"
    elif typed == "" and gen == "normal" and str(preset.get("send_if_empty") or "").strip():
        chat.append(ChatMessage("user", str(preset["send_if_empty"]).strip()))
        appended = "send_if_empty"
    prefill_mode = gen == "continue" and bool(preset.get("continue_prefill"))
    swiped: ChatMessage | None = None
    if gen == "regenerate" and chat and chat[-1].role != "user":
        chat.pop()  # ``Generate`` deletes the last message unless it is the user's, a narrator's too
    elif gen == "swipe" and chat and chat[-1].role == "assistant":
        # the message being replaced is not part of the prompt; it stays in the chat the macros read
        swiped = chat.pop()
    roles = [m.role for m in chat]
    # a dry run sends nothing, so neither the typed input nor ``send_if_empty`` is in SillyTavern's
    # chat yet (``Generate`` adds them only when not ``dryRun``)
    unsent = 1 if req.options.dry_run and appended else 0
    macro_chat, has_first = _macro_chat(chat[:len(chat) - unsent], roles[:len(roles) - unsent], swiped)
    macro_base = {"user": user, "char": char, "persona": persona_text,
                  "character": {k: v for k, v in (read_card if read_card is not None else card).items()
                                if k != "extensions"},
                  "seed": req.options.seed, **({"now": req.options.now} if req.options.now else {}),
                  **({"group": list(req.group.members)} if req.group else {}), **muted}
    first = macro_chat["chat"][0] if has_first else None
    if first is not None and "{{" in first["content"]:
        # ``Generate`` substitutes the first message's macros in place before the prompts are built
        first["content"] = expand_macros(first["content"], {**macro_base, **macro_chat},
                                         seed=macro_base.get("seed", 0)).text
    expand_chat_macros = _chat_macro_expander({**macro_base, **macro_chat})
    chat_history = ChatHistory(chat, behavior=behavior, user=user, char=char, group=group, expand=expand_chat_macros)
    history_end = len(chat)  # the history is chat messages [0, history_end)
    continued: dict[str, Any] | None = None
    continued_text = ""
    if gen == "continue" and chat:
        continued = None if prefill_mode else chat_history.item(len(chat) - 1)
        # ``{{lastChatMessage}}`` is the message as written, without the name prefix names_behavior adds
        continued_text = chat[-1].content.replace("\r", "")
        if prefill_mode:  # taken out before the in-chat injections, sent last (``continuePrefill``)
            history_end -= 1
            # made from the history message before ``populateChatHistory`` prepares it: its
            # macros are sent as written
            m = chat[-1]
            continued = history_item(len(chat) - 1, m.role, m.content or "", m.name, m.force_avatar, m.id,
                                     behavior=behavior, user=user, char=char, group=group)
    persona = req.user.persona
    assets: dict[str, Any] = {
        "st_preset": preset,
        "st_preset_name": inputs.preset_name,
        "user": user,
        "persona": {"name": user, "description": persona_text,
                    "position": _PERSONA_POSITIONS[persona.position], "depth": persona.depth, "role": persona.role},
        "prefer_character_prompt": req.options.prefer_character_prompt,
        "prefer_character_jailbreak": req.options.prefer_character_jailbreak,
        "generation_type": gen,
        # ``Generate`` substitutes the quiet prompt's macros before the prompt is prepared, which
        # substitutes them again: a macro's value holding a macro is expanded too
        "quiet_prompt": expand_chat_macros(req.generation.quiet_prompt)
        if gen == "quiet" and "{{" in req.generation.quiet_prompt else req.generation.quiet_prompt,
        "continue_prefill": prefill_mode,
        "last_chat_role": roles[history_end - 1] if history_end else None,
    }
    if read_card is not None:
        assets["character"] = read_card
    if group_prompts:
        assets["group_depth_prompts"] = group_prompts
    note = req.author_note
    note_active = _author_note_active(note.interval, roles.count("user"))
    assets["author_note"] = {"content": note.content if note_active else "", "depth": note.depth,
                             "role": note.role, "position": note.position, "active": note_active}
    macro_extra: dict[str, Any] = {}
    if group and req.group is not None:
        macro_extra["group"] = list(req.group.members)
        macro_extra.update(muted)
        assets["group"] = list(req.group.members)
    books, book_diags = world_info_books(inputs, req)
    warnings.extend(book_diags)
    activation = None
    if books:
        wi = req.world_info.model_dump()
        # world info's budget is a share of the prompt's room: the context minus the reply
        # (``getMaxPromptTokens``)
        wi["max_context"] = (req.budget.max_context or int(preset["openai_max_context"])) - \
            (req.budget.max_tokens if req.budget.max_tokens is not None else int(preset["openai_max_tokens"]))
        # a narrator message is part of the chat SillyTavern scans (only hidden ones are not), so it
        # goes in as a message of its speaker ("System" unless named); only the newest messages any
        # scan reads are built (``ChatTail``)
        speakers = {"user": user, "system": "System", "assistant": char}

        def newest(n: int) -> list[dict[str, Any]]:
            return [{"role": "assistant" if m.role == "system" else m.role, "name": m.name or speakers[m.role],
                     "content": m.content} for m in chat[max(0, len(chat) - n):]]
        dp = card.get("extensions", {}).get("depth_prompt") if isinstance(card.get("extensions"), Mapping) else None
        # the scan reads the card fields as sent: joined in a join mode, overridden by the chat
        sent = read_card if read_card is not None else card
        context = ScanContext(
            persona_description=persona.description,
            character_description=str(sent.get("description") or ""),
            character_personality=str(sent.get("personality") or ""),
            character_depth_prompt=str(dp.get("prompt") or "") if isinstance(dp, Mapping) else "",
            scenario=str(sent.get("scenario") or ""),
            creator_notes=str(card.get("creator_notes") or ""),
        )
        activation = activate_world_info(scan_books(books), ChatTail(len(chat), newest), wi, seed=req.options.seed,
                                         context=context,
                                         token_counter=_wi_counter(req.budget.tokenizer))
        warnings.extend(d for d in activation.diagnostics if d.severity != "info")
        # the same activated entries give the same frozen value, which the assembler takes as it is
        assets["world_info"] = shared_frozen(world_info_from_activation(activation))
        outlets = {name: activation.by_position.outlet_text(name) for name in activation.by_position.outlets}
        if outlets:
            macro_extra["outlets"] = outlets
    if req.options.now is not None:
        macro_extra["now"] = req.options.now
    if macro_extra:
        assets["macro_context"] = macro_extra
    if not _has_chat_history(preset, gen):
        # no chat-history marker: SillyTavern sends no history, and so none of the in-chat prompts
        # that would have been spliced into it (``populateChatHistory`` returns at once)
        history_end = 0
        assets["no_chat_history"] = True
    max_context = req.budget.max_context or int(preset["openai_max_context"])
    max_tokens = req.budget.max_tokens if req.budget.max_tokens is not None else int(preset["openai_max_tokens"])
    pre_cut = reachable_start(chat_history, history_end, max_context - max_tokens, lambda: _counter(req.budget.tokenizer))
    history = chat_history.items(pre_cut, history_end)
    input_ids = [history[-1]["id"]] if history and history[-1]["role"] == "user" else []
    if req.options.dry_run:
        # SillyTavern's dry run adds nothing to the chat first (what was typed stays unsent) and
        # builds the prompt from the stored chat whole; ``populateChatHistory`` then adds
        # ``send_if_empty`` after an assistant message, so only there is that one sent
        after_reply = appended == "send_if_empty" and len(chat) > 1 and chat[-2].role == "assistant"
        if not appended or after_reply:
            input_ids = []
    # the prompts' chat macros read the chat as stored, whatever part of it is sent (``_macro_chat``)
    assets["macro_context"] = {**assets.get("macro_context", {}), **macro_chat}
    result = Assembler(_registry()).assemble(AssemblyRequest.from_dict({
        "preset": builtin_strategy("builtin-st"), "messages": history, "input_ids": input_ids, "assets": assets,
        "preview": req.options.dry_run, "system_prompt_update": "in-history", "seed": req.options.seed}))
    warnings.extend(named_render_warning(d, preset, inputs.preset_name, assets.get("world_info") or (), char)
                    for d in result.diagnostics
                    if d.severity in ("warning", "error") and not said_before(d, inputs.diagnostics))
    squash = req.options.squash_system_messages if req.options.squash_system_messages is not None else \
        bool(preset.get("squash_system_messages", False))
    logical = [dict(m) for m in result.logical_messages]
    block_of = {mid: str(n.get("block_id") or "") for n in result.nodes for mid in n.get("input_message_ids", ())}
    native_index = {h["id"]: i + pre_cut for i, h in enumerate(history)}
    if continued is not None and not prefill_mode:
        # ``populateChatHistory``: the continued message leaves the history and goes, with the
        # continue nudge, after everything but the control prompts
        at = next((i for i, m in enumerate(logical) if m["id"] == continued["id"]), None)
        nudge = next((i for i, m in enumerate(logical) if block_of.get(m["id"]) == "preset:control:continueNudge"),
                     None)
        if nudge is not None:  # ``substituteParamsExtended(nudge, {lastChatMessage})``, the text as it is
            text = _LAST_CHAT_MESSAGE.sub(lambda _m: continued_text.strip(), str(logical[nudge]["content"]))
            logical[nudge] = {**logical[nudge], "content": text}
        if at is not None:
            moved = logical.pop(at)
            nudge = nudge - 1 if nudge is not None and nudge > at else nudge
            logical.insert(nudge if nudge is not None else len(logical), moved)
            block_of[moved["id"]] = "preset:control:continued"
    if continued is not None and prefill_mode:
        prefill = str(preset.get("assistant_prefill") or "") if req.options.target == "claude" and \
            continued["role"] == "assistant" else ""
        text = "\n\n".join(x for x in (prefill, continued["content"]) if x)
        item = {"id": "continue-prefill", "role": continued["role"], "content": text}
        if continued.get("name"):
            item["name"] = continued["name"]
        logical.append(item)
        block_of[item["id"]] = "preset:control:continuePrefill"
    kinds = [_kind(block_of.get(m["id"], ""), native_index.get(m["id"])) for m in logical]
    examples = req.budget.examples
    if examples == "disabled":
        keep_rows = [i for i, k in enumerate(kinds) if k.kind != "example"]
        logical, kinds = [logical[i] for i in keep_rows], [kinds[i] for i in keep_rows]
    report = _fit(logical, kinds, block_of, preset, req, max_context, max_tokens)
    if report is not None:
        kept, budget_report = report
        logical = [logical[i] for i in kept]
        if pre_cut:
            budget_report.dropped_messages = list(range(pre_cut)) + budget_report.dropped_messages
            counter = _counter(req.budget.tokenizer)
            # built and counted only when asked for (as the budget pass prices them: empty ones too)
            budget_report.unplaced_tokens = lambda: sum(map(counter.message, chat_history.items(0, pre_cut)))
    else:
        budget_report = None
    spans_of: dict[str, Any] = {m["id"]: sp for m, sp in zip(result.logical_messages, result.logical_spans)}
    for m in logical:
        if m["id"] not in spans_of:  # a message made here (the continued message sent last)
            spans_of[m["id"]] = [(0, len(str(m.get("content") or "")), {"kind": "chat_message",
                                                                         "block_id": block_of.get(m["id"])})]
    kept = kept_messages(logical, result.logical_messages)
    separators: set[str] = set()
    if squash and not req.options.dry_run:
        separators = {m["id"] for m in logical
                      if block_of.get(m["id"], "").endswith((":newChat", ":groupNudge"))}
        logical = squash_system_messages(logical, separators, spans_of)
    entries_by_key = _wi_entries_for_spans(assets.get("world_info") or [])
    span_source: list[tuple[str, str, list[Any]]] = []
    final = []
    for m in logical:
        item = sendable(m)
        if item is not None:
            final.append(item)
            text = item["content"] if isinstance(item["content"], str) else ""
            span_source.append((m["id"], text, _with_entry_spans(text, spans_of.get(m["id"], []), entries_by_key)))
    kind = req.options.post_processing
    names = PromptNames(char=char, user=user, group=tuple(req.group.members) if req.group else ())
    if kind not in ("", "none"):
        final = post_process(final, kind, names)
    fields: dict[str, Any] = {"custom_prompt_post_processing": "" if kind == "none" else kind, "char_name": char,
                              "user_name": user, "group_names": list(names.group)}
    use_sysprompt = req.options.use_sysprompt if req.options.use_sysprompt is not None else \
        bool(preset.get("use_sysprompt", False))
    prefill = ""
    if req.options.target == "claude":
        prefill = str(preset.get("assistant_prefill") or "")
        body: dict[str, Any] = to_claude(final, names, use_sysprompt=use_sysprompt, prefill=prefill)
        fields["assistant_prefill"] = prefill
    elif req.options.target == "google":
        body = to_google(final, names, use_sysprompt=use_sysprompt)
    else:
        body = {"messages": final}
    if gen == "impersonate" and req.options.target == "claude":
        fields["assistant_impersonation"] = str(preset.get("assistant_impersonation") or "")
    provenance_of = "messages" if kind in ("", "none") else "messages before post-processing"
    steps = SentSteps(kept, squash and not req.options.dry_run, sorted(separators), kind,
                      {"char": names.char, "user": names.user, "group": list(names.group)},
                      req.options.target or "openai", use_sysprompt, prefill)
    return StAssembly(final, bound_diagnostics(warnings), result, activation, fields, body, budget_report,
                      provenance_source=span_source, provenance_of=provenance_of, sent_steps=steps)


def read_request_file(path: str) -> tuple[Any, Path | None]:
    """A request file's JSON (``-``: standard input) and the folder its relative paths resolve against."""
    import sys

    from .st_request import read_request_text

    if path == "-":
        return read_request_text(sys.stdin.read()), Path.cwd()
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise TemplateError(f"cannot read the request {path!r}: {exc.strerror or exc}", code="REQUEST_INVALID") from None
    return read_request_text(text), Path(path).resolve().parent
