"""A region the LALR grammar rejects is lexed once: the whole-document path resumes after it.

``_region_prefix`` lexes each top-level region to try the grammar on it; when the grammar
rejects one, the recovery parser takes over from that region's start. Its tokens are exactly
what the whole-document lexer makes first there (the lexer is in plain text before and after a
region), so they are handed over and lexing resumes at the region's end (issue 14: a fuzzing
input of a malformed macro lexed it twice). The parse must equal the whole-document parse.
"""

from __future__ import annotations

import dataclasses
import random
from typing import Any

from tavernbox.macros.lexer import tokenize_limited
from tavernbox.macros.parser import MAX_NESTING, _region_prefix, document_items
from tavernbox.testing.macro_generator import MacroTextGenerator


def _plain(value: Any) -> Any:
    if dataclasses.is_dataclass(value):
        return (type(value).__name__, tuple(_plain(getattr(value, f.name)) for f in dataclasses.fields(value)))
    if isinstance(value, (tuple, list)):
        return (type(value).__name__, tuple(_plain(v) for v in value))
    return value


def test_a_rejected_region_hands_its_tokens_to_the_whole_document_path() -> None:
    gen = MacroTextGenerator(random.Random(3))
    rejected = 0
    for _ in range(1500):
        text = gen.text() + " tail {{user}} {{if 1}}x{{/if}}"
        items, stop, region = _region_prefix(text, 0, len(text), MAX_NESTING)
        if isinstance(region, tuple):
            rejected += 1
            toks, end = region
            # the handed-over tokens are the whole-document lexer's first tokens from ``stop``
            errors: list[int] = []
            whole, holes = tokenize_limited(text, stop, len(text), errors, MAX_NESTING)
            assert whole[: len(toks)] == toks and (not whole[len(toks):] or whole[len(toks)][1] >= end)
        for nesting in (MAX_NESTING, 2):
            prefix, stop, region = _region_prefix(text, 0, len(text), nesting)
            if not isinstance(region, tuple):
                continue
            got = document_items(text, 0, len(text), nesting)
            # what the whole-document path makes of the rest, lexing the rejected region itself
            rest, diagnostics, clean = document_items(text, stop, len(text), nesting, _regions=False)
            assert _plain(got[0]) == _plain([*prefix, *rest]), text
            assert (got[1], got[2]) == (diagnostics, clean), text
    assert rejected > 100  # the generator makes plenty of them
