"""``tavernbox assemble``: build the chat-completion messages for one request.

With the default strategy, ``builtin-st``, the answer is exactly what SillyTavern sends for the
request: ``--request REQ.json`` carries everything (preset, card, books, chat, user and persona,
Author's Note, world-info settings, options; see :mod:`tavernbox.sillytavern.request`), and the
flags ``--preset``, ``--card``, ``--book``, ``--chat``, ``--user``, ``--persona``,
``--post-processing`` and ``--seed`` are shorthands that fill or override its fields. The messages
are printed readably, warnings go to stderr; ``--json`` prints the whole result (messages, warnings,
nodes, provenance, world-info trace and record), ``--messages`` only the array that is sent.

Any other strategy (a rule file in format ``dsh-tavern-request-assembly`` v1, or the other
built-ins) takes the assembler's own chat file ``{"messages": [...], "input_ids": [...]}`` with
message ids and prints its projected ``messages`` as JSON. A failure is reported as every command reports
it (:func:`tavernbox.cli.output.guarded`): ``where: error CODE message`` on stderr, or with ``--json`` the
``{"error": {...}}`` object on stdout; exit status 1, never a traceback: the CLI is where hostile input arrives.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import click

from ..errors import TemplateError
from ..strict_json import check_json_source, check_output
from .output import guarded, read_json_arg, stderr

__all__ = ["command"]

#: built-in strategy ids (upstream), defined in :mod:`tavernbox.strategies.builtin`
KNOWN_BUILTINS = ("builtin-native-slots", "builtin-native-roles", "builtin-st")


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


def _st_request(request_path: str | None, flags: dict[str, Any]) -> tuple[dict[str, Any], Any]:
    """The request object: the file (if any) with the shorthand flags filled in over it."""
    from pathlib import Path

    from ..sillytavern.loading import read_request_file

    data: dict[str, Any] = {}
    base: Any = Path.cwd()
    if request_path:
        loaded, base = read_request_file(request_path)
        if not isinstance(loaded, dict):
            raise TemplateError("a request must be a JSON object", code="REQUEST_INVALID", path="$")
        data = loaded
    return _with_flags(data, flags), base


def _with_flags(data: dict[str, Any], flags: dict[str, Any]) -> dict[str, Any]:
    """``data`` with the shorthand flags filled in over it (asset paths relative to the current directory)."""
    from pathlib import Path

    cwd = str(Path.cwd())
    for key in ("preset", "card", "chat"):
        if flags.get(key):
            data[key] = str(Path(cwd) / flags[key]) if flags[key] != "-" else _stdin_chat()
    if flags.get("books"):
        data["books"] = [*data.get("books", []), *(str(Path(cwd) / b) for b in flags["books"])]
    if flags.get("regex"):
        data["extensions"] = _with_regex_files(data.get("extensions"), flags["regex"])
    if flags.get("user") is not None or flags.get("persona") is not None:
        user = dict(data.get("user") or {})
        if flags.get("user") is not None:
            user["name"] = flags["user"]
        if flags.get("persona") is not None:
            user["persona"] = {**(user.get("persona") or {}), "description": flags["persona"]}
        data["user"] = user
    options = dict(data.get("options") or {})
    if flags.get("post_processing") is not None:
        options["post_processing"] = flags["post_processing"]
    if flags.get("seed") is not None:
        options["seed"] = flags["seed"]
    if flags.get("preview"):
        options["dry_run"] = True
    if flags.get("target"):
        options["target"] = flags["target"]
    for section, keys in (("generation", (("generation_type", "type"), ("quiet_prompt", "quiet_prompt"))),
                          ("budget", (("max_context", "max_context"), ("max_tokens", "max_tokens"),
                                      ("tokenizer", "tokenizer")))):
        given = {field: flags[flag] for flag, field in keys if flags.get(flag) is not None}
        if given:
            data[section] = {**(data.get(section) or {}), **given}
    if options:
        data["options"] = options
    return data


def _run_jsonl(path: str, flags: dict[str, Any], as_json: bool) -> None:
    """``--jsonl``: one request object a line in, one answer a line out, in one process (issue 11).

    An answer is ``{"messages", "warnings"}`` (and ``body`` for a ``--target`` other than openai), or with ``--json``
    the whole result; a line that cannot be assembled answers ``{"error": {...}}`` and the batch goes on (exit 1 at
    the end). Relative asset paths resolve against the file's folder (the current one for ``-``).
    """
    from pathlib import Path

    from ..sillytavern.batch import assemble_requests
    from .output import checked_answer, echo_json, parse_json_row, read_json_lines

    base = Path.cwd() if path == "-" else Path(path).resolve().parent
    failures = 0
    rows: list[Any] = []

    def requests() -> Any:
        for number, raw in read_json_lines(path):
            row: Any = raw if isinstance(raw, TemplateError) else _row(raw, number, parse_json_row)
            rows.append(row)
            yield _with_flags(row, flags) if isinstance(row, dict) else {}

    for answer in assemble_requests(requests(), base_dir=base):
        given = rows.pop(0)
        if isinstance(given, TemplateError):
            answer = given
        if isinstance(answer, TemplateError):
            failures += 1
            out: dict[str, Any] = {"error": answer.to_dict()}
        elif as_json:
            out = answer.to_dict()
        else:
            out = {"messages": answer.messages, "warnings": [d.to_dict() for d in answer.warnings]}
            if set(answer.body) != {"messages"}:
                out["body"] = answer.body
        out = checked_answer(out, lambda exc: {"error": exc.to_dict()})
        echo_json(out, pretty=False)
    if failures:
        sys.exit(1)


def _row(raw: str, number: int, parse: Any) -> Any:
    try:
        row = parse(raw, number, what="request line")
    except TemplateError as exc:
        return exc
    if not isinstance(row, dict):
        return TemplateError(f"line {number}: a request is a JSON object", code="REQUEST_INVALID", path="$",
                             line=number)
    return row


def _with_regex_files(extensions: Any, paths: tuple[str, ...]) -> dict[str, Any]:
    """The request's ``extensions`` with the scripts of SillyTavern regex exports (``--regex``) added to the
    global scripts, after the request's own."""
    from ..strict_json import loads

    ext = dict(extensions) if isinstance(extensions, dict) else {}
    regex = dict(ext.get("regex") or {}) if isinstance(ext.get("regex") or {}, dict) else {}
    given = regex.get("scripts")
    scripts: list[Any] = [] if given is None else list(given) if isinstance(given, list) else [given]
    for path in paths:
        try:
            text = open(path, encoding="utf-8-sig").read()
        except (OSError, UnicodeDecodeError) as exc:
            raise TemplateError(f"--regex {path}: cannot read the file: {exc}", code="INPUT_INVALID") from None
        try:
            loaded = loads(text, what=f"--regex {path}", code="INPUT_INVALID")
        except json.JSONDecodeError as exc:
            raise TemplateError(f"--regex {path} is not JSON: {exc.msg}", code="INPUT_INVALID", line=exc.lineno,
                                column=exc.colno) from None
        scripts.extend(loaded if isinstance(loaded, list) else [loaded])
    regex["scripts"] = scripts
    ext["regex"] = regex
    return ext


