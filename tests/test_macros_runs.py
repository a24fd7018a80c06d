"""Runs of one repeated unit are parsed in one step, and give what the whole-document parse gives.

A run of one simple macro is found by doubling comparisons and built in one loop; a region seen
twice is not lexed again; contiguous text is one ``Plain`` on both paths (a hostile run of
flattened macros held an item per token: ~160 MB at 2 MiB). Each case is compared with the
whole-document path (no regions) for every count, the unit followed by a few different tails.
"""

from __future__ import annotations

import random
import subprocess
import sys

import pytest

from tavernbox.macros.parser import MAX_NESTING, MacroNode, Plain, document_items
from tavernbox.macros.regions import _run_end
from tavernbox.testing.macro_generator import MacroTextGenerator
from tavernbox.shortcuts import DEFAULT
from macro_support import NO_REGIONS

from test_macros_region_resume import _plain

UNITS = [
    "{{user}}", "{{if 1}}", "{{.x}}", "{{$x}}", "{{a::b}}", "{{roll:1d6}}", "{{a::{{b}}}}",  # well-formed
    "{{#}}", "{{.}}", "{{.1}}", "{{a:}}", "{{!}}x", "{{user!}}", "{{a|}}", "{{ {{a}}", "{{", "{{{",  # malformed
]
TAILS = ["", "x", "{{", "}}", "{{user}}", "{", "{{a}"]


@pytest.mark.parametrize("unit", UNITS)
def test_a_run_of_one_unit_parses_as_the_whole_document_does(unit: str) -> None:
    for count in (1, 2, 3, 7, 300):
        for tail in TAILS:
            text = unit * count + tail
            for nesting in (MAX_NESTING, 3):
                regions = document_items(text, 0, len(text), nesting)
                whole = document_items(text, 0, len(text), nesting, shortcuts=NO_REGIONS)
                assert _plain(regions) == _plain(whole), (unit, count, tail, nesting)


def test_repeats_built_from_generated_units_agree_with_the_whole_document_path() -> None:
    rng = random.Random(14)
    gen = MacroTextGenerator(rng)
    for _ in range(400):
        unit = gen.fragment()
        text = unit * rng.randrange(2, 9) + rng.choice(TAILS)
        assert _plain(document_items(text)) == _plain(document_items(text, shortcuts=NO_REGIONS)), text


def test_contiguous_text_is_one_item_on_both_paths() -> None:
    # "{{." is a region recovered as text, "1}}" plain text after it: one item for the whole run
    text = "a{{.1}}" * 1000 + "b"
    for regions in (True, False):
        items, _diagnostics, clean = document_items(text, shortcuts=DEFAULT if regions else NO_REGIONS)
        assert items == [Plain(0, len(text))] and not clean
    # text on either side of a macro stays apart from it
    items = document_items("a{b{{user}}c{d")[0]
    assert [type(i) for i in items] == [Plain, MacroNode, Plain] and items[0] == Plain(0, 3)


def test_a_run_of_one_simple_macro_is_one_node_per_copy() -> None:
    items = document_items("x" + "{{user}}" * 5000 + "y")[0]
    nodes = items[1:-1]
    assert len(nodes) == 5000 and all(type(n) is MacroNode and n.name == "user" for n in nodes)
    assert [n.start for n in nodes] == list(range(1, 1 + 8 * 5000, 8))
    assert all(a.end == b.start for a, b in zip(nodes, nodes[1:]))


@pytest.mark.parametrize("copies", [1, 2, 3, 5, 1000, 70_000])
def test_run_end_finds_where_the_copies_stop(copies: int) -> None:
    unit = "{{a}}"
    text = "x" + unit * copies + "{{a}"
    assert _run_end(text, unit, 1, len(text)) == 1 + len(unit) * copies
    # the end of the span searched stops it too, mid-copy
    hi = 1 + len(unit) * copies - 2
    assert _run_end(text, unit, 1, hi) == 1 + len(unit) * (copies - 1)


def test_a_probe_reads_its_own_peak_memory_not_its_parents() -> None:
    # ru_maxrss of a child started by vfork + exec includes the parent's peak (Linux): a probe
    # launched late in the suite read 524 MB for a 158 MB run
    parent = (
        "import subprocess, sys\n"
        "held = bytearray(300 * 1024 * 1024)\n"
        "for i in range(0, len(held), 4096): held[i] = 1\n"
        "child = ('import resource; from tavernbox.testing.memory import peak_rss_kib; '\n"
        "         'print(peak_rss_kib(), resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)')\n"
        "print(subprocess.run([sys.executable, '-c', child], capture_output=True, text=True, check=True).stdout)\n"
    )
    out = subprocess.run([sys.executable, "-c", parent], capture_output=True, text=True, check=True).stdout
    own, maxrss = (int(v) for v in out.split())
    assert own < 150 * 1024  # the child's own peak (an interpreter: tens of MB)
    if sys.platform == "linux":
        assert maxrss > 250 * 1024  # what ru_maxrss would have said
