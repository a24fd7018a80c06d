"""The ``tavernbox`` console script.

Commands live one per module in this package and are imported only when invoked, so
``tavernbox --help`` stays fast. A command module that is not present yet is simply not listed.
"""

from __future__ import annotations

import importlib
import importlib.util

import click

from .. import __version__

#: command name -> "module:attribute" (relative to ``tavernbox.cli``)
COMMANDS: dict[str, str] = {
    "macros": "macros:command",
    "render": "render:command",
    "inspect": "inspect:command",
    "activate": "activate:command",
    "import": "importer:command",
    "fuzz": "fuzz:command",
    "assemble": "assemble:command",
    "replay": "replay:command",
    "lint": "lint:command",
    "cache-report": "cache_report:command",
    "serve": "serve:command",
}


class LazyGroup(click.Group):
    """A click group that imports each command's module only when that command is used."""

    def _available(self) -> dict[str, str]:
        out = {}
        for name, target in COMMANDS.items():
            module = target.split(":", 1)[0]
            if importlib.util.find_spec(f"{__package__}.{module}") is not None:
                out[name] = target
        return out

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


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="tavernbox")
def main() -> None:
    """Render SillyTavern-style prompt material safely, exactly and reproducibly."""


if __name__ == "__main__":  # pragma: no cover
    main()
