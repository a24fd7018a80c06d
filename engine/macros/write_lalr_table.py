"""Write :mod:`.lalr_table`: Lark's LALR(1) table for ``grammars/macros.lark``, stored as data.

Run ``python -m tavernbox.macros.write_lalr_table`` after changing the grammar (a test fails
until the stored table is Lark's table for the grammar as it is). Until then the parser builds
the table with Lark at first use, so a stale file costs time, never a wrong parse.
"""

from __future__ import annotations

import hashlib
import pprint
from collections import deque
from importlib import resources
from pathlib import Path

from .lalr import build_table

__all__ = ["canonical_table", "table_module_text", "main"]


def canonical_table(table: tuple) -> tuple:
    """``table`` with states and rules numbered in a fixed order (Lark's numbering varies by run).

    States are numbered breadth-first from the start state, following each state's transitions
    in sorted order; rules in the order the renumbered states first reduce by them. Two tables
    are the same automaton exactly when their canonical forms are equal.
    """
    states, start, end, rules = table
    order = {start: 0}
    queue = deque([start])
    while queue:
        state = queue.popleft()
        for key in sorted(states[state], key=repr):
            shift, arg = states[state][key]
            if shift and arg not in order:
                order[arg] = len(order)
                queue.append(arg)
    rule_ids: dict[int, int] = {}
    out_rules: list = []
    out_states: dict = {}
    for state in sorted(order, key=order.__getitem__):
        row: dict = {}
        for key in sorted(states[state], key=repr):
            shift, arg = states[state][key]
            if shift:
                row[key] = (True, order[arg])
            else:
                if arg not in rule_ids:
                    rule_ids[arg] = len(out_rules)
                    out_rules.append(rules[arg])
                row[key] = (False, rule_ids[arg])
        out_states[order[state]] = row
    return out_states, order[start], order[end], out_rules


def table_module_text() -> str:
    """The source of :mod:`.lalr_table` for the grammar file as it is now."""
    grammar = (resources.files("tavernbox.grammars") / "macros.lark").read_text(encoding="utf-8")
    digest = hashlib.sha256(grammar.encode("utf-8")).hexdigest()
    table = canonical_table(build_table(grammar))
    return (
        '"""Lark\'s LALR(1) table for ``grammars/macros.lark`` (generated: do not edit).\n\n'
        "Written by ``python -m tavernbox.macros.write_lalr_table``; :func:`.parser._table` uses it while\n"
        "the grammar file has ``GRAMMAR_DIGEST`` (its SHA-256), and asks Lark otherwise.\n"
        '"""\n\n'
        "# fmt: off\n"
        f"GRAMMAR_DIGEST = {digest!r}\n\n"
        f"TABLE: tuple = {pprint.pformat(table, width=120, compact=True, sort_dicts=False)}\n"
    )


def main() -> None:
    """Rewrite ``lalr_table.py`` beside this module."""
    Path(__file__).with_name("lalr_table.py").write_text(table_module_text(), encoding="utf-8")


if __name__ == "__main__":  # pragma: no cover
    main()
