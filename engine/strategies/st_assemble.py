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

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import Diagnostic, TemplateError
from .st_chat import StChat, parse_chat, parse_chat_text
from .st_postprocess import PromptNames, history_messages, post_process, to_claude, to_google
from .st_request import StRequest, parse_request

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

    def to_dict(self) -> dict[str, Any]:
        """The CLI's ``--json`` form: messages, warnings, nodes, provenance, trace and record."""
        full = self.result.to_dict()
        out: dict[str, Any] = {
            "messages": self.messages,
            "body": self.body,
            "request_fields": self.request_fields,
            "warnings": [d.to_dict() for d in self.warnings],
            "logical_messages": full.get("logical_messages"),
            "nodes": full.get("nodes"),
            "provenance": full.get("provenance"),
            "trace": {"world_info": _wi_trace(self.world_info)},
            "record": full.get("record"),
        }
        return out


def _wi_trace(activation: Any) -> Any:
    if activation is None:
        return None
    from ..worldinfo import to_json

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


def _resolve(value: Any, base_dir: Path | None) -> Any:
    if isinstance(value, str):
        path = Path(value)
        if not path.is_absolute() and base_dir is not None:
            path = base_dir / path
        return path
    return value


def _load(kind: str, value: Any, base_dir: Path | None, where: str) -> tuple[Any, str]:
    """An asset model from an object or a path; errors keep their code and gain the request path."""
    from ..assets import load_asset, parse_card, parse_preset, parse_world_book

    value = _resolve(value, base_dir)
    try:
        if isinstance(value, Path):
            if not value.exists():
                raise TemplateError(f"{where}: no such file {str(value)!r}", code="REQUEST_INVALID", path=where)
            loaded = load_asset(value, kind=kind)
            return loaded.model, value.stem
        if not isinstance(value, Mapping):
            raise TemplateError(f"{where} must be an object or a path", code="REQUEST_INVALID", path=where)
        data = dict(value)
        if kind == "preset":
            return parse_preset(data, base_path=where), str(data.get("name") or "preset")
        if kind == "card":
            return parse_card(data, base_path=where), ""
        return parse_world_book(data, base_path=where), str(data.get("name") or "")
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
    preset = preset_model.model_dump(mode="json", exclude_none=True)
    card = card_model = None
    if request.card is not None:
        card_model, _ = _load("card", request.card, base_dir, "$.card")
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
    return LoadedInputs(preset, preset_name, card, card_model, books, chat, diags)


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
    out: list[dict[str, Any]] = []
    for model, source, _where in inputs.books:
        name = getattr(model, "name", None) or "book"
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
    embedded = inputs.card_model.character_book if inputs.card_model is not None else None
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


def _author_note_active(interval: int, chat: Sequence[Mapping[str, Any]]) -> bool:
    """SillyTavern's interval rule (``setFloatingPrompt``): counted in user messages of the chat."""
    if interval == 1:
        return True
    users = sum(1 for m in chat if m["role"] == "user")
    if users <= 0 or interval <= 0:
        return False
    left = users % interval if users >= interval else interval - users
    return left == 0


