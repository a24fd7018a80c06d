"""Byte-level BPE tokenizers from a Hugging Face ``tokenizer.json`` the user gives (``llama3``).

SillyTavern counts Llama 3 prompts with ``src/tokenizers/llama3.json`` (a Hugging Face tokenizer
file: byte-level BPE, a split regex, 256 added special tokens). That file is Meta's, under the
Llama 3 Community License, so it is not shipped here: ``llama3`` reads it from the folder
``TAVERNBOX_ST_TOKENIZERS`` names (a SillyTavern install's ``src/tokenizers``). The file is turned
into a tiktoken encoding (the vocabulary's byte-level strings back into bytes, its ids as ranks,
the added tokens as special tokens), which encodes as the Hugging Face tokenizer does for these
files: added tokens are matched in the text first (``<|eot_id|>`` is one token), the rest is split
by the regex and merged by rank. A count is the number of ids, no beginning-of-text token added
(the file's post-processor adds none), as SillyTavern's server counts.
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Any

from ..errors import TemplateError

__all__ = ["ENV_FOLDER", "HfByteLevelBpe"]

ENV_FOLDER = "TAVERNBOX_ST_TOKENIZERS"


def _byte_decoder() -> dict[str, int]:
    """GPT-2's ``bytes_to_unicode`` inverted: the character a byte-level vocabulary writes for each byte."""
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + \
        list(range(ord("®"), ord("ÿ") + 1))
    chars = list(printable)
    extra = 0
    for byte in range(256):
        if byte not in printable:
            printable.append(byte)
            chars.append(256 + extra)
            extra += 1
    return {chr(c): b for b, c in zip(printable, chars)}


class HfByteLevelBpe:
    """A ``count(text)`` tokenizer over a byte-level BPE ``tokenizer.json`` (loaded on first use)."""

    at_most_utf8_bytes = False  # added tokens are matched first; ids are never more than bytes, but unproved here

    def __init__(self, file_name: str, folder: str | os.PathLike[str] | None = None) -> None:
        self.file_name = file_name
        self.folder = folder
        self._encoding: Any = None
        self._lock = threading.Lock()

    def _path(self) -> Path:
        folder = self.folder if self.folder is not None else os.environ.get(ENV_FOLDER)
        if not folder:
            raise TemplateError(
                f"the {self.file_name} tokenizer is not shipped with tavernbox (its licence is the model's): set "
                f"{ENV_FOLDER} to a folder holding {self.file_name} (a SillyTavern install's src/tokenizers)",
                code="INPUT_INVALID")
        path = Path(folder) / self.file_name
        if not path.is_file():
            raise TemplateError(f"no {self.file_name} in {folder} ({ENV_FOLDER})", code="INPUT_INVALID")
        return path

    def _load(self) -> Any:
        with self._lock:
            if self._encoding is None:
                self._encoding = _encoding(self._path())
        return self._encoding

    def count(self, text: str) -> int:
        encoding = self._encoding or self._load()
        return len(encoding.encode(text, allowed_special="all"))


def _encoding(path: Path) -> Any:
    import tiktoken

    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        model = data["model"]
        if model.get("type") != "BPE":
            raise ValueError("not a BPE model")
        split = next(p for p in data["pre_tokenizer"]["pretokenizers"] if p.get("type") == "Split")
        pattern = split["pattern"]["Regex"]
        decoder = _byte_decoder()
        ranks = {bytes(decoder[ch] for ch in token): rank for token, rank in model["vocab"].items()}
        special = {t["content"]: t["id"] for t in data.get("added_tokens", [])}
    except (OSError, ValueError, KeyError, TypeError, StopIteration) as exc:
        raise TemplateError(f"{path} is not a byte-level BPE tokenizer file this reader knows ({exc})",
                            code="INPUT_INVALID") from None
    return tiktoken.Encoding(f"tavernbox-{path.stem}", pat_str=pattern, mergeable_ranks=ranks, special_tokens=special)
