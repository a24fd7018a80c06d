"""The byte-level BPE reader (``llama3``) on a small hand-made tokenizer file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tavernbox.errors import TemplateError
from tavernbox.tokenizers.hf_bpe import HfByteLevelBpe, _byte_decoder


def _write(folder: Path) -> None:
    decoder = _byte_decoder()
    encoder = {b: ch for ch, b in decoder.items()}
    vocab = {encoder[b]: b for b in range(256)}
    # two merges: "h"+"i" -> "hi" (rank 256), " "+"hi" -> " hi" (rank 257); "é" is two bytes
    vocab[encoder[ord("h")] + encoder[ord("i")]] = 256
    vocab[encoder[ord(" ")] + encoder[ord("h")] + encoder[ord("i")]] = 257
    data = {
        "added_tokens": [{"id": 300, "content": "<|eot|>", "special": True}],
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": " ?\\\\p{L}+|\\\\s+|[^\\\\s\\\\p{L}]+"}, "behavior": "Isolated"},
            {"type": "ByteLevel", "add_prefix_space": False}]},
        "model": {"type": "BPE", "vocab": vocab, "merges": []},
    }
    (folder / "mini.json").write_text(json.dumps(data), encoding="utf-8")


def test_a_tokenizer_file_is_read_as_byte_level_bpe(tmp_path: Path) -> None:
    _write(tmp_path)
    tokenizer = HfByteLevelBpe("mini.json", tmp_path)
    assert tokenizer.count("hi") == 1          # merged
    assert tokenizer.count("hi hi") == 2       # "hi" + " hi"
    assert tokenizer.count("hx") == 2          # no merge
    assert tokenizer.count("é") == 2           # two bytes, no merge
    assert tokenizer.count("hi<|eot|>hi") == 3  # an added token is one token, matched in the text


def test_a_missing_or_broken_file_is_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TAVERNBOX_ST_TOKENIZERS", raising=False)
    with pytest.raises(TemplateError, match="TAVERNBOX_ST_TOKENIZERS"):
        HfByteLevelBpe("llama3.json").count("x")
    with pytest.raises(TemplateError, match="no llama3.json"):
        HfByteLevelBpe("llama3.json", tmp_path).count("x")
    (tmp_path / "bad.json").write_text("{}", encoding="utf-8")
    with pytest.raises(TemplateError) as info:
        HfByteLevelBpe("bad.json", tmp_path).count("x")
    assert info.value.code == "INPUT_INVALID"
