"""The ``tavernbox`` console script's entry point: ``--help`` without importing click.

``tavernbox --help`` is the command people run most to find their way; importing click alone
costs more than the rest of it (about 30 ms on a quiet machine, the whole of issue 11's 40 ms
allowance). The top-level help is fixed text (the group's docstring, two options and
:data:`~tavernbox.cli.main.SUMMARIES`), so it is laid out here exactly as click lays it out,
for the same terminal width; everything else (a command, ``--version``, an unknown option) goes
to the click group :func:`tavernbox.cli.main.main` unchanged. A test compares this text with
click's own output at every width click can choose.
"""

from __future__ import annotations

import sys

__all__ = ["help_text", "run"]

_USAGE = "Usage: {prog} [OPTIONS] COMMAND [ARGS]..."
_OPTIONS = (("--version", "Show the version and exit."), ("-h, --help", "Show this message and exit."))
#: click's layout constants: a definition list's first column is at most 30 wide, then 2 spaces
_COL_MAX, _COL_SPACING = 30, 2


def help_width() -> int:
    """The width click formats help for: the terminal's, at most 80, minus 2, never under 50.

    The terminal's width is ``shutil.get_terminal_size()``'s, found the same way here because
    importing :mod:`shutil` (it imports the compression modules) costs more than the help:
    ``COLUMNS`` when it is a positive number, else standard output's terminal, else 80.
    """
    import os

    try:
        columns = int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns  # type: ignore[union-attr]
        except (AttributeError, ValueError, OSError):
            columns = 0
        columns = columns or 80
    return max(min(columns, 80) - 2, 50)


def _wrap(text: str, width: int, indent: str = "") -> list[str]:
    import textwrap

    return textwrap.TextWrapper(width, initial_indent=indent, subsequent_indent=indent,
                                replace_whitespace=False).wrap(text)


def _shortened(text: str, limit: int) -> str:
    """A command's one-line summary within ``limit`` characters, as click shortens it: whole
    words up to the first sentence end, else as many words as fit before ``...``."""
    words = text.split()
    used = -1
    for i, word in enumerate(words):
        used += len(word) + 1
        if used > limit:
            break
        if word.endswith("."):
            return " ".join(words[: i + 1])
        if used == limit and i < len(words) - 1:
            break
    else:
        return " ".join(words)
    keep = i
    while keep > 0 and len(" ".join(words[:keep])) + 3 > limit:
        keep -= 1
    return " ".join(words[:keep]) + "..."


def _definitions(rows: list[tuple[str, str]], width: int, indent: int) -> list[str]:
    first = min(max(len(name) for name, _ in rows), _COL_MAX) + _COL_SPACING
    out = []
    for name, text in rows:
        head = " " * indent + name
        lines = _wrap(text, max(width - first - 2, 10)) if text else []
        if not lines:
            out.append(head)
            continue
        if len(name) <= first - _COL_SPACING:
            out.append(head + " " * (first - len(name)) + lines[0])
        else:
            out += [head, " " * (first + indent) + lines[0]]
        out += [" " * (first + indent) + line for line in lines[1:]]
    return out


def help_text(prog: str = "tavernbox", width: int | None = None) -> str:
    """``tavernbox --help`` as click prints it (without the final newline)."""
    from . import GROUP_HELP, SUMMARIES, available_commands

    width = help_width() if width is None else width
    lines = [_USAGE.format(prog=prog), ""]
    lines += _wrap(GROUP_HELP, width, "  ")
    lines += ["", "Options:"]
    lines += _definitions(list(_OPTIONS), width, 2)
    names = {n: SUMMARIES[n] for n in available_commands()}
    if names:
        limit = width - 6 - max(len(n) for n in names)
        lines += ["", "Commands:"]
        lines += _definitions([(n, _shortened(s, limit)) for n, s in sorted(names.items())], width, 2)
    return "\n".join(lines)


def _summarised() -> bool:
    """Whether every available command has a summary (else click lists them its own way)."""
    from . import SUMMARIES, available_commands

    return all(n in SUMMARIES for n in available_commands())


def run() -> None:
    """The console script: top-level help here, anything else through click."""
    import os

    args = sys.argv[1:]
    prog = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else "tavernbox"
    if args in (["--help"], ["-h"]) and prog == "tavernbox" and _summarised():
        sys.stdout.write(help_text(prog) + "\n")
        sys.stdout.flush()
        raise SystemExit(0)
    from .main import main

    main()
