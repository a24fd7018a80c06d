"""``tavernbox macros``: expand SillyTavern macros in a text file, stdin, or a JSON-lines batch.

Single text::

    tavernbox macros --context CONTEXT.json [--card CARD.json] [--seed N] [--json] [TEXT_FILE]

prints the expanded text (or, with ``--json``, the whole result: text, variables, diagnostics
with line:col, draws); diagnostics go to stderr. Batch::

    tavernbox macros --context CONTEXT.json --jsonl < rows.jsonl

reads one ``{"template", "vars", "globals"}`` object per line (``vars``/``globals`` replace the
context's local/global variables for that row) and writes one line per input, in order:
``{"text", "vars", "globals", "diagnostics"}``, or ``{"error": {...}}`` for a row that cannot be
rendered. A bad row never stops the batch and never shows a traceback.

``--time-limit S`` (default 1) is the CPU seconds a text, or a row, may take to render before it
stops with ``MACRO_TIME_LIMIT`` (see :mod:`tavernbox.macros.budget`).
"""

from __future__ import annotations

import json
import sys
from typing import Any

import click

from ..errors import TemplateError
from ..strict_json import check_output
from .output import checked_answer, echo_json, guarded, parse_json_row, print_diagnostics, read_json_arg, read_text_arg

__all__ = ["command", "load_context"]

def _card_fields(card_path: str) -> tuple[str, dict[str, Any]]:
    """A character card file (JSON or PNG, v1/v2/v3) -> (character name, ``character`` fields).

    The card goes through the asset importer, so encodings, BOMs, PNG chunks and bad fields are
    reported exactly as ``tavernbox import`` reports them.
    """
    from ..assets import load_asset

    from ..macros.context import CARD_FIELDS

    card = load_asset(card_path, kind="card").model
    fields: dict[str, Any] = {key: getattr(card, key) for key in CARD_FIELDS if key != "depth_prompt"}
    fields["alternate_greetings"] = card.alternate_greetings
    depth_prompt = card.depth_prompt
    if depth_prompt is not None:
        fields["depth_prompt"] = depth_prompt.prompt
    return card.name, fields


def load_context(context_path: str | None, card_path: str | None) -> dict[str, Any]:
    """The context dict from ``--context`` and ``--card`` (the card fills ``character``/``char``)."""
    context: dict[str, Any] = {}
    if context_path is not None:
        loaded = read_json_arg(context_path, "context", code="ASSET_JSON")
        if not isinstance(loaded, dict):
            raise TemplateError("the context must be a JSON object", code="INPUT_INVALID", path="$")
        from ..macros.context import MacroContext

        print_diagnostics(MacroContext.unknown_keys(loaded), label=context_path)
        context = loaded
    if card_path is not None:
        name, fields = _card_fields(card_path)
        character = dict(context.get("character") or {})
        character.update(fields)
        context = {**context, "character": character}
        if name and "char" not in context:
            context["char"] = name
    return context


def _row_error(exc: Exception, row: int) -> dict[str, Any]:
    if isinstance(exc, TemplateError):
        out = {"code": exc.code, "message": exc.message}
        if exc.line is not None:
            out["line"], out["column"] = exc.line, exc.column
        if exc.path is not None:
            out["path"] = exc.path
    else:  # the boundary: an unexpected failure is reported, never raised
        out = {"code": "INTERNAL_ERROR", "message": f"{type(exc).__name__}: {exc}"}
    out["row"] = row
    return {"error": out}


