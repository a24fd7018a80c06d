"""``tavernbox replay RECORD_FILE``: print the recorded messages again, calling no source.

``RECORD_FILE`` is a record (the ``record`` field of ``tavernbox assemble --json``) or the whole
``--json`` output. The messages are rebuilt from the recorded source outputs and renders and
checked against the recorded hash, so a stale or edited record fails instead of printing
something that was never sent. A record of the default strategy prints exactly what
``tavernbox assemble --messages`` printed (the converted body with ``--target claude|google``).
"""

from __future__ import annotations

import json

import click

from ..strict_json import check_output
from .output import guarded, read_json_arg

__all__ = ["command"]


@click.command("replay")
@click.argument("record_file")
@click.option("--json", "as_json", is_flag=True, help="Print the whole replayed result as JSON.")
def command(record_file: str, as_json: bool) -> None:
    """Rebuild the messages of a recorded assembly without resolving any source."""

    def body() -> None:
        from ..sillytavern.replay import ReplayedRequest, replay

        data = read_json_arg(record_file, "record file")
        if isinstance(data, dict) and isinstance(data.get("record"), dict):
            data = data["record"]
        result = replay(data)
        if as_json:
            out = result.to_dict()
        else:  # what `assemble --messages` printed for the record
            out = result.sent if isinstance(result, ReplayedRequest) else result.messages
        check_output(out)  # the lone-surrogate rule (tavernbox.strict_json) on the answer
        click.echo(json.dumps(out, ensure_ascii=False, indent=2))

    guarded(body, label=record_file, as_json=as_json)
