"""``tavernbox inspect TEMPLATE_FILE``: a prompt template's lifecycle metadata and diagnostics.

Prints the events the title tags suggest, the leading ``@@`` decorators, whether the resource
could be enabled, and every diagnostic with line:column (``--json`` for the object). ``--name``
gives the resource title (the file stem by default), where the ``[GENERATE:BEFORE]``-style tags
live. The template is also compiled (never run), so tag and JavaScript syntax errors show here.
Exit status: 0 when the template could be enabled, 1 otherwise.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from ..errors import Diagnostic, TemplateError
from .output import echo_json, guarded, print_diagnostics, read_text_arg

__all__ = ["command"]


@click.command("inspect")
@click.argument("template_file")
@click.option("--name", "name", help="The resource title (default: the file stem).")
@click.option("--json", "as_json", is_flag=True, help="Print the metadata as JSON.")
def command(template_file: str, name: str | None, as_json: bool) -> None:
    """Show the metadata (title tags, @@ decorators) and diagnostics of a template."""

    def body() -> int:
        from ..bridge import inspect_template_metadata
        from ..ejs import compile_source

        content = read_text_arg(template_file)
        title = name if name is not None else ("stdin" if template_file == "-" else Path(template_file).stem)
        meta = inspect_template_metadata(title, content)
        diagnostics = list(meta.diagnostics)
        try:
            compile_source(content)
        except TemplateError as exc:
            diagnostics.append(Diagnostic(exc.code, exc.message, span=exc.span, severity="error"))
        ok = meta.supported and all(d.severity != "error" for d in diagnostics)
        if as_json:
            out = meta.to_dict(content)
            out["diagnostics"] = [d.to_dict(content) for d in diagnostics]
            out["enableable"] = ok
            echo_json(out)
        else:
            click.echo(f"name: {title}")
            click.echo(f"events: {', '.join(meta.events) or '(none: runs where the assembly rule puts it)'}")
            if meta.placement:
                click.echo(f"suggested placement: {meta.placement} (the assembly rule decides)")
            for d in meta.decorators:
                kind = "official, not executed" if d.official else "unknown"
                click.echo(f"decorator: @@{d.name} {d.argument}".rstrip() + f" ({kind})")
            click.echo(f"enableable: {'yes' if ok else 'no (UNSUPPORTED_EVENT)'}")
            print_diagnostics(diagnostics, content, label=template_file)
        return 0 if ok else 1

    sys.exit(guarded(body, label=template_file, as_json=as_json))