def _text_completion_flags(data: dict[str, Any], flags: dict[str, str | None]) -> None:
    """``--instruct``/``--context``/``--sysprompt``/``--st-templates`` over the request's ``text_completion``."""
    from pathlib import Path

    if all(value is None for value in flags.values()):
        return
    spec = dict(data.get("text_completion") or {})
    for key, value in flags.items():
        if value is None:
            continue
        if key == "instruct" and value.lower() in ("none", "off"):
            spec[key] = None
        elif key == "templates" or Path(value).is_file():
            spec[key] = str(Path(value).resolve())
        else:
            spec[key] = value  # a name, looked up in the template folder
    data["text_completion"] = spec


def _text_body(data: dict[str, Any], base: Any) -> None:
    """Text completion: ``--json`` prints the prompt, the stop strings and the warnings; else the prompt."""
    from ..sillytavern.text_completion import assemble_text_completion

    result = assemble_text_completion(data, base_dir=base)
    answer = result.to_dict()
    check_output(answer)
    if click.get_current_context().params.get("as_json"):
        _echo_json(answer)
        return
    _warn(result.warnings)
    click.echo(result.prompt, nl=False)
    if not result.prompt.endswith("\n"):
        click.echo()


def _stdin_chat() -> Any:
    """The chat on standard input (either form, any encoding the chat reader reads) as the request's JSON form."""
    from ..assets.chats import read_chat_bytes
    from .output import read_bytes_arg

    chat = read_chat_bytes(read_bytes_arg("-"))
    extra = {k: v for k, v in (("lorebook", chat.lorebook), ("scenario", chat.scenario),
                                ("mes_example", chat.mes_example), ("user_name", chat.user_name),
                                ("character_name", chat.character_name), ("input_ids", list(chat.input_ids))) if v}
    return {"messages": [m.to_dict() for m in chat.messages], **extra}


