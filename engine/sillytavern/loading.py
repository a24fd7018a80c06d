"""Loading the assets: every asset a request names (objects or paths), read and validated once.

The first stage of SillyTavern's generation as tavernbox runs it: the request is parsed
(:mod:`.request`), its preset, card, books, group cards and chat are read (through the asset cache:
read-only views of validated assets), and the preset gains SillyTavern's fresh-install value of
every setting it lacks. The result, :class:`Loaded`, is what every later stage starts from.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ..assets.cache import load_cached, parse_cached  # read-only views of validated assets, cached
from ..assets.chats import StChat, parse_chat, read_chat_file
from ..errors import Diagnostic, TemplateError
from .diagnostics import asset_warnings
from .passes import TextPass, request_passes
from .request import StRequest, parse_request

__all__ = ["Loaded", "LoadedInputs", "ST_PRESET_DEFAULTS", "load", "load_inputs", "read_request_file",
           "with_st_defaults"]


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
    preset_source = request.preset
    if preset_source is None:
        # text completion reads no preset: its context size and reply length are the text-completion
        # settings' (SillyTavern's first-run 8192 and 350)
        preset_source = {"name": "text completion", "openai_max_context": 8192, "openai_max_tokens": 350}
    preset_model, preset_name = _load("preset", preset_source, base_dir, "$.preset")
    diags.extend(asset_warnings(preset_model, "$.preset", _resolve(preset_source, base_dir)))
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
        chat = read_chat_file(chat_value, where="$.chat")
        # what reading the file went through (the Windows-1252 fallback), said against the request's chat
        diags.extend(replace(d, path="$.chat") for d in chat.diagnostics if d.severity != "info")
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

def read_request_file(path: str) -> tuple[Any, Path | None]:
    """A request file's JSON (``-``: standard input) and the folder its relative paths resolve against."""
    import sys

    from .request import read_request_text

    if path == "-":
        return read_request_text(sys.stdin.read()), Path.cwd()
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise TemplateError(f"cannot read the request {path!r}: {exc.strerror or exc}", code="REQUEST_INVALID") from None
    return read_request_text(text), Path(path).resolve().parent


@dataclass(slots=True)
class Loaded:
    """The request and its assets: the state every later stage starts from."""

    req: StRequest
    inputs: LoadedInputs
    #: the preset with SillyTavern's value of every setting it lacks (:func:`with_st_defaults`)
    preset: dict[str, Any]
    #: what the request's material went through, in the order the stages met it
    warnings: list[Diagnostic]
    #: the text passes this request runs (:mod:`.passes`), in order
    passes: tuple[TextPass, ...] = ()
    #: the folder the request's relative paths resolve against
    base_dir: Path | None = None
    #: SillyTavern's template extensions for this request (:class:`.templates.TemplateRun`)
    templates: Any = None


def load(request: Mapping[str, Any] | StRequest, base_dir: str | Path | None = None,
         passes: Sequence[TextPass] = ()) -> Loaded:
    """Stage 1: the request parsed and its assets read (relative paths against ``base_dir``), and the
    text passes it runs: the request's own (:func:`~.passes.request_passes`), then ``passes``."""
    req = parse_request(request)
    base = Path(base_dir) if base_dir is not None else None
    inputs = load_inputs(req, base)
    loaded = Loaded(req, inputs, with_st_defaults(inputs.preset), list(inputs.diagnostics), tuple(passes), base)
    asked = request_passes(loaded)
    if asked:  # the request's own passes (regex scripts, templates) run before the caller's
        loaded.passes = asked + loaded.passes
    return loaded
