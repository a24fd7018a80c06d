"""``tavernbox render``: render an EJS template (ST-Prompt-Template dialect) in the sandbox.

Single template::

    tavernbox render TEMPLATE_FILE [--vars FILE.json|FILE.yaml] [--json]

prints the rendered text (``-`` reads the template from stdin). With ``--json`` it prints
``{"text", "error", "usage"}`` instead. A failed render is reported on stderr with its code and
template line:col (exit 1), or as the ``error`` object with ``--json``.

Batch::

    tavernbox render --jsonl < jobs.jsonl

reads one ``{"template", "variables", "dialect"?}`` object per line and writes one line per input, in
order: ``{"text": ..., "error": null}`` or ``{"text": null, "error": {"code", "message",
"line", "column"}}``. A bad line is an ``INPUT_INVALID`` error line, never the end of the
batch; the exit status is 0 whenever the batch ran.

Dialect: ``st-prompt-template`` (the default) gives every template the ST-Prompt-Template API
(``getvar`` reads the variables; ``getwi``/``getpreset``/``getchar`` answer as for an unknown
title unless the files below are given; writes are ``TEMPLATE_UNSUPPORTED``); ``--dialect ejs``
(or a row's ``"dialect": "ejs"``) renders plain ejs.

Template API (issue 4): ``--mvu FILE``, ``--world-book FILE`` (repeatable) with ``--activated
UID,...`` (one per book, in order), ``--preset FILE`` and ``--card FILE`` render through the
dependency bridge (``getvar``, ``getwi``, ``getpreset``, ``getchar``; writes are refused). A batch
line does the same when it has any of the fields ``mvu``, ``world_books``, ``activated``,
``preset``, ``card``; its answer then also lists ``reads`` (kind, key, id, revision).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click

from ..ejs.render import DIALECT_PROMPT_TEMPLATE, DIALECTS
from ..errors import TemplateError
from ..strict_json import check_output, loads, refuse_non_finite, refuse_surrogates
from .output import guarded, parse_json_row, read_text_arg

__all__ = ["command"]


def _load_vars(path: str) -> Any:
    """``--vars``: JSON, or YAML for ``.yaml``/``.yml`` files."""
    text = read_text_arg(path)
    if Path(path).suffix.lower() in (".yaml", ".yml"):
        import yaml

        try:
            value = yaml.safe_load(text)
            refuse_surrogates(value, what=f"--vars {path}")
            refuse_non_finite(value, what=f"--vars {path}", code="INPUT_INVALID")
            return value
        except RecursionError:
            raise _too_deep(f"--vars {path}", path) from None
        except ValueError as exc:  # an integer longer than Python converts (4,300 digits)
            raise TemplateError(f"--vars {path} holds a value that cannot be read: {exc}", code="INPUT_INVALID",
                                path=path) from None
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            raise TemplateError(
                f"--vars {path} is not valid YAML: {getattr(exc, 'problem', exc)}",
                code="INPUT_INVALID",
                line=mark.line + 1 if mark is not None else None,
                column=mark.column + 1 if mark is not None else None,
                path=path,
            ) from None
    try:
        return loads(text, what=f"--vars {path}")
    except json.JSONDecodeError as exc:
        raise TemplateError(
            f"--vars {path} is not valid JSON: {exc.msg}",
            code="INPUT_INVALID",
            line=exc.lineno,
            column=exc.colno,
            path=path,
        ) from None
    except RecursionError:
        raise _too_deep(f"--vars {path}", path) from None
    except ValueError as exc:  # an integer longer than Python converts (4,300 digits)
        raise TemplateError(f"--vars {path} holds a number that cannot be read: {exc}", code="INPUT_INVALID",
                            path=path) from None


def _too_deep(what: str, path: str | None = None) -> TemplateError:
    """Input nested deeper than the host's parser goes (about 1,000 levels): an input error."""
    return TemplateError(f"{what} is nested too deeply (more than the host's parser reads)",
                         code="TEMPLATE_INPUT_LIMIT", path=path)


def _print_json(value: Any) -> None:
    """Print an answer; one whose text breaks the lone-surrogate rule becomes its ``TEXT_SURROGATE`` error."""
    try:
        check_output(value, what="the rendered answer")
    except TemplateError as exc:
        value = {"text": None, "error": _error_object(exc), "usage": None}
        click.echo(json.dumps(value, ensure_ascii=True, indent=2))
        sys.exit(1)
    click.echo(json.dumps(value, ensure_ascii=True, indent=2))


def _write_text(text: str) -> None:
    """Write a rendered text as UTF-8; a lone surrogate in it is refused (``TEXT_SURROGATE``), never replaced."""
    check_output({"text": text}, what="the rendered text")
    sys.stdout.buffer.write(text.encode("utf-8"))
    sys.stdout.flush()


