"""``tavernbox assemble``: build the chat-completion messages for one request.

The chat file is ``{"messages": [...], "input_ids": [...]}`` or a plain list of messages (then the
trailing user message is the current input). ``--strategy`` is a preset file in format
``dsh-tavern-request-assembly`` v1. Without ``--json`` the messages are printed; with it, the
whole result. A failure prints ``{"error": {"code", "message"}}`` and exits 1, never a traceback:
the CLI is where hostile input arrives.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from typing import Any

import click

from ..errors import TemplateError
from ..strict_json import check_json_source, check_output
from .output import read_json_arg, surrogate_error

__all__ = ["command", "emit_error", "json_guard"]

#: built-in strategy ids (upstream), defined in :mod:`tavernbox.strategies.builtin`
KNOWN_BUILTINS = ("builtin-native-slots", "builtin-native-roles", "builtin-st")


def emit_error(error: TemplateError) -> None:
    """Print the error object on stdout (and exit 1)."""
    out: dict[str, Any] = {"code": error.code, "message": error.message}
    if error.path:
        out["path"] = error.path
    if error.line is not None:
        out["line"], out["column"] = error.line, error.column
    click.echo(json.dumps({"error": out}, ensure_ascii=False))
    sys.exit(1)


def json_guard(body: Callable[[], None]) -> None:
    """Run ``body``; every failure becomes ``{"error": ...}`` with exit status 1."""
    try:
        body()
    except TemplateError as exc:
        emit_error(exc)
    except (click.exceptions.Exit, click.exceptions.Abort, click.ClickException, SystemExit):
        raise
    except UnicodeEncodeError as exc:  # text no check saw: the lone-surrogate rule's code, not INTERNAL_ERROR
        emit_error(surrogate_error(exc) or TemplateError(f"{type(exc).__name__}: {exc}", code="INTERNAL_ERROR"))
    except Exception as exc:  # the boundary: no traceback for the user
        emit_error(TemplateError(f"{type(exc).__name__}: {exc}", code="INTERNAL_ERROR"))


def _strategy(value: str) -> Any:
    from ..assembler import load_preset
    from ..strategies import builtin_strategy
    from .output import read_text_arg

    if os.path.exists(value) or value == "-":
        text = read_text_arg(value)
        check_json_source(text, what=f"--strategy {value}")
        return load_preset(text)
    if value in KNOWN_BUILTINS:
        return builtin_strategy(value)
    raise TemplateError(f"--strategy {value!r} is neither a preset file nor a known built-in strategy "
                        f"({', '.join(KNOWN_BUILTINS)})", code="ASSEMBLY_STRATEGY_UNKNOWN")


def _st_preset(path: str) -> tuple[dict[str, Any], str]:
    """A SillyTavern chat-completion preset file as JSON data (any encoding the importer reads) and its name."""
    from pathlib import Path

    from ..assets import load_asset

    model = load_asset(path, kind="preset").model
    return model.model_dump(mode="json", exclude_none=True), Path(path).stem


def _chat(path: str) -> tuple[list[Any], list[str]]:
    data = read_json_arg(path, "chat file")
    if isinstance(data, list):
        trailing = data[-1] if data else None
        is_input = isinstance(trailing, dict) and trailing.get("role") == "user" and isinstance(trailing.get("id"), str)
        return data, [trailing["id"]] if is_input else []  # type: ignore[index]
    if not isinstance(data, dict) or not isinstance(data.get("messages"), list):
        raise TemplateError("the chat file must be a list of messages or {\"messages\": [...], \"input_ids\": [...]}",
                            code="INPUT_INVALID", path="$")
    ids = data.get("input_ids", [])
    return data["messages"], ids


def _card(path: str) -> dict[str, Any]:
    from ..assets import load_asset

    model = load_asset(path, kind="card").model
    dumped = model.model_dump(mode="json") if hasattr(model, "model_dump") else dict(model)
    data = dumped.get("data", dumped)
    return {k: v for k, v in data.items() if k != "character_book"}


def _world_info(paths: tuple[str, ...], messages: list[Any], seed: int) -> tuple[list[dict[str, Any]], dict[str, str]]:
    """The activated entries for the ``worldbook`` source, and the outlet texts for ``{{outlet::name}}``."""
    from ..assembler.sources import world_info_from_activation
    from ..worldinfo import activate_world_info

    books = [read_json_arg(p, "world book") for p in paths]
    chat = [{"role": m.get("role"), "name": m.get("name", ""), "content": m.get("content")}
            for m in messages if isinstance(m, dict) and isinstance(m.get("content"), str)]
    activation = activate_world_info(books, chat, seed=seed)
    outlets = {name: activation.by_position.outlet_text(name) for name in activation.by_position.outlets}
    return world_info_from_activation(activation), outlets


@click.command("assemble")
@click.option("--strategy", required=True,
              help="A preset file (dsh-tavern-request-assembly v1) or a built-in id (builtin-native-slots, "
                   "builtin-native-roles, builtin-st).")
@click.option("--chat", "chat_path", required=True, help="The chat file: messages and input ids.")
@click.option("--card", help="A character card (JSON or PNG).")
@click.option("--preset", "st_preset", help="A SillyTavern chat-completion preset, placed by the `preset` rule as SillyTavern does.")
@click.option("--book", "books", multiple=True, help="A world book; activated against the chat.")
@click.option("--mvu", help="MVU variables: for tavern.mvu/state and {{format_message_variable::stat_data}}.")
@click.option("--templates", help="Prompt-template resources (a JSON list, or {\"templates\": [...]}) for the "
                                   "pmp-dsh-tavern/prompt-template source; they run only with --session.")
@click.option("--session", "session_id", help="The session id (prompt templates run only for a bound session).")
@click.option("--system-update", type=click.Choice(["leading-only", "in-history"]), default="leading-only",
              show_default=True, help="Whether the model accepts system messages after the first.")
@click.option("--preview", is_flag=True, help="Preview: no unsent input, system-update capability unverified.")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed for random macros and world info.")
@click.option("--max-profile-bytes", type=int, default=None, help="Logical extra-byte limit (default 512 KiB).")
@click.option("--json", "as_json", is_flag=True, help="Print the whole result as JSON.")
def command(
    strategy: str,
    chat_path: str,
    card: str | None,
    st_preset: str | None,
    books: tuple[str, ...],
    mvu: str | None,
    templates: str | None,
    session_id: str | None,
    system_update: str,
    preview: bool,
    seed: int,
    max_profile_bytes: int | None,
    as_json: bool,
) -> None:
    """Assemble the chat-completion messages for one request."""

    def body() -> None:
        from ..assembler import Assembler, AssemblyRequest

        preset = _strategy(strategy)
        messages, input_ids = _chat(chat_path)
        assets: dict[str, Any] = {}
        if card:
            assets["character"] = _card(card)
        if templates:
            loaded = read_json_arg(templates, "prompt templates")
            if isinstance(loaded, dict):
                if "templates" not in loaded:
                    raise TemplateError(f"prompt templates {templates}: expected a list or {{\"templates\": [...]}}",
                                        code="TEMPLATE_RESOURCE_INVALID", path="$")
                loaded = loaded["templates"]
            assets["prompt_templates"] = loaded
        if books:
            assets["world_info"], outlets = _world_info(books, messages, seed)
            named = [read_json_arg(p, "world book") for p in books]
            if templates and all(isinstance(b, dict) and isinstance(b.get("name"), str) for b in named):
                assets["world_books"] = named  # what getwi reads (activated entries only)
            if outlets:
                assets["macro_context"] = {"outlets": outlets}
        if st_preset:
            from ..strategies import apply_names_behavior

            assets["st_preset"], assets["st_preset_name"] = _st_preset(st_preset)
            behavior = assets["st_preset"].get("names_behavior")
            if behavior in (1, 2):  # the host's chat as SillyTavern sends it (completion names, content prefixes)
                card_data = assets.get("character") or {}
                messages = apply_names_behavior(
                    [m for m in messages if isinstance(m, dict)], behavior, "User",
                    str(card_data.get("nickname") or card_data.get("name") or "Assistant"))
        if mvu:
            from pathlib import Path

            from ..assets import load_asset

            assets["mvu"] = {"name": Path(mvu).stem, "stat_data": load_asset(mvu, kind="mvu").model.stat_data}
        request = {"preset": preset, "messages": messages, "input_ids": input_ids, "assets": assets,
                   "preview": preview, "system_prompt_update": system_update, "seed": seed, "session_id": session_id}
        if max_profile_bytes is not None:
            request["max_profile_bytes"] = max_profile_bytes
        from ..strategies import st_registry

        result = Assembler(st_registry()).assemble(AssemblyRequest.from_dict(request))
        out = result.to_dict() if as_json else result.messages
        check_output(out)  # the lone-surrogate rule (tavernbox.strict_json) on the answer
        click.echo(json.dumps(out, ensure_ascii=False, indent=2))

    json_guard(body)
