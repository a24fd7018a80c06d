"""SillyTavern's sentencepiece tokenizers: a model trained here, and SillyTavern's own where at hand."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import sentencepiece

from tavernbox.errors import TemplateError
from tavernbox.tokenizers import get_tokenizer
from tavernbox.tokenizers.sentencepiece_models import SENTENCEPIECE_MODELS, SentencePieceModel

ST_TOKENIZERS = Path(os.environ.get("TAVERNBOX_ST_TOKENIZERS")
                     or Path.home() / ".cache" / "st-oracle" / "st" / "src" / "tokenizers")


def _train(folder: Path, name: str) -> None:
    corpus = folder / "corpus.txt"
    corpus.write_text("\n".join(f"the lighthouse keeper {i} lights the lamp at night" for i in range(200)),
                      encoding="utf-8")
    sentencepiece.SentencePieceTrainer.train(input=str(corpus), model_prefix=str(folder / name), vocab_size=60,
                                             model_type="bpe", minloglevel=2)


def test_a_model_counts_the_ids_it_encodes(tmp_path: Path) -> None:
    _train(tmp_path, "mini")
    model = SentencePieceModel("mini", tmp_path)
    processor = sentencepiece.SentencePieceProcessor(model_file=str(tmp_path / "mini.model"))
    for text in ("the lighthouse", "lamp at night 7", "", "unseen words: ünï ✓"):
        assert model.count(text) == len(processor.encode(text))
    assert model.count("the lighthouse keeper") < len("the lighthouse keeper")


def test_every_name_sillytavern_ships_is_registered_and_says_where_its_file_is(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("TAVERNBOX_ST_TOKENIZERS", raising=False)
    for name in SENTENCEPIECE_MODELS:
        with pytest.raises(TemplateError, match="TAVERNBOX_ST_TOKENIZERS") as info:
            SentencePieceModel(name).count("x")
        assert info.value.code == "INPUT_INVALID"
        assert get_tokenizer(name) is not None
    (tmp_path / "llama.model").write_bytes(b"not a model")
    with pytest.raises(TemplateError, match="not a sentencepiece model"):
        SentencePieceModel("llama", tmp_path).count("x")


def test_sillytavern_s_models_count_as_its_server_did_where_they_are() -> None:
    # counts SillyTavern 1.18.0's server answered (POST /api/tokenizers/<name>/encode) for these texts
    expected = {
        "llama": [2, 17, 7, 9, 11], "mistral": [2, 17, 7, 9, 11], "yi": [2, 5, 8, 13, 11],
        "gemma": [2, 15, 6, 5, 8], "nerdstash": [2, 17, 8, 10, 13], "nerdstash_v2": [2, 17, 8, 10, 13],
        "jamba": [2, 15, 7, 9, 10],
    }
    texts = ["Hello world", "<|im_start|>user\nHi<|im_end|>", "  two  spaces\n\nnew", "Chiến Quốc 你好",
             "[INST] x [/INST]</s>"]
    present = [name for name in expected if (ST_TOKENIZERS / f"{name}.model").is_file()]
    for name in present:
        model = SentencePieceModel(name, ST_TOKENIZERS)
        assert [model.count(t) for t in texts] == expected[name], name
    # without SillyTavern's files this is the error test's job; with them, all must be there
    assert not present or len(present) == len(expected)
