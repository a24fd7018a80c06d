"""The ``tavernbox`` command line: one module per command.

The command table and the top-level help's text are here, not in :mod:`.main`, so the console
script can print ``tavernbox --help`` without importing click (:mod:`.launch`).
"""

from __future__ import annotations

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

#: the group's help text (``tavernbox --help``'s description)
GROUP_HELP = "Render SillyTavern-style prompt material safely, exactly and reproducibly."


def available_commands() -> dict[str, str]:
    """The commands whose module is present (a command module that is not there yet is not listed)."""
    import importlib.util

    out = {}
    for name, target in COMMANDS.items():
        module = target.split(":", 1)[0]
        if importlib.util.find_spec(f"{__name__}.{module}") is not None:
            out[name] = target
    return out
