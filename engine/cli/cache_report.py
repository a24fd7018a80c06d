"""``tavernbox cache-report --request REQ.json [--turns N] [--format rich|json]``: prompt-cache stability.

Assembles the request of the current turn and of the next one (the chat plus the model's reply and
the user's next message, the same seed, the clock moved on by ``--gap`` seconds) and reports the
longest common prefix in bytes and estimated tokens, the total, and the spans that break the prefix
(by provenance, ordered by the cached bytes each one costs, with a suggestion). ``--turns N`` replays
the last N turns of the request's recorded chat instead. Exit status 0, or 1 for a bad request.
"""

from __future__ import annotations

import sys
from datetime import timedelta

import click

from .output import echo_json, guarded

__all__ = ["command"]


@click.command("cache-report")
@click.option("--request", "request_file", required=True, help="The request file (as `tavernbox assemble --request`).")
@click.option("--turns", type=click.IntRange(1, 100), help="Replay the last N turns of the recorded chat.")
@click.option("--format", "fmt", type=click.Choice(["rich", "json"]), default="rich", show_default=True)
@click.option("--gap", type=click.IntRange(0, 10 * 365 * 86400), default=int(timedelta(days=1, hours=1, minutes=1).total_seconds()),
              show_default=True, help="Seconds between two turns (clock macros read the later time).")
@click.option("--next-user", default=None, help="The user's next message (default: a neutral placeholder).")
@click.option("--reply", default=None, help="The model's reply to the current turn (default: a neutral placeholder).")
@click.option("--tokenizer", default=None, help="o200k, cl100k, estimate... (default: the request's budget.tokenizer).")
def command(request_file: str, turns: int | None, fmt: str, gap: int, next_user: str | None, reply: str | None,
            tokenizer: str | None) -> None:
    """Report how much of the prompt stays byte-identical between turns, and what breaks it."""

    def body() -> int:
        from ..lint.prefix_cache import NEXT_REPLY, NEXT_USER, cache_report
        from ..sillytavern.loading import read_request_file

        data, base = read_request_file(request_file)
        report = cache_report(data, base_dir=base, turns=turns, gap=timedelta(seconds=gap),
                              next_user=next_user or NEXT_USER, reply=reply or NEXT_REPLY, tokenizer=tokenizer)
        if fmt == "json":
            echo_json(report.to_dict())
        else:
            _print(report)
        return 0

    sys.exit(guarded(body, label=request_file))


def _print(report: object) -> None:
    from rich.console import Console
    from rich.markup import escape

    console = Console(highlight=False, soft_wrap=True)
    for t in report.turns:  # type: ignore[attr-defined]
        share = t.prefix_bytes / t.total_bytes if t.total_bytes else 0.0
        console.print(f"[bold]turn {t.turn}[/]: cached prefix {t.prefix_bytes:,} of {t.total_bytes:,} bytes "
                      f"({share:.0%}; {t.prefix_tokens:,} of {t.total_tokens:,} {t.tokenizer} tokens); "
                      f"ideal {t.ideal_prefix_bytes:,} bytes (everything before the new messages; "
                      f"{t.current_cacheable_bytes:,} in this turn's request)")
        if not t.breakers:
            console.print("  nothing breaks the prefix before the new messages")
        for b in t.breakers:
            console.print(f"  [red]{b.cost_bytes:>8,}[/] bytes  [bold]{escape(b.label)}[/] ({b.change}, message "
                          f"{b.message_index}, byte {b.byte_offset:,}): {escape(b.text[:60])!r}")
            console.print(f"            [dim]hint: {escape(b.suggestion)}[/]")
    summary = report.summary()  # type: ignore[attr-defined]
    if len(report.turns) > 1:  # type: ignore[attr-defined]
        console.print(f"\n{summary['turns']} turns: {summary['prefix_bytes']:,} of {summary['total_bytes']:,} bytes "
                      f"cached ({summary['cached_share']:.0%})")
        for row in summary["breakers"]:
            console.print(f"  {row['cost_bytes']:>8,} bytes over {row['turns']} turn(s): {escape(row['label'])}")
