"""``tavernbox activate``: scan a chat for world-info entries, as SillyTavern does before a generation.

Books are read with the asset importer (``tavernbox.assets.load_asset``: encodings, BOMs,
list-form books, validation with JSON paths) and handed to activation as SillyTavern world-file
dicts; ``--card`` adds the card's embedded book as the character's book and its description,
personality, scenario, creator notes and depth prompt as the extra match sources. ``--json`` prints
one object (the shape documented in the issue); ``--jsonl`` reads scenarios as JSON lines and
writes one object per line. Every failure is a message with a code and a JSON path, never a
traceback.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from ..errors import Diagnostic, TemplateError
from .output import checked_answer, echo_json, guarded, parse_json_row, print_diagnostics, read_json_arg, read_json_lines

__all__ = ["command", "run_jsonl_line"]


def _load_book(path: str) -> tuple[dict[str, Any], list[Diagnostic]]:
    """A world-book file as ``{"name", "source", "entries"}`` (a card file gives its embedded book)."""
    try:
        from ..assets import load_asset
    except ImportError:  # pragma: no cover - the importer ships with the package
        data = read_json_arg(path, "book")
        if not isinstance(data, dict):
            data = {"entries": data}
        return {"name": Path(path).stem, **data}, []
    asset = load_asset(path)
    diagnostics = list(asset.diagnostics)
    if asset.kind == "world_book":
        return {"name": asset.model.name or Path(path).stem, "source": "global",
                **asset.model.to_st_dict()}, diagnostics
    if asset.kind == "card":
        book = asset.model.character_book
        if book is None:
            raise TemplateError("a character card without an embedded book", code="INPUT_INVALID",
                                path="$.data.character_book")
        return {"name": book.name or f"{asset.model.name}'s Lorebook", "source": "global",
                **book.to_st_dict()}, diagnostics
    raise TemplateError(f"a {asset.kind.replace('_', ' ')}, not a world book", code="INPUT_INVALID",
                        path="$")


def _load_card(path: str) -> tuple[dict[str, Any] | None, dict[str, Any], list[Diagnostic]]:
    """The card's book (as the character's book) and its scan context."""
    from ..assets import load_asset

    asset = load_asset(path, kind="card")
    card = asset.model
    context: dict[str, Any] = {
        "character_description": card.description,
        "character_personality": card.personality,
        "scenario": card.scenario,
        "creator_notes": card.creator_notes,
        "character": Path(path).stem,
        "character_name": card.name,
    }
    depth_prompt = card.depth_prompt
    if depth_prompt is not None and depth_prompt.prompt:
        context["character_depth_prompt"] = depth_prompt.prompt
    book = card.character_book
    out = None
    if book is not None:
        out = {"name": book.name or f"{card.name}'s Lorebook", "source": "character", **book.to_st_dict()}
    return out, context, list(asset.diagnostics)


def _scenario_books(line: dict[str, Any]) -> Any:
    if "books" in line:
        return line["books"]
    if "entries" in line:
        return {"name": line.get("name", "book"), "entries": line["entries"]}
    raise TemplateError("a line needs 'entries' (one book's entries) or 'books'", code="INPUT_INVALID", path="$")


def run_jsonl_line(text: str, *, seed: int, expand: Any, number: int = 1) -> dict[str, Any]:
    """One ``--jsonl`` scenario to its output object (errors become ``{"error": {...}}``).

    ``number`` is the line's number in the batch, for the line:column of a JSON error.
    """
    from ..worldinfo import activate_world_info, to_json

    try:
        line = parse_json_row(text, number)
        if not isinstance(line, dict):
            raise TemplateError("each line should be a JSON object", code="INPUT_INVALID", path="$")
        if not isinstance(line.get("settings", {}), (dict, type(None))):
            raise TemplateError("settings should be an object", code="INPUT_INVALID", path="$.settings")
        settings = dict(line.get("settings") or {})
        if "max_context" in line:
            settings["max_context"] = line["max_context"]
        line_seed = line.get("seed", seed)
        if isinstance(line_seed, bool) or not isinstance(line_seed, int):
            raise TemplateError("seed should be an integer", code="INPUT_INVALID", path="$.seed")
        # validate with the line's own JSON paths before activating
        from ..worldinfo import ScanContext, WorldInfoSettings, normalize_books
        from ..worldinfo.scan import chat_scan_messages

        conf = WorldInfoSettings.from_mapping(settings, path="$.settings")
        warnings = WorldInfoSettings.unknown_keys(line.get("settings"), path="$.settings")
        chat = line.get("chat", [])
        chat_scan_messages(chat, include_names=False, path="$.chat")
        context = ScanContext.from_mapping(line.get("context"), path="$.context")
        books, _ = normalize_books(line["books"], path="$.books") if "books" in line else ([_scenario_books(line)], [])
        activation = activate_world_info(
            books, chat, conf, line.get("state"), seed=line_seed,
            expand=expand, context=context, generation_type=line.get("generation_type", "normal"),
        )
        out = to_json(activation)
        if warnings:
            out["diagnostics"] = [d.to_dict() for d in warnings]
        return out
    except TemplateError as exc:
        return {"error": exc.to_dict()}
    except RecursionError:
        return {"error": TemplateError("the line is nested too deeply", code="INPUT_INVALID").to_dict()}
    except Exception as exc:  # one bad line must not end the stream; report it like the CLI boundary does
        return {"error": TemplateError(f"{type(exc).__name__}: {exc}", code="INTERNAL_ERROR").to_dict()}


def _expand_hook(macro_context: dict[str, Any] | None = None) -> Any:
    """The macro engine's expansion when it is importable, else ``None`` (contents stay as written).

    Keys and contents are expanded with ``macro_context`` (the card's name as ``{{char}}``).
    """
    try:
        from ..macros import expand_macros
    except ImportError:  # pragma: no cover - the macro engine ships with the package
        return None

    def expand(text: str) -> str:
        return expand_macros(text, macro_context).text

    return expand


def _print_human(activation: Any) -> None:
    out = activation.by_position
    for label, items in (("before", out.before), ("after", out.after), ("AN top", out.an_top),
                         ("AN bottom", out.an_bottom), ("EM top", out.em_top), ("EM bottom", out.em_bottom)):
        if items:
            click.echo(f"== {label} ==")
            click.echo("\n".join(i.content for i in items))
    for group in out.at_depth:
        click.echo(f"== at depth {group.depth} ({group.role_name}) ==")
        click.echo(group.content)
    for name in out.outlets:
        click.echo(f"== outlet {name} ==")
        click.echo(out.outlet_text(name))
    click.echo(f"== trace ({len(activation.activated)} activated, budget {activation.budget} tokens) ==")
    for record in activation.trace:
        step = f" [step {record.step}]" if record.step is not None else ""
        click.echo(f"{record.book}.{record.uid}: {record.outcome} ({record.reason}){step} {record.detail}")


@click.command("activate")
@click.option("--book", "books", multiple=True, type=click.Path(dir_okay=False), help="A world book (repeatable).")
@click.option("--card", type=click.Path(dir_okay=False), help="A character card: its book and texts join the scan.")
@click.option("--chat", type=click.Path(dir_okay=False),
              help="The chat: SillyTavern's .jsonl export, {\"messages\": [...]} JSON, or a JSON list of messages "
                   "(oldest first) or strings.")
@click.option("--settings", "settings_path", type=click.Path(dir_okay=False),
              help="JSON object with SillyTavern's world_info_* names, max_context and tokenizer.")
@click.option("--state", "state_path", type=click.Path(dir_okay=False), help="Timed-effects state from a previous run.")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed for probability and group rolls.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as one JSON object.")
@click.option("--jsonl", "jsonl", is_flag=True, help="Read scenarios as JSON lines (stdin or INPUT), write JSON lines.")
@click.option("--macros/--no-macros", "macros", default=None,
              help="Macro-expand keys and contents (default: on, off with --jsonl like the conformance data).")
@click.argument("input_path", required=False, metavar="[INPUT]")
def command(books: tuple[str, ...], card: str | None, chat: str | None, settings_path: str | None,
            state_path: str | None, seed: int, as_json: bool, jsonl: bool, macros: bool | None,
            input_path: str | None) -> None:
    """Activate world-info entries for a chat, the way SillyTavern 1.18 does, and explain each one.

    --jsonl reads one scenario per line, {"entries" or "books", "chat", "settings", "max_context"}
    (optionally "state", "seed", "context", "generation_type"), and writes the --json object per
    line in order ({"error": {...}} for a bad line; the exit code is then 1).
    """

    def body() -> None:
        from ..worldinfo import activate_world_info, to_json

        if jsonl:
            expand = _expand_hook() if macros else None
            failures = 0
            for number, raw in read_json_lines(input_path):
                if isinstance(raw, TemplateError):
                    result = {"error": raw.to_dict()}
                else:
                    result = run_jsonl_line(raw, seed=seed, expand=expand, number=number)
                result = checked_answer(result, lambda exc: {"error": exc.to_dict()})
                failures += "error" in result
                echo_json(result, pretty=False)
            if failures:
                sys.exit(1)
            return
        if input_path is not None:
            raise TemplateError("INPUT is read only with --jsonl", code="INPUT_INVALID")
        if chat is None:
            raise TemplateError("--chat is required (or use --jsonl)", code="INPUT_INVALID")
        if not books and not card:
            raise TemplateError("give at least one --book or a --card", code="INPUT_INVALID")
        all_books: list[dict[str, Any]] = []
        diagnostics: list[Diagnostic] = []
        for path in books:
            book, diags = guarded_load(path, _load_book)
            all_books.append(book)
            diagnostics.extend(diags)
        context: dict[str, Any] = {}
        macro_context: dict[str, Any] | None = None
        if card:
            card_book, context, diags = guarded_load(card, _load_card)
            macro_context = {"char": context.pop("character_name")}
            diagnostics.extend(diags)
            if card_book is not None:
                all_books.append(card_book)
        chat_data, chat_names, chat_diags = _read_chat(chat, macro_context)
        diagnostics.extend(chat_diags)
        if chat_names and macros is not False:
            macro_context = {**chat_names, **(macro_context or {})}
        settings = read_json_arg(settings_path, "settings") if settings_path else {}
        from ..worldinfo import WorldInfoSettings

        diagnostics.extend(WorldInfoSettings.unknown_keys(settings))
        state = read_json_arg(state_path, "state") if state_path else None
        activation = activate_world_info(all_books, chat_data, settings, state, seed=seed,
                                         expand=_expand_hook(macro_context) if macros is not False else None,
                                         context=context or None)
        diagnostics.extend(activation.diagnostics)
        print_diagnostics([d for d in diagnostics if d.severity != "info"])
        if as_json:
            echo_json(to_json(activation))
        else:
            _print_human(activation)

    guarded(body)


def _read_chat(path: str, macro_context: dict[str, Any] | None) -> tuple[list[Any], dict[str, str], list[Diagnostic]]:
    """The chat to scan, through the one chat reader (:mod:`tavernbox.assets.chats`): its encoding rule
    (UTF-8, UTF-16 with its byte-order mark, the Windows-1252 fallback with its warning) and its forms.

    A JSON array is the scan's own list (strings, or messages with ``content``/``mes``, ``name``,
    ``role``/``is_system``); SillyTavern's ``.jsonl`` export and ``{"messages": [...]}`` are read as
    ``assemble`` reads them, each message named by its speaker (the export's ``user_name`` and
    ``character_name`` when the message has none), a narrator's as "System". Returns the messages,
    the export's names as macro names (``user``, ``char``) and the reader's warnings.
    """
    from ..assets.chats import read_chat_bytes, scan_messages
    from ..assets.decoding import decode_bytes
    from ..strict_json import loads
    from .output import read_bytes_arg

    data = read_bytes_arg(path)
    try:
        decoded = decode_bytes(data)
        diagnostics = [d for d in decoded.diagnostics if d.severity != "info"]
        if decoded.text.lstrip().startswith("["):
            return loads(decoded.text, what=f"chat {path}", code="INPUT_INVALID"), {}, diagnostics
        chat = read_chat_bytes(data, hint=Path(path).name)
    except TemplateError as exc:
        exc.message = f"{path}: {exc.message}"
        raise
    except ValueError as exc:  # JSONDecodeError: the strict reader's refusal, with its position
        raise TemplateError(f"chat {path} is not valid JSON: {getattr(exc, 'msg', exc)}", code="INPUT_INVALID",
                            line=getattr(exc, "lineno", None), column=getattr(exc, "colno", None)) from None
    except RecursionError:
        raise TemplateError(f"chat {path} is nested too deeply", code="INPUT_INVALID") from None
    messages = scan_messages(chat, char=(macro_context or {}).get("char"))
    names = {k: v for k, v in (("user", chat.user_name), ("char", chat.character_name)) if v}
    return messages, names, diagnostics


def guarded_load(path: str, loader: Any) -> Any:
    """Run a loader, naming the file in its error."""
    try:
        return loader(path)
    except TemplateError as exc:
        exc.message = f"{path}: {exc.message}"
        raise