def _error_object(exc: TemplateError) -> dict[str, Any]:
    out = {"code": exc.code, "message": exc.message, "line": exc.line, "column": exc.column}
    if exc.code == "TEXT_SURROGATE" and exc.path is not None:
        out["path"] = exc.path
    return out


def _render_line(raw: str, number: int = 1) -> dict[str, Any]:
    """One batch line -> its answer object; every failure becomes an error object."""
    from ..ejs import render_template

    try:
        job = parse_json_row(raw, number)
    except TemplateError as exc:
        if exc.code == "INPUT_INVALID" and "nested too deeply" in exc.message:
            # deeper than the host's parser reads: the template input limit, as for --vars
            return {"text": None, "error": {**_error_object(_too_deep("the line")), "line": exc.line,
                                            "column": exc.column}}
        return {"text": None, "error": _error_object(exc)}
    except ValueError as exc:  # an integer longer than Python converts (4,300 digits)
        return {"text": None, "error": {"code": "INPUT_INVALID", "message": f"the line cannot be read: {exc}",
                                        "line": number, "column": None}}
    if not isinstance(job, dict) or not isinstance(job.get("template"), str):
        return {"text": None, "error": {"code": "INPUT_INVALID",
                                        "message": 'each line must be an object with a string "template"',
                                        "line": None, "column": None}}
    dialect = job.get("dialect", DIALECT_PROMPT_TEMPLATE)
    if dialect not in DIALECTS:
        return {"text": None, "error": {"code": "INPUT_INVALID",
                                        "message": f'"dialect" must be one of {", ".join(DIALECTS)}',
                                        "line": None, "column": None}}
    if any(key in job for key in _BRIDGE_FIELDS):
        if dialect != DIALECT_PROMPT_TEMPLATE:
            return {"text": None, "error": {"code": "INPUT_INVALID",
                                            "message": f'the fields {", ".join(_BRIDGE_FIELDS)} need the '
                                                       f'{DIALECT_PROMPT_TEMPLATE} dialect (the template API)',
                                            "line": None, "column": None}, "reads": []}
        return _render_bridge_line(job)
    try:
        result = render_template(job["template"], job.get("variables"), dialect=dialect)
    except TemplateError as exc:
        return {"text": None, "error": _error_object(exc)}
    return {"text": result.text, "error": None}


#: Batch fields that switch a line to the template API (the dependency bridge).
_BRIDGE_FIELDS = ("mvu", "world_books", "activated", "preset", "card")


def _render_bridge_line(job: dict[str, Any]) -> dict[str, Any]:
    from ..bridge import render_with_sources, sources_from_inputs

    try:
        sources = sources_from_inputs(variables=job.get("variables"), mvu=job.get("mvu"),
                                      world_books=job.get("world_books"), activated=job.get("activated"),
                                      preset=job.get("preset"), card=job.get("card"))
        result = render_with_sources(job["template"], sources)
    except TemplateError as exc:
        return {"text": None, "error": _error_object(exc), "reads": []}
    return {"text": result.text, "error": None, "reads": [r.to_dict() for r in result.reads]}


def _bridge_sources(mvu: str | None, world_books: tuple[str, ...], activated: tuple[str, ...],
                    preset: str | None, card: str | None, variables: Any) -> Any:
    """The CLI's files as bridge sources (assets are validated by ``load_asset``)."""
    from ..assets import load_asset as _load_asset
    from ..bridge import MvuSource, sources_from_inputs

    def load_asset(path: str, kind: str) -> Any:
        """Load one asset; its errors name the option and the file, not the template."""
        try:
            return _load_asset(path, kind=kind)
        except TemplateError as exc:
            option = "--" + kind.replace("_", "-")
            where = f":{exc.line}:{exc.column}" if exc.line is not None else (f" at {exc.path}" if exc.path else "")
            raise TemplateError(f"{option} {path}{where}: {exc.message}", code=exc.code) from None

    if activated and len(activated) != len(world_books):
        raise click.UsageError("give one --activated UID,... per --world-book, in the same order")
    books = []
    record: dict[str, list[int | str]] = {}
    for index, path in enumerate(world_books):
        book = load_asset(path, kind="world_book").model
        books.append(book)
        if activated:
            uids: list[int | str] = []
            for part in activated[index].split(","):
                part = part.strip()
                if part:
                    uids.append(int(part) if part.lstrip("-").isdigit() else part)
            record[book.name] = uids
    return sources_from_inputs(
        variables=variables,
        mvu=MvuSource(load_asset(mvu, "mvu").model, resource_id=f"mvu:{Path(mvu).stem}") if mvu is not None else None,
        world_books=books if world_books else None,
        activated=record,
        preset=load_asset(preset, kind="preset").model if preset is not None else None,
        card=load_asset(card, kind="card").model if card is not None else None,
    )


