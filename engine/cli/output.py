"""Shared CLI plumbing: diagnostics on stderr with rich, JSON on stdout, no tracebacks.

Every command body runs inside :func:`guarded`, which turns a :class:`TemplateError` into a
clear message with its code and caret snippet, and any other exception into ``INTERNAL_ERROR``
without a traceback: the CLI is a boundary hostile input reaches.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable, Iterable, Iterator
from typing import Any, NoReturn, TypeVar

import click
from rich.console import Console
from rich.markup import escape

from ..errors import Diagnostic, TemplateError, bound_diagnostics
from ..strict_json import check_output, loads, refuse_surrogates

_SURROGATE = re.compile("[\ud800-\udfff]")

__all__ = [
    "checked_answer",
    "echo_json",
    "error_object",
    "fail",
    "fail_json",
    "guarded",
    "json_mode",
    "parse_json_row",
    "print_diagnostics",
    "printable",
    "read_bytes_arg",
    "read_json_arg",
    "read_json_lines",
    "read_text_arg",
    "stderr",
    "stream_json",
    "surrogate_error",
]

T = TypeVar("T")

stderr = Console(stderr=True, highlight=False, soft_wrap=True)


def echo_json(value: Any, *, pretty: bool = True) -> None:
    """Write ``value`` as JSON to stdout (UTF-8, non-ASCII kept).

    An answer holding a lone surrogate is refused (``TEXT_SURROGATE`` with its path) instead of being
    written as a ``\\ud800`` escape strict consumers reject: the project's one rule (:mod:`tavernbox.strict_json`).
    """
    text = json.dumps(value, ensure_ascii=False, indent=2 if pretty else None, separators=None if pretty else (",", ":"))
    if _SURROGATE.search(text) is not None:  # one scan of the text we write, no second serialisation
        refuse_surrogates(value, what="the answer")
    click.echo(text)


def stream_json(value: Any) -> None:
    """Write a large answer as indented JSON to stdout in pieces, never as one string.

    The lone-surrogate rule is checked by walking ``value`` first (nothing is written for a refused
    answer); ``tavernbox import --json`` on a book of 100,000 entries then needs no second copy of its
    report as text.
    """
    refuse_surrogates(value, what="the answer")
    out = sys.stdout
    json.dump(value, out, ensure_ascii=False, indent=2)
    out.write("\n")
    out.flush()


def checked_answer(value: Any, error: Callable[[TemplateError], Any]) -> Any:
    """A batch answer as it may be written: one breaking the lone-surrogate rule becomes ``error(exc)``.

    A batch goes on past such a row, so the refusal is that row's answer rather than the command's end.
    """
    try:
        check_output(value)
    except TemplateError as exc:
        return error(exc)
    return value


def parse_json_row(line: str, number: int, *, what: str = "line") -> Any:
    """One ``--jsonl`` row under the project's JSON rules.

    Bad JSON is ``INPUT_INVALID`` at ``number:column``; ``NaN``/``Infinity`` likewise; a lone surrogate
    is ``TEXT_SURROGATE`` with the row's JSON path. The caller reports it as that row's error and goes on.
    """
    try:
        return loads(line, what=f"{what} {number}")
    except TemplateError as exc:
        if exc.line is None:
            raise
        raise TemplateError(exc.message, code=exc.code, line=number, column=exc.column) from None
    except json.JSONDecodeError as exc:
        raise TemplateError(
            f"line {number} is not valid JSON: {exc.msg}", code="INPUT_INVALID", line=number, column=exc.colno
        ) from None
    except RecursionError:
        raise TemplateError(f"line {number} is nested too deeply", code="INPUT_INVALID", line=number) from None


def print_diagnostics(diagnostics: Iterable[Diagnostic], source: str | None = None, *, label: str = "") -> None:
    """Print diagnostics to stderr: ``label:line:col: severity CODE message`` plus a caret snippet.

    Identical ones (same code, same message shape) are shown a few times, the last with how many more were like it.
    """
    from ..spans import caret_snippet, line_col

    for d in bound_diagnostics(diagnostics):
        where = label
        if d.span is not None and source is not None:
            line, col = line_col(source, d.span.start)
            where = f"{label}:{line}:{col}" if label else f"{line}:{col}"
        elif d.path:
            where = f"{label}:{d.path}" if label else d.path
        colour = {"error": "red", "warning": "yellow"}.get(d.severity, "cyan")
        prefix = f"{escape(printable(where))}: " if where else ""
        stderr.print(f"{prefix}[{colour}]{d.severity}[/] [bold]{d.code}[/] {escape(printable(d.message))}")
        if d.span is not None and source is not None:
            stderr.print(escape(printable(caret_snippet(source, d.span))), markup=True)


def printable(text: str) -> str:
    """``text`` safe for a UTF-8 terminal: a lone surrogate shows as its ``\\udXXX`` escape.

    Messages may quote what the user gave; diagnostics on stderr must never crash on it.
    """
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def fail(error: TemplateError, *, label: str = "", exit_code: int = 1) -> NoReturn:
    """Report ``error`` on stderr (``where: error CODE message`` and its snippet) and exit with ``exit_code``."""
    where = label
    if error.line is not None:
        where = f"{label}:{error.line}:{error.column}" if label else f"{error.line}:{error.column}"
    elif error.path:
        where = f"{label}:{error.path}" if label else error.path
    prefix = f"{escape(printable(where))}: " if where else ""
    stderr.print(f"{prefix}[red]error[/] [bold]{error.code}[/] {escape(printable(error.message))}")
    snippet = error.snippet()
    if snippet:
        stderr.print(escape(printable(snippet)))
    sys.exit(exit_code)


def error_object(error: TemplateError, *, label: str = "") -> dict[str, Any]:
    """The JSON form of a command's error: ``{"error": {"code", "message", "where"?, "path"?, "line"?, "column"?}}``.

    ``where`` is what plain output prints first: the file the error concerns, or the command.
    """
    out: dict[str, Any] = {"code": error.code, "message": error.message}
    if label:
        out["where"] = label
    if error.path:
        out["path"] = error.path
    if error.line is not None:
        out["line"], out["column"] = error.line, error.column
    return {"error": out}


def fail_json(error: TemplateError, *, label: str = "", exit_code: int = 1) -> NoReturn:
    """Report ``error`` as its JSON object on stdout (what a ``--json`` caller parses) and exit with ``exit_code``."""
    click.echo(json.dumps(error_object(error, label=label), ensure_ascii=False).encode("utf-8", "backslashreplace")
               .decode("utf-8"))
    sys.exit(exit_code)


def surrogate_error(exc: UnicodeEncodeError) -> TemplateError | None:
    """The ``TEXT_SURROGATE`` refusal for an encode that failed on a lone surrogate, else ``None``.

    The last line of the rule: a command that writes text the earlier checks did not see (a path not yet
    routed through :mod:`tavernbox.strict_json`) still ends with the rule's code, not ``INTERNAL_ERROR``.
    """
    bad = exc.object[exc.start : exc.end] if isinstance(exc.object, str) else ""
    if not bad or not all("\ud800" <= ch <= "\udfff" for ch in bad):
        return None
    return TemplateError(
        f"the answer holds a lone surrogate U+{ord(bad[0]):04X}; it is not Unicode text and cannot be written as "
        "UTF-8, so it is refused rather than silently replaced",
        code="TEXT_SURROGATE",
    )


def guarded(body: Callable[[], T], *, label: str = "", as_json: bool = False) -> T:
    """Run ``body``; report tavernbox errors in one place and never show a Python traceback.

    Every command reports the same way: in plain output the error goes to stderr as ``where: error CODE
    message`` (with its snippet) and nothing to stdout; with ``as_json`` (``--json``, ``--format json``) its JSON
    object goes to stdout, where the caller reads answers. The exit status is 1 (usage errors, 2, are
    click's: :meth:`tavernbox.cli.main.LazyGroup.invoke` reports them the same two ways).
    """
    report = fail_json if as_json else fail
    try:
        return body()
    except TemplateError as exc:
        report(exc, label=label)
    except (click.exceptions.Exit, click.exceptions.Abort, click.ClickException, SystemExit):
        raise
    except KeyboardInterrupt:
        stderr.print("[red]interrupted[/]")
        sys.exit(130)
    except BrokenPipeError:
        # `tavernbox ... | head`: the reader went away. Stop quietly, as `cat` does (128 + SIGPIPE).
        import os

        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        sys.exit(141)
    except UnicodeEncodeError as exc:  # text no check saw: the lone-surrogate rule's code, not INTERNAL_ERROR
        report(surrogate_error(exc) or TemplateError(f"{type(exc).__name__}: {exc}", code="INTERNAL_ERROR"),
               label=label)
    except Exception as exc:  # the boundary: no traceback for the user
        report(TemplateError(f"{type(exc).__name__}: {exc}", code="INTERNAL_ERROR"), label=label)


def json_mode(args: Iterable[str]) -> bool:
    """Whether a command line asks for JSON output (``--json``, ``--jsonl``, ``--format json|sarif``)."""
    items = list(args)
    for i, arg in enumerate(items):
        if arg in ("--json", "--jsonl") or arg in ("--format=json", "--format=sarif"):
            return True
        if arg == "--format" and i + 1 < len(items) and items[i + 1] in ("json", "sarif"):
            return True
    return False


def read_bytes_arg(path: str | None) -> bytes:
    """Read a file argument's bytes (``-`` or ``None`` is stdin); ``INPUT_INVALID`` when it cannot be read."""
    try:
        if path is None or path == "-":
            return sys.stdin.buffer.read()
        with open(path, "rb") as fh:
            return fh.read()
    except OSError as exc:
        raise TemplateError(f"cannot read {path}: {exc.strerror}", code="INPUT_INVALID") from None


def read_json_lines(path: str | None) -> Iterator[tuple[int, str | TemplateError]]:
    """The lines of a JSON-lines input as ``(number, text)``; a line that is not UTF-8 comes as its error.

    Lines are split on bytes (``\\n``, ``\\r``), never on U+2028 inside a JSON string, and decoded one by one,
    so one bad line does not end the batch. Blank lines are skipped; a BOM before the first is dropped.
    """
    for number, raw in enumerate(read_bytes_arg(path).splitlines(), start=1):
        if number == 1 and raw.startswith(b"\xef\xbb\xbf"):
            raw = raw[3:]
        if not raw.strip():
            continue
        try:
            yield number, raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            yield number, TemplateError(f"line {number} is not UTF-8 (byte {exc.start})", code="INPUT_INVALID",
                                        line=number)


def read_text_arg(path: str | None) -> str:
    """Read a text file argument (``-`` or ``None`` is stdin) as UTF-8, BOM stripped.

    Raises ``TemplateError(INPUT_INVALID)`` for a missing file or bytes that are not UTF-8.
    """
    data = read_bytes_arg(path)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise TemplateError(
            f"{path or 'stdin'} is not UTF-8 (byte {exc.start})", code="INPUT_INVALID"
        ) from None
    return text[1:] if text.startswith("\ufeff") else text


def read_json_arg(path: str, what: str, *, code: str = "INPUT_INVALID") -> Any:
    """Read a JSON file argument (``-`` is stdin) through :func:`read_text_arg`.

    Bad JSON raises ``TemplateError(code)`` naming ``what`` and the file, with the line:col of the
    error (``NaN``/``Infinity``/``1e999`` included); nesting too deep for the parser is reported the same
    way instead of crashing; a lone surrogate is ``TEXT_SURROGATE`` with its JSON path.
    """
    text = read_text_arg(path)
    try:
        return loads(text, what=f"{what} {path}", code=code)
    except json.JSONDecodeError as exc:
        raise TemplateError(
            f"{what} {path} is not valid JSON: {exc.msg}", code=code, line=exc.lineno, column=exc.colno
        ) from None
    except RecursionError:
        raise TemplateError(f"{what} {path} is nested too deeply", code=code) from None