def assemble_request(request: Mapping[str, Any] | StRequest, *, base_dir: str | Path | None = None) -> StAssembly:
    """Assemble what SillyTavern sends for ``request`` (a request-file object, see :mod:`.st_request`)."""
    from ..assembler import Assembler, AssemblyRequest
    from ..assembler.sources import world_info_from_activation
    from ..worldinfo import ScanContext, activate_world_info
    from .builtin import builtin_strategy
    from .sillytavern import st_messages, st_registry

    req = parse_request(request)
    base = Path(base_dir) if base_dir is not None else None
    inputs = load_inputs(req, base)
    warnings = list(inputs.diagnostics)
    preset = inputs.preset
    card = inputs.card or {}
    user = req.user.name
    char = str(card.get("name") or "Assistant")
    behavior = req.options.names_behavior if req.options.names_behavior is not None else \
        int(preset.get("names_behavior", 0) or 0)
    group = req.group is not None
    chat = [m.to_dict() for m in inputs.chat.messages]
    history = history_messages(chat, behavior=behavior, user=user, char=char, group=group)
    persona = req.user.persona
    assets: dict[str, Any] = {
        "st_preset": preset,
        "st_preset_name": inputs.preset_name,
        "user": user,
        "persona": {"name": user, "description": persona.description,
                    "position": _PERSONA_POSITIONS[persona.position], "depth": persona.depth, "role": persona.role},
        "prefer_character_prompt": req.options.prefer_character_prompt,
        "prefer_character_jailbreak": req.options.prefer_character_jailbreak,
        "generation_type": "normal",
    }
    if inputs.card is not None:
        assets["character"] = card
    note = req.author_note
    note_active = _author_note_active(note.interval, chat)
    assets["author_note"] = {"content": note.content if note_active else "", "depth": note.depth,
                             "role": note.role, "position": note.position, "active": note_active}
    macro_extra: dict[str, Any] = {}
    if group and req.group is not None:
        macro_extra["group"] = list(req.group.members)
    books, book_diags = world_info_books(inputs, req)
    warnings.extend(book_diags)
    activation = None
    if books:
        wi = req.world_info.model_dump()
        wi["max_context"] = int(preset.get("openai_max_context") or 4095)
        scan_chat = [{"role": m["role"], "name": m.get("name") or (user if m["role"] == "user" else char),
                      "content": m["content"]} for m in chat]
        dp = card.get("extensions", {}).get("depth_prompt") if isinstance(card.get("extensions"), Mapping) else None
        context = ScanContext(
            persona_description=persona.description,
            character_description=str(card.get("description") or ""),
            character_personality=str(card.get("personality") or ""),
            character_depth_prompt=str(dp.get("prompt") or "") if isinstance(dp, Mapping) else "",
            scenario=str(card.get("scenario") or ""),
            creator_notes=str(card.get("creator_notes") or ""),
        )
        activation = activate_world_info(books, scan_chat, wi, seed=req.options.seed, context=context)
        warnings.extend(d for d in activation.diagnostics if d.severity != "info")
        assets["world_info"] = world_info_from_activation(activation)
        outlets = {name: activation.by_position.outlet_text(name) for name in activation.by_position.outlets}
        if outlets:
            macro_extra["outlets"] = outlets
    if req.options.now is not None:
        macro_extra["now"] = req.options.now
    if macro_extra:
        assets["macro_context"] = macro_extra
    input_ids = [history[-1]["id"]] if history and history[-1]["role"] == "user" else []
    result = Assembler(st_registry()).assemble(AssemblyRequest.from_dict({
        "preset": builtin_strategy("builtin-st"), "messages": history, "input_ids": input_ids, "assets": assets,
        "preview": req.options.dry_run, "system_prompt_update": "in-history", "seed": req.options.seed}))
    warnings.extend(d for d in result.diagnostics if d.severity in ("warning", "error"))
    squash = req.options.squash_system_messages if req.options.squash_system_messages is not None else \
        bool(preset.get("squash_system_messages", False))
    messages = st_messages(result, squash=squash and not req.options.dry_run)
    final = []
    for m in messages:
        item: dict[str, Any] = {"role": m["role"], "content": m["content"]}
        if m.get("name"):
            item["name"] = m["name"]
        if m.get("tool_calls"):
            item["tool_calls"] = m["tool_calls"]
        if m["role"] == "tool" and m.get("tool_call_id"):
            item["tool_call_id"] = m["tool_call_id"]
        if item["content"] or item.get("tool_calls"):
            final.append(item)
    kind = req.options.post_processing
    if kind not in ("", "none"):
        final = post_process(final, kind, PromptNames(char=char, user=user,
                                                      group=tuple(req.group.members) if req.group else ()))
    fields: dict[str, Any] = {"custom_prompt_post_processing": "" if kind == "none" else kind, "char_name": char,
                              "user_name": user}
    names = PromptNames(char=char, user=user, group=tuple(req.group.members) if req.group else ())
    use_sysprompt = req.options.use_sysprompt if req.options.use_sysprompt is not None else \
        bool(preset.get("use_sysprompt", False))
    if req.options.target == "claude":
        prefill = str(preset.get("assistant_prefill") or "")
        body: dict[str, Any] = to_claude(final, names, use_sysprompt=use_sysprompt, prefill=prefill)
        fields["assistant_prefill"] = prefill
    elif req.options.target == "google":
        body = to_google(final, names, use_sysprompt=use_sysprompt)
    else:
        body = {"messages": final}
    return StAssembly(final, warnings, result, activation, fields, body)


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