def _run_batch() -> None:
    out = sys.stdout
    for number, raw in enumerate(sys.stdin.buffer, start=1):
        if not raw.strip():
            continue
        try:
            try:
                line = raw.decode("utf-8").strip()
            except UnicodeDecodeError as exc:
                raise TemplateError(f"line {number} is not UTF-8 (byte {exc.start})", code="INPUT_INVALID",
                                    line=number) from None
            answer = _render_line(line.lstrip("\ufeff"), number)
            check_output(answer, what=f"the answer to line {number}")
        except TemplateError as exc:  # a bad line, or an answer breaking the lone-surrogate rule
            answer = {"text": None, "error": _error_object(exc)}
        except Exception as exc:  # the boundary: one bad job must not end the batch
            answer = {"text": None, "error": {"code": "INTERNAL_ERROR", "message": f"{type(exc).__name__}: {exc}",
                                              "line": None, "column": None}}
        out.write(json.dumps(answer, ensure_ascii=True) + "\n")
        out.flush()


def _usage_dict(usage: Any) -> dict[str, Any] | None:
    if usage is None:
        return None
    return {name: getattr(usage, name) for name in ("time_ms", "memory_bytes", "output_bytes", "passes", "job_steps")
            if hasattr(usage, name)}


@click.command("render")
@click.argument("template_file", required=False)
@click.option("--vars", "vars_file", metavar="FILE", help="Variables as JSON, or YAML (.yaml/.yml).")
@click.option("--json", "as_json", is_flag=True, help="Print {text, error, usage} as JSON.")
@click.option("--jsonl", is_flag=True, help='Batch: {"template", "variables"} lines on stdin, one answer per line.')
@click.option("--mvu", "mvu_file", metavar="FILE", help="MVU variables (JSON/YAML): variables and getvar read them.")
@click.option("--world-book", "world_books", metavar="FILE", multiple=True, help="A world book getwi may read.")
@click.option("--activated", "activated", metavar="UID,...", multiple=True,
              help="Entries activated this request, one per --world-book (only these are readable).")
@click.option("--preset", "preset_file", metavar="FILE", help="A chat-completion preset (getpreset).")
@click.option("--card", "card_file", metavar="FILE", help="A character card, JSON or PNG (getchar).")
@click.option("--dialect", type=click.Choice(DIALECTS), default=None,
              help=f"{DIALECT_PROMPT_TEMPLATE} (the default: ejs plus getvar, getwi, ...) or plain ejs.")
def command(template_file: str | None, vars_file: str | None, as_json: bool, jsonl: bool, mvu_file: str | None,
            world_books: tuple[str, ...], activated: tuple[str, ...], preset_file: str | None,
            card_file: str | None, dialect: str | None) -> None:
    """Render an EJS TEMPLATE_FILE (ST-Prompt-Template dialect) in the sandbox."""
    bridge = mvu_file is not None or bool(world_books) or bool(activated) or preset_file is not None \
        or card_file is not None
    if jsonl:
        if template_file is not None or vars_file is not None or as_json or bridge or dialect is not None:
            raise click.UsageError("--jsonl reads its jobs from stdin; it takes no file, --vars, --json, --dialect "
                                   "or asset options (use the row fields)")
        guarded(_run_batch, as_json=True)
        return
    if template_file is None:
        raise click.UsageError("missing TEMPLATE_FILE (use - for stdin)")
    if bridge and dialect not in (None, DIALECT_PROMPT_TEMPLATE):
        raise click.UsageError(f"--mvu, --world-book, --preset and --card need the {DIALECT_PROMPT_TEMPLATE} dialect")
    chosen = dialect or DIALECT_PROMPT_TEMPLATE

    def body() -> None:
        from ..ejs import render_template

        source = read_text_arg(template_file)
        variables = _load_vars(vars_file) if vars_file is not None else None
        if bridge:
            from ..bridge import render_with_sources

            sources = _bridge_sources(mvu_file, world_books, activated, preset_file, card_file, variables)
            if not as_json:
                _write_text(render_with_sources(source, sources).text)
                return
            try:
                bridged = render_with_sources(source, sources)
            except TemplateError as exc:
                _print_json({"text": None, "error": _error_object(exc), "usage": None, "reads": []})
                sys.exit(1)
            _print_json({"text": bridged.text, "error": None, "usage": _usage_dict(bridged.usage),
                         "reads": [r.to_dict() for r in bridged.reads]})
            return
        if not as_json:
            _write_text(render_template(source, variables, dialect=chosen).text)
            return
        try:
            result = render_template(source, variables, dialect=chosen)
        except TemplateError as exc:
            _print_json({"text": None, "error": _error_object(exc), "usage": None})
            sys.exit(1)
        _print_json({"text": result.text, "error": None, "usage": _usage_dict(result.usage)})

    guarded(body, label=template_file, as_json=as_json)
