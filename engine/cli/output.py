"""Shared CLI plumbing: diagnostics on stderr with rich, JSON on stdout, no tracebacks.

Every command body runs inside :func:`guarded`, which turns a :class:`TemplateError` into a
clear message with its code and caret snippet, and any other exception into ``INTERNAL_ERROR``
without a traceback: the CLI is a boundary hostile input reaches.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterable
from typing import Any, NoReturn, TypeVar

import click
from rich.console import Console
from rich.markup import escape

from ..errors import Diagnostic, TemplateError

__all__ = ["echo_json", "fail", "guarded", "print_diagnostics", "read_json_arg", "read_text_arg", "stderr"]

T = TypeVar("T")

stderr = Console(stderr=True, highlight=False, soft_wrap=True)


def echo_json(value: Any, *, pretty: bool = True) -> None:
    """Write ``value`` as JSON to stdout (UTF-8, non-ASCII kept)."""
    text = json.dumps(value, ensure_ascii=False, indent=2 if pretty else None, separators=None if pretty else (",", ":"))
    click.echo(text)


def print_diagnostics(diagnostics: Iterable[Diagnostic], source: str | None = None, *, label: str = "") -> None:
    """Print diagnostics to stderr: ``label:line:col: severity CODE message`` plus a caret snippet."""
    from ..spans import caret_snippet, line_col

    for d in diagnostics:
        where = label
        if d.span is not None and source is not None:
            line, col = line_col(source, d.span.start)
            where = f"{label}:{line}:{col}" if label else f"{line}:{col}"
        elif d.path:
            where = f"{label}:{d.path}" if label else d.path
        colour = {"error": "red", "warning": "yellow"}.get(d.severity, "cyan")
        prefix = f"{escape(where)}: " if where else ""
        stderr.print(f"{prefix}[{colour}]{d.severity}[/] [bold]{d.code}[/] {escape(d.message)}")
        if d.span is not None and source is not None:
            stderr.print(escape(caret_snippet(source, d.span)), markup=True)


def fail(error: TemplateError, *, label: str = "", exit_code: int = 1) -> NoReturn:
    """Report ``error`` on stderr and exit with ``exit_code``."""
    where = label
    if error.line is not None:
        where = f"{label}:{error.line}:{error.column}" if label else f"{error.line}:{error.column}"
    elif error.path:
        where = f"{label}:{error.path}" if label else error.path
    prefix = f"{escape(where)}: " if where else ""
    stderr.print(f"{prefix}[red]error[/] [bold]{error.code}[/] {escape(error.message)}")
    snippet = error.snippet()
    if snippet:
        stderr.print(escape(snippet))
    sys.exit(exit_code)


def guarded(body: Callable[[], T], *, label: str = "") -> T:
    """Run ``body``; report tavernbox errors cleanly and never show a Python traceback."""
    try:
        return body()
    except TemplateError as exc:
        fail(exc, label=label)
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
    except Exception as exc:  # the boundary: no traceback for the user
        fail(TemplateError(f"{type(exc).__name__}: {exc}", code="INTERNAL_ERROR"), label=label, exit_code=2)


def read_text_arg(path: str | None) -> str:
    """Read a text file argument (``-`` or ``None`` is stdin) as UTF-8, BOM stripped.

    Raises ``TemplateError(INPUT_INVALID)`` for a missing file or bytes that are not UTF-8.
    """
    try:
        if path is None or path == "-":
            data = sys.stdin.buffer.read()
        else:
            with open(path, "rb") as fh:
                data = fh.read()
    except OSError as exc:
        raise TemplateError(f"cannot read {path}: {exc.strerror}", code="INPUT_INVALID") from None
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
    error; nesting too deep for the parser is reported the same way instead of crashing.
    """
    text = read_text_arg(path)
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise TemplateError(
            f"{what} {path} is not valid JSON: {exc.msg}", code=code, line=exc.lineno, column=exc.colno
        ) from None
    except RecursionError:
        raise TemplateError(f"{what} {path} is nested too deeply", code=code) from None
