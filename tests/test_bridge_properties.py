"""Property: getvar in the VM and the host's path reader (get_message_variable) agree on every path."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from bridge_support import text
from tavernbox.bridge import StaticVariables, TemplateSources
from tavernbox.bridge.mvu import lookup_path

KEYS = st.sampled_from(["a", "b", "x.y", "0", "1", "hp", "名"])
LEAVES = st.one_of(st.none(), st.booleans(), st.integers(-5, 5), st.text("ab", max_size=3))
TREES = st.recursive(LEAVES, lambda kids: st.one_of(st.lists(kids, max_size=3), st.dictionaries(KEYS, kids, max_size=3)),
                     max_leaves=12)


def _path_text(parts: list[str | int]) -> str:
    out = ""
    for part in parts:
        if isinstance(part, int):
            out += f"[{part}]"
        elif "." in part:
            out += f"['{part}']"
        else:
            out += ("." if out else "") + part
    return out


PATHS = st.lists(st.one_of(KEYS, st.integers(0, 3)), min_size=1, max_size=4).map(_path_text)


@settings(max_examples=25, deadline=None)
@given(tree=st.dictionaries(KEYS, TREES, max_size=4), paths=st.lists(PATHS, min_size=1, max_size=6))
def test_getvar_matches_the_host_path_reader(tree: dict, paths: list[str]) -> None:
    src = TemplateSources(variables=StaticVariables(tree))
    body = ",".join(f"getvar({json.dumps(p)}, {{defaults: '<missing>'}})" for p in paths)
    got = json.loads(text(f"<%- JSON.stringify([{body}]) %>", src))
    want = []
    for p in paths:
        found, value = lookup_path(tree, p)
        want.append(value if found else "<missing>")
    assert got == want