def _print_readable(messages: list[dict[str, Any]]) -> None:
    """Messages for a person: a header per message (index, role, name), then its content as sent."""
    for i, m in enumerate(messages, 1):
        head = f"--- [{i}] {m['role']}" + (f" ({m['name']})" if m.get("name") else "") + " ---"
        click.echo(head)
        content = m.get("content")
        click.echo(content if isinstance(content, str) else json.dumps(content, ensure_ascii=False, indent=2))
    click.echo(f"--- {len(messages)} messages, {sum(len(str(m.get('content') or '')) for m in messages)} characters ---")


def _echo_json(value: Any) -> None:
    """``value`` as indented JSON on standard output, written in pieces of about 64 KiB.

    ``json.dumps(indent=2)`` runs the pure-Python encoder and joins its millions of small chunks
    at the end: a 20 MB answer (a prompt of 40,000 macros, one provenance span each) held ~100 MB
    of chunk strings at once. The pieces are the same characters, so the output is identical.
    """
    out = sys.stdout  # what click.echo writes to (and what CliRunner captures)
    pending: list[str] = []
    size = 0
    for chunk in json.JSONEncoder(ensure_ascii=False, indent=2).iterencode(value):
        pending.append(chunk)
        size += len(chunk)
        if size >= 1 << 16:
            out.write("".join(pending))
            pending.clear()
            size = 0
    pending.append("\n")
    out.write("".join(pending))
    out.flush()


def _warn(diagnostics: list[Any]) -> None:
    from .output import print_diagnostics

    print_diagnostics(diagnostics)


@click.command("assemble")
@click.option("--strategy", default="builtin-st", show_default=True,
              help="builtin-st (exactly what SillyTavern sends), another built-in id (builtin-native-slots, "
                   "builtin-native-roles) or a rule file (dsh-tavern-request-assembly v1).")
@click.option("--request", "request_path", help="A request file (JSON, '-' for stdin): preset, card, books, chat, "
                                                 "user, author_note, world_info, options. The flags below override it.")
@click.option("--chat", "chat_path", help="The chat: {\"messages\": [...]} JSON or SillyTavern's .jsonl export ('-' "
                                          "for stdin).")
@click.option("--card", help="A character card (JSON or PNG); its embedded lorebook is scanned.")
@click.option("--preset", "st_preset", help="A SillyTavern chat-completion preset.")
@click.option("--book", "books", multiple=True, help="A world book (repeatable): global, unless the card links it.")
@click.option("--regex", "regex_files", multiple=True, help="A SillyTavern regex export (one script or a list; "
                                                            "repeatable): the user's global regex scripts.")
