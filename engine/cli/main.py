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


#: each command's one-line summary (the first paragraph of its help), so ``tavernbox --help`` lists
#: the commands without importing them; a test checks they match the commands' own help
SUMMARIES: dict[str, str] = {
    "macros": "Expand SillyTavern macros in TEXT_FILE (or stdin) with SillyTavern 1.18's semantics.",
    "render": "Render an EJS TEMPLATE_FILE (ST-Prompt-Template dialect) in the sandbox.",
    "inspect": "Show the metadata (title tags, @@ decorators) and diagnostics of a template.",
    "activate": "Activate world-info entries for a chat, the way SillyTavern 1.18 does, and explain each one.",
    "import": "Detect each FILE's kind (card, world book, preset, MVU variables), validate it and summarise it.",
    "fuzz": "Fuzz the macro engine or the EJS renderer; save shrunk failing inputs to --out.",
    "assemble": "Assemble the chat-completion messages for one request (by default exactly what SillyTavern sends).",
    "replay": "Rebuild the messages of a recorded assembly without resolving any source.",
    "lint": "Check presets, cards, world books, templates and MVU files without rendering them.",
    "cache-report": "Report how much of the prompt stays byte-identical between turns, and what breaks it.",
    "serve": "Serve the engines, an asset library and an OpenAI-compatible endpoint over HTTP.",
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


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="tavernbox")
def main() -> None:
    """Render SillyTavern-style prompt material safely, exactly and reproducibly."""


if __name__ == "__main__":  # pragma: no cover
    main()