def _run_jsonl(context: dict[str, Any], seed: int | None, time_limit: float | None) -> None:
    from ..macros import MacroContext, expand_macros

    MacroContext.from_dict(context)  # a malformed context fails once, before any row
    variables = context.get("variables") or {}
    out = sys.stdout
    for number, raw in enumerate(sys.stdin.buffer, start=1):
        if not raw.strip():
            continue
        try:
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise TemplateError(f"line {number} is not UTF-8 (byte {exc.start})", code="INPUT_INVALID",
                                    line=number) from None
            row = parse_json_row(line.lstrip("\ufeff") if number == 1 else line, number)
            if not isinstance(row, dict) or not isinstance(row.get("template"), str):
                raise TemplateError(
                    "each line must be an object with a string 'template'", code="INPUT_INVALID", path="$.template"
                )
            local = row.get("vars", variables.get("local") or {})
            glob = row.get("globals", variables.get("global") or {})
            for key, value in (("vars", local), ("globals", glob)):
                if not isinstance(value, dict):
                    raise TemplateError(f"'{key}' must be an object", code="INPUT_INVALID", path=f"$.{key}")
            row_ctx = MacroContext.from_dict({**context, "variables": {"local": local, "global": glob}})
            result = expand_macros(row["template"], row_ctx, seed=seed, time_limit=time_limit)
            record: dict[str, Any] = {
                "text": result.text,
                "vars": result.variables["local"],
                "globals": result.variables["global"],
                "diagnostics": [d.to_dict(row["template"]) for d in result.diagnostics],
            }
        except Exception as exc:  # noqa: BLE001 - every row failure becomes an error line
            record = _row_error(exc, number)
        record = checked_answer(record, lambda exc, n=number: _row_error(exc, n))
        out.write(json.dumps(record, ensure_ascii=False) + "\n")
        out.flush()


def _run_single(
    context: dict[str, Any], seed: int | None, as_json: bool, text_file: str | None, trace: bool, time_limit: float | None
) -> None:
    from ..macros import expand_macros

    text = read_text_arg(text_file)
    if text.startswith("\ufeff"):
        text = text[1:]
    result = expand_macros(text, context, seed=seed, trace=trace, time_limit=time_limit)
    label = text_file or "stdin"
    if as_json:
        echo_json(result.to_dict(text))
    else:
        check_output({"text": result.text}, what="the expanded text")  # the lone-surrogate rule
        # ends with a newline, as a shell's output should (one added only when the text has none)
        sys.stdout.write(result.text if result.text.endswith("\n") else result.text + "\n")
        sys.stdout.flush()
    print_diagnostics(result.diagnostics, text, label=label)


def _positive_seconds(_ctx: click.Context, _param: click.Parameter, value: float) -> float:
    """``--time-limit``: positive seconds (``FloatRange`` lets ``nan`` through, which would switch the budget off)."""
    if not value > 0:
        raise click.BadParameter(f"{value} is not a positive number of seconds")
    return value


@click.command("macros")
@click.option("--context", "context_path", type=str, default=None, help="Context JSON (names, card, chat, variables...).")
@click.option("--card", "card_path", type=str, default=None, help="A chara_card_v2/v3 JSON; fills the card fields and {{char}}.")
@click.option("--seed", type=int, default=None, help="Seed for {{random}} and {{roll}} (default: the context's, else 0).")
@click.option("--json", "as_json", is_flag=True, help="Print the whole result as JSON.")
@click.option("--trace", is_flag=True, help="With --json: add 'segments', the output range each top-level macro produced.")
@click.option("--jsonl", is_flag=True, help="Batch mode: JSON lines {template, vars, globals} on stdin.")
@click.option(
    "--time-limit", type=float, default=1.0, show_default=True, callback=_positive_seconds,
    help="CPU seconds a text (a row with --jsonl) may take to render before it stops with MACRO_TIME_LIMIT.",
)
@click.argument("text_file", required=False)
def command(
    context_path: str | None,
    card_path: str | None,
    seed: int | None,
    as_json: bool,
    trace: bool,
    jsonl: bool,
    time_limit: float,
    text_file: str | None,
) -> None:
    """Expand SillyTavern macros in TEXT_FILE (or stdin) with SillyTavern 1.18's semantics."""

    def body() -> None:
        context = load_context(context_path, card_path)
        if jsonl:
            if text_file is not None:
                raise TemplateError("--jsonl reads stdin; do not pass TEXT_FILE", code="INPUT_INVALID")
            _run_jsonl(context, seed, time_limit)
        else:
            _run_single(context, seed, as_json, text_file, trace, time_limit)

    guarded(body, label="macros", as_json=as_json or jsonl)