@click.option("--user", "user_name", help="The user's name (default User).")
@click.option("--persona", help="The user's persona description (placed where the preset's marker is).")
@click.option("--post-processing", type=click.Choice(["none", "merge", "semi", "strict", "single"]),
              help="SillyTavern's prompt post-processing, for back ends that refuse system messages after the first.")
@click.option("--generation", "generation_type",
              type=click.Choice(["normal", "continue", "impersonate", "regenerate", "swipe", "quiet"]),
              help="The generation type (SillyTavern's Generate(type)); default normal.")
@click.option("--quiet-prompt", help="The quiet prompt (with --generation quiet).")
@click.option("--max-context", type=int, help="Context size in tokens (default: the preset's openai_max_context).")
@click.option("--max-tokens", type=int, help="Tokens kept for the reply (default: the preset's openai_max_tokens).")
@click.option("--tokenizer", help="o200k (default), cl100k, estimate, or a registered tokenizer's name.")
@click.option("--target", type=click.Choice(["openai", "claude", "google"]), default=None,
              help="The API shape of the body: OpenAI-compatible (default), or SillyTavern's Claude/Google conversion.")
@click.option("--messages", "as_messages", is_flag=True, help="Print only what is sent, as JSON: the messages array "
                                                               "(with --target claude/google, the converted body).")
@click.option("--mvu", help="MVU variables (rule-file strategies): for tavern.mvu/state and "
                            "{{format_message_variable::stat_data}}.")
@click.option("--templates", help="Prompt-template resources (rule-file strategies; a JSON list, or "
                                   "{\"templates\": [...]}); they run only with --session.")
@click.option("--session", "session_id", help="The session id (prompt templates run only for a bound session).")
@click.option("--system-update", type=click.Choice(["leading-only", "in-history"]), default="leading-only",
              show_default=True, help="Rule-file strategies: whether the model accepts system messages after the first.")
@click.option("--preview", is_flag=True, help="Preview (SillyTavern's dry run: no squashing).")
@click.option("--seed", type=int, default=None, help="Seed for random macros and world info (default 0).")
@click.option("--max-profile-bytes", type=int, default=None, help="Logical extra-byte limit (default 512 KiB).")
@click.option("--instruct", help="Text completion: an instruct template (a file, or the name of one in the template "
                                "folder; 'none' for instruct mode off).")
@click.option("--context", "context_template", help="Text completion: a context template (a file or a name).")
@click.option("--sysprompt", help="Text completion: a system prompt (a file or a name; default none).")
@click.option("--st-templates", help="The template folder names are looked up in (a SillyTavern install's "
                                     "default/content/presets or its data/default-user; default: $TAVERNBOX_ST_TEMPLATES).")
@click.option("--json", "as_json", is_flag=True, help="Print the whole result as JSON.")
@click.option("--jsonl", "jsonl_path", metavar="FILE", help="Many requests in one process: one request object a line "
                                                              "in FILE ('-': stdin), one answer a line out.")
