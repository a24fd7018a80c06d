"""The shipped encodings' ranks, read in C loops, are what reading them line by line gives."""

from __future__ import annotations

import base64
import gzip

import pytest

from tavernbox.errors import TemplateError
from tavernbox.tokenizers import _DATA, _ENCODINGS, _ranks


@pytest.mark.parametrize("name", sorted(_ENCODINGS))
def test_ranks_equal_the_line_by_line_reading(name: str) -> None:
    raw = gzip.decompress((_DATA / f"{_ENCODINGS[name][0]}.tiktoken.gz").read_bytes())
    expected = {base64.b64decode(token): int(rank)
                for token, rank in (line.split() for line in raw.splitlines() if line)}
    got = _ranks(raw)
    assert got == expected and list(got) == list(expected)
    # the shipped files list ranks 0, 1, 2... in order, which the tokenizer's fast reading relies on
    assert list(expected.values()) == list(range(len(expected)))
    assert _ranks(raw, in_order=True) == expected


def test_a_line_without_a_rank_is_refused() -> None:
    assert _ranks(b"YQ== 0\nYg== 1\n") == {b"a": 0, b"b": 1}
    with pytest.raises(TemplateError):
        _ranks(b"YQ== 0\nYg==\n")
