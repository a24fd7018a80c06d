"""SillyTavern's sentencepiece tokenizers (``llama``, ``mistral``, ``yi``, ``gemma``, ``nerdstash``...),
read from the user's copy of their model files.

SillyTavern counts text-completion prompts for these models with ``src/tokenizers/<name>.model``
(sentencepiece models; the count is the number of ids, no beginning- or end-of-text id added). The
files belong to their models' makers, under their licences, so none is shipped here: each name
reads ``<name>.model`` from the folder ``TAVERNBOX_ST_TOKENIZERS`` names (a SillyTavern install's
``src/tokenizers``), with the ``sentencepiece`` package.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

from ..errors import TemplateError
from .hf_bpe import ENV_FOLDER

__all__ = ["SENTENCEPIECE_MODELS", "SentencePieceModel"]

#: the tokenizer names SillyTavern 1.18 ships a sentencepiece model for (``<name>.model``)
SENTENCEPIECE_MODELS = ("llama", "mistral", "yi", "gemma", "nerdstash", "nerdstash_v2", "jamba")


class SentencePieceModel:
    """A ``count(text)`` tokenizer over ``<name>.model`` (loaded on first use)."""

    at_most_utf8_bytes = False

    def __init__(self, name: str, folder: str | os.PathLike[str] | None = None) -> None:
        self.name = name
        self.folder = folder
        self._processor: Any = None
        self._lock = threading.Lock()

    def _path(self) -> Path:
        folder = self.folder if self.folder is not None else os.environ.get(ENV_FOLDER)
        if not folder:
            raise TemplateError(
                f"the {self.name} tokenizer is not shipped with tavernbox (its licence is the model's): set "
                f"{ENV_FOLDER} to a folder holding {self.name}.model (a SillyTavern install's src/tokenizers)",
                code="INPUT_INVALID")
        path = Path(folder) / f"{self.name}.model"
        if not path.is_file():
            raise TemplateError(f"no {self.name}.model in {folder} ({ENV_FOLDER})", code="INPUT_INVALID")
        return path

    def _load(self) -> Any:
        with self._lock:
            if self._processor is None:
                path = self._path()
                try:
                    import sentencepiece
                except ImportError:  # pragma: no cover - a dependency of the package
                    raise TemplateError("the sentencepiece package is not installed", code="INPUT_INVALID") from None
                try:
                    self._processor = sentencepiece.SentencePieceProcessor(model_file=str(path))
                except (OSError, RuntimeError) as exc:
                    raise TemplateError(f"{path} is not a sentencepiece model ({exc})", code="INPUT_INVALID") from None
        return self._processor

    def count(self, text: str) -> int:
        processor = self._processor or self._load()
        return len(processor.encode(text)) if text else 0