def command(
    strategy: str,
    request_path: str | None,
    chat_path: str | None,
    card: str | None,
    st_preset: str | None,
    books: tuple[str, ...],
    regex_files: tuple[str, ...],
    user_name: str | None,
    persona: str | None,
    post_processing: str | None,
    generation_type: str | None,
    quiet_prompt: str | None,
    max_context: int | None,
    max_tokens: int | None,
    tokenizer: str | None,
    target: str | None,
    as_messages: bool,
    mvu: str | None,
    templates: str | None,
    session_id: str | None,
    system_update: str,
    preview: bool,
    seed: int | None,
    max_profile_bytes: int | None,
    instruct: str | None,
    context_template: str | None,
    sysprompt: str | None,
    st_templates: str | None,
    as_json: bool,
    jsonl_path: str | None,
) -> None:
    """Assemble the chat-completion messages for one request (by default exactly what SillyTavern sends)."""

    def st_body() -> None:
        from ..sillytavern.assemble import assemble_request

        for flag, value in (("--mvu", mvu), ("--templates", templates), ("--session", session_id),
                            ("--max-profile-bytes", max_profile_bytes)):
            if value is not None:
                raise TemplateError(f"{flag} applies to rule-file strategies; builtin-st sends what SillyTavern sends "
                                    "(use --strategy FILE for it)", code="INPUT_INVALID")
        flags = {
            "preset": st_preset, "card": card, "chat": chat_path, "books": books, "regex": regex_files,
            "user": user_name,
            "persona": persona, "post_processing": post_processing, "seed": seed, "preview": preview,
            "target": target, "generation_type": generation_type, "quiet_prompt": quiet_prompt,
            "max_context": max_context, "max_tokens": max_tokens, "tokenizer": tokenizer}
        if jsonl_path is not None:
            if request_path or as_messages or chat_path == "-":
                raise click.UsageError("--jsonl reads one request a line; it takes no --request, --messages or "
                                       "--chat - (the other flags fill in every line)")
            _run_jsonl(jsonl_path, flags, as_json)
            return
        data, base = _st_request(request_path, flags)
        _text_completion_flags(data, {"instruct": instruct, "context": context_template, "sysprompt": sysprompt,
                                      "templates": st_templates})
        if data.get("text_completion") is not None:
            _text_body(data, base)
            return
        result = assemble_request(data, base_dir=base)
        # the lone-surrogate rule (tavernbox.strict_json) on exactly what is printed, before any of it
        # is: the whole result with --json (built once, written in pieces), else the messages (or the
        # body) and warnings; the JSON form (provenance: a dict per span; the record) is not built
        # for a check of what is never shown
        if as_json:
            answer = result.to_dict()
            check_output(answer)
            _echo_json(answer)
            return
        sent = result.messages if not as_messages or ("messages" in result.body and len(result.body) == 1) \
            else result.body
        check_output({"messages": sent, "warnings": [d.to_dict() for d in result.warnings]})
        _warn(result.warnings)
        if result.budget is not None and (result.budget.dropped_messages or result.budget.dropped_dialogues
                                          or result.budget.dropped_injections):
            b = result.budget
            stderr.print(f"budget: {b.used}/{b.budget} tokens ({b.tokenizer}); left out {len(b.dropped_messages)} "
                         f"chat message(s), {b.dropped_injections} in-chat prompt(s), {len(b.dropped_dialogues)} "
                         f"example dialogue(s), {b.dropped_tokens} tokens")
        if as_messages:
            click.echo(json.dumps(sent, ensure_ascii=False, indent=2))
        else:
            _print_readable(result.messages)

    def body() -> None:
        from ..assembler import Assembler, AssemblyRequest

        if request_path:
            raise TemplateError("--request is for the builtin-st strategy", code="INPUT_INVALID")
        if regex_files:
            raise TemplateError("--regex is for the builtin-st strategy (SillyTavern's regex scripts)",
                                code="INPUT_INVALID")
        if jsonl_path is not None:
            raise click.UsageError("--jsonl is for the builtin-st strategy")
        if not chat_path:
            raise TemplateError("--chat is required", code="INPUT_INVALID")
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
        seed_value = seed or 0
        if books:
            assets["world_info"], outlets = _world_info(books, messages, seed_value)
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
                   "preview": preview, "system_prompt_update": system_update, "seed": seed_value,
                   "session_id": session_id}
        if max_profile_bytes is not None:
            request["max_profile_bytes"] = max_profile_bytes
        from ..strategies import st_registry

        result = Assembler(st_registry()).assemble(AssemblyRequest.from_dict(request))
        out = result.to_dict() if as_json else result.messages
        check_output(out)  # the lone-surrogate rule (tavernbox.strict_json) on the answer
        click.echo(json.dumps(out, ensure_ascii=False, indent=2))

    guarded(st_body if strategy == "builtin-st" else body, label=request_path or "", as_json=as_json or jsonl_path is not None)
