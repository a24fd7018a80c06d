"""The ``tavernbox`` console script.

Commands live one per module in this package and are imported only when invoked, so
``tavernbox --help`` stays fast. A command module that is not present yet is simply not listed.
"""

from __future__ import annotations

import importlib
from typing import Any, NoReturn

import click

from .. import __version__

# the command table and the summaries live in the package (``tavernbox.cli``), where the console
# script's ``--help`` reads them without importing click (:mod:`.launch`)
from . import COMMANDS, GROUP_HELP, SUMMARIES, available_commands

__all__ = ["COMMANDS", "SUMMARIES", "LazyGroup", "main"]


class LazyGroup(click.Group):
    """A click group that imports each command's module only when that command is used."""

    def _available(self) -> dict[str, str]:
        return available_commands()

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(self._available())

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        target = self._available().get(cmd_name)
        if target is None:
            return None
        module_name, attr = target.split(":", 1)
        module = importlib.import_module(f"{__package__}.{module_name}")
        command: click.Command = getattr(module, attr)
        return command

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        ctx.meta["tavernbox.argv"] = list(args)  # whether a usage error is reported as JSON (see invoke)
        return super().parse_args(ctx, args)

    def invoke(self, ctx: click.Context) -> Any:
        """Run the command; a usage error is reported as every error is (:func:`.output.guarded`), exit 2."""
        try:
            return super().invoke(ctx)
        except click.UsageError as exc:
            from .output import json_mode

            report_usage_error(exc, as_json=json_mode(ctx.meta.get("tavernbox.argv", ())))

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The command list from :data:`SUMMARIES` (as click would print it), importing no command."""
        names = [n for n in self.list_commands(ctx) if n in SUMMARIES]
        if any(n not in SUMMARIES for n in self.list_commands(ctx)):
            super().format_commands(ctx, formatter)  # a command without a summary: click's own way
            return
        if names:
            limit = formatter.width - 6 - max(len(n) for n in names)
            # a stand-in command per summary, so the shortening is click's own
            rows = [(n, click.Command(n, help=SUMMARIES[n]).get_short_help_str(limit)) for n in names]
            with formatter.section("Commands"):
                formatter.write_dl(rows)


def report_usage_error(exc: click.UsageError, *, as_json: bool) -> NoReturn:
    """``where: error USAGE_INVALID message`` on stderr after the command's usage line, or its JSON on stdout."""
    from ..errors import TemplateError
    from .output import fail, fail_json, stderr

    where = exc.ctx.command_path if exc.ctx is not None else "tavernbox"
    error = TemplateError(exc.format_message(), code="USAGE_INVALID")
    if as_json:
        fail_json(error, label=where, exit_code=2)
    if exc.ctx is not None:
        stderr.print(exc.ctx.get_usage(), markup=False, highlight=False)
        help_option = (exc.ctx.help_option_names or ["--help"])[0]
        stderr.print(f"Try '{where} {help_option}' for help.", markup=False, highlight=False)
    fail(error, label=where, exit_code=2)


@click.group(cls=LazyGroup, help=GROUP_HELP, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="tavernbox")
def main() -> None:
    """The group: its help is :data:`tavernbox.cli.GROUP_HELP` (shared with the fast ``--help``)."""


if __name__ == "__main__":  # pragma: no cover
    main()
